"""Claim C3's checks (protocol section 5, amendment 7.5): the erasure sweep against its random and
information-matched controls, and the circuit overlap against its split-half ceiling; called only by
:func:`rote.chapters.c3.evaluate`."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pandas as pd

from .. import fmt
from ..analysis.sweep_table import SetErasure
from ..claims import THRESHOLDS
from .core import Check, CheckLabel, numeric, above, at_least, group, inline, missing_reason, unresolved, validate
from .core import as_read  # thresholds as of each reading

if TYPE_CHECKING:  # the verdict layer imports no torch (rote.build.site shows records without it)
    from ..analysis.patching import ErasureSweep


C3_CONTROLS = ("random", "matched")  # erasure controls of the sweep: random subspace; information-matched (7.5)
C3_OVERLAP = "circuit overlap (Jaccard of top 5%)"  # the registered overlap check (superseded below its ceiling)
C3_NO_SITE = ("8.5: the intervention cannot run: no layer carries the intermediate result at 5 x chance on C "
              "(no erasure site)")
C3_EMPTY = {"mem": "no memorized example (M is empty)", "gen": "no correctly answered example (C is empty)",
            "mem_unconnected": "no memorized example whose noisy label is unconnected to the bridge"}
C3_NO_CONTROL = {"random": "the random-subspace control was not computed",
                 "matched": "the information-matched control was not computed"}
C3_GEN_NOT_LOWERED = ("8.6: the erasure did not lower gen on C more than its larger control (random, "
                      "information-matched): it did not remove the rule, so its checks cannot say what removing "
                      "the rule does to memorization")
SETS = ("mem", "gen", "mem_unconnected")  # the sets the erasure sweep may hold, in the record's order
ABLATIONS = {"top": "top generalization neurons", "random": "random neurons (matched)"}  # ablation rows


@dataclass(frozen=True)
class OverlapStats:
    """Amendment 7.5's overlap statistics for one attribution metric
    (:func:`rote.analysis.attribution.overlap_statistics`); None: not given."""

    jaccard: float | None = None
    random: float | None = None
    split_half_C: float | None = None
    split_half_M: float | None = None
    spearman: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    @classmethod
    def of(cls, stats: dict | None) -> "OverlapStats | None":
        return None if not stats else cls(*[numeric(stats[k]) if k in stats else None for k in cls.__dataclass_fields__])


@dataclass(frozen=True)
class Ablation:
    """Each set's accuracy with a set of neurons mean-ablated (None: the set is not in the ablation)."""

    mem: float | None = None
    gen: float | None = None
    mem_unconnected: float | None = None

    @classmethod
    def of(cls, table: pd.DataFrame, row: str) -> "Ablation | None":
        if row not in table.index:
            return None
        return cls(*[float(table.loc[row, s]) if s in table.columns else None for s in SETS])


@dataclass(frozen=True)
class C3Metrics:
    """One seed's C3 numbers, in the record's order: the erasure at the judged rank per set (``mem``: M,
    ``gen``: C, ``mem_unconnected``: THR's part of M unconnected to the bridge), the overlap of section 5
    against random sets, 7.5's statistics per attribution metric (``overlap_lp``: log-prob,
    ``overlap_ld``: logit difference), whether the registered overlap check is superseded, then what the
    chapter adds: the erasure sites, the neurons-only overlap and the ablation of the top generalization
    neurons against random ones. None: does not apply (left out of :meth:`record`); NaN: not computed."""

    erasure_rank: int
    mem: SetErasure | None = group(prefix="mem_", default=None)
    gen: SetErasure | None = group(prefix="gen_", default=None)
    mem_unconnected: SetErasure | None = group(prefix="mem_unconnected_", default=None)
    overlap: float | None = None
    overlap_random: float | None = None
    overlap_over_random: float | None = None
    overlap_lp: OverlapStats | None = group(prefix="overlap_lp_", default=None)
    overlap_ld: OverlapStats | None = group(prefix="overlap_ld_", default=None)
    overlap_ld_over_ceiling: float | None = None
    overlap_superseded: bool | None = None  # the registered overlap check superseded (a ceiling below its threshold)
    erasure_layers: list | None = None  # the erasure sites' layers (empty: no site, 8.5)
    erasure_positions: list | None = None
    overlap_neurons: float | None = None
    overlap_neurons_random: float | None = None
    ablate_top: Ablation | None = group(prefix="ablate_top_neurons_", default=None)
    ablate_random: Ablation | None = group(prefix="ablate_random_neurons_", default=None)

    def __post_init__(self):
        if isinstance(self.erasure_rank, bool) or not isinstance(self.erasure_rank, int) or self.erasure_rank < 0:
            raise ValueError(f"erasure_rank must be a whole number >= 0, got {self.erasure_rank!r}")

    def record(self) -> dict:
        """The record's ``metrics``: every number that applies (None left out), in field order."""
        return inline(self, None)

    def erasure(self, s: str) -> SetErasure:
        """The erasure numbers of set ``s`` (NaN where the sweep does not hold it)."""
        return getattr(self, s) or SetErasure(*[math.nan] * 7)


def _stat(stats: OverlapStats | None, name: str) -> float:
    value = None if stats is None else getattr(stats, name)
    return math.nan if value is None else value


@as_read
def checks(sweep: pd.DataFrame | ErasureSweep, rank: int, overlap: dict, task: str,
           statistics: dict | None = None, erasure_layers: list | None = None) -> tuple[C3Metrics, list[Check]]:
    """C3 from the erasure sweep (a table with rows rank / method / set / accuracy, rank 0 = before, or a
    :class:`rote.analysis.patching.ErasureSweep` whose outcomes give the erasure checks' intervals), the
    overlap of section 5 (``jaccard``, ``random``) and 7.5's ``statistics`` per attribution metric
    (``logprob``, ``logit_diff``). ``erasure_layers``: the sites' layers (``[]``: no site, 8.5; None: not given).

    Registered: mem drop over the random control >= 0.3 (THR: also the unconnected subset); overlap >= 0.5
    and >= 3 x random. Amended (7.5): the same margin over the larger control. The gen check (8.6,
    ``validity``) leaves the erasure checks unresolved in the amended reading where it fails; the split-half
    ceiling (8.1, ``validity``) supersedes the registered overlap check below 0.5 by the logit-difference
    J(M, C) >= 0.5 x J(C, C'). A missing number leaves its check unresolved with the case (8.5). Returns C3's
    numbers (the chapter adds its own) and the checks."""
    table, outcomes = (sweep, None) if isinstance(sweep, pd.DataFrame) else (sweep.table, sweep)
    at_rank = {s: SetErasure.of(table, s, rank) if s in set(table.set) else None for s in SETS}
    lp, ld = (OverlapStats.of((statistics or {}).get(k)) for k in ("logprob", "logit_diff"))
    j, rand, ceiling_ld = numeric(overlap.get("jaccard")), numeric(overlap.get("random")), _stat(ld, "split_half_C")
    m = C3Metrics(rank, at_rank["mem"], at_rank["gen"], at_rank["mem_unconnected"], overlap=j, overlap_random=rand,
                  overlap_over_random=j / rand if rand else math.nan, overlap_lp=lp, overlap_ld=ld,
                  overlap_ld_over_ceiling=_stat(ld, "jaccard") / ceiling_ld if ceiling_ld else math.nan,
                  erasure_layers=None if erasure_layers is None else list(erasure_layers))
    no_site = erasure_layers is not None and not list(erasure_layers)
    erasure = _erasure_checks(table, outcomes, m, no_site, task)
    overlaps = _overlap_checks(m, overlap, statistics or {})
    return replace(m, overlap_superseded=overlaps[0].kind == "superseded"), erasure + overlaps


def _erasure_checks(table: pd.DataFrame, outcomes: ErasureSweep | None, m: C3Metrics, no_site: bool,
                    task: str) -> list[Check]:
    """The erasure checks on M (and THR's unconnected subset), validated by the gen check (8.6); ``outcomes``
    (None: not kept) give their intervals, and without an erasure site (8.5) every one is unresolved."""
    th, rank = THRESHOLDS["C3"], m.erasure_rank
    no_matched = None if "matched" in set(table.method) else C3_NO_CONTROL["matched"]

    def erasure_check(label: CheckLabel, s: str, number: str, controls: tuple, compare=at_least,
                      threshold=th["erasure_mem_drop_over_control_min"]) -> Check:
        """The check ``label`` of set ``s``'s ``number`` against ``controls``, with why it has no value."""
        e = m.erasure(s)
        if no_site or s not in set(table.set):
            reason = (C3_NO_SITE if no_site else C3_EMPTY[s] if s == "mem_unconnected"
                      else f"the set {s} is not in the erasure sweep")
        else:
            reason = missing_reason((e.before, C3_EMPTY[s]),
                                    (e.inlp, f"the INLP erasure was not computed at rank {rank}"),
                                    *[(getattr(e, c), C3_NO_CONTROL[c]) for c in controls])
        interval = None if outcomes is None or no_site else outcomes.drop_over(s, rank, controls)
        check = compare(label, getattr(e, number), threshold, missing=reason or f"{s}_{number} could not be computed",
                        interval=interval)
        if no_site:  # 8.5: unresolved whatever the sweep holds
            return unresolved(check.replace(value=None, margin=None, interval=None, method="", near=None), C3_NO_SITE)
        if "matched" in controls and no_matched:  # a control the amended check needs was not run
            return unresolved(check, no_matched)
        return check

    sets = [("mem", "", "mem")] + ([("mem_unconnected", ".unconnected", "unconnected mem")] if task == "thr" else [])
    treated = []
    for s, suffix, words in sets:
        treated += [erasure_check(CheckLabel(f"c3.erasure{suffix}.random", f"erasure: {words} drop over random control",
                                             "registered", "erasure"), s, "drop_over_control", ("random",)),
                    erasure_check(CheckLabel(f"c3.erasure{suffix}", f"erasure: {words} drop over the larger control"
                                             + (" (random, information-matched)" if s == "mem" else ""),
                                             "amended", "erasure"), s, "drop_over_larger_control", C3_CONTROLS)]
    gen = erasure_check(CheckLabel("c3.erasure.gen", "8.6 validity: erasure lowers gen on C more than the larger "
                                   "control (the rule is removed)", "validity", "erasure"),
                        "gen", "drop_over_larger_control", C3_CONTROLS, compare=above,
                        threshold=th["gen_drop_over_control_above"]).replace(history=(("7.5", "amended"), ("8.6", "validity")))
    if gen.passed is False:
        gen = gen.replace(reason=C3_GEN_NOT_LOWERED)
    if no_site:  # 8.5 already leaves every erasure check unresolved, with that reason
        return treated + [gen]
    # a check already unresolved (its own number missing) stays as it is: unresolved in either reading
    judged = [c for check in treated
              for c in (validate(check, gen, "unresolve", "8.6")[:-1] if check.passed is not None else [check])]
    return judged + [gen]


def _overlap_checks(m: C3Metrics, overlap: dict, stats: dict) -> list[Check]:
    """The registered overlap checks (the first one superseded or not), the split-half ceiling (validity)
    and, below it, the amended overlap check; margins only (an overlap has no per-example sample)."""
    th = THRESHOLDS["C3"]
    ceiling = _stat(m.overlap_lp, "split_half_C")  # what identical circuits reach with the registered metric
    ceiling_ld, j_ld = _stat(m.overlap_ld, "split_half_C"), _stat(m.overlap_ld, "jaccard")
    validity = at_least(CheckLabel("c3.overlap.ceiling", "split-half ceiling J(C, C') (log-prob) reaches the overlap "
                                   "threshold", "validity", "overlap"), ceiling, th["overlap_min"],
                        missing="the split-half ceiling was not computed")
    validity = validity.replace(history=(("7.5", "ceiling"), ("8.1", "validity")))
    if validity.passed is False:
        validity = validity.replace(reason=f"7.5: out of reach: two halves of C overlap only {fmt.plain(ceiling)}")
    no_overlap = ("the circuit overlap was not given to the verdict" if not overlap else
                  "the circuit overlap could not be computed: M or C has no example to attribute")
    registered = validate(at_least(CheckLabel("c3.overlap.registered", C3_OVERLAP, "registered", "overlap"), m.overlap,
                                   th["overlap_min"], missing=no_overlap), validity, "supersede", "7.5")
    checks = [*registered, at_least(CheckLabel("c3.overlap.random",
                                               f"circuit overlap vs {th['overlap_over_random_min']} x random",
                                               "registered", "overlap"),
                                    m.overlap, th["overlap_over_random_min"] * m.overlap_random, missing=no_overlap)]
    if validity.passed is False:
        checks.append(at_least(CheckLabel("c3.overlap", f"circuit overlap vs {th['ceiling_ratio_min']} x split-half "
                                          "ceiling (logit difference)", "amended", "overlap"),
                               j_ld, th["ceiling_ratio_min"] * ceiling_ld,
                               missing="the logit-difference statistics were not computed"
                               if not stats.get("logit_diff") else "the logit-difference overlap could not be "
                               "computed: M or C has no example to attribute"))
    return checks

"""Claim C3's checks (protocol section 5, amendment 7.5): the erasure sweep against its random and
information-matched controls, and the circuit overlap against its split-half ceiling. Its only
caller is :func:`rote.chapters.c3.evaluate`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import pandas as pd

from .. import fmt
from ..analysis.sweep_table import sweep_accuracy
from ..claims import THRESHOLDS
from .core import Check, CheckLabel, numeric, above, at_least, missing_reason, unresolved, validate

if TYPE_CHECKING:  # the verdict layer imports no torch (rote.site shows records without it)
    from ..analysis.patching import ErasureSweep


C3_CONTROLS = ("random", "matched")  # erasure controls of the sweep: random subspace; information-matched (7.5)


C3_OVERLAP = "circuit overlap (Jaccard of top 5%)"  # the registered overlap check (superseded below its ceiling)


C3_NO_SITE = ("8.5: the intervention cannot run: no layer carries the intermediate result at 5 x chance on C "
              "(no erasure site)")


C3_EMPTY = {"mem": "no memorized example (M is empty)", "gen": "no correctly answered example (C is empty)",
            "mem_unconnected": "no memorized example whose noisy label is unconnected to the bridge"}


C3_NO_CONTROL = {"random": "the random-subspace control was not computed",
                 "matched": "the information-matched control was not computed"}


SETS = ("mem", "gen", "mem_unconnected")  # the sets the erasure sweep may hold, in the record's order
STATISTICS = ("jaccard", "random", "split_half_C", "split_half_M", "spearman", "ci_low", "ci_high")  # kept per metric


@dataclass(frozen=True)
class C3Metrics:
    """One seed's numbers for claim C3: the ``metrics`` of its record.

    The erasure at the judged rank ``erasure_rank``, per set (``mem``: M, ``gen``: C,
    ``mem_unconnected``: THR's memorized examples unconnected to the bridge): accuracy before, after
    INLP and after each control, and INLP's drop beyond the drop of the random control
    (``drop_over_control``), of the information-matched control and of the larger of the two. The
    circuit overlap of section 5 (Jaccard of the top components, log-prob attribution) against two
    random sets, and amendment 7.5's statistics per attribution metric (``lp``: log-prob, ``ld``:
    logit difference; :func:`rote.analysis.attribution.overlap_statistics`). Then what the chapter
    adds (:func:`rote.chapters.c3.evaluate`): the erasure sites, the neurons-only overlap and the
    accuracy of each set with the top generalization neurons (``top``) or as many random ones
    (``random``) mean-ablated.

    None: the number does not apply to this seed and is left out of the record (:meth:`record`): the
    unconnected subset outside THR, overlap statistics not given, an ablation that did not run (no top
    neurons), the chapter's numbers before :func:`~rote.chapters.c3.evaluate` adds them. NaN: it applies
    but could not be computed (null in the record)."""

    erasure_rank: int
    mem_before: float | None = None
    mem_inlp: float | None = None
    mem_random: float | None = None
    mem_matched: float | None = None
    mem_drop_over_control: float | None = None
    mem_drop_over_matched: float | None = None
    mem_drop_over_larger_control: float | None = None
    gen_before: float | None = None
    gen_inlp: float | None = None
    gen_random: float | None = None
    gen_matched: float | None = None
    gen_drop_over_control: float | None = None
    gen_drop_over_matched: float | None = None
    gen_drop_over_larger_control: float | None = None
    mem_unconnected_before: float | None = None
    mem_unconnected_inlp: float | None = None
    mem_unconnected_random: float | None = None
    mem_unconnected_matched: float | None = None
    mem_unconnected_drop_over_control: float | None = None
    mem_unconnected_drop_over_matched: float | None = None
    mem_unconnected_drop_over_larger_control: float | None = None
    overlap: float | None = None
    overlap_random: float | None = None
    overlap_over_random: float | None = None
    overlap_lp_jaccard: float | None = None
    overlap_lp_random: float | None = None
    overlap_lp_split_half_C: float | None = None
    overlap_lp_split_half_M: float | None = None
    overlap_lp_spearman: float | None = None
    overlap_lp_ci_low: float | None = None
    overlap_lp_ci_high: float | None = None
    overlap_ld_jaccard: float | None = None
    overlap_ld_random: float | None = None
    overlap_ld_split_half_C: float | None = None
    overlap_ld_split_half_M: float | None = None
    overlap_ld_spearman: float | None = None
    overlap_ld_ci_low: float | None = None
    overlap_ld_ci_high: float | None = None
    overlap_ld_over_ceiling: float | None = None
    overlap_superseded: bool | None = None  # the registered overlap check superseded (a ceiling below its threshold)
    erasure_layers: list | None = None  # the erasure sites' layers (empty: no site, 8.5)
    erasure_positions: list | None = None
    overlap_neurons: float | None = None
    overlap_neurons_random: float | None = None
    ablate_top_neurons_mem: float | None = None
    ablate_top_neurons_gen: float | None = None
    ablate_top_neurons_mem_unconnected: float | None = None
    ablate_random_neurons_mem: float | None = None
    ablate_random_neurons_gen: float | None = None
    ablate_random_neurons_mem_unconnected: float | None = None

    def __post_init__(self):
        if isinstance(self.erasure_rank, bool) or not isinstance(self.erasure_rank, int) or self.erasure_rank < 0:
            raise ValueError(f"erasure_rank must be a whole number >= 0, got {self.erasure_rank!r}")
        if self.overlap_superseded is not None and not isinstance(self.overlap_superseded, bool):
            raise ValueError(f"overlap_superseded must be True, False or None, got {self.overlap_superseded!r}")
        for name in ("erasure_layers", "erasure_positions"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), list):
                raise ValueError(f"{name} must be a list or None, got {getattr(self, name)!r}")

    def record(self) -> dict:
        """The record's ``metrics``: every number that applies (None fields left out), in field order."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def _given(x) -> float:
    """A number that may not apply (None) as a float: NaN where it does not."""
    return math.nan if x is None else x


def measure(sweep: pd.DataFrame, rank: int, overlap: dict, statistics: dict | None = None,
            erasure_layers: list | None = None) -> C3Metrics:
    """C3's numbers from the erasure sweep, the overlap and its statistics (the inputs of :func:`checks`),
    without ``overlap_superseded``, which the checks decide, and without the chapter's numbers."""
    def acc(s, method, r):
        return sweep_accuracy(sweep, s, method, r)

    erasure = {}
    for s in [x for x in SETS if x in set(sweep.set)]:
        before, inlp = acc(s, "INLP", 0), acc(s, "INLP", rank)
        drops = {m: before - acc(s, m, rank) for m in C3_CONTROLS}
        larger = max(drops.values()) if not any(math.isnan(d) for d in drops.values()) else math.nan
        erasure.update({f"{s}_before": before, f"{s}_inlp": inlp, f"{s}_random": acc(s, "random", rank),
                        f"{s}_matched": acc(s, "matched", rank),
                        f"{s}_drop_over_control": (before - inlp) - drops["random"],
                        f"{s}_drop_over_matched": (before - inlp) - drops["matched"],
                        f"{s}_drop_over_larger_control": (before - inlp) - larger})
    stats = statistics or {}
    given = {f"overlap_{short}_{key}": numeric(value) for metric, short in (("logprob", "lp"), ("logit_diff", "ld"))
             for key, value in (stats.get(metric) or {}).items() if key in STATISTICS}
    j, rand = numeric(overlap.get("jaccard")), numeric(overlap.get("random"))
    ceiling_ld = given.get("overlap_ld_split_half_C", math.nan)
    return C3Metrics(erasure_rank=rank, **erasure, overlap=j, overlap_random=rand,
                     overlap_over_random=j / rand if rand else math.nan, **given,
                     overlap_ld_over_ceiling=given.get("overlap_ld_jaccard", math.nan) / ceiling_ld if ceiling_ld
                     else math.nan,
                     erasure_layers=None if erasure_layers is None else list(erasure_layers))


def checks(sweep: pd.DataFrame | ErasureSweep, rank: int, overlap: dict, task: str,
           statistics: dict | None = None, erasure_layers: list | None = None) -> tuple[C3Metrics, list[Check]]:
    """C3 from the erasure sweep (rows rank, method INLP / random / matched, set mem / gen /
    mem_unconnected, accuracy; rank 0 = before; or a :class:`rote.analysis.patching.ErasureSweep`, the
    table with each example's outcome, from which the erasure checks take their sampling intervals,
    section 11), the all-component overlap of section 5 (``jaccard``, ``random``: log-prob
    attribution) and ``statistics``, the overlap statistics of amendment 1, 7.5 per attribution
    metric ({"logprob": ..., "logit_diff": ...}, each
    :func:`rote.analysis.attribution.overlap_statistics`: ``jaccard``, ``split_half_C``,
    ``split_half_M``, ``spearman``, ``ci_low``, ``ci_high``). ``erasure_layers``: the erasure sites'
    layers (where C2's probes find the result at 5 x chance on C); None: not given. Returns the
    numbers (:class:`C3Metrics`, from :func:`measure`) and the checks.

    Registered (section 5): mem drop over the random control >= 0.3 (THR: also on the unconnected
    subset); overlap >= 0.5; overlap >= 3 x random. Amended (7.5): the same margin over the larger
    of the two controls' drops (random, information-matched). The gen check of 7.5 (gen on C drops
    more under INLP than under the larger control, > 0) is a ``validity`` check (amendment 2, 8.6: a
    check of the instrument): where the erasure does not lower gen beyond its controls, it did not
    remove the rule, and every erasure check is unresolved in the amended reading (``<id>.amended``
    stands for it, :func:`rote.verdicts.core.validate`); section 5 named it a sanity check, so the
    registered reading shows it and does not count it. The split-half ceiling J(C, C') is a
    ``validity`` check (8.1: what identical circuits reach, against the overlap threshold); where it
    is below 0.5 the registered overlap check is ``superseded`` by J(M, C) >= 0.5 x J(C, C') on the
    logit-difference attribution (``amended``).

    Section 11: every check has its margin; the erasure checks and the gen check also the 95%
    bootstrap interval over the examples of their set (:meth:`ErasureSweep.drop_over`) where the sweep
    kept its outcomes; the overlap checks have no per-example sample (margin only).

    Missing values (8.5): with no erasure site (``erasure_layers == []``) the intervention cannot
    run, and every erasure check, registered and amended, is unresolved with that reason. Otherwise a
    check whose number is missing is unresolved with its case: an empty set, a control not computed
    (no matched control in the sweep), the overlap not computed (M or C empty), no statistics."""
    table, outcomes = (sweep, None) if isinstance(sweep, pd.DataFrame) else (sweep.table, sweep)
    m = measure(table, rank, overlap, statistics, erasure_layers)
    no_site = erasure_layers is not None and not list(erasure_layers)
    erasure = _erasure_checks(_ErasureInputs(table, outcomes, rank, no_site), m, task)
    overlaps = _overlap_checks(m, overlap, statistics or {})
    return replace(m, overlap_superseded=overlaps[0].kind == "superseded"), erasure + overlaps


@dataclass(frozen=True)
class _ErasureInputs:
    """What the erasure checks read: the sweep's table, its per-example outcomes (None: not kept), the
    judged rank, and whether there is no erasure site (8.5)."""

    table: pd.DataFrame
    outcomes: ErasureSweep | None
    rank: int
    no_site: bool

    def accuracy(self, s: str, method: str, rank: int) -> float:
        return sweep_accuracy(self.table, s, method, rank)

    def why(self, s: str, controls: tuple) -> str | None:
        """Why the erasure check on set ``s`` against ``controls`` has no value, naming the case."""
        if self.no_site:
            return C3_NO_SITE
        if s not in set(self.table.set):
            return f"the set {s} is not in the erasure sweep" if s != "mem_unconnected" else C3_EMPTY[s]
        return missing_reason((self.accuracy(s, "INLP", 0), C3_EMPTY[s]),
                              (self.accuracy(s, "INLP", self.rank), f"the INLP erasure was not computed at rank "
                                                                    f"{self.rank}"),
                              *[(self.accuracy(s, c, self.rank), C3_NO_CONTROL[c]) for c in controls])

    def interval(self, s: str, controls: tuple):
        """Section 11: the bootstrap interval of INLP's drop on ``s`` beyond the larger of ``controls``."""
        return None if self.outcomes is None or self.no_site else self.outcomes.drop_over(s, self.rank, controls)


C3_GEN_NOT_LOWERED = ("8.6: the erasure did not lower gen on C more than its larger control (random, "
                      "information-matched): it did not remove the rule, so its checks cannot say what removing "
                      "the rule does to memorization")


def _erasure_checks(inputs: _ErasureInputs, m: C3Metrics, task: str) -> list[Check]:
    """The erasure checks on M (and THR's unconnected subset), validated by the gen check (8.6)."""
    th = THRESHOLDS["C3"]
    no_matched = None if "matched" in set(inputs.table.method) else C3_NO_CONTROL["matched"]

    def erasure_check(label: CheckLabel, number: str, s: str, controls: tuple, compare=at_least,
                      threshold=th["erasure_mem_drop_over_control_min"]) -> Check:
        """The check ``label`` of the metric ``number`` on set ``s`` against ``controls``."""
        reason = inputs.why(s, controls)
        check = compare(label, getattr(m, number), threshold, missing=reason or f"{number} could not be computed",
                        interval=inputs.interval(s, controls))
        if inputs.no_site:  # 8.5: unresolved whatever the sweep holds
            return unresolved(check.replace(value=None, margin=None, interval=None, method="", near=None), C3_NO_SITE)
        if "matched" in controls and no_matched:  # a control the amended check needs was not run
            return unresolved(check, no_matched)
        return check

    sets = [("mem", "", "mem")] + ([("mem_unconnected", ".unconnected", "unconnected mem")] if task == "thr" else [])
    treated = []
    for s, suffix, words in sets:
        treated += [erasure_check(CheckLabel(f"c3.erasure{suffix}.random", f"erasure: {words} drop over random control",
                                             "registered", "erasure"),
                                  f"{s}_drop_over_control", s, ("random",)),
                    erasure_check(CheckLabel(f"c3.erasure{suffix}", f"erasure: {words} drop over the larger control"
                                             + (" (random, information-matched)" if s == "mem" else ""),
                                             "amended", "erasure"),
                                  f"{s}_drop_over_larger_control", s, C3_CONTROLS)]
    gen = erasure_check(CheckLabel("c3.erasure.gen", "8.6 validity: erasure lowers gen on C more than the larger "
                                   "control (the rule is removed)", "validity", "erasure"),
                        "gen_drop_over_larger_control", "gen", C3_CONTROLS, compare=above,
                        threshold=th["gen_drop_over_control_above"]).replace(history=(("7.5", "amended"), ("8.6", "validity")))
    if gen.passed is False:
        gen = gen.replace(reason=C3_GEN_NOT_LOWERED)
    if inputs.no_site:  # 8.5 already leaves every erasure check unresolved, with that reason
        return treated + [gen]
    # a check already unresolved (its own number missing) stays as it is: unresolved in either reading
    judged = [c for check in treated
              for c in (validate(check, gen, "unresolve", "8.6")[:-1] if check.passed is not None else [check])]
    return judged + [gen]


def _overlap_checks(m: C3Metrics, overlap: dict, stats: dict) -> list[Check]:
    """The registered overlap checks, the split-half ceiling (validity) and, below it, the amended
    overlap check; margins only (section 11: an overlap has no per-example sample). The first check
    is the registered overlap check (superseded or not)."""
    th = THRESHOLDS["C3"]
    ceiling = _given(m.overlap_lp_split_half_C)  # what identical circuits reach with the registered metric
    ceiling_ld, j_ld = _given(m.overlap_ld_split_half_C), _given(m.overlap_ld_jaccard)
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

"""Claim C2's checks (protocol section 5, amendments 7.3-7.4, 8.2): the probes on M and on C, the
logit-lens race, and their controls and validity checks. Its only callers are in
:mod:`rote.chapters.c2` (``evaluate``).

- :class:`ProbeReads`, :class:`LensReads` -- one seed's inputs: the probe summaries and the logit lens.
- :func:`checks` -- the claim's :class:`C2Metrics` and checks from them.
- :class:`C2Metrics` -- every number a record stores under ``per_seed[i]["metrics"]``
  (:meth:`C2Metrics.record`)."""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .. import fmt
from ..claims import THRESHOLDS
from ..analysis.intervals import Interval, wilson, wilson_bounds
from .core import Check, CheckLabel, numeric, above, at_least, supersede, validate


class Absent(enum.Enum):
    """A metric that the seed's inputs do not give: a probe read of the other task, an amended read or a
    lens not given to the verdict. It is left out of the record (:meth:`C2Metrics.record`)."""

    ABSENT = "absent"


ABSENT = Absent.ABSENT
Layer = int | None | Absent  # a layer (None: no layer to read at)
Number = float | None | Absent  # an accuracy, chance or share (NaN: not measured)
Flag = bool | None | Absent  # None: a number it reads is missing
Curve = list | Absent  # one number per layer

PROBE_READS = ("carries", "answer_digits", "bridge", "true_tail", "bridge_r2", "tail_masked")
PROBE_READ_FIELDS = ("best_layer", "acc_M", "acc_C", "chance", "best_layer_C", "acc_C_best", "chance_reachable")
LENS_FIELDS = ("lens_takeover_layer", "lens_p_true_by_layer", "lens_p_noisy_by_layer")
LENS_SHARE_FIELDS = ("lens_share_best_layer", "lens_share", "lens_share_null", "lens_share_n",
                     "lens_intermediate_layers")
LENS_SHARE_INTERVAL_FIELDS = ("lens_share_lo", "lens_share_hi", "lens_share_by_layer")


@dataclass(frozen=True)
class C2Metrics:
    """One seed's C2 numbers, in the record's order. A probe read ``<key>_*`` (key: FDA ``carries`` and
    ``answer_digits``, THR ``bridge`` (at r1) and ``true_tail``, both read at their best layer on M; the
    amended THR reads ``bridge_r2`` and ``tail_masked``) holds the best layer on M, the accuracies on M
    and C there, chance (on M), C's own best layer and its accuracy there (8.5), chance measured on C
    (``<key>_chance_C``, 8.6; given where the read's inputs give it) and whether a true claim can reach
    the chance check (:func:`chance_reachable`, from C's accuracy and C's chance). The lens holds the takeover layer and P(true),
    P(noisy) by layer on M; the lens share (7.4) its best intermediate layer, share, null, n and, where
    the model has an intermediate layer with examples, the Wilson interval and the share by layer.

    A field the seed's inputs do not give is :data:`ABSENT` (a part is given whole or not at all) and
    is left out of :meth:`record`, which is the record's dict exactly as before the metrics were typed."""

    n_M: int
    n_C: int
    carries_best_layer: Layer = ABSENT
    carries_acc_M: Number = ABSENT
    carries_acc_C: Number = ABSENT
    carries_chance: Number = ABSENT
    carries_best_layer_C: Layer = ABSENT
    carries_acc_C_best: Number = ABSENT
    carries_chance_C: Number = ABSENT  # chance measured on C (8.6)
    carries_chance_reachable: Flag = ABSENT
    answer_digits_best_layer: Layer = ABSENT
    answer_digits_acc_M: Number = ABSENT
    answer_digits_acc_C: Number = ABSENT
    answer_digits_chance: Number = ABSENT
    answer_digits_best_layer_C: Layer = ABSENT
    answer_digits_acc_C_best: Number = ABSENT
    answer_digits_chance_C: Number = ABSENT  # chance measured on C (8.6)
    answer_digits_chance_reachable: Flag = ABSENT
    bridge_best_layer: Layer = ABSENT
    bridge_acc_M: Number = ABSENT
    bridge_acc_C: Number = ABSENT
    bridge_chance: Number = ABSENT
    bridge_best_layer_C: Layer = ABSENT
    bridge_acc_C_best: Number = ABSENT
    bridge_chance_C: Number = ABSENT  # chance measured on C (8.6)
    bridge_chance_reachable: Flag = ABSENT
    true_tail_best_layer: Layer = ABSENT
    true_tail_acc_M: Number = ABSENT
    true_tail_acc_C: Number = ABSENT
    true_tail_chance: Number = ABSENT
    true_tail_best_layer_C: Layer = ABSENT
    true_tail_acc_C_best: Number = ABSENT
    true_tail_chance_C: Number = ABSENT  # chance measured on C (8.6)
    true_tail_chance_reachable: Flag = ABSENT
    lens_takeover_layer: Layer = ABSENT
    lens_p_true_by_layer: Curve = ABSENT
    lens_p_noisy_by_layer: Curve = ABSENT
    bridge_r2_best_layer: Layer = ABSENT
    bridge_r2_acc_M: Number = ABSENT
    bridge_r2_acc_C: Number = ABSENT
    bridge_r2_chance: Number = ABSENT
    bridge_r2_best_layer_C: Layer = ABSENT
    bridge_r2_acc_C_best: Number = ABSENT
    bridge_r2_chance_C: Number = ABSENT  # chance measured on C (8.6)
    bridge_r2_chance_reachable: Flag = ABSENT
    tail_masked_best_layer: Layer = ABSENT
    tail_masked_acc_M: Number = ABSENT
    tail_masked_acc_C: Number = ABSENT
    tail_masked_chance: Number = ABSENT
    tail_masked_reads_noisy_M: Number = ABSENT  # share of M whose unmasked read is the noisy label
    tail_masked_acc_M_unmasked: Number = ABSENT
    tail_masked_best_layer_C: Layer = ABSENT
    tail_masked_acc_C_best: Number = ABSENT
    tail_masked_chance_C: Number = ABSENT  # chance measured on C (8.6)
    tail_masked_chance_reachable: Flag = ABSENT
    lens_share_best_layer: Layer = ABSENT
    lens_share: Number = ABSENT
    lens_share_lo: Number = ABSENT
    lens_share_hi: Number = ABSENT
    lens_share_null: Number = ABSENT
    lens_share_n: int | Absent = ABSENT
    lens_share_by_layer: Curve = ABSENT
    lens_intermediate_layers: int | Absent = ABSENT

    def __post_init__(self):
        for n in (self.n_M, self.n_C):
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"C2Metrics: n_M and n_C count examples, got {self.n_M!r} and {self.n_C!r}")
        parts = [[f"{key}_{name}" for name in PROBE_READ_FIELDS] for key in PROBE_READS]  # chance_C: optional
        parts += [["tail_masked_reads_noisy_M", "tail_masked_acc_M_unmasked"], list(LENS_FIELDS),
                  list(LENS_SHARE_FIELDS), list(LENS_SHARE_INTERVAL_FIELDS)]
        for names in parts:
            given = [getattr(self, name) is not ABSENT for name in names]
            if any(given) and not all(given):
                raise ValueError(f"C2Metrics: {', '.join(names)} are given together or not at all")
        if self.lens_share_lo is not ABSENT and self.lens_share is ABSENT:
            raise ValueError("C2Metrics: the lens share's interval without the share")

    def record(self) -> dict:
        """The metrics as the record stores them: every field the inputs give, in this order."""
        return {name: value for name, value in asdict(self).items() if value is not ABSENT}

    @property
    def reachable(self) -> dict[str, bool | None]:
        """Per probe read these metrics hold (its key), whether a true claim could pass its chance
        check (:func:`chance_reachable`; ``None``: a number it reads is missing)."""
        reads = {"carries": self.carries_chance_reachable, "answer_digits": self.answer_digits_chance_reachable,
                 "bridge": self.bridge_chance_reachable, "true_tail": self.true_tail_chance_reachable,
                 "bridge_r2": self.bridge_r2_chance_reachable, "tail_masked": self.tail_masked_chance_reachable}
        return {key: value for key, value in reads.items() if value is not ABSENT}


@dataclass(frozen=True)
class ProbeReads:
    """One seed's probe summaries (one row per read: ``best_layer``, ``acc_M``, ``acc_C``, ``chance`` and,
    read on C alone (8.5), ``best_layer_C``, ``acc_C_best``):

    - ``summary``: the headline groups of the task at their best layer on M
      (:func:`rote.analysis.probes.best_layer_summary`; ``group`` names the read).
    - ``bridge_r2`` (THR): the bridge read at r2, one row (:func:`rote.analysis.probes.position_summary`).
      The registered bridge check at r1 is ``superseded`` (at r1 the bridge is an atomic fact of the
      input, so M = C there by construction); the amended check is the same pair of thresholds at r2.
    - ``masked_tail`` (THR): the true tail with the noisy label's class masked on M and a random wrong
      class on C, chance 1 / (n_classes - 1), one row (:func:`rote.analysis.probes.masked_summary`). The
      unmasked registered check is ``superseded``: trained where the true tail is the output, the probe
      reads the output, which on M is the noisy label (``reads_masked_M`` records how often).

    A THR read not given leaves its amended checks unresolved ("not given to the verdict")."""

    summary: pd.DataFrame
    bridge_r2: pd.DataFrame | dict | None = None
    masked_tail: pd.DataFrame | dict | None = None

    def __post_init__(self):
        if not isinstance(self.summary, pd.DataFrame) or "group" not in self.summary:
            raise ValueError("ProbeReads: summary is a probe summary table with a 'group' column")
        unknown = {g.replace(" ", "_") for g in self.summary.group} - set(PROBE_READS)
        if unknown:
            raise ValueError(f"ProbeReads: C2 has no probe read {', '.join(sorted(unknown))}")
        for name in ("bridge_r2", "masked_tail"):
            if not isinstance(getattr(self, name), (pd.DataFrame, dict, type(None))):
                raise ValueError(f"ProbeReads: {name} is a summary row (a table or a dict) or None")


@dataclass(frozen=True)
class LensReads:
    """One seed's logit lens on M: the registered pattern (``verdict``:
    :func:`rote.analysis.lens.lens_verdict`, ``true_ahead_intermediate``, ``noisy_only_last``,
    ``takeover_layer``), the mean P(true) and P(noisy) by layer (``table``:
    :func:`rote.analysis.lens.lens_curves`), and amendment 7.4's share by layer (``share``: ``n``,
    ``ahead``, ``null``; :func:`rote.analysis.lens.ahead_share`; None: not given to the verdict)."""

    verdict: dict
    table: pd.DataFrame
    share: pd.DataFrame | None = None

    def __post_init__(self):
        if not isinstance(self.verdict, dict):
            raise ValueError("LensReads: verdict is the lens pattern's dict (rote.analysis.lens.lens_verdict)")
        if not isinstance(self.table, pd.DataFrame) or not {"p_true", "p_noisy"} <= set(self.table.columns):
            raise ValueError("LensReads: table has P(true) and P(noisy) by layer (p_true, p_noisy)")
        if not isinstance(self.share, (pd.DataFrame, type(None))):
            raise ValueError("LensReads: share is the share table by layer or None")


def checks(task: str, n_M: int, n_C: int, probes: ProbeReads, lens: LensReads | None) -> tuple[C2Metrics, list[Check]]:
    """C2 on one seed of ``task``, from its probe reads and its logit lens on M (None: not given to the
    verdict, its checks unresolved); ``n_M``, ``n_C``: the sizes of M and C.

    The probe checks read each probe at its best layer on M, as section 5 does; for THR the bridge at
    r1 and the unmasked true tail are ``superseded`` by amendment 7.4's reads (:class:`ProbeReads`).
    The chance check reads chance measured on M (``chance``); the reachable check (8.2, a ``validity``
    check) reads C alone (8.5, 8.6): the probe's accuracy on C at C's own best layer (``acc_C_best``),
    against chance measured on C (``chance_C``). The lens ``null`` check (7.4):
    at the intermediate layer (1..L-1) with the largest share, the lower bound of the Wilson interval
    (level ``lens_interval_level``) must be above the training-label prior's share.

    Missing values (8.5): a missing input leaves its check unresolved with the reason that names the
    case (no memorized example to probe, no correct example, chance not measured, no memorized
    example with a differing token for the lens, an input not given); a probe accuracy of 0 on M is a
    fail by section 5 ("at least 5 times chance"), with that reason.

    Section 11: every check holds its margin and, where its statistic comes from a sample of examples,
    a 95% interval (:func:`_c2_probe_pair`, :func:`_lens_checks`, :func:`c2_lens_share`)."""
    th = THRESHOLDS["C2"]
    metrics: dict = {"n_M": n_M, "n_C": n_C}
    checks: list[Check] = []
    replaced = C2_SUPERSEDED if task == "thr" else {}
    for row in probes.summary.itertuples():
        key = row.group.replace(" ", "_")
        read = row._asdict()
        metrics.update(_probe_read(key, read))
        if row.group in replaced:
            name, why = replaced[row.group]
            checks += [supersede(c, why, "7.4") for c in _c2_probe_pair(key, f"probe {name}", "registered", read,
                                                                 validated=False)]
        else:
            checks += _c2_probe_pair(key, f"probe {row.group}", "registered", read)
    checks += _lens_checks(lens)
    if lens is not None:
        metrics.update({"lens_takeover_layer": lens.verdict.get("takeover_layer"),
                        "lens_p_true_by_layer": [float(x) for x in lens.table.p_true],
                        "lens_p_noisy_by_layer": [float(x) for x in lens.table.p_noisy]})
    if task == "thr":
        for key, name, given in (("bridge_r2", C2_AMENDED["bridge"], probes.bridge_r2),
                                 ("tail_masked", C2_AMENDED["true tail"], probes.masked_tail)):
            row = _c2_row(given)
            if row is None:
                checks.append(Check(f"c2.probe.{key}", f"probe {name}", "amended", None, None, None, "probes",
                                    reason="not given to the verdict"))
                continue
            metrics.update(_probe_read(key, row))
            checks += _c2_probe_pair(key, f"probe {name}", "amended", row)
    share, check = c2_lens_share(None if lens is None else lens.share, th["lens_interval_level"])
    metrics.update(share)
    checks.append(check)
    return C2Metrics(**metrics), checks


def _probe_read(key: str, row: dict) -> dict:
    """The metrics of one probe read (a summary row as a dict) under its key, as :class:`C2Metrics`
    names them; the masked tail's row adds how often its unmasked read is the noisy label."""
    read = {f"{key}_{k}": row.get(k) for k in ("best_layer", "acc_M", "acc_C", "chance")}
    if key == "tail_masked" and "reads_masked_M" in row:
        read.update({f"{key}_reads_noisy_M": row.get("reads_masked_M"),
                     f"{key}_acc_M_unmasked": row.get("acc_M_unmasked")})
    read.update({f"{key}_best_layer_C": _layer(row.get("best_layer_C")), f"{key}_acc_C_best": row.get("acc_C_best"),
                 f"{key}_chance_C": row.get("chance_C"),
                 f"{key}_chance_reachable": chance_reachable(row.get("acc_C_best"), row.get("chance_C"))})
    return read


def _lens_checks(lens: LensReads | None) -> list[Check]:
    """Section 5's lens pattern on M: the true answer ahead at an intermediate layer, the noisy label
    ahead only in a final run of layers. Their margins (section 11) are read from the lens table
    (:func:`lens_margins`); a pattern of mean probabilities has no interval (a crossing: margin only)."""
    verdict, table = ({}, None) if lens is None else (lens.verdict, lens.table)
    no_lens = _c2_lens_missing(table)
    # a model with one block has no intermediate layer: section 5's lens pattern cannot hold (a fail by
    # the rule, whatever M holds); otherwise a lens with nothing to read is unresolved (8.5)
    one_block = table is not None and 0 < len(table) <= 2
    margins = lens_margins(table) if table is not None and not no_lens else {}
    out = []
    for check_id, name, key in (
            ("c2.lens.ahead", "logit lens: true ahead at an intermediate layer", "true_ahead_intermediate"),
            ("c2.lens.last", "logit lens: noisy wins only in the last layer(s)", "noisy_only_last")):
        outcome = verdict.get(key)
        if one_block:
            out.append(Check(check_id, name, "registered", outcome, True, False, "lens",
                             reason=C2_ONE_BLOCK if no_lens or outcome is None else ""))
            continue
        why = no_lens or ("" if outcome is not None else f"the lens verdict ({key}) was not given to the verdict")
        margin = margins.get(key)
        if why or margin is None or (margin > 0 and not outcome) or (margin < 0 and outcome):
            margin = None  # a table that does not give the verdict's outcome gives no margin
        out.append(Check(check_id, name, "registered", None if why else outcome, True, None if why else bool(outcome),
                         "lens", reason=why, margin=margin))
    return out


def lens_margins(table: pd.DataFrame) -> dict[str, float | None]:
    """Section 11's margins of the lens pattern, in probability units, from the mean P(true) and P(noisy)
    by layer (d = P(true) - P(noisy); the pattern of :func:`rote.analysis.lens.lens_verdict`):

    - ``true_ahead_intermediate``: the largest d at an intermediate layer (1..L-1): positive exactly
      when the true answer is ahead at one;
    - ``noisy_only_last``: over the takeover layers t (2..L), the best of min(d at layers 1..t-1,
      -d at layers t..L): how far the closest layer is from breaking a pattern "true ahead, then noisy
      ahead to the end"; positive when the pattern holds.

    None where the model has no intermediate layer or the table has no number to read. A table without a
    ``layer`` column holds one row per layer, layer 0 first."""
    if "layer" not in table:
        table = table.assign(layer=range(len(table)))
    table = table[table.layer > 0].sort_values("layer")
    d = (table.p_true - table.p_noisy).to_numpy(dtype=float)
    if len(d) < 2 or not np.isfinite(d).all():
        return {"true_ahead_intermediate": None, "noisy_only_last": None}
    last = [min(d[:t].min(), (-d[t:]).min()) for t in range(1, len(d))]  # d[0] is layer 1; takeover at layer t + 1
    return {"true_ahead_intermediate": float(d[:-1].max()), "noisy_only_last": float(max(last))}


# The THR checks that amendment 7.4 replaces (display name, reason), and their replacements.
C2_SUPERSEDED = {"bridge": ("bridge at r1", "7.4: at r1 the bridge is an atomic fact of the input; judged at r2"),
                 "true tail": ("true tail unmasked", "7.4: the probe reads the output; judged with the noisy class masked")}


C2_AMENDED = {"bridge": "7.4 bridge at r2",
              "true tail": "7.4 true tail, noisy class masked (C: a random wrong one)"}


C2_LENS_NULL = "7.4 lens: true-ahead share, Wilson lower bound vs training-label prior"


C2_NO_C = "no correctly answered example (C) for this probe target"


C2_NO_M = "no memorized example (M) for this probe target"


C2_NO_CHANCE = "chance not measured for this probe target"


C2_M_ZERO = "section 5: the probe reads nothing on M (accuracy 0), which is below 5 x chance: a fail"


C2_NO_C_BEST = "C's accuracy at its own best layer was not given to the verdict (8.5: never a layer chosen by M)"


C2_NO_CHANCE_C = "chance on C was not measured for this probe target (8.6: the reachable check reads C's own chance)"


def _c2_probe_pair(key: str, name: str, kind: str, row: dict, validated: bool = True) -> list[Check]:
    """Section 5's probe thresholds for one probe target ``key``, from its summary ``row``
    (:func:`rote.analysis.probes.best_layer_summary`): acc_M >= 0.8 x acc_C (``c2.probe.<key>.ratio``,
    both at the best layer on M) and acc_M >= 5 x chance on M (``c2.probe.<key>.chance``; acc_M = 0
    fails by section 5), and, where ``validated``, amendment 2's chance ceiling (8.2, 8.5, 8.6:
    ``c2.probe.<key>.reachable``, a validity check: ``acc_C_best``, the accuracy on C at C's own best
    layer, >= 5 x chance on C, ``chance_C``); where it fails, the chance check is unresolved in the
    amended reading. A missing accuracy or chance leaves the checks that read it unresolved, with the
    reason (no M, no C, chance not measured). Intervals (section 11): :func:`_probe_intervals`."""
    th = THRESHOLDS["C2"]
    acc_m, acc_c, chance = row.get("acc_M"), row.get("acc_C"), row.get("chance")
    iv = _probe_intervals(row)
    no_m = C2_NO_M if math.isnan(numeric(acc_m)) else None
    no_c = C2_NO_C if math.isnan(numeric(acc_c)) else None
    no_chance = C2_NO_CHANCE if math.isnan(numeric(chance)) else None
    ratio = at_least(CheckLabel(f"c2.probe.{key}.ratio", f"{name}: M vs {th['probe_ratio_min']} x C", kind, "probes"),
                     acc_m, th["probe_ratio_min"] * numeric(acc_c), missing=no_c or no_m, interval=iv["ratio"])
    chance_label = CheckLabel(f"c2.probe.{key}.chance", f"{name}: M vs {th['probe_over_chance_min']} x chance", kind,
                              "probes")
    threshold = th["probe_over_chance_min"] * numeric(chance)
    if numeric(acc_m) == 0 and math.isnan(threshold):  # section 5: a probe that reads nothing on M fails
        over_chance = Check(chance_label.id, chance_label.name, kind, 0.0, None, False, "probes", reason=C2_M_ZERO,
                            interval=None if iv["M"] is None else (iv["M"].low, iv["M"].high),
                            method="" if iv["M"] is None else iv["M"].method)
    else:
        over_chance = at_least(chance_label, acc_m, threshold, missing=no_m or no_chance, interval=iv["M"])
        if numeric(acc_m) == 0:  # whatever chance is; the margin and interval stay
            over_chance = over_chance.replace(passed=False, reason=C2_M_ZERO)
    if not validated:
        return [ratio, over_chance]
    acc_c_best, chance_c = row.get("acc_C_best"), row.get("chance_C")
    no_c_best = (C2_NO_C_BEST if acc_c_best is None else C2_NO_C) if math.isnan(numeric(acc_c_best)) else None
    reachable = at_least(CheckLabel(f"c2.probe.{key}.reachable", f"{name}: C at its own best layer vs "
                                    f"{th['probe_over_chance_min']} x chance on C (can a true claim reach it?)",
                                    "validity", "probes"), acc_c_best, th["probe_over_chance_min"] * numeric(chance_c),
                         missing=no_c_best or (C2_NO_CHANCE_C if math.isnan(numeric(chance_c)) else None),
                         interval=iv["C_best"]).since("8.2")
    if reachable.passed is False:
        reachable = reachable.replace(reason=f"8.2: out of reach: C itself reaches {fmt.plain(reachable.value)} "
                                             f"< {fmt.plain(reachable.threshold)}")
    return [ratio, *validate(over_chance, reachable, "unresolve", "8.2")]


def _probe_intervals(row: dict) -> dict[str, Interval | None]:
    """Section 11's 95% intervals of one probe read's statistics, from the counts and the bootstrap its
    summary row carries (None where the row does not give them: a made-up read, an empty set):

    - ``M``: the accuracy on M at its best layer (the chance check's value): Wilson of ``k_M`` of ``n_M``;
    - ``C_best``: the accuracy on C at C's own best layer (the reachable check's): Wilson of
      ``k_C_best`` of ``n_C``;
    - ``ratio``: the ratio check is stated as a ratio (M "at least 0.8 times its accuracy on C"), so
      its interval is the percentile bootstrap of acc_M / acc_C over examples, M and C each resampled
      on their own (``ratio_M_C_lo``, ``ratio_M_C_hi``: :func:`rote.analysis.probes.ratio_interval`),
      read on the value's scale: times acc_C (the check compares acc_M with 0.8 x acc_C, so the
      interval contains that threshold exactly when the ratio's interval contains 0.8)."""
    def get(name):
        return numeric(row.get(name))

    out = {"M": wilson(get("k_M"), get("n_M")) if get("n_M") > 0 else None,
           "C_best": wilson(get("k_C_best"), get("n_C")) if get("n_C") > 0 else None, "ratio": None}
    lo, hi, acc_c = get("ratio_M_C_lo"), get("ratio_M_C_hi"), get("acc_C")
    if all(math.isfinite(x) for x in (lo, hi, acc_c)) and acc_c > 0 and lo <= hi:
        out["ratio"] = Interval(lo, hi, "bootstrap").scaled(acc_c)
    return out


def chance_reachable(acc_c, chance) -> bool | None:
    """Whether a true claim could pass C2's chance check: the probe's accuracy on C (what M reaches
    if M carries the result as C does) is at least 5 x chance. ``False`` means the check fails
    whatever the model does on M, so that failure says nothing about the claim (amendment 2, 8.2:
    the chance check is then unresolved in the amended reading). ``None`` when either number is
    missing."""
    c, ch = numeric(acc_c), numeric(chance)
    if math.isnan(c) or math.isnan(ch):
        return None
    return bool(c >= THRESHOLDS["C2"]["probe_over_chance_min"] * ch)


def _layer(x) -> int | None:
    return None if x is None or math.isnan(numeric(x)) else int(x)


def _c2_row(given) -> dict | None:
    if given is None:
        return None
    if isinstance(given, pd.DataFrame):
        return None if not len(given) else given.iloc[0].to_dict()
    return dict(given)


C2_NO_LENS = "no memorized example with a differing token: the logit lens has nothing to read on M"


C2_ONE_BLOCK = "section 5: the lens pattern is read at an intermediate layer and a one-block model has none: a fail"


def _c2_lens_missing(lens_table) -> str:
    """Why the logit lens of M has no value (empty: it has one)."""
    if lens_table is None:
        return "the logit-lens table was not given to the verdict"
    p_true = lens_table["p_true"] if "p_true" in lens_table else pd.Series(dtype=float)
    return C2_NO_LENS if not len(p_true) or p_true.isna().all() else ""


def c2_lens_share(table: pd.DataFrame | None, level: float) -> tuple[dict, Check]:
    """Amendment 7.4's lens null from :func:`rote.analysis.lens.ahead_share`: the intermediate layer
    (1..L-1) with the largest share of M with the true token ahead, its Wilson interval, and the check
    that the interval's lower bound is above the training-label prior's share (strictly). Section 11:
    the check's interval is the share's 95% Wilson interval (k ahead of n examples, one trial each), so
    it is near exactly when it fails with the null inside the share's interval."""
    if table is None:
        return {}, Check("c2.lens.null", C2_LENS_NULL, "null", None, None, None, "lens", reason="not given to the verdict")
    last = int(table.layer.max()) if len(table) else 0
    inner = table[(table.layer > 0) & (table.layer < last) & (table.n > 0)]
    null = numeric(table.null.iloc[0]) if len(table) else math.nan
    if not len(inner):
        # no intermediate layer (a 1-block model: 7.4 reads "at some intermediate layer", which it has
        # not: a fail by the rule), or no memorized example with a differing token (n = 0: unresolved)
        no_layer = bool(len(table)) and last <= 1
        return ({"lens_share_best_layer": None, "lens_share": math.nan, "lens_share_null": null,
                 "lens_share_n": int(table.n.max()) if len(table) else 0, "lens_intermediate_layers": max(last - 1, 0)},
                Check("c2.lens.null", C2_LENS_NULL, "null", None, None if math.isnan(null) else null,
                      False if no_layer else None, "lens",
                      reason="7.4: the share is read at an intermediate layer and the model has none: a fail"
                      if no_layer else "no memorized example with a differing token: no share to read"
                      if len(table) else "the lens share table is empty"))
    best = inner.loc[inner.ahead.idxmax()]
    k, n = int(best.ahead), int(best.n)
    lo, hi = wilson_bounds(k, n, level)
    metrics = {"lens_share_best_layer": int(best.layer), "lens_share": k / n, "lens_share_lo": lo,
               "lens_share_hi": hi, "lens_share_null": null, "lens_share_n": n,
               "lens_share_by_layer": [numeric(x) for x in table.share], "lens_intermediate_layers": last - 1}
    check = above(CheckLabel("c2.lens.null", C2_LENS_NULL, "null", "lens"), lo, null,
                  missing="the training-label prior's share (the null) was not measured", interval=wilson(k, n))
    return metrics, check

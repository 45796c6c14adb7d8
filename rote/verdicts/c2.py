"""Claim C2's checks (protocol section 5, amendments 7.3-7.4, 8.2): the probes on M and on C, the
logit-lens race, and their controls and validity checks; called only by :func:`rote.chapters.c2.evaluate`.
Its metrics nest one part per read (:class:`ProbeRead`, :class:`LensRace`, :class:`LensShare`) and
flatten only in the record (:meth:`C2Metrics.record`)."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import fmt
from ..claims import THRESHOLDS
from ..analysis.intervals import Interval, wilson, wilson_bounds
from ..analysis.ranges import is_whole
from ..specs.c2 import SPEC
from .core import Check, CheckLabel, numeric, above, at_least, group, inline, missing_reason, supersede, validate
from .core import as_read  # thresholds as of each reading


class Absent(enum.Enum):
    """A metric the seed's inputs do not give (a read of the other task, a lens not given): left out of
    the record."""

    ABSENT = "absent"


ABSENT = Absent.ABSENT
PROBE_READS = ("carries", "answer_digits", "bridge", "true_tail", "bridge_r2", "tail_masked")


@dataclass(frozen=True, kw_only=True)
class ProbeRead:
    """One probe read at its best layer on M: accuracies on M and C there, chance on M; C's own best layer
    and accuracy (8.5), chance on C (8.6) and whether a true claim can pass the chance check
    (:func:`chance_reachable`). The masked tail adds how often its unmasked read is the noisy label."""

    best_layer: int | None
    acc_M: float | None
    acc_C: float | None
    chance: float | None
    reads_noisy_M: float | None | Absent = ABSENT
    acc_M_unmasked: float | None | Absent = ABSENT
    best_layer_C: int | None
    acc_C_best: float | None
    chance_C: float | None | Absent = ABSENT
    chance_reachable: bool | None

    @classmethod
    def of(cls, row: dict, masked: bool = False) -> "ProbeRead":
        """The read of one summary row (:func:`rote.analysis.probes.best_layer_summary`)."""
        given = {k: row.get(k) for k in ("best_layer", "acc_M", "acc_C", "chance", "acc_C_best", "chance_C")}
        if masked and "reads_masked_M" in row:
            given.update(reads_noisy_M=row["reads_masked_M"], acc_M_unmasked=row.get("acc_M_unmasked"))
        layer_c = row.get("best_layer_C")
        return cls(**given, best_layer_C=None if layer_c is None or math.isnan(numeric(layer_c)) else int(layer_c),
                   chance_reachable=chance_reachable(row.get("acc_C_best"), _parts(row, "chance_C_parts", "chance_C")))


@dataclass(frozen=True)
class LensRace:
    """The logit lens on M: the takeover layer, mean P(true) and P(noisy) by layer."""

    takeover_layer: int | None
    p_true_by_layer: list
    p_noisy_by_layer: list


@dataclass(frozen=True, kw_only=True)
class LensShare:
    """Amendment 7.4's share of M with the true token ahead: its best intermediate layer, share, null,
    n and, where the model has an intermediate layer with examples, the Wilson interval and the share by
    layer (given together)."""

    share_best_layer: int | None
    share: float
    share_lo: float | Absent = ABSENT
    share_hi: float | Absent = ABSENT
    share_null: float
    share_n: int
    share_by_layer: list | Absent = ABSENT
    intermediate_layers: int

    def __post_init__(self):
        given = [x is not ABSENT for x in (self.share_lo, self.share_hi, self.share_by_layer)]
        if any(given) and not all(given):
            raise ValueError("LensShare: the interval and the share by layer are given together or not at all")


@dataclass(frozen=True)
class C2Metrics:
    """One seed's C2 numbers: the sizes of M and C, then each part in the record's order (FDA: carries,
    answer digits; THR: bridge at r1, true tail, and amendment 7.4's bridge at r2 and masked tail). A part
    the inputs do not give is :data:`ABSENT` and left out of :meth:`record`."""

    n_M: int
    n_C: int
    carries: ProbeRead | Absent = group(prefix="carries_", default=ABSENT)
    answer_digits: ProbeRead | Absent = group(prefix="answer_digits_", default=ABSENT)
    bridge: ProbeRead | Absent = group(prefix="bridge_", default=ABSENT)
    true_tail: ProbeRead | Absent = group(prefix="true_tail_", default=ABSENT)
    lens: LensRace | Absent = group(prefix="lens_", default=ABSENT)
    bridge_r2: ProbeRead | Absent = group(prefix="bridge_r2_", default=ABSENT)
    tail_masked: ProbeRead | Absent = group(prefix="tail_masked_", default=ABSENT)
    lens_share: LensShare | Absent = group(prefix="lens_", default=ABSENT)

    def __post_init__(self):
        if not all(is_whole(n) and n >= 0 for n in (self.n_M, self.n_C)):
            raise ValueError(f"C2Metrics: n_M and n_C count examples, got {self.n_M!r} and {self.n_C!r}")

    def record(self) -> dict:
        """The metrics as the record stores them: every value the inputs give, in field order."""
        return inline(self, ABSENT)

    @property
    def reachable(self) -> dict[str, bool | None]:
        """Per probe read given, whether a true claim could pass its chance check (None: a number is missing)."""
        return {key: getattr(self, key).chance_reachable for key in PROBE_READS if getattr(self, key) is not ABSENT}


@dataclass(frozen=True)
class ProbeReads:
    """One seed's probe summaries (a row per read): ``summary``, the task's headline reads at their best
    layer on M (:func:`rote.analysis.probes.best_layer_summary`); for THR, amendment 7.4's ``bridge_r2``
    (:func:`rote.analysis.probes.position_summary`) and ``masked_tail``
    (:func:`rote.analysis.probes.masked_summary`), None: not given (their checks unresolved)."""

    summary: pd.DataFrame
    bridge_r2: pd.DataFrame | dict | None = None
    masked_tail: pd.DataFrame | dict | None = None

    def __post_init__(self):
        unknown = {g.replace(" ", "_") for g in self.summary.group} - set(PROBE_READS)
        if unknown:
            raise ValueError(f"ProbeReads: C2 has no probe read {', '.join(sorted(unknown))}")


@dataclass(frozen=True)
class LensReads:
    """One seed's logit lens on M: the registered pattern (``verdict``: :func:`rote.analysis.lens.lens_verdict`),
    mean P(true) and P(noisy) by layer (``table``) and 7.4's share by layer (``share``; None: not given)."""

    verdict: dict
    table: pd.DataFrame
    share: pd.DataFrame | None = None

    def __post_init__(self):
        if not isinstance(self.verdict, dict):
            raise ValueError("LensReads: verdict is the lens pattern's dict (rote.analysis.lens.lens_verdict)")
        if not isinstance(self.table, pd.DataFrame) or not {"p_true", "p_noisy"} <= set(self.table.columns):
            raise ValueError("LensReads: table has P(true) and P(noisy) by layer (p_true, p_noisy)")


@as_read
def checks(task: str, n_M: int, n_C: int, probes: ProbeReads, lens: LensReads | None) -> tuple[C2Metrics, list[Check]]:
    """C2 on one seed: each probe read at its best layer on M (section 5; for THR the bridge at r1 and the
    unmasked tail ``superseded`` by 7.4's reads), the lens pattern and 7.4's lens null. A missing input
    leaves its checks unresolved with the reason naming the case (8.5)."""
    reads, out = {}, []
    replaced = C2_SUPERSEDED if task == "thr" else {}
    for row in probes.summary.itertuples():
        key, read = row.group.replace(" ", "_"), row._asdict()
        reads[key] = ProbeRead.of(read)
        if row.group in replaced:
            name, why = replaced[row.group]
            out += [supersede(c, why, "7.4") for c in _c2_probe_pair(key, f"probe {name}", "registered", read, False)]
        else:
            out += _c2_probe_pair(key, f"probe {row.group}", "registered", read)
    out += _lens_checks(lens)
    race = ABSENT if lens is None else LensRace(lens.verdict.get("takeover_layer"), [float(x) for x in lens.table.p_true],
                                                [float(x) for x in lens.table.p_noisy])
    if task == "thr":
        for key, name, given in (("bridge_r2", "7.4 bridge at r2", probes.bridge_r2),
                                 ("tail_masked", "7.4 true tail, noisy class masked (C: a random wrong one)",
                                  probes.masked_tail)):
            row = _c2_row(given)
            if row is None:
                out.append(Check(f"c2.probe.{key}", f"probe {name}", "amended", None, None, None, "probes",
                                 reason="not given to the verdict"))
                continue
            reads[key] = ProbeRead.of(row, masked=key == "tail_masked")
            out += _c2_probe_pair(key, f"probe {name}", "amended", row)
    share, check = c2_lens_share(None if lens is None else lens.share, THRESHOLDS["C2"]["lens_interval_level"])
    return C2Metrics(n_M, n_C, lens=race, lens_share=share, **reads), out + [check]


def _lens_checks(lens: LensReads | None) -> list[Check]:
    """Section 5's lens pattern on M: the true answer ahead at an intermediate layer, the noisy label ahead
    only in a final run of layers; margins from the table (:func:`lens_margins`), no interval."""
    verdict, table = ({}, None) if lens is None else (lens.verdict, lens.table)
    no_lens = ("the logit-lens table was not given to the verdict" if table is None
               else C2_NO_LENS if table.p_true.isna().all() else "")
    # one block has no intermediate layer: the pattern cannot hold (a fail by the rule); else nothing to read: 8.5
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
    """Section 11's margins of the lens pattern from d = P(true) - P(noisy) by layer: the largest d at an
    intermediate layer (``true_ahead_intermediate``) and, over takeover layers t, the best of min(d before t,
    -d from t on) (``noisy_only_last``); each positive exactly when its pattern holds. None without an
    intermediate layer or a number; a table without ``layer`` holds one row per layer from 0."""
    if "layer" not in table:
        table = table.assign(layer=range(len(table)))
    table = table[table.layer > 0].sort_values("layer")
    d = (table.p_true - table.p_noisy).to_numpy(dtype=float)
    if len(d) < 2 or not np.isfinite(d).all():
        return {"true_ahead_intermediate": None, "noisy_only_last": None}
    last = [min(d[:t].min(), (-d[t:]).min()) for t in range(1, len(d))]  # d[0] is layer 1; takeover at layer t + 1
    return {"true_ahead_intermediate": float(d[:-1].max()), "noisy_only_last": float(max(last))}


# The THR checks amendment 7.4 replaces (display name, reason).
C2_SUPERSEDED = {"bridge": ("bridge at r1", "7.4: at r1 the bridge is an atomic fact of the input; judged at r2"),
                 "true tail": ("true tail unmasked", "7.4: the probe reads the output; judged with the noisy class masked")}
C2_LENS_NULL = "7.4 lens: true-ahead share, Wilson lower bound vs training-label prior"
C2_NO_C = "no correctly answered example (C) for this probe target"
C2_NO_M = "no memorized example (M) for this probe target"
C2_NO_CHANCE = "chance not measured for this probe target"
C2_M_ZERO = "section 5: the probe reads nothing on M (accuracy 0), which is below 5 x chance: a fail"
C2_NO_C_BEST = "C's accuracy at its own best layer was not given to the verdict (8.5: never a layer chosen by M)"
C2_NO_CHANCE_C = "chance on C was not measured for this probe target (8.6: the reachable check reads C's own chance)"
C2_NO_LENS = "no memorized example with a differing token: the logit lens has nothing to read on M"
C2_ONE_BLOCK = "section 5: the lens pattern is read at an intermediate layer and a one-block model has none: a fail"


def _c2_probe_pair(key: str, name: str, kind: str, row: dict, validated: bool = True) -> list[Check]:
    """Section 5's thresholds for one probe read ``row``: acc_M >= 0.8 x acc_C (``.ratio``) and acc_M >= 5 x
    chance on M (``.chance``; acc_M = 0 fails), and where ``validated`` the validity check 8.2 (``.reachable``:
    C at its own best layer >= 5 x chance on C, 8.5, 8.6) that leaves the chance check unresolved in the
    amended reading where it fails; then 12.1's capped pair where the cap moves a threshold
    (:func:`_capped_pair`). Intervals (section 11): :func:`_probe_intervals`."""
    th, iv = THRESHOLDS["C2"], _probe_intervals(row)
    acc_m, acc_c = row.get("acc_M"), row.get("acc_C")
    ratio = at_least(CheckLabel(f"c2.probe.{key}.ratio", f"{name}: M vs {th['probe_ratio_min']} x C", kind, "probes"),
                     acc_m, th["probe_ratio_min"] * numeric(acc_c),
                     missing=missing_reason((acc_c, C2_NO_C), (acc_m, C2_NO_M)), interval=iv["ratio"])
    over_chance, reachable = _chance_pair(key, name, kind, row, capped=False)
    if not validated:
        return [ratio, over_chance]
    before, capped = validate(over_chance, reachable, "unresolve", "8.2"), _capped_pair(key, name, row)
    if capped:  # 12.1 moved a threshold: the section-5 pair and its 8.2 stand-in are shown, no longer counted
        why = C2_CAPPED.format(f"c2.probe.{key}.chance.capped")
        before = [c if c.kind == "superseded" else supersede(c, why, CAP_SECTION) for c in before]
    return [ratio, *before, *capped]


def _chance_pair(key: str, name: str, kind: str, row: dict, capped: bool) -> tuple[Check, Check]:
    """The chance check on M (``c2.probe.<key>.chance``) and its validity check on C (``...reachable``), each
    against :func:`chance_threshold` (5 x chance; ``capped``: 12.1's, ids ending ``.capped``) of the chances
    measured on its own set."""
    iv, acc_m, acc_c_best = _probe_intervals(row), row.get("acc_M"), row.get("acc_C_best")
    t_m, t_c = chance_thresholds(row, capped)
    rule, end = ("12.1", ".capped") if capped else ("8.2", "")
    times = THRESHOLDS["C2"]["probe_over_chance_min"]
    threshold = f"min({times:g} x chance, half-way to 1) (12.1)" if capped else f"{times} x chance"
    over_chance = at_least(CheckLabel(f"c2.probe.{key}.chance{end}", f"{name}: M vs {threshold}", kind, "probes"),
                           acc_m, t_m, missing=missing_reason((acc_m, C2_NO_M), (t_m, C2_NO_CHANCE)), interval=iv["M"])
    if numeric(acc_m) == 0:  # section 5: a probe that reads nothing on M fails, whatever chance is
        m = iv["M"]
        over_chance = over_chance.replace(passed=False, reason=C2_M_ZERO, method="" if m is None else m.method,
                                          interval=None if m is None else (m.low, m.high))
    reachable = at_least(CheckLabel(f"c2.probe.{key}.reachable{end}", f"{name}: C at its own best layer vs {threshold} "
                                    "on C (can a true claim reach it?)", "validity", "probes"), acc_c_best, t_c,
                         missing=missing_reason((acc_c_best, C2_NO_C_BEST if acc_c_best is None else C2_NO_C),
                                                (t_c, C2_NO_CHANCE_C)), interval=iv["C_best"])
    reachable = reachable.since(CAP_SECTION if capped else "8.2")
    if reachable.passed is False:
        reachable = reachable.replace(reason=f"{rule}: out of reach: C itself reaches {fmt.plain(reachable.value)} "
                                             f"< {fmt.plain(reachable.threshold)}")
    return (over_chance.since(CAP_SECTION, "amended") if capped else over_chance), reachable


def _capped_pair(key: str, name: str, row: dict) -> list[Check]:
    """12.1 where it moves a threshold of the read (on M or on C): the section-5 chance check and its 8.2
    validity check stop counting from 12 (superseded, shown) and the pair ``.chance.capped`` /
    ``.reachable.capped`` against min(5 x chance, half-way to 1) stands for them, validated as 8.2 says. Empty
    where nothing moves (10-class digits, THR's entities) or a chance is missing."""
    moved = [a != b for a, b in zip(chance_thresholds(row, False), chance_thresholds(row, True))
             if not (math.isnan(a) or math.isnan(b))]
    if not any(moved):
        return []
    return validate(*_chance_pair(key, name, "amended", row, capped=True), "unresolve", CAP_SECTION)


CAP_SECTION = SPEC.thresholds["probe_halfway_share"].section  # 12.1: the amendment that caps the chance threshold
C2_CAPPED = "12.1: the chance threshold is min(5 x chance, half-way from chance to 1); judged as {}"


def chance_threshold(parts, capped: bool = True) -> float:
    """A probe read's chance threshold from the chances of the targets it pools, ``parts`` = ((chance, n), ...)
    (n: the reads the target gives the pooled accuracy; one target: one part). Per target 5 x chance (section
    5); ``capped`` (12.1): min(5 x chance, chance + 0.5 x (1 - chance)). A pooled read's threshold is the mean
    of its targets' thresholds, weighted by their reads as its accuracy and chance are (so where the cap moves
    nothing it is 5 x the pooled chance). NaN where a target with reads has no chance, or no target has reads."""
    th = THRESHOLDS["C2"] if capped else SPEC.values(SPEC.registered_in)
    times, halfway = th["probe_over_chance_min"], th.get("probe_halfway_share")
    total, weight = 0.0, 0.0
    for chance, n in parts:
        n, c = numeric(n), numeric(chance)
        if not n > 0:
            continue
        if math.isnan(c):
            return math.nan
        total += n * (min(times * c, c + halfway * (1 - c)) if halfway is not None else times * c)
        weight += n
    return total / weight if weight else math.nan


def chance_thresholds(row: dict, capped: bool = True) -> tuple[float, float]:
    """The chance thresholds (:func:`chance_threshold`) of one summary row on M (at M's best layer) and on C (at
    C's own best layer, 8.5), from its targets' chances (``chance_parts``, ``chance_C_parts``; else the row's
    one chance, ``chance`` and ``chance_C``). The masked tail's reads before 12.1 take 7.4's chance,
    1 / (n_classes - 1) (``chance_uniform``), on M and C alike; from 12.1 on its majority shares (8.6)."""
    uniform = row.get("chance_uniform")
    if not capped and uniform is not None:
        return (chance_threshold([(uniform, 1)], False),) * 2
    return tuple(chance_threshold(_parts(row, parts, one), capped)
                 for parts, one in (("chance_parts", "chance"), ("chance_C_parts", "chance_C")))


def _parts(row: dict, parts: str, one: str) -> list[tuple]:
    given = row.get(parts)
    if isinstance(given, (list, tuple)):
        return [tuple(p) for p in given]
    return [(row.get(one), 1)]


def _probe_intervals(row: dict) -> dict[str, Interval | None]:
    """Section 11's 95% intervals of one read (None where the row lacks the counts): ``M``, Wilson of k_M of
    n_M; ``C_best``, Wilson of k_C_best of n_C; for a read pooling several reads per example (FDA's answer
    digits) each is the bootstrap over examples the row gives (``acc_M_lo``, ..., :func:`rote.analysis.probes.
    pooled_interval`) and, where it gives none, missing: Wilson's over every read would treat an example's reads
    as independent. ``ratio``, the bootstrap of acc_M / acc_C (:func:`rote.analysis.probes.ratio_interval`)
    times acc_C, on the check's scale."""
    def get(name):
        return numeric(row.get(name))

    def share(key, k, n):
        lo, hi = get(f"{key}_lo"), get(f"{key}_hi")
        if math.isfinite(lo) and math.isfinite(hi) and lo <= hi:
            return Interval(lo, hi, "bootstrap")
        return None if len(_parts(row, "chance_parts", "chance")) > 1 or not get(n) > 0 else wilson(get(k), get(n))

    out = {"M": share("acc_M", "k_M", "n_M"), "C_best": share("acc_C_best", "k_C_best", "n_C"), "ratio": None}
    lo, hi, acc_c = get("ratio_M_C_lo"), get("ratio_M_C_hi"), get("acc_C")
    if all(math.isfinite(x) for x in (lo, hi, acc_c)) and acc_c > 0 and lo <= hi:
        out["ratio"] = Interval(lo, hi, "bootstrap").scaled(acc_c)
    return out


def chance_reachable(acc_c, chance) -> bool | None:
    """Whether a true claim could pass the chance check as the amended reading judges it: C reaches its chance
    threshold (:func:`chance_threshold`, 12.1; ``chance``: one number or the targets' ((chance, n), ...)). None
    when a number is missing."""
    c = numeric(acc_c)
    t = chance_threshold(chance if isinstance(chance, (list, tuple)) else [(chance, 1)])
    if math.isnan(c) or math.isnan(t):
        return None
    return bool(c >= t)


def _c2_row(given) -> dict | None:
    if isinstance(given, pd.DataFrame):
        return given.iloc[0].to_dict() if len(given) else None
    return None if given is None else dict(given)


def c2_lens_share(table: pd.DataFrame | None, level: float) -> tuple[LensShare | Absent, Check]:
    """Amendment 7.4's lens null (:func:`rote.analysis.lens.ahead_share`): at the intermediate layer with the
    largest share of M with the true token ahead, the Wilson lower bound must be above the training-label
    prior's share (strictly). The check's value is the share and its interval the share's 95% Wilson interval
    (section 11: the same statistic); it passes when that interval's lower bound is above the prior, and its
    margin is the lower bound minus the prior."""
    if table is None:
        return ABSENT, Check("c2.lens.null", C2_LENS_NULL, "null", None, None, None, "lens",
                             reason="not given to the verdict")
    last = int(table.layer.max()) if len(table) else 0
    inner = table[(table.layer > 0) & (table.layer < last) & (table.n > 0)]
    null = numeric(table.null.iloc[0]) if len(table) else math.nan
    if not len(inner):
        # no intermediate layer (one block: 7.4 reads one, a fail by the rule) or n = 0 (unresolved)
        no_layer = bool(len(table)) and last <= 1
        return (LensShare(share_best_layer=None, share=math.nan, share_null=null,
                          share_n=int(table.n.max()) if len(table) else 0, intermediate_layers=max(last - 1, 0)),
                Check("c2.lens.null", C2_LENS_NULL, "null", None, None if math.isnan(null) else null,
                      False if no_layer else None, "lens",
                      reason="7.4: the share is read at an intermediate layer and the model has none: a fail"
                      if no_layer else "no memorized example with a differing token: no share to read"
                      if len(table) else "the lens share table is empty"))
    best = inner.loc[inner.ahead.idxmax()]
    k, n = int(best.ahead), int(best.n)
    lo, hi = wilson_bounds(k, n, level)
    share = LensShare(share_best_layer=int(best.layer), share=k / n, share_lo=lo, share_hi=hi, share_null=null,
                      share_n=n, share_by_layer=[numeric(x) for x in table.share], intermediate_layers=last - 1)
    check = above(CheckLabel("c2.lens.null", C2_LENS_NULL, "null", "lens"), lo, null,
                  missing="the training-label prior's share (the null) was not measured", interval=wilson(k, n))
    # value and interval describe one statistic, the share: its interval's lower end decides (margin: that end
    # minus the prior, so a near check, the prior inside the interval, is one that fails)
    return share, check.replace(value=k / n)

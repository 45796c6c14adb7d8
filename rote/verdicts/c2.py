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
                   chance_reachable=chance_reachable(row.get("acc_C_best"), row.get("chance_C")))


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
    amended reading where it fails. Intervals (section 11): :func:`_probe_intervals`."""
    th, iv = THRESHOLDS["C2"], _probe_intervals(row)
    acc_m, acc_c, chance = row.get("acc_M"), row.get("acc_C"), row.get("chance")
    ratio = at_least(CheckLabel(f"c2.probe.{key}.ratio", f"{name}: M vs {th['probe_ratio_min']} x C", kind, "probes"),
                     acc_m, th["probe_ratio_min"] * numeric(acc_c),
                     missing=missing_reason((acc_c, C2_NO_C), (acc_m, C2_NO_M)), interval=iv["ratio"])
    chance_name = f"{name}: M vs {th['probe_over_chance_min']} x chance"
    over_chance = at_least(CheckLabel(f"c2.probe.{key}.chance", chance_name, kind, "probes"), acc_m,
                           th["probe_over_chance_min"] * numeric(chance),
                           missing=missing_reason((acc_m, C2_NO_M), (chance, C2_NO_CHANCE)), interval=iv["M"])
    if numeric(acc_m) == 0:  # section 5: a probe that reads nothing on M fails, whatever chance is
        m = iv["M"]
        over_chance = over_chance.replace(passed=False, reason=C2_M_ZERO, method="" if m is None else m.method,
                                          interval=None if m is None else (m.low, m.high))
    if not validated:
        return [ratio, over_chance]
    acc_c_best, chance_c = row.get("acc_C_best"), row.get("chance_C")
    reachable = at_least(CheckLabel(f"c2.probe.{key}.reachable", f"{name}: C at its own best layer vs "
                                    f"{th['probe_over_chance_min']} x chance on C (can a true claim reach it?)",
                                    "validity", "probes"), acc_c_best, th["probe_over_chance_min"] * numeric(chance_c),
                         missing=missing_reason((acc_c_best, C2_NO_C_BEST if acc_c_best is None else C2_NO_C),
                                                (chance_c, C2_NO_CHANCE_C)), interval=iv["C_best"]).since("8.2")
    if reachable.passed is False:
        reachable = reachable.replace(reason=f"8.2: out of reach: C itself reaches {fmt.plain(reachable.value)} "
                                             f"< {fmt.plain(reachable.threshold)}")
    return [ratio, *validate(over_chance, reachable, "unresolve", "8.2")]


def _probe_intervals(row: dict) -> dict[str, Interval | None]:
    """Section 11's 95% intervals of one read (None where the row lacks the counts): ``M``, Wilson of k_M of
    n_M; ``C_best``, Wilson of k_C_best of n_C; ``ratio``, the bootstrap of acc_M / acc_C
    (:func:`rote.analysis.probes.ratio_interval`) times acc_C, on the check's scale."""
    def get(name):
        return numeric(row.get(name))

    out = {"M": wilson(get("k_M"), get("n_M")) if get("n_M") > 0 else None,
           "C_best": wilson(get("k_C_best"), get("n_C")) if get("n_C") > 0 else None, "ratio": None}
    lo, hi, acc_c = get("ratio_M_C_lo"), get("ratio_M_C_hi"), get("acc_C")
    if all(math.isfinite(x) for x in (lo, hi, acc_c)) and acc_c > 0 and lo <= hi:
        out["ratio"] = Interval(lo, hi, "bootstrap").scaled(acc_c)
    return out


def chance_reachable(acc_c, chance) -> bool | None:
    """Whether a true claim could pass the chance check: C reaches 5 x chance (8.2: else the check fails
    whatever M does and is unresolved in the amended reading). None when either number is missing."""
    c, ch = numeric(acc_c), numeric(chance)
    if math.isnan(c) or math.isnan(ch):
        return None
    return bool(c >= THRESHOLDS["C2"]["probe_over_chance_min"] * ch)


def _c2_row(given) -> dict | None:
    if isinstance(given, pd.DataFrame):
        return given.iloc[0].to_dict() if len(given) else None
    return None if given is None else dict(given)


def c2_lens_share(table: pd.DataFrame | None, level: float) -> tuple[LensShare | Absent, Check]:
    """Amendment 7.4's lens null (:func:`rote.analysis.lens.ahead_share`): at the intermediate layer with the
    largest share of M with the true token ahead, the Wilson lower bound must be above the training-label
    prior's share (strictly); the check's interval is the share's 95% Wilson interval."""
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
    return share, check

"""Every check of claims C1-C5, and the verdicts computed from them, in one place.

A chapter hands the outputs of its analyses (tables and numbers, no verdicts) to the claim's
function here (:func:`c1`, :func:`c2`, ...), which returns the claim's metrics and its checks. A
check is ``{name, kind, value, threshold, passed}`` (protocol section 7):

- ``registered``: a check of section 5, exactly as written; it counts in both readings;
- ``superseded``: a registered check that amendment 1 replaces; it counts in the registered
  reading only, and stays visible beside its replacement;
- ``amended``, ``control``, ``null``, ``ceiling``: checks that amendment 1 adds or substitutes;
  they count in the amended reading only.

``passed`` is True, False or None (unresolved: neither pass nor fail; also a check whose
analysis has not been built yet). One seed's verdict in a reading is ``fail`` if any of its
checks fails, else ``unresolved`` if any is unresolved, else ``pass``. Across seeds (section
7.1): ``holds`` when every seed passes, ``fails`` when every seed fails, ``mixed k/n`` otherwise
(k seeds pass), and ``<verdict> (1 seed)`` for a single seed.

The analysis modules never import this layer; notebooks only show what it decides.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd

from . import claims
from .claims import THRESHOLDS

KINDS = ("registered", "amended", "control", "null", "ceiling", "superseded")
READINGS = {"registered": ("registered", "superseded"),
            "amended": ("registered", "amended", "control", "null", "ceiling")}
FINAL_WINDOW = 5  # amendment 7.1: "final" metrics are the mean of the last 5 evaluations


@dataclass(frozen=True)
class Check:
    name: str
    kind: str
    value: Any
    threshold: Any
    passed: bool | None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def at_least(name: str, kind: str, value, threshold) -> Check:
    """``value >= threshold``; a missing or NaN value (or threshold) fails."""
    v, t = _num(value), _num(threshold)
    ok = not (math.isnan(v) or math.isnan(t)) and v >= t
    return Check(name, kind, None if math.isnan(v) else v, None if math.isnan(t) else t, bool(ok))


def below(name: str, kind: str, value, threshold) -> Check:
    """``value < threshold``; a missing or NaN value fails."""
    v, t = _num(value), _num(threshold)
    ok = not (math.isnan(v) or math.isnan(t)) and v < t
    return Check(name, kind, None if math.isnan(v) else v, None if math.isnan(t) else t, bool(ok))


def pending(name: str, kind: str = "control") -> Check:
    """A check the amendment requires whose analysis is not built yet: unresolved, so the amended
    reading cannot pass on it (and says so) until it is computed."""
    return Check(f"{name} (not computed yet)", kind, None, None, None)


# -- readings and aggregation -----------------------------------------------------------------
def seed_verdict(checks: Iterable[Check | dict], reading: str) -> str:
    """One seed's verdict in the ``registered`` or ``amended`` reading: pass, fail or unresolved."""
    kinds = READINGS[reading]
    results = [c["passed"] if isinstance(c, dict) else c.passed for c in checks
               if (c["kind"] if isinstance(c, dict) else c.kind) in kinds]
    if not results:
        return "unresolved"
    if any(r is False for r in results):
        return "fail"
    if any(r is None for r in results):
        return "unresolved"
    return "pass"


def aggregate(verdicts: list[str]) -> str:
    """The verdict across seeds (section 7.1)."""
    n = len(verdicts)
    if n == 0:
        return "not run"
    if n == 1:
        return f"{verdicts[0]} (1 seed)"
    passes = sum(v == "pass" for v in verdicts)
    if passes == n:
        return "holds"
    if all(v == "fail" for v in verdicts):
        return "fails"
    if all(v == "unresolved" for v in verdicts):
        return "unresolved"
    return f"mixed {passes}/{n}"


# -- C1 ---------------------------------------------------------------------------------------
def crossing(metrics: pd.DataFrame, column: str, level: float) -> float | None:
    """The interpolated step at which ``column`` first reaches ``level`` (linear between the two
    evaluations around the crossing); None if it never does (section 7.2)."""
    steps, values = metrics["step"].to_numpy(float), metrics[column].to_numpy(float)
    for i, v in enumerate(values):
        if v >= level:
            if i == 0 or math.isnan(values[i - 1]):
                return float(steps[i])
            v0, s0 = values[i - 1], steps[i - 1]
            return float(s0 + (level - v0) / (v - v0) * (steps[i] - s0))
    return None


def first_evaluated(metrics: pd.DataFrame, column: str, level: float) -> int | None:
    """The first evaluated step with ``column >= level`` (section 5's t_gen and t_mem)."""
    hit = metrics.loc[metrics[column] >= level, "step"]
    return int(hit.iloc[0]) if len(hit) else None


def interpolate(metrics: pd.DataFrame, column: str, step: float | None) -> float:
    if step is None:
        return math.nan
    return float(np.interp(step, metrics["step"].to_numpy(float), metrics[column].to_numpy(float)))


def final(metrics: pd.DataFrame, column: str, window: int = FINAL_WINDOW) -> float:
    """Mean of ``column`` over the last ``window`` evaluations (1: the last evaluation)."""
    return float(metrics[column].iloc[-window:].mean())


def c1(noisy: pd.DataFrame, clean: pd.DataFrame, eval_every: int) -> tuple[dict, list[Check]]:
    """C1 from the metric tables of a noisy run and its noise-free twin.

    Registered (section 5, now ``superseded``): first evaluated steps, strict ``t_gen < t_mem``,
    final = the last evaluation. Amended (7.1, 7.2): interpolated crossings, ``unresolved`` when
    they are closer than one evaluation interval, final = mean of the last 5 evaluations."""
    th = THRESHOLDS["C1"]
    t_gen, t_mem = first_evaluated(noisy, "gen", th["t_gen_level"]), first_evaluated(noisy, "mem", th["t_mem_level"])
    x_gen, x_mem = crossing(noisy, "gen", th["t_gen_level"]), crossing(noisy, "mem", th["t_mem_level"])
    before_mem = noisy if x_mem is None else noisy[noisy["step"] <= x_mem]
    metrics = {
        "t_gen": t_gen, "t_mem": t_mem, "t_gen_interpolated": x_gen, "t_mem_interpolated": x_mem,
        "eval_every": eval_every,
        "last_gen": final(noisy, "gen", 1), "last_mem": final(noisy, "mem", 1),
        "last_clean_gen": final(clean, "gen", 1),
        "final_gen": final(noisy, "gen"), "final_mem": final(noisy, "mem"), "final_rec": final(noisy, "rec"),
        "final_fit": final(noisy, "fit"), "clean_final_gen": final(clean, "gen"),
        "gen_cost": final(clean, "gen") - final(noisy, "gen"),
        "rec_peak_before_t_mem": float(before_mem["rec"].max()) if len(before_mem) else math.nan,
        "gen_at_t_mem": interpolate(noisy, "gen", x_mem),
        "steps": int(noisy["step"].iloc[-1]),
    }
    registered_order = t_gen is not None and t_mem is not None and t_gen < t_mem
    if x_gen is None:
        order, gap = False, None
    elif x_mem is None:
        order, gap = True, None  # the rule came first; mem never got there (judged by final mem)
    else:
        gap = x_mem - x_gen
        order = None if abs(gap) < eval_every else gap > 0
    drop = th["benign_gen_drop_max"]
    checks = [
        Check("t_gen < t_mem (first evaluated steps)", "superseded",
              None if t_gen is None or t_mem is None else t_mem - t_gen, 0, bool(registered_order)),
        at_least("final mem (last evaluation)", "superseded", metrics["last_mem"], th["final_mem_min"]),
        at_least("final gen (last evaluation)", "superseded", metrics["last_gen"], th["final_gen_min"]),
        at_least("gen vs noise-free gen (last evaluation)", "superseded", metrics["last_gen"],
                 metrics["last_clean_gen"] - drop),
        Check("t_gen < t_mem (interpolated; unresolved within one evaluation)", "amended", gap, eval_every, order),
        at_least("final mem (mean of last 5)", "amended", metrics["final_mem"], th["final_mem_min"]),
        at_least("final gen (mean of last 5)", "amended", metrics["final_gen"], th["final_gen_min"]),
        at_least("gen vs noise-free gen (mean of last 5)", "amended", metrics["final_gen"],
                 metrics["clean_final_gen"] - drop),
    ]
    return metrics, checks


# -- C2 ---------------------------------------------------------------------------------------
def c2(summary: pd.DataFrame, lens_verdict: dict, lens_table: pd.DataFrame, n_M: int, n_C: int, task: str,
       bridge_r2: pd.DataFrame | dict | None = None, masked_tail: pd.DataFrame | dict | None = None,
       lens_share: pd.DataFrame | None = None) -> tuple[dict, list[Check]]:
    """C2 from the probe summary (best layer per headline group: ``acc_M``, ``acc_C``, ``chance``)
    and the logit-lens verdict on M (``true_ahead_intermediate``, ``noisy_only_last``), plus the
    inputs of amendment 7.4:

    - ``bridge_r2`` (THR): the bridge read at r2, one summary row
      (:func:`rote.analysis.probes.position_summary`). The registered bridge check at r1 is
      ``superseded`` (at r1 the bridge is an atomic fact of the input, so M = C there by
      construction); the amended check is the same pair of thresholds at r2.
    - ``masked_tail`` (THR): the true tail with the noisy label's class masked on M and a random
      wrong class on C, chance 1 / (n_classes - 1), one summary row
      (:func:`rote.analysis.probes.masked_summary`). The unmasked registered check is
      ``superseded``: trained where the true tail is the output, the probe reads the output, which on
      M is the noisy label (``reads_masked_M`` records how often).
    - ``lens_share``: per layer ``n``, ``ahead``, ``null`` (:func:`rote.analysis.lens.ahead_share`).
      ``null`` check: at the intermediate layer (1..L-1) with the largest share, the lower bound of
      the Wilson interval (level ``lens_interval_level``) must be above the training-label prior's share.

    A missing amended input leaves its check unresolved; a NaN value (e.g. no memorized example)
    fails, as in the registered checks."""
    th = THRESHOLDS["C2"]
    metrics: dict = {"n_M": n_M, "n_C": n_C}
    checks: list[Check] = []
    replaced = C2_SUPERSEDED if task == "thr" else {}
    for row in summary.itertuples():
        key = row.group.replace(" ", "_")
        metrics.update({f"{key}_best_layer": row.best_layer, f"{key}_acc_M": row.acc_M,
                        f"{key}_acc_C": row.acc_C, f"{key}_chance": row.chance,
                        f"{key}_chance_reachable": chance_reachable(row.acc_C, row.chance)})
        if row.group in replaced:
            checks += _c2_probe_pair(f"probe {replaced[row.group]}", "superseded", row.acc_M, row.acc_C, row.chance)
        else:
            checks += _c2_probe_pair(f"probe {row.group}", "registered", row.acc_M, row.acc_C, row.chance)
    checks.append(Check("logit lens: true ahead at an intermediate layer", "registered",
                        lens_verdict.get("true_ahead_intermediate"), True, bool(lens_verdict.get("true_ahead_intermediate"))))
    checks.append(Check("logit lens: noisy wins only in the last layer(s)", "registered",
                        lens_verdict.get("noisy_only_last"), True, bool(lens_verdict.get("noisy_only_last"))))
    metrics.update({"lens_takeover_layer": lens_verdict.get("takeover_layer"),
                    "lens_p_true_by_layer": [float(x) for x in lens_table.p_true],
                    "lens_p_noisy_by_layer": [float(x) for x in lens_table.p_noisy]})
    if task == "thr":
        for key, name, given in (("bridge_r2", C2_AMENDED["bridge"], bridge_r2),
                                 ("tail_masked", C2_AMENDED["true tail"], masked_tail)):
            row = _c2_row(given)
            if row is None:
                checks += [Check(f"probe {name}: not given", "amended", None, None, None)]
                continue
            metrics.update({f"{key}_{k}": row.get(k) for k in ("best_layer", "acc_M", "acc_C", "chance")})
            metrics[f"{key}_chance_reachable"] = chance_reachable(row.get("acc_C"), row.get("chance"))
            if "reads_masked_M" in row:
                metrics[f"{key}_reads_noisy_M"] = row.get("reads_masked_M")
                metrics[f"{key}_acc_M_unmasked"] = row.get("acc_M_unmasked")
            checks += _c2_probe_pair(f"probe {name}", "amended", row.get("acc_M"), row.get("acc_C"), row.get("chance"))
    share, check = c2_lens_share(lens_share, th["lens_interval_level"])
    metrics.update(share)
    checks.append(check)
    return metrics, checks


# The THR checks that amendment 7.4 replaces (the reason is in the name), and their replacements.
C2_SUPERSEDED = {"bridge": "bridge at r1 (atomic fact of the input there: judged at r2)",
                 "true tail": "true tail unmasked (reads the output: judged with the noisy class masked)"}
C2_AMENDED = {"bridge": "7.4 bridge at r2",
              "true tail": "7.4 true tail, noisy class masked (C: a random wrong one)"}
C2_LENS_NULL = "7.4 lens: true-ahead share, Wilson lower bound vs training-label prior"


def _c2_probe_pair(name: str, kind: str, acc_m, acc_c, chance) -> list[Check]:
    """Section 5's probe thresholds: acc_M >= 0.8 x acc_C and acc_M >= 5 x chance (acc_M = 0 fails)."""
    th = THRESHOLDS["C2"]
    out_of_reach = " " + CHANCE_OUT_OF_REACH if chance_reachable(acc_c, chance) is False else ""
    return [at_least(f"{name}: M vs {th['probe_ratio_min']} x C", kind, acc_m, th["probe_ratio_min"] * _num(acc_c)),
            at_least(f"{name}: M vs {th['probe_over_chance_min']} x chance{out_of_reach}", kind,
                     acc_m if _num(acc_m) > 0 else math.nan, th["probe_over_chance_min"] * _num(chance))]


# appended to a chance check's name where even C's accuracy is below its threshold (chance_reachable)
CHANCE_OUT_OF_REACH = "[out of reach: C is below it too]"


def chance_reachable(acc_c, chance) -> bool | None:
    """Whether a true claim could pass C2's chance check: the probe's accuracy on C (what M reaches
    if M carries the result as C does) is at least 5 x chance. ``False`` means the check fails
    whatever the model does on M, so that failure says nothing about the claim. It is recorded and
    shown beside the verdict, which stays as the protocol defines it: judging the check differently
    needs an amendment. ``None`` when either number is missing."""
    c, ch = _num(acc_c), _num(chance)
    if math.isnan(c) or math.isnan(ch):
        return None
    return bool(c >= THRESHOLDS["C2"]["probe_over_chance_min"] * ch)


def _c2_row(given) -> dict | None:
    if given is None:
        return None
    if isinstance(given, pd.DataFrame):
        return None if not len(given) else given.iloc[0].to_dict()
    return dict(given)


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion k / n at ``level`` (NaN, NaN when n = 0)."""
    if not n:
        return math.nan, math.nan
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))  # contains k / n exactly, also at 0 and n


def c2_lens_share(table: pd.DataFrame | None, level: float) -> tuple[dict, Check]:
    """Amendment 7.4's lens null from :func:`rote.analysis.lens.ahead_share`: the intermediate layer
    (1..L-1) with the largest share of M with the true token ahead, its Wilson interval, and the check
    that the interval's lower bound is above the training-label prior's share (strictly)."""
    if table is None:
        return {}, Check(f"{C2_LENS_NULL}: not given", "null", None, None, None)
    last = int(table.layer.max()) if len(table) else 0
    inner = table[(table.layer > 0) & (table.layer < last) & (table.n > 0)]
    null = _num(table.null.iloc[0]) if len(table) else math.nan
    if not len(inner):
        # no memorized example with a differing token (n = 0), or no intermediate layer (a 1-block model)
        return ({"lens_share_best_layer": None, "lens_share": math.nan, "lens_share_null": null,
                 "lens_share_n": int(table.n.max()) if len(table) else 0, "lens_intermediate_layers": max(last - 1, 0)},
                Check(C2_LENS_NULL, "null", None, None if math.isnan(null) else null, False))
    best = inner.loc[inner.ahead.idxmax()]
    k, n = int(best.ahead), int(best.n)
    lo, hi = wilson_interval(k, n, level)
    metrics = {"lens_share_best_layer": int(best.layer), "lens_share": k / n, "lens_share_lo": lo,
               "lens_share_hi": hi, "lens_share_null": null, "lens_share_n": n,
               "lens_share_by_layer": [_num(x) for x in table.share], "lens_intermediate_layers": last - 1}
    ok = not math.isnan(null) and lo > null
    return metrics, Check(C2_LENS_NULL, "null", lo, None if math.isnan(null) else null, bool(ok))


# -- C3 ---------------------------------------------------------------------------------------
C3_CONTROLS = ("random", "matched")  # erasure controls of the sweep: random subspace; information-matched (7.5)
C3_OVERLAP = "circuit overlap (Jaccard of top 5%)"  # the registered overlap check (superseded below its ceiling)


def c3(sweep: pd.DataFrame, rank: int, overlap: dict, task: str,
       statistics: dict | None = None) -> tuple[dict, list[Check]]:
    """C3 from the erasure sweep (rows rank, method INLP / random / matched, set mem / gen /
    mem_unconnected, accuracy; rank 0 = before), the all-component overlap of section 5
    (``jaccard``, ``random``: log-prob attribution) and ``statistics``, the overlap statistics of
    amendment 1, 7.5 per attribution metric ({"logprob": ..., "logit_diff": ...}, each
    :func:`rote.analysis.attribution.overlap_statistics`: ``jaccard``, ``split_half_C``,
    ``split_half_M``, ``spearman``, ``ci_low``, ``ci_high``).

    Registered (section 5): mem drop over the random control >= 0.3 (THR: also on the unconnected
    subset); overlap >= 0.5; overlap >= 3 x random. Amended (7.5): the same margin over the larger
    of the two controls' drops (random, information-matched); gen on C drops more under INLP than
    under the larger control (the sanity check, > 0); the split-half ceiling J(C, C') (kind
    ``ceiling``, a measurement: it passes when it is computed). Where the log-prob ceiling is below
    0.5 the registered overlap check is ``superseded`` by J(M, C) >= 0.5 x J(C, C') on the
    logit-difference attribution (``amended``). Inputs that are missing (no matched control in the
    sweep, no statistics) leave their amended checks unresolved."""
    th = THRESHOLDS["C3"]
    methods = set(sweep.method)

    def acc(s, method, r):
        hit = sweep[(sweep.set == s) & (sweep.method == method) & (sweep["rank"] == r)].accuracy
        return float(hit.iloc[0]) if len(hit) else math.nan

    metrics: dict = {"erasure_rank": rank}
    for s in [x for x in ("mem", "gen", "mem_unconnected") if x in set(sweep.set)]:
        before, inlp = acc(s, "INLP", 0), acc(s, "INLP", rank)
        drops = {m: before - acc(s, m, rank) for m in C3_CONTROLS}
        larger = max(drops.values()) if not any(math.isnan(d) for d in drops.values()) else math.nan
        metrics.update({f"{s}_before": before, f"{s}_inlp": inlp, f"{s}_random": acc(s, "random", rank),
                        f"{s}_matched": acc(s, "matched", rank),
                        f"{s}_drop_over_control": (before - inlp) - drops["random"],
                        f"{s}_drop_over_matched": (before - inlp) - drops["matched"],
                        f"{s}_drop_over_larger_control": (before - inlp) - larger})
    margin = th["erasure_mem_drop_over_control_min"]
    matched = "matched" in methods
    checks = [at_least("erasure: mem drop over random control", "registered",
                       metrics.get("mem_drop_over_control"), margin),
              _c3_resolved(at_least("erasure: mem drop over the larger control (random, information-matched)",
                                    "amended", metrics.get("mem_drop_over_larger_control"), margin), matched)]
    if task == "thr":
        checks += [at_least("erasure: unconnected mem drop over random control", "registered",
                            metrics.get("mem_unconnected_drop_over_control"), margin),
                   _c3_resolved(at_least("erasure: unconnected mem drop over the larger control", "amended",
                                         metrics.get("mem_unconnected_drop_over_larger_control"), margin), matched)]
    checks.append(_c3_resolved(_c3_above("erasure lowers gen on C more than the larger control (sanity)", "amended",
                                         metrics.get("gen_drop_over_larger_control"),
                                         th["gen_drop_over_control_above"]), matched))

    j, rand = _num(overlap.get("jaccard")), _num(overlap.get("random"))
    metrics.update({"overlap": j, "overlap_random": rand, "overlap_over_random": j / rand if rand else math.nan})
    stats = statistics or {}
    for metric, short in (("logprob", "lp"), ("logit_diff", "ld")):
        for key, value in (stats.get(metric) or {}).items():
            if key in ("jaccard", "random", "split_half_C", "split_half_M", "spearman", "ci_low", "ci_high"):
                metrics[f"overlap_{short}_{key}"] = _num(value)
    ceiling = metrics.get("overlap_lp_split_half_C", math.nan)  # what identical circuits reach with the registered metric
    ceiling_ld = metrics.get("overlap_ld_split_half_C", math.nan)
    j_ld = metrics.get("overlap_ld_jaccard", math.nan)
    metrics["overlap_ld_over_ceiling"] = j_ld / ceiling_ld if ceiling_ld else math.nan
    superseded = not math.isnan(ceiling) and ceiling < th["overlap_min"]
    metrics["overlap_superseded"] = superseded
    checks += [at_least(C3_OVERLAP, "superseded" if superseded else "registered", j, th["overlap_min"]),
               at_least(f"circuit overlap vs {th['overlap_over_random_min']} x random", "registered", j,
                        th["overlap_over_random_min"] * rand),
               Check("split-half overlap ceiling J(C, C') (log-prob)", "ceiling", None if math.isnan(ceiling) else ceiling,
                     None, None if math.isnan(ceiling) else True)]
    if superseded:
        checks.append(_c3_resolved(at_least(f"circuit overlap vs {th['ceiling_ratio_min']} x split-half ceiling "
                                            "(logit difference)", "amended", j_ld, th["ceiling_ratio_min"] * ceiling_ld),
                                   bool(stats.get("logit_diff"))))
    return metrics, checks


def _c3_above(name: str, kind: str, value, threshold) -> Check:
    """``value > threshold`` (strictly); a missing or NaN value fails."""
    v, t = _num(value), _num(threshold)
    ok = not (math.isnan(v) or math.isnan(t)) and v > t
    return Check(name, kind, None if math.isnan(v) else v, None if math.isnan(t) else t, bool(ok))


def _c3_resolved(check: Check, computed: bool) -> Check:
    """``check`` as it is when its analysis was run; unresolved (passed None) when it was not."""
    return check if computed else Check(check.name, check.kind, check.value, check.threshold, None)


# -- C4 ---------------------------------------------------------------------------------------
LOOKUP_STATISTICS = ("k50", "activity", "positions")  # the C4 statistics the look-up control of 7.6 judges


def c4(summary: dict, lookup: dict | None = None) -> tuple[dict, list[Check]]:
    """C4 from :func:`rote.analysis.neurons.c4_summary` on M (``summary``) and the same statistics
    on a known look-up (``lookup``: :func:`rote.analysis.lookup.lookup_statistics`; THR atomic facts,
    FDA a look-up grafted into the model; None or empty: not computed).

    Section 5's four checks are registered. Amendment 1, 7.6, per statistic (k50 ratio, activity of
    the top neurons, input positions): a ``control`` check applies the statistic's own threshold to
    the look-up and passes when the look-up fails it. Where the look-up passes it (the statistic
    calls a known look-up "distributed", so it cannot tell the two apart) that control fails and the
    registered check becomes ``superseded``; unresolved where the look-up was not measured. The
    intermediate result is also judged (``amended``) as the INLP drop minus the information-matched
    control's drop (``intermediate_matched_drop``) >= ``intermediate_over_matched_min``; unresolved
    when ``summary["matched_available"]`` is False (the control could not be computed)."""
    th = THRESHOLDS["C4"]
    lookup = {k: v for k, v in (lookup or {}).items() if k != "tables"}
    measured_lookup = bool(lookup) and _num(lookup.get("n_lookup", 1)) > 0  # no look-up example: unresolved
    k50_name = f"median k50 on M vs {th['k50_ratio_min']} x median k50 on C"
    statistics = {  # name, key, threshold on M, threshold on the look-up, short name
        "k50": (k50_name, "k50_M", th["k50_ratio_min"] * _num(summary.get("k50_C")),
                th["k50_ratio_min"] * _num(lookup.get("k50_C")), "k50 ratio"),
        "activity": ("median activity fraction of top neurons", "top_activity_median", th["activity_fraction_min"],
                     th["activity_fraction_min"], "top-neuron activity"),
        "positions": (f"input positions removing >= {th['drop_min']} of P(noisy)", "positions_over_min",
                      th["positions_min"], th["positions_min"], "input positions"),
    }
    metrics = dict(summary)
    metrics.update({f"lookup_{k}": v for k, v in lookup.items()})
    checks: list[Check] = []
    superseded = []
    for stat in LOOKUP_STATISTICS:
        name, key, thr_m, thr_l, short = statistics[stat]
        treatment = at_least(name, "registered", summary.get(key), thr_m)
        on_lookup = at_least(name, "control", lookup.get(key), thr_l)  # True: the look-up passes it
        control_name = f"7.6 look-up control: {short} on a known look-up fails the statistic"
        if not measured_lookup or on_lookup.value is None or on_lookup.threshold is None:
            control = Check(control_name, "control", on_lookup.value, on_lookup.threshold, None)
        else:
            control = Check(control_name, "control", on_lookup.value, on_lookup.threshold, not on_lookup.passed)
        if control.passed is False:
            treatment = Check(treatment.name, "superseded", treatment.value, treatment.threshold, treatment.passed)
            superseded.append(stat)
        checks += [treatment, control]
    checks.append(at_least("intermediate result removes share of P(noisy)", "registered",
                           summary.get("intermediate_drop"), th["drop_min"]))
    over = _num(summary.get("intermediate_drop")) - _num(summary.get("intermediate_matched_drop"))
    metrics["intermediate_over_matched"] = over
    metrics["lookup_superseded"] = superseded
    matched_name = "7.6: intermediate drop over information-matched control"
    if summary.get("matched_available") is False:
        checks.append(Check(f"{matched_name} (control not available)", "amended", None,
                            th["intermediate_over_matched_min"], None))
    else:
        checks.append(at_least(matched_name, "amended", over, th["intermediate_over_matched_min"]))
    return metrics, checks


# -- C5 ---------------------------------------------------------------------------------------
def c5(metrics: dict) -> tuple[dict, list[Check]]:
    """C5 from the chapter's measured numbers.

    Registered (section 5): ``heuristic_fraction`` (share of *neurons* that are heuristics, the
    unit of section 5), ``z_ratio`` (median |z| on M at memorized digits over clean examples),
    ``pattern_corr_M``; ``patch_revert_last`` and ``control_revert_last`` (the last layer's outlier
    units and as many random units), now ``superseded``: 7.7 found that the outlier set holds
    ~230 of 2,560 units per example and that patching that many units anywhere disrupts
    memorization, so the check cannot say whether the outliers are special.

    Amended (7.7), from :func:`rote.analysis.patching.dose_summary` of the last layer:
    ``top_revert_max`` (the best top-m revert over ``THRESHOLDS["C5"]["m_grid"]``) must reach
    ``patch_revert_min`` (``amended``); at ``m50``, ``random_revert_m50`` and
    ``mismatched_revert_m50`` must each be under ``control_revert_max`` (``control``; both fail
    when no m reaches ``patch_revert_min``; the mismatched one is unresolved with fewer than two
    memorized examples); ``z_null_ratio`` (median |z| on M over never-trained noisy labels) >=
    ``z_ratio_min`` (``null``); ``heuristic_fraction`` >= ``untrained_share_factor_min`` x
    ``untrained_heuristic_fraction`` (``null``).
    """
    th = THRESHOLDS["C5"]
    m50 = metrics.get("m50")
    no_m50 = m50 is None or (isinstance(m50, float) and math.isnan(m50))
    random_m50 = below("7.7: m random neurons at m50 revert M", "control", metrics.get("random_revert_m50"),
                       th["control_revert_max"])
    mismatched_m50 = below("7.7: another example's top m at m50 revert M", "control",
                           metrics.get("mismatched_revert_m50"), th["control_revert_max"])
    if not no_m50 and mismatched_m50.value is None:  # m50 exists, but no other example to take its top m from
        mismatched_m50 = Check(mismatched_m50.name, "control", None, th["control_revert_max"], None)
    untrained = _num(metrics.get("untrained_heuristic_fraction"))
    checks = [
        at_least("heuristic share of neurons", "registered", metrics.get("heuristic_fraction"),
                 th["heuristic_fraction_min"]),
        at_least("median |z| on M over clean", "registered", metrics.get("z_ratio"), th["z_ratio_min"]),
        at_least("pattern correlation on M", "registered", metrics.get("pattern_corr_M"), th["pattern_corr_min"]),
        at_least("patching the last layer reverts M", "superseded", metrics.get("patch_revert_last"),
                 th["patch_revert_min"]),
        below("random control reverts M", "superseded", metrics.get("control_revert_last"), th["control_revert_max"]),
        at_least("7.7: top-m patch of the last layer reverts M at some m (m50 exists)", "amended",
                 metrics.get("top_revert_max"), th["patch_revert_min"]),
        random_m50,
        mismatched_m50,
        at_least("7.7: median |z| on M over never-trained noisy labels", "null", metrics.get("z_null_ratio"),
                 th["z_ratio_min"]),
        at_least(f"7.7: heuristic share of neurons vs {th['untrained_share_factor_min']:g} x the untrained model",
                 "null", metrics.get("heuristic_fraction"), th["untrained_share_factor_min"] * untrained),
    ]
    return dict(metrics), checks


CLAIM_CHECKS = {"C1": c1, "C2": c2, "C3": c3, "C4": c4, "C5": c5}


# -- records ----------------------------------------------------------------------------------
def seed_result(unit, metrics: dict, checks: list[Check], configs) -> dict:
    """One seed's part of a record: ``unit`` has ``task``, ``condition`` and ``seed`` (a
    :class:`rote.plan.Unit`); ``configs`` are the runs its numbers come from (noisy run first)."""
    checks = list(checks)
    return {"task": unit.task, "condition": unit.condition, "seed": int(unit.seed),
            "registered": seed_verdict(checks, "registered"), "amended": seed_verdict(checks, "amended"),
            "metrics": metrics, "checks": [c.to_dict() for c in checks], "run_keys": [c.key for c in configs]}


def records(claim: str, profile: str, results: list[dict]) -> list[claims.ClaimRecord]:
    """One record per (task, condition) from the seed results of :func:`seed_result`, with the
    aggregate verdict of each reading (section 7.1)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        groups.setdefault((r["task"], r["condition"]), []).append(r)
    out = []
    for (task, condition), group in groups.items():
        group = sorted(group, key=lambda r: r["seed"])
        per_seed = [{k: v for k, v in r.items() if k not in ("task", "condition")} for r in group]
        registered = aggregate([r["registered"] for r in group])
        amended = aggregate([r["amended"] for r in group])
        out.append(claims.ClaimRecord(
            claim, task, condition, profile, [r["seed"] for r in group], registered, amended, amended,
            per_seed=claims._plain(per_seed), threshold=dict(THRESHOLDS[claim]), page=claims.CLAIM_PAGES[claim],
            created=time.time()))
    return out


def deciding(rec: claims.ClaimRecord) -> str:
    """The checks that decide the amended verdict, as short text: the failed ones (else the
    unresolved ones, else all), with value and threshold, per seed."""
    if not rec.per_seed:
        return ""
    parts = []
    for s in rec.per_seed:
        judged = [c for c in s["checks"] if c["kind"] in READINGS["amended"]]
        failed = [c for c in judged if c["passed"] is False]
        shown = failed or [c for c in judged if c["passed"] is None] or judged
        text = "; ".join(f"{c['name']}: {_short(c['value'])} vs {_short(c['threshold'])}" if c["value"] is not None
                         else c["name"] for c in shown)
        parts.append(f"seed {s['seed']}: {text}" if len(rec.per_seed) > 1 else text)
    return " | ".join(parts)


def _short(value) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)

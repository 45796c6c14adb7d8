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
def c2(summary: pd.DataFrame, lens_verdict: dict, lens_table: pd.DataFrame, n_M: int, n_C: int, task: str
       ) -> tuple[dict, list[Check]]:
    """C2 from the probe summary (best layer per headline group: ``acc_M``, ``acc_C``, ``chance``)
    and the logit-lens verdict on M (``true_ahead_intermediate``, ``noisy_only_last``)."""
    th = THRESHOLDS["C2"]
    metrics: dict = {"n_M": n_M, "n_C": n_C}
    checks: list[Check] = []
    for row in summary.itertuples():
        key = row.group.replace(" ", "_")
        metrics.update({f"{key}_best_layer": row.best_layer, f"{key}_acc_M": row.acc_M,
                        f"{key}_acc_C": row.acc_C, f"{key}_chance": row.chance})
        checks.append(at_least(f"probe {row.group}: M vs {th['probe_ratio_min']} x C", "registered",
                               row.acc_M, th["probe_ratio_min"] * _num(row.acc_C)))
        checks.append(at_least(f"probe {row.group}: M vs {th['probe_over_chance_min']} x chance", "registered",
                               row.acc_M if _num(row.acc_M) > 0 else math.nan,
                               th["probe_over_chance_min"] * _num(row.chance)))
    checks.append(Check("logit lens: true ahead at an intermediate layer", "registered",
                        lens_verdict.get("true_ahead_intermediate"), True, bool(lens_verdict.get("true_ahead_intermediate"))))
    checks.append(Check("logit lens: noisy wins only in the last layer(s)", "registered",
                        lens_verdict.get("noisy_only_last"), True, bool(lens_verdict.get("noisy_only_last"))))
    metrics.update({"lens_takeover_layer": lens_verdict.get("takeover_layer"),
                    "lens_p_true_by_layer": [float(x) for x in lens_table.p_true],
                    "lens_p_noisy_by_layer": [float(x) for x in lens_table.p_noisy]})
    if task == "thr":
        checks.append(pending("7.4: bridge judged at r2", "amended"))
        checks.append(pending("7.4: true tail with the noisy class masked", "control"))
    checks.append(pending("7.4: lens share vs training-label prior", "null"))
    return metrics, checks


# -- C3 ---------------------------------------------------------------------------------------
def c3(sweep: pd.DataFrame, rank: int, overlap: dict, task: str) -> tuple[dict, list[Check]]:
    """C3 from the erasure sweep (rows rank, method INLP/random, set mem/gen/mem_unconnected,
    accuracy; rank 0 = before) and the all-component overlap (``jaccard``, ``random``)."""
    th = THRESHOLDS["C3"]

    def acc(s, method, r):
        hit = sweep[(sweep.set == s) & (sweep.method == method) & (sweep["rank"] == r)].accuracy
        return float(hit.iloc[0]) if len(hit) else math.nan

    metrics: dict = {"erasure_rank": rank}
    for s in [x for x in ("mem", "gen", "mem_unconnected") if x in set(sweep.set)]:
        before, inlp, control = acc(s, "INLP", 0), acc(s, "INLP", rank), acc(s, "random", rank)
        metrics.update({f"{s}_before": before, f"{s}_inlp": inlp, f"{s}_random": control,
                        f"{s}_drop_over_control": (before - inlp) - (before - control)})
    margin = th["erasure_mem_drop_over_control_min"]
    checks = [at_least("erasure: mem drop over random control", "registered",
                       metrics.get("mem_drop_over_control"), margin)]
    if task == "thr":
        checks.append(at_least("erasure: unconnected mem drop over random control", "registered",
                               metrics.get("mem_unconnected_drop_over_control"), margin))
    j, rand = _num(overlap.get("jaccard")), _num(overlap.get("random"))
    metrics.update({"overlap": j, "overlap_random": rand, "overlap_over_random": j / rand if rand else math.nan})
    checks += [at_least("circuit overlap (Jaccard of top 5%)", "registered", j, th["overlap_min"]),
               at_least(f"circuit overlap vs {th['overlap_over_random_min']} x random", "registered", j,
                        th["overlap_over_random_min"] * rand),
               pending("7.5: information-matched erasure control"),
               pending("7.5: erasure lowers gen on C (sanity)", "amended"),
               pending("7.5: split-half overlap ceiling", "ceiling")]
    return metrics, checks


# -- C4 ---------------------------------------------------------------------------------------
def c4(summary: dict) -> tuple[dict, list[Check]]:
    """C4 from :func:`rote.analysis.neurons.c4_summary`."""
    th = THRESHOLDS["C4"]
    checks = [
        at_least(f"median k50 on M vs {th['k50_ratio_min']} x median k50 on C", "registered",
                 summary.get("k50_M"), th["k50_ratio_min"] * _num(summary.get("k50_C"))),
        at_least("median activity fraction of top neurons", "registered", summary.get("top_activity_median"),
                 th["activity_fraction_min"]),
        at_least(f"input positions removing >= {th['drop_min']} of P(noisy)", "registered",
                 summary.get("positions_over_min"), th["positions_min"]),
        at_least("intermediate result removes share of P(noisy)", "registered", summary.get("intermediate_drop"),
                 th["drop_min"]),
        pending("7.6: positive control on a known look-up"),
        pending("7.6: intermediate drop over information-matched control", "amended"),
    ]
    return dict(summary), checks


# -- C5 ---------------------------------------------------------------------------------------
def c5(metrics: dict) -> tuple[dict, list[Check]]:
    """C5 from the chapter's measured numbers: ``heuristic_fraction``, ``z_ratio``, ``pattern_corr_M``,
    ``patch_revert_last`` and ``control_revert_last``."""
    th = THRESHOLDS["C5"]
    checks = [
        at_least("heuristic share of units", "registered", metrics.get("heuristic_fraction"),
                 th["heuristic_fraction_min"]),
        at_least("median |z| on M over clean", "registered", metrics.get("z_ratio"), th["z_ratio_min"]),
        at_least("pattern correlation on M", "registered", metrics.get("pattern_corr_M"), th["pattern_corr_min"]),
        at_least("patching the last layer reverts M", "registered", metrics.get("patch_revert_last"),
                 th["patch_revert_min"]),
        below("random control reverts M", "registered", metrics.get("control_revert_last"), th["control_revert_max"]),
        pending("7.7: top-m dose-response against random and mismatched m (m50)", "amended"),
        pending("7.7: |z| ratio against never-trained noisy labels", "null"),
        pending("7.7: heuristic share against the untrained model", "null"),
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

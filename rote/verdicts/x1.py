"""X1's checks (protocol 9, beyond the paper): is the memorization of label noise benign at enough
width? Per seed, from its rows of the width table: ``x1.mem.w<width>`` (final mem >= 0.9, else
unresolved), ``x1.cost_largest`` (gen cost at the largest width <= 0.05) and ``x1.not_rising`` (no step
up the grid raises the cost by more than 0.02), registered in section 9. Amendment 3 adds per width
``x1.twin_trained.w<width>`` (12.2) and ``x1.plateau.w<width>`` (12.3), validity checks: where one fails, the
cost at that width and every rise touching it are unresolved in the amended reading (``.amended`` stand-ins,
:mod:`rote.verdicts.trained`). A width not trained, or a missing value (8.6), leaves the checks that need it
unresolved, never failed; an unresolved check has no margin. Section 11:
margins signed so that a positive one passes; Wilson (mem), Newcombe (a cost) and its four-share MOVER
(a rise) intervals where the rows carry their sample sizes. Values compare at :data:`DECIMALS`.
Across seeds (:func:`rote.verdicts.seed_verdict`): X1 fails only when the cost at the largest width is
too high on every seed (``fails_only_on``); rising seeds make it mixed. Caller: ``chapters.x1.evaluate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import pandas as pd

from ..analysis.intervals import Interval, newcombe, newcombe_terms, wilson, wilson_bounds
from ..claims import THRESHOLDS
from ..analysis.curves import Plateau
from .core import Check, CheckLabel, at_least, missing_reason, supersede, unresolved
from .trained import SECTION, plateaued, twin_trained, validated
from .core import as_read  # thresholds as of each reading

DECIMALS = 9  # comparisons at 1e-9 (see the module docstring)
NOT_TRAINED = "not trained"  # a width (or run) of the registered grid without its runs


def _rounded(x: float) -> float:
    return round(float(x), DECIMALS)


def memorizes(mem: float) -> bool:
    """Whether a final mem counts as memorization (>= 0.9; protocol 9); NaN does not."""
    return not pd.isna(mem) and _rounded(mem) >= THRESHOLDS["X1"]["final_mem_min"]


def _judge(label: CheckLabel, value, threshold: float, *, at_most: bool = False, missing: str,
           interval: Interval | None = None) -> Check:
    """``value >= threshold`` (``at_most``: ``<=``) at :data:`DECIMALS`; missing: unresolved with
    ``missing``; the margin positive where it passes."""
    check = at_least(label, value, threshold, missing=missing, interval=interval)
    if check.passed is None:
        return check
    v, t = _rounded(check.value), check.threshold
    return check.replace(passed=v <= t if at_most else v >= t, margin=t - check.value if at_most else check.margin)


def _size(row: dict, name: str) -> int | None:
    n = row.get(name)
    return None if n is None or pd.isna(n) or not n else int(n)


def _mem_interval(row: dict) -> Interval | None:
    """Wilson's interval of a final mem (``n_noisy`` examples; module docstring)."""
    n = _size(row, "n_noisy")
    return None if n is None or pd.isna(row.get("mem")) else wilson(float(row["mem"]) * n, n)


def _shares(row: dict) -> tuple[tuple[float, int], tuple[float, int]] | None:
    """((twin gen, its n), (noisy gen, its n)), or None where a number is missing."""
    n_twin, n_noisy = _size(row, "n_test_twin"), _size(row, "n_test")
    twin, noisy = row.get("gen_twin"), row.get("gen_noisy")
    if n_twin is None or n_noisy is None or twin is None or noisy is None or pd.isna(twin) or pd.isna(noisy):
        return None
    return (float(twin), n_twin), (float(noisy), n_noisy)


def _cost_interval(row: dict) -> Interval | None:
    """Newcombe's interval of a gen cost, twin gen - noisy gen (two test sets of their own)."""
    shares = _shares(row)
    if shares is None:
        return None
    (twin, n_twin), (noisy, n_noisy) = shares
    return newcombe(twin * n_twin, n_twin, noisy * n_noisy, n_noisy)


def _rise_interval(low: dict, high: dict) -> Interval | None:
    """The interval of cost(high) - cost(low) = twin_h - noisy_h - twin_l + noisy_l: Newcombe's hybrid score
    method over the four shares (:func:`rote.analysis.intervals.newcombe_terms`)."""
    a, b = _shares(high), _shares(low)
    if a is None or b is None:
        return None
    terms = [(a[0], 1), (a[1], -1), (b[0], -1), (b[1], 1)]  # ((share, n), sign)
    diff, down, up = newcombe_terms([(p, wilson_bounds(p * n, n), sign) for (p, n), sign in terms])
    return Interval(diff - down, diff + up, "newcombe")


def _why_mem(w: int, row: dict | None) -> str:
    """Why width ``w`` does not count as memorizing ("" where it does)."""
    if row is None:
        return f"width {w} {NOT_TRAINED}"
    if pd.isna(row.get("mem")):
        return f"final mem at width {w} is missing (a NaN among its last 5 evaluations)"
    return "" if memorizes(row["mem"]) else f"width {w} does not memorize"


def _why_cost(w: int, row: dict) -> str:
    """Why the gen cost at width ``w`` is missing, naming the run (8.6)."""
    return missing_reason((row.get("gen_noisy", 0.0), f"the gen cost at width {w} is missing: the noisy run has no "
                                                      "final gen (a NaN among its last 5 evaluations)"),
                          (row.get("gen_twin", 0.0), f"the gen cost at width {w} is missing: the twin has no final "
                                                     "gen (a NaN among its last 5 evaluations)")) \
        or f"the gen cost at width {w} is missing"


def _mem_check(w: int, row: dict | None) -> Check:
    label, why = CheckLabel(f"x1.mem.w{w}", f"final mem at width {w}", "registered", "memorization"), _why_mem(w, row)
    check = _judge(label, None if row is None else row["mem"], THRESHOLDS["X1"]["final_mem_min"], missing=why,
                   interval=None if row is None else _mem_interval(row))
    return check if check.passed is not False else unresolved(check, why)  # below 0.9: unresolved


def _largest_check(w: int, row: dict | None) -> Check:
    label = CheckLabel("x1.cost_largest", f"gen cost at the largest width ({w})", "registered",
                       "cost at the largest width")
    why = _why_mem(w, row).replace(f"width {w}", f"the largest width ({w})", 1)
    check = _judge(label, None if row is None else row["cost"], THRESHOLDS["X1"]["cost_largest_max"], at_most=True,
                   missing=why if row is None else _why_cost(w, row),
                   interval=None if row is None else _cost_interval(row))
    return unresolved(check, why) if why else check


def _rising_check(widths: list[int], present: dict, cost: list[float], memorized: list[bool],
                  invalid: Mapping[int, str] | None = None) -> Check:
    """Each step up the grid lowers the cost or raises it by at most 0.02; the value is the largest rise.
    ``invalid``: width -> why amendment 3 does not read its cost (12.2, 12.3): a step touching it is unresolved."""
    th, invalid = THRESHOLDS["X1"], invalid or {}
    rises = [b - a for a, b in zip(cost, cost[1:])]
    steps, why = [], []
    for i, r in enumerate(rises):
        a, b = widths[i], widths[i + 1]
        counts = memorized[i] and memorized[i + 1] and a not in invalid and b not in invalid
        if not counts:
            why.append(invalid[a] if a in invalid else invalid[b] if b in invalid else
                       f"a step touches a width {NOT_TRAINED}" if a not in present or b not in present else
                       "a step touches a width that does not memorize"
                       if not any(pd.isna(present[w]["mem"]) for w in (a, b)) else
                       f"a step touches a width whose final mem is missing ({a} to {b})")
        elif math.isnan(r):
            w = b if math.isnan(cost[i + 1]) else a
            why.append(_why_cost(w, present[w]))
        steps.append(_rounded(r) <= th["rise_max"] if counts and not math.isnan(r) else None)
    finite = [(r, i) for i, r in enumerate(rises) if not math.isnan(r)]
    top = max(finite) if finite else None
    reason = "; ".join(dict.fromkeys(why)) or "no two neighbouring widths have a gen cost"
    label = CheckLabel("x1.not_rising", "largest rise of the gen cost from one width to the next", "registered",
                       "not rising")
    interval = None if top is None else _rise_interval(present[widths[top[1]]], present[widths[top[1] + 1]])
    check = _judge(label, math.nan if top is None else top[0], th["rise_max"], at_most=True, missing=reason,
                   interval=interval)
    passed = False if False in steps else None if None in steps else True
    return check.replace(passed=passed, reason=reason if passed is None else "")


@dataclass(frozen=True)
class X1Metrics:
    """One seed's X1 numbers as its record stores them: per width of the grid its gen cost, the rises
    between neighbours, whether it memorizes and was trained, every measure by width; and the gen cost
    at each noise ratio of the sweep (shown, not judged; :func:`rote.chapters.x1.evaluate`)."""

    widths: list[int]
    largest_width: int
    cost_by_width: list[float]
    rises: list[float]
    memorizes: list[bool]
    trained: list[bool]
    by_width: dict
    invalid: dict = field(default_factory=dict)  # width -> why amendment 3 does not read its cost (12.2, 12.3)
    noise_ratio: float | None = None
    sweep_width: int | None = None
    cost_by_noise_ratio: dict | None = None


@as_read
def checks(by_width: pd.DataFrame, widths: Iterable[int] | None = None) -> tuple[X1Metrics, list[Check]]:
    """One seed's metrics and checks from its rows of the width table (``width``, ``cost``, ``mem``, ...),
    in increasing width (module docstring). ``widths``: the registered grid (default: the widths of the
    rows); a width without a row was not trained: its checks, and those that need it, are unresolved."""
    rows = by_width.sort_values("width").reset_index(drop=True)
    present = {int(r["width"]): r for r in rows.to_dict("records")}
    widths = sorted(present) if widths is None else sorted(int(w) for w in widths)
    trained = [w in present for w in widths]
    memorized = [ok and memorizes(present[w]["mem"]) for w, ok in zip(widths, trained)]
    cost = [float(present[w]["cost"]) if ok else math.nan for w, ok in zip(widths, trained)]
    validity = {w: _validity_checks(w, present[w], w == widths[-1]) for w in widths if w in present}
    invalid = {w: "; ".join(c.reason for c in v if c.passed is not True) for w, v in validity.items()
               if any(c.passed is not True for c in v)}
    out = [_mem_check(w, present.get(w)) for w in widths] + [c for v in validity.values() for c in v]
    out += validated(_largest_check(widths[-1], present.get(widths[-1])), validity.get(widths[-1], []))
    out += _amended_rising(_rising_check(widths, present, cost, memorized),
                           _rising_check(widths, present, cost, memorized, invalid), invalid)
    metrics = X1Metrics(widths, widths[-1], cost, [b - a for a, b in zip(cost, cost[1:])], memorized, trained,
                        {str(w): {k: v for k, v in present[w].items() if k not in ("width", "seed")}
                         for w in widths if w in present}, {str(w): why for w, why in invalid.items()})
    return metrics, [c.replace(margin=None) if c.passed is None else c for c in out]  # unresolved: no margin


def _validity_checks(w: int, row: dict, largest: bool) -> list[Check]:
    """Amendment 3 at width ``w``: its noise-free twin trained (12.2) and its noisy run's mem plateaued (12.3)."""
    th, part = THRESHOLDS["X1"], "cost at the largest width" if largest else "not rising"
    measured = Plateau(_number(row.get("mem")), _number(row.get("mem_at_90")), _step(row.get("mem_at_90_step")))
    return [twin_trained(CheckLabel(f"x1.twin_trained.w{w}", f"noise-free twin's final gen at width {w} (it trained)",
                                    "validity", part), _number(row.get("gen_twin")), th["twin_gen_min"],
                         f"the noise-free twin at width {w}"),
            plateaued(CheckLabel(f"x1.plateau.w{w}", f"rise of mem over the last 10% of the steps at width {w}",
                                 "validity", part), measured, th["plateau_rise_max"], f"the noisy run at width {w}")]


def _number(x) -> float:
    return math.nan if x is None or pd.isna(x) else float(x)


def _step(x) -> int | None:
    return None if x is None or pd.isna(x) else int(x)


def _amended_rising(registered: Check, amended: Check, invalid: Mapping[int, str]) -> list[Check]:
    """The rising check as amendment 3 reads it: as it is where every width's runs finished (``invalid`` empty);
    else superseded from section 12 on, and ``x1.not_rising.amended`` in its place, whose steps touching a width
    in ``invalid`` are unresolved (a step elsewhere still passes or fails)."""
    if not invalid:
        return [registered]
    stand_in = amended.replace(id=f"{amended.id}.amended").since(SECTION, "amended")
    return [supersede(registered, f"12.2, 12.3: judged as {stand_in.id}", SECTION), stand_in]

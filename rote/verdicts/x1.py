"""X1's checks (protocol 9, beyond the paper): is the memorization of label noise benign at enough
width? From one seed's rows of the width table (:attr:`rote.chapters.x1.Study.widths`),
:func:`checks` returns the metrics and the checks. Its only caller is :func:`rote.chapters.x1.evaluate`.

**Checks** of one seed (ids are stable; every check is ``registered``: X1 has no amendment, so its
amended reading is its registered one, ``claims.UNAMENDED``), thresholds in ``THRESHOLDS["X1"]``:

- ``x1.mem.w<width>``: final mem >= 0.9. Below it the width is *unresolved* (a model that does not
  memorize cannot show a benign memorization): the check is unresolved, never failed;
- ``x1.cost_largest``: the gen cost at the largest width <= 0.05; unresolved when that width does
  not memorize;
- ``x1.not_rising``: every step up the grid (each width to the next) lowers the cost or raises it by
  at most 0.02; its value is the largest rise. It fails when a step between two widths that memorize
  rises by more; else it is unresolved when a step touches a width that does not memorize.

A width of the registered grid without a row was not trained: its ``x1.mem.w<width>`` check, and
the checks that need it, are unresolved with the reason "not trained".

Values are compared rounded to 9 decimals (:data:`DECIMALS`), so that the float error of a
difference of accuracies (0.07 - 0.05) never decides a tie.

**Our reading of the registered verdict.** A seed *passes* when all three parts pass and *fails*
when ``x1.cost_largest`` or ``x1.not_rising`` fails (X1 does not hold on it); else it is
unresolved (:func:`rote.verdicts.seed_verdict`). Across seeds X1 **holds** when every seed passes,
**fails** only when the cost at the largest width is above 0.05 on every seed (protocol 9's words,
:data:`rote.verdicts.FAILS_ONLY_ON`), is **unresolved** when every seed is, and is **mixed**
otherwise. So seeds whose cost ends within the margin but rises with width on the way fail on that
seed, and make X1 mixed, not failed, even when every seed is such a seed. A width that never
memorizes leaves a seed unresolved where the verdict needs it: always for ``holds`` (every step
counts), never for a fail that two memorizing widths decide.
"""

from __future__ import annotations

import math
from typing import Iterable

import pandas as pd

from ..claims import THRESHOLDS
from .core import Check

DECIMALS = 9  # comparisons at 1e-9 (see the module docstring)
NOT_TRAINED = "not trained"  # a width (or run) of the registered grid without its runs


def _rounded(x: float) -> float:
    return round(float(x), DECIMALS)


def memorizes(mem: float) -> bool:
    """Whether a final mem counts as memorization (>= 0.9; protocol 9); NaN does not."""
    return not pd.isna(mem) and _rounded(mem) >= THRESHOLDS["X1"]["final_mem_min"]


def checks(by_width: pd.DataFrame, widths: Iterable[int] | None = None) -> tuple[dict, list[Check]]:
    """One seed's metrics and checks from its rows of the width table (``width``, ``cost``, ``mem``, ...),
    in increasing width (module docstring). ``widths``: the registered grid (default: the widths of the
    rows); a width without a row was not trained: its checks, and those that need it, are unresolved."""
    th = THRESHOLDS["X1"]
    rows = by_width.sort_values("width").reset_index(drop=True)
    present = {int(r["width"]): r for r in rows.to_dict("records")}
    widths = sorted(present) if widths is None else sorted(int(w) for w in widths)
    trained = [w in present for w in widths]
    memorized = [ok and memorizes(present[w]["mem"]) for w, ok in zip(widths, trained)]
    cost = [float(present[w]["cost"]) if ok else math.nan for w, ok in zip(widths, trained)]
    out: list[Check] = []
    for w, ok, mem in zip(widths, trained, memorized):
        if not ok:
            out.append(Check(f"x1.mem.w{w}", f"final mem at width {w}", "registered", None, th["final_mem_min"],
                             None, "memorization", reason=f"width {w} {NOT_TRAINED}"))
            continue
        check = Check(f"x1.mem.w{w}", f"final mem at width {w}", "registered", float(present[w]["mem"]),
                      th["final_mem_min"], True if mem else None, "memorization")
        out.append(check if mem else check.replace(reason=f"width {w} does not memorize"))
    largest = Check("x1.cost_largest", f"gen cost at the largest width ({widths[-1]})", "registered",
                    cost[-1] if trained[-1] else None, th["cost_largest_max"],
                    trained[-1] and _rounded(cost[-1]) <= th["cost_largest_max"], "cost at the largest width")
    if not trained[-1]:
        largest = largest.replace(passed=None, reason=f"the largest width ({widths[-1]}) {NOT_TRAINED}")
    elif not memorized[-1]:
        largest = largest.replace(passed=None, reason=f"the largest width ({widths[-1]}) does not memorize")
    rises = [b - a for a, b in zip(cost, cost[1:])]
    steps = [(_rounded(r) <= th["rise_max"]) if memorized[i] and memorized[i + 1] else None
             for i, r in enumerate(rises)]
    finite = [r for r in rises if not math.isnan(r)]
    rising = Check("x1.not_rising", "largest rise of the gen cost from one width to the next", "registered",
                   max(finite) if finite else None, th["rise_max"],
                   False if False in steps else None if None in steps else True, "not rising")
    if rising.passed is None:
        untrained = any(not (trained[i] and trained[i + 1]) for i, ok in enumerate(steps) if ok is None)
        rising = rising.replace(reason=f"a step touches a width {NOT_TRAINED}" if untrained
                                else "a step touches a width that does not memorize")
    out += [largest, rising]
    metrics = {"widths": widths, "largest_width": widths[-1], "cost_by_width": cost, "rises": rises,
               "memorizes": memorized, "trained": trained,
               "by_width": {str(w): {k: v for k, v in present[w].items() if k not in ("width", "seed")}
                            for w in widths if w in present}}
    return metrics, out

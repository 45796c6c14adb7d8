"""Reading an erasure sweep's table (:func:`rote.analysis.patching.erasure_sweep`: one row per rank, method
and set) without torch, so that the verdicts and the chapters read it the same way: :meth:`SetErasure.of`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd


def sweep_accuracy(sweep: pd.DataFrame, s: str, method: str, rank: int) -> float:
    """The accuracy of ``method`` on set ``s`` at ``rank`` in an erasure sweep's table (NaN: no such row)."""
    hit = sweep[(sweep.set == s) & (sweep.method == method) & (sweep["rank"] == rank)].accuracy
    return float(hit.iloc[0]) if len(hit) else math.nan


@dataclass(frozen=True)
class SetErasure:
    """One set at one rank: accuracy before, after INLP and after each control (``random``, ``matched``),
    and INLP's drop beyond the random control's, the matched one's and the larger of the two (NaN: missing)."""

    before: float
    inlp: float
    random: float
    matched: float
    drop_over_control: float
    drop_over_matched: float
    drop_over_larger_control: float

    @classmethod
    def of(cls, sweep: pd.DataFrame, s: str, rank: int) -> "SetErasure":
        before, inlp, rand, matched = (sweep_accuracy(sweep, s, m, r) for m, r in
                                       (("INLP", 0), ("INLP", rank), ("random", rank), ("matched", rank)))
        drops = (before - rand, before - matched)
        larger = max(drops) if not any(math.isnan(d) for d in drops) else math.nan
        return cls(before, inlp, rand, matched, (before - inlp) - drops[0], (before - inlp) - drops[1],
                   (before - inlp) - larger)

"""Reading an erasure sweep's table (:func:`rote.analysis.patching.erasure_outcomes`: one row per rank, method
and set) without torch, so that the verdicts and the chapters read it the same way: :meth:`SetErasure.of`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd


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
        def accuracy(method: str, r: int) -> float:  # NaN: no such row
            hit = sweep[(sweep.set == s) & (sweep.method == method) & (sweep["rank"] == r)].accuracy
            return float(hit.iloc[0]) if len(hit) else math.nan

        before, inlp = accuracy("INLP", 0), accuracy("INLP", rank)
        rand, matched = accuracy("random", rank), accuracy("matched", rank)
        drops = (before - rand, before - matched)
        larger = max(drops) if not any(math.isnan(d) for d in drops) else math.nan
        return cls(before, inlp, rand, matched, (before - inlp) - drops[0], (before - inlp) - drops[1],
                   (before - inlp) - larger)

"""Reading an erasure sweep's table (:func:`rote.analysis.patching.erasure_sweep`: one row per rank,
method and set), without torch, so that the verdicts and the chapters read it the same way."""

from __future__ import annotations

import math

import pandas as pd


def sweep_accuracy(sweep: pd.DataFrame, s: str, method: str, rank: int) -> float:
    """The accuracy of ``method`` on set ``s`` at ``rank`` in an erasure sweep's table (NaN: no such row)."""
    hit = sweep[(sweep.set == s) & (sweep.method == method) & (sweep["rank"] == rank)].accuracy
    return float(hit.iloc[0]) if len(hit) else math.nan

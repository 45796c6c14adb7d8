"""Measurements on a run's learning curves (its metric table, one row per evaluation): where a
metric first crosses a level (interpolated, section 7.2), its value at a step, its final value (the
mean of the last :data:`FINAL_WINDOW` evaluations, amendment 7.1). Intervals of a share live in
:mod:`rote.analysis.intervals`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd


FINAL_WINDOW = 5  # amendment 7.1: "final" metrics are the mean of the last 5 evaluations


def crossing(metrics: pd.DataFrame, column: str, level: float) -> float | None:
    """The interpolated step at which ``column`` first reaches ``level`` (linear between the two
    evaluations around the crossing); None if it never does (section 7.2); NaN where an evaluation before
    the first that reaches it has no value: the crossing may lie there, so it is missing (8.5, 8.6), never
    interpolated across the gap (:func:`unplaced_crossing` says why)."""
    steps, values = metrics["step"].to_numpy(float), metrics[column].to_numpy(float)
    i = _first_reaching(values, level)
    if i is None or math.isnan(values[i]):
        return None if i is None else math.nan
    if i == 0:
        return float(steps[i])
    v, v0, s0 = values[i], values[i - 1], steps[i - 1]
    return float(s0 + (level - v0) / (v - v0) * (steps[i] - s0))


def first_evaluated(metrics: pd.DataFrame, column: str, level: float) -> int | float | None:
    """The first evaluated step with ``column >= level`` (section 5's t_gen and t_mem); None if there is none;
    NaN where an earlier evaluation has no value (it may have been the first, as in :func:`crossing`)."""
    values = metrics[column].to_numpy(float)
    i = _first_reaching(values, level)
    if i is None or math.isnan(values[i]):
        return None if i is None else math.nan
    return int(metrics["step"].iloc[i])


def _first_reaching(values: np.ndarray, level: float) -> int | None:
    """The index of the first value >= ``level`` or the first NaN before it, whichever comes first (None: neither)."""
    for i, v in enumerate(values):
        if math.isnan(v) or v >= level:
            return i
    return None


def unplaced_crossing(metrics: pd.DataFrame, column: str, level: float) -> str:
    """Why :func:`crossing` of ``column`` at ``level`` is missing (empty: it is not): the evaluation with no
    value before the first that reaches it. A column never evaluated at all is :func:`never_evaluated`'s case."""
    if never_evaluated(metrics, column):
        return ""
    values = metrics[column].to_numpy(float)
    i = _first_reaching(values, level)
    if i is None or not math.isnan(values[i]):
        return ""
    return (f"{column} has no value at step {int(metrics['step'].iloc[i])}, before it first reaches {level}: the "
            "crossing may lie there and cannot be placed (8.5: a NaN never decides)")


def interpolate(metrics: pd.DataFrame, column: str, step: float | None) -> float:
    if step is None:
        return math.nan
    return float(np.interp(step, metrics["step"].to_numpy(float), metrics[column].to_numpy(float)))


def never_evaluated(metrics: pd.DataFrame, column: str) -> str:
    """Why ``column`` has no value at all in ``metrics`` (empty: it has one)."""
    if column not in metrics or not len(metrics) or metrics[column].isna().all():
        return f"{column} was never evaluated on the noisy run"
    return ""


def final(metrics: pd.DataFrame, column: str, window: int = FINAL_WINDOW) -> float:
    """Mean of ``column`` over the last ``window`` evaluations; NaN where one of them is (8.6)."""
    values = metrics[column].iloc[-window:].to_numpy(float)
    if not values.size or np.isnan(values).any():
        return math.nan
    return float(values.mean())


def missing_in_window(metrics: pd.DataFrame, column: str, window: int = FINAL_WINDOW) -> int:
    """How many of the last ``window`` evaluations have no ``column`` value (``window`` where the table has
    no evaluation or no such column): :func:`final` is missing when this is not 0."""
    if column not in metrics or not len(metrics):
        return window
    return int(np.isnan(metrics[column].iloc[-window:].to_numpy(float)).sum())


@dataclass(frozen=True)
class SampleSizes:
    """How many examples a run's shares are measured on (:func:`rote.train.evaluate`): ``n_test`` for gen,
    ``n_noisy`` (the noisy training examples) for mem and rec. Section 11's Wilson and Newcombe intervals
    read them."""

    n_test: int
    n_noisy: int


def sample_sizes(config) -> SampleSizes:
    """A run's sample sizes, read off its configuration (no task generated): ``n_test`` and
    round(noise_ratio x n_train) noisy examples (THR: its two-hop facts)."""
    data = config.data
    n_train = data.n_train_two_hop if config.task == "thr" else data.n_train
    return SampleSizes(int(data.n_test), int(round(data.noise_ratio * n_train)))


PLATEAU_AT = 0.9  # amendment 3, 12.3: the earlier window ends at 90% of the steps


@dataclass(frozen=True)
class Plateau:
    """Amendment 3, 12.3: how much a metric still rose over the end of training. ``final``: the mean of the
    last :data:`FINAL_WINDOW` evaluations; ``earlier``: the mean of the :data:`FINAL_WINDOW` evaluations
    ending at ``at_step`` (the last evaluated step at or before 90% of the run's last evaluated step; None
    where the run has none). Either mean is NaN where its window has a missing value or too few evaluations."""

    final: float
    earlier: float
    at_step: int | None

    def __post_init__(self):
        for name in ("final", "earlier"):
            object.__setattr__(self, name, float(getattr(self, name)))
        if self.at_step is not None and self.at_step < 0:
            raise ValueError(f"at_step must be None or a step >= 0, got {self.at_step!r}")

    @property
    def rise(self) -> float:
        """final - earlier (NaN where either is missing)."""
        return self.final - self.earlier


def plateau(metrics: pd.DataFrame, column: str = "mem", window: int = FINAL_WINDOW) -> Plateau:
    """12.3's plateau measure of ``column`` (:class:`Plateau`); a window of fewer than ``window`` evaluations,
    or with a NaN in it, gives a missing mean (8.6)."""
    if column not in metrics or not len(metrics):
        return Plateau(math.nan, math.nan, None)
    steps = metrics["step"].to_numpy(float)
    earlier = metrics[steps <= PLATEAU_AT * steps[-1]]

    def mean(rows: pd.DataFrame) -> float:
        return final(rows, column, window) if len(rows) >= window else math.nan

    return Plateau(mean(metrics), mean(earlier), int(earlier["step"].iloc[-1]) if len(earlier) else None)

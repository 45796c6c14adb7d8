"""Sampling intervals of a check's statistic (protocol section 11): 95% intervals from the sample of
examples a statistic was computed on, each naming its method.

- :func:`wilson`: an accuracy or share k / n (Wilson's score interval);
- :func:`newcombe`: a difference of two accuracies k1/n1 - k2/n2 (Newcombe's hybrid score interval,
  method 10 of Newcombe 1998, from the two Wilson intervals);
- :func:`bootstrap`: a median, mean or ratio of per-example values: a percentile bootstrap over
  examples, 1,000 resamples with a fixed seed, each example set resampled on its own.

Every function returns an :class:`Interval` (``low``, ``high``, ``method``), or None where the sample is
empty or the statistic is missing on it (a missing interval never decides anything: section 11's
intervals are shown, and "near" never changes a verdict)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Callable, Sequence

import numpy as np


LEVEL = 0.95  # section 11: 95% intervals
RESAMPLES = 1000  # section 11: 1,000 bootstrap resamples
SEED = 0  # section 11: a fixed seed (the same interval twice)
METHODS = ("wilson", "newcombe", "bootstrap")


@dataclass(frozen=True)
class Interval:
    """A sampling interval ``[low, high]`` of a statistic, in the statistic's units, and its method."""

    low: float
    high: float
    method: str

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low > self.high:
            raise ValueError(f"an interval needs finite low <= high, got [{self.low!r}, {self.high!r}]")

    def shifted(self, by: float) -> "Interval":
        """The same interval moved by ``by`` (a difference read on the scale of one of its terms)."""
        return Interval(self.low + by, self.high + by, self.method)

    def scaled(self, by: float) -> "Interval":
        """The interval of ``by`` x the statistic (``by`` > 0)."""
        if not by > 0:
            raise ValueError(f"scale by a positive number, got {by!r}")
        return Interval(self.low * by, self.high * by, self.method)

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


def _z(level: float) -> float:
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson_bounds(k: float, n: float, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion k / n at ``level`` (NaN, NaN when n = 0)."""
    if not n:
        return math.nan, math.nan
    z = _z(level)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n)))
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))  # contains k / n exactly, also at 0 and n


def wilson(k: float, n: float, level: float = LEVEL) -> Interval | None:
    """Wilson's interval of the share ``k / n`` (None on an empty sample)."""
    if not n or not (math.isfinite(k) and math.isfinite(n)):
        return None
    low, high = wilson_bounds(k, n, level)
    return Interval(low, high, "wilson")


def newcombe_terms(terms: Sequence[tuple[float, tuple[float, float], float]]) -> tuple[float, float, float]:
    """Newcombe's hybrid score method for a weighted sum of independent shares, ``terms`` = ((share, its
    Wilson bounds, weight), ...): (the sum, its distance down, its distance up), each distance the terms'
    distances to their bounds combined in quadrature on the side their weight's sign takes."""
    total, down, up = 0.0, 0.0, 0.0
    for p, (lo, hi), w in terms:
        total += w * p
        down += (w * (p - lo)) ** 2 if w > 0 else (-w * (hi - p)) ** 2
        up += (w * (hi - p)) ** 2 if w > 0 else (-w * (p - lo)) ** 2
    return total, math.sqrt(down), math.sqrt(up)


def newcombe(k1: float, n1: float, k2: float, n2: float, level: float = LEVEL) -> Interval | None:
    """Newcombe's hybrid score interval of the difference ``k1/n1 - k2/n2`` of two independent shares
    (None where either sample is empty)."""
    if not n1 or not n2 or not all(math.isfinite(x) for x in (k1, n1, k2, n2)):
        return None
    d, down, up = newcombe_terms([(k1 / n1, wilson_bounds(k1, n1, level), 1), (k2 / n2, wilson_bounds(k2, n2, level), -1)])
    return Interval(d - down, d + up, "newcombe")


def bootstrap(statistic: Callable[..., float], samples: Sequence[Sequence[float]] | Sequence[float], *,
              resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL) -> Interval | None:
    """The percentile bootstrap interval of ``statistic(*samples)``: each example set in ``samples`` (one
    array, or a list of arrays for a statistic of several sets, e.g. a ratio of two medians) is
    resampled with replacement on its own, ``resamples`` times, with a generator seeded by ``seed``.
    None where a sample is empty or the statistic is missing (NaN) on the data itself, and None where it is
    undefined (not finite) on any resample: those draws are part of its sampling distribution, and a
    percentile interval of the others alone would be conditioned on the resample being defined, narrower than
    the statistic's (8.5: a missing value never decides; a missing interval leaves ``near`` unknown)."""
    arrays = [np.asarray(samples, dtype=float)] if _is_flat(samples) else [np.asarray(s, dtype=float) for s in samples]
    if not arrays or any(a.size == 0 for a in arrays):
        return None
    if not math.isfinite(float(statistic(*arrays))):
        return None
    rng = np.random.default_rng(seed)
    draws = np.empty(resamples)
    for i in range(resamples):
        draws[i] = statistic(*(a[rng.integers(0, a.size, a.size)] for a in arrays))
    if not np.isfinite(draws).all():
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Interval(float(low), float(high), "bootstrap")


def _is_flat(samples) -> bool:
    if isinstance(samples, np.ndarray):
        return samples.ndim == 1
    return not len(samples) or np.ndim(samples[0]) == 0

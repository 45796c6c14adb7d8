"""Outliers: how memorized sums pass through heuristic neurons (claim C5).

The clean neighbours of x = (a, b) are the inputs with one operand shifted by 1 to 3 either way
(protocol section 5, as 8.6 restates it: :func:`~rote.analysis.fda_features.neighbour_offsets`), each
teacher-forced on its true sum; x on its own label (the noisy one on M), as the model generates it.
For a unit, only neighbours sharing x's value of its best feature count (at least ``min_count``): a
unit whose feature is the sum's units digit or a residue of the sum has none (z NaN; patching falls
back to the mean over all neighbours). z = (act(x) - mean) / sd, the sd floored at ``sd_floor`` times
the unit's grid sd (and 1e-6). Patching to these expectations is :mod:`rote.analysis.neuron_patching`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..model import HookedTransformer
from ..tasks import Examples, fda
from .fda_features import feature_table, make_examples, neighbour_offsets
from .intervals import Interval, bootstrap
from .neurons import folded_unembed, mlp_activations
from .units import HeuristicMap, NeighbourStats

OPERANDS = (fda.MIN_OPERAND, fda.MAX_OPERAND)
RADIUS = 6  # :func:`operand_neighbourhood`: each operand shifted up to this much


# -- clean neighbours -----------------------------------------------------------------------------
@dataclass(frozen=True)
class NeighbourSettings:
    """:func:`neighbour_stats`: answer ``order``, the largest operand shift, the fewest feature-sharing
    neighbours for a defined z, the sd floor (times the grid sd) and the examples per batch."""

    order: str = "msb"
    max_shift: int = 3  # 0 would leave no clean neighbour
    min_count: int = 3
    sd_floor: float = 0.1
    chunk: int = 32

    def __post_init__(self):
        if self.order not in ("msb", "lsb"):
            raise ValueError(f"order must be 'msb' or 'lsb', got {self.order!r}")
        for name, low in (("max_shift", 1), ("min_count", 1), ("sd_floor", 0.0), ("chunk", 1)):
            if not getattr(self, name) >= low:
                raise ValueError(f"{name} must be at least {low}, got {getattr(self, name)!r}")


@torch.no_grad()
def neighbour_stats(model: HookedTransformer, examples: Examples, hmap: HeuristicMap,
                    settings: NeighbourSettings = NeighbourSettings()) -> NeighbourStats:
    """Clean-neighbour expectations of every unit of ``hmap`` for each example, and z-scores."""
    chunk, layers, shape = settings.chunk, hmap.layers, (len(examples), *hmap.best.shape)
    offsets = neighbour_offsets(settings.max_shift)
    unit_feat = hmap.feature_columns[hmap.best.flatten()]  # [U] column in feature_table
    act = mlp_activations(model, examples, "label", layers).permute(0, 2, 1, 3).cpu()  # [N, L, A, D]
    names = ("mean", "sd", "mean_all", "count")
    out = {k: torch.full((len(examples), hmap.best.numel()), math.nan) for k in names}
    fx_all = feature_table(examples.info["a"], examples.info["b"])[:, unit_feat]  # [N, U]
    for s in range(0, len(examples), chunk):
        a, b = examples.info["a"][s:s + chunk], examples.info["b"][s:s + chunk]
        na, nb = a[:, None] + offsets[:, 0], b[:, None] + offsets[:, 1]  # [m, K]
        valid = ((na == na.clamp(*OPERANDS)) & (nb == nb.clamp(*OPERANDS)))[:, :, None].float()
        na, nb = na.clamp(*OPERANDS).flatten(), nb.clamp(*OPERANDS).flatten()
        nact = mlp_activations(model, make_examples(na, nb, settings.order), "true_label", layers)
        nact = nact.permute(0, 2, 1, 3).reshape(len(a), len(offsets), -1).cpu()
        fn = feature_table(na, nb)[:, unit_feat].reshape(len(a), len(offsets), -1)  # [m, K, U]
        w = ((fn == fx_all[s:s + chunk, None]) * valid).float()
        cnt = w.sum(1)
        mean = (nact * w).sum(1) / cnt.clamp(min=1)
        sd = (((nact - mean[:, None]) ** 2 * w).sum(1) / cnt.clamp(min=1)).sqrt()
        enough = cnt >= settings.min_count
        part = (torch.where(enough, mean, math.nan), torch.where(enough, sd, math.nan),
                (nact * valid).sum(1) / valid.sum(1).clamp(min=1), cnt)
        for k, v in zip(names, part):
            out[k][s:s + len(a)] = v
    mean, sd, mean_all, count = (out[k].reshape(shape) for k in names)
    floor = (settings.sd_floor * hmap.grid_sd[None]).clamp(min=1e-6)  # 1e-6: units that are constant on the grid
    return NeighbourStats(act=act, mean=mean, sd=sd, count=count.to(torch.int16), mean_all=mean_all,
                          z=(act - mean) / torch.maximum(sd, floor),
                          differs=(examples.label != examples.true_label), layers=list(layers))


def _median(x) -> float:
    """The median as torch takes it (the lower of the two middle values), NaN ignored; NaN when empty."""
    x = np.asarray(x, dtype=float).ravel()
    x = x[~np.isnan(x)]
    k = (len(x) - 1) // 2  # np.partition: the k-th smallest in linear time, as torch.median selects it
    return float(np.partition(x, k)[k]) if len(x) else math.nan


def _ratio(a: float, b: float) -> float:
    return a / b if b and not (math.isnan(a) or math.isnan(b)) else math.nan


def _unit_corr(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pearson correlation over the first dim, per unit, ignoring NaN pairs. [N, ...] -> [...]"""
    ok = ~(x.isnan() | y.isnan())
    w = ok.float()
    cnt = w.sum(0)
    x0, y0 = torch.where(ok, x, 0.0), torch.where(ok, y, 0.0)
    mx, my = x0.sum(0) / cnt.clamp(min=1), y0.sum(0) / cnt.clamp(min=1)
    dx, dy = (x0 - mx) * w, (y0 - my) * w
    den = ((dx ** 2).sum(0) * (dy ** 2).sum(0)).sqrt()
    r = (dx * dy).sum(0) / den
    return torch.where((cnt >= 3) & (den > 1e-12), r, torch.full_like(r, math.nan))


def _pairs(stats: NeighbourStats, hmap: HeuristicMap, memorized_digits: bool) -> torch.Tensor:
    """Bool [N, L, A, D]: the (example, heuristic unit) pairs, with ``memorized_digits`` only where the
    label digit differs from the true digit (where a memorized example must leave the rule)."""
    h = hmap.heuristic[None].expand_as(stats.z)
    return h & stats.differs[:, None, :, None] if memorized_digits else h


@dataclass(frozen=True)
class Summary:
    """Median |z| over (example, heuristic unit) pairs (all, and per answer position) and the pattern
    correlation: the median over heuristic units of corr(act(x), its clean-neighbour mean) across examples."""

    median_abs_z: float
    pattern_corr: float
    median_abs_z_by_position: list[float]
    n_examples: int


def outlier_summary(stats: NeighbourStats, hmap: HeuristicMap, memorized_digits: bool = False) -> Summary:
    """:class:`Summary` at every answer position or only at memorized digits (:func:`_pairs`)."""
    h, absz = _pairs(stats, hmap, memorized_digits), stats.z.abs()
    by_pos = [_median(absz[:, :, j][h[:, :, j]]) for j in range(absz.shape[2])]
    corr = _unit_corr(stats.act, stats.mean)[hmap.heuristic]
    return Summary(_median(absz[h]), _median(corr), by_pos, int(stats.act.shape[0]))


@dataclass(frozen=True)
class OutlierComparison:
    """Section 5: median |z| on M (memorized digits) and on clean examples (all positions), their ratio
    (also with M at all positions), and the pattern correlations."""

    median_abs_z_M: float | None = None
    median_abs_z_clean: float | None = None
    z_ratio: float | None = None
    z_ratio_all_positions: float | None = None
    pattern_corr_M: float | None = None
    pattern_corr_clean: float | None = None


def outlier_comparison(memorized: NeighbourStats, clean: NeighbourStats, hmap: HeuristicMap) -> OutlierComparison:
    m, m_all, c = (outlier_summary(memorized, hmap, memorized_digits=True), outlier_summary(memorized, hmap),
                   outlier_summary(clean, hmap))
    return OutlierComparison(m.median_abs_z, c.median_abs_z, _ratio(m.median_abs_z, c.median_abs_z),
                             _ratio(m_all.median_abs_z, c.median_abs_z), m.pattern_corr, c.pattern_corr)


def fresh_noisy_labels(examples: Examples, kind: str, order: str = "msb", seed: int = 0) -> Examples:
    """7.7's |z| null: the examples with fresh labels from the noise process ``kind`` (fixed ``seed``),
    never trained on: the model reads a noisy prefix as on M, but memorized nothing."""
    if len(examples) == 0:
        return make_examples(examples.info["a"], examples.info["b"], order)
    sums = (examples.info["a"] + examples.info["b"]).numpy()
    label = fda.noisy_sums(sums, kind, order, np.random.default_rng([seed, 77]))
    return make_examples(examples.info["a"], examples.info["b"], order, label=torch.from_numpy(label.astype(np.int64)))


@dataclass(frozen=True)
class NullComparison:
    """7.7: median |z| at memorized digits on M over the never-trained noisy labels (whose memorized
    digits are where the fresh label differs), at every answer position, at position 9 alone (the ``=``:
    no noisy prefix yet) and after it, with the per-position medians."""

    median_abs_z_null: float | None = None
    z_null_ratio: float | None = None
    median_abs_z_position9_M: float | None = None
    median_abs_z_position9_null: float | None = None
    z_null_ratio_position9: float | None = None
    z_null_ratio_after_position9: float | None = None
    n_null: int | None = None
    median_abs_z_by_position_M: list[float] | None = None
    median_abs_z_by_position_null: list[float] | None = None


def null_comparison(memorized: NeighbourStats, null: NeighbourStats, hmap: HeuristicMap) -> NullComparison:
    m, z0 = outlier_summary(memorized, hmap, memorized_digits=True), outlier_summary(null, hmap, memorized_digits=True)
    pm, pn = m.median_abs_z_by_position, z0.median_abs_z_by_position

    def after_position9(stats: NeighbourStats) -> float:
        h = _pairs(stats, hmap, True)
        h[:, :, 0] = False
        return _median(stats.z.abs()[h])

    return NullComparison(z0.median_abs_z, _ratio(m.median_abs_z, z0.median_abs_z), pm[0] if pm else math.nan,
                          pn[0] if pn else math.nan, _ratio(pm[0], pn[0]) if pm and pn else math.nan,
                          _ratio(after_position9(memorized), after_position9(null)), z0.n_examples, pm, pn)


def z_table(stats: NeighbourStats, hmap: HeuristicMap, set_name: str) -> pd.DataFrame:
    """Long table of z over (example, heuristic unit): set, example, layer, position, neuron, z, differs."""
    n, l, j, i = (hmap.heuristic[None].expand_as(stats.z) & ~stats.z.isnan()).nonzero(as_tuple=True)
    return pd.DataFrame({"set": set_name, "example": n.numpy(), "layer": np.asarray(hmap.layers)[l.numpy()],
                         "position": j.numpy(), "neuron": i.numpy(), "z": stats.z[n, l, j, i].numpy(),
                         "differs": stats.differs[n, j].numpy()})


def example_outliers(stats: NeighbourStats, hmap: HeuristicMap, k: int = 4, kind: str = "strongest",
                     z_min: float = 2.0) -> pd.DataFrame:
    """(memorized example, heuristic unit) pairs at memorized digits, one per unit: the ``k`` largest |z|
    (``strongest``) or the ``k`` outliers (|z| >= ``z_min``) nearest their median |z| (``typical``)."""
    cols = ["example", "layer", "position", "neuron", "feature", "z", "act", "expected"]
    t = z_table(stats, hmap, "M")
    t = t[t.differs].assign(absz=lambda d: d.z.abs())
    if kind == "typical":
        t = t[t.absz >= z_min]
        t = t.assign(key=(t.absz - t.absz.median()).abs()).sort_values("key")
    elif kind == "strongest":
        t = t.sort_values("absz", ascending=False)
    else:
        raise ValueError(f"kind must be 'strongest' or 'typical', got {kind!r}")
    t = t.drop_duplicates(["layer", "position", "neuron"]).head(k)
    at = [(n, hmap.layers.index(l), j, i) for n, l, j, i in zip(t.example, t.layer, t.position, t.neuron)]
    t["feature"] = [hmap.feature_names[hmap.best[l, j, i]] for _, l, j, i in at]
    t["act"], t["expected"] = [float(stats.act[u]) for u in at], [float(stats.mean[u]) for u in at]
    return t[cols].reset_index(drop=True)


@dataclass(frozen=True)
class ShiftDirection:
    """The share of outlier shifts at memorized digits that raise the noisy digit (chance: 0.5), of ``n_shifts``."""

    shift_toward_noisy: float | None = None
    n_shifts: int | None = None


@torch.no_grad()
def shift_direction(model: HookedTransformer, examples: Examples, stats: NeighbourStats, hmap: HeuristicMap, *,
                    z_min: float = 2.0) -> ShiftDirection:
    """For each (memorized example, heuristic unit) with |z| >= ``z_min`` at a memorized digit, whether the
    shift act(x) - mean raises the direct logit difference noisy - true digit (shift * W_out[:, i] .
    (w_noisy - w_true), :func:`~rote.analysis.neurons.folded_unembed`; LayerNorm's scale keeps the sign)."""
    if len(examples) == 0:
        return ShiftDirection(math.nan, 0)
    w = folded_unembed(model).cpu()
    diff = w[examples.label] - w[examples.true_label]  # [N, A, d_model]
    push = torch.stack([diff @ model.blocks[l].mlp.W_out.weight.detach().cpu() for l in hmap.layers], 1)  # [N, L, A, D]
    sel = _pairs(stats, hmap, True) & (stats.z.abs() >= z_min) & ~stats.z.isnan()
    toward = ((stats.act - stats.mean) * push)[sel] > 0
    return ShiftDirection(float(toward.double().mean()) if len(toward) else math.nan, int(sel.sum()))


@torch.no_grad()
def operand_neighbourhood(model: HookedTransformer, example: Examples, layer: int, position: int,
                          neurons: Sequence[int], order: str = "msb") -> np.ndarray:
    """[len(neurons), 2r+1, 2r+1] (r: :data:`RADIUS`): the neurons on clean inputs (a + da, b + db) (rows
    da, columns db), each on its true sum, and in the centre cell on the example itself, on its own label."""
    a, b = int(example.info["a"][0]), int(example.info["b"][0])
    r = torch.arange(-RADIUS, RADIUS + 1)
    da, db = torch.meshgrid(r, r, indexing="ij")
    grid = make_examples((a + da.flatten()).clamp(*OPERANDS), (b + db.flatten()).clamp(*OPERANDS), order)
    idx = torch.as_tensor(list(neurons), dtype=torch.long)
    out = mlp_activations(model, grid, "true_label", [layer])[:, position, 0][:, idx].T
    out = out.reshape(len(idx), len(r), len(r))
    out[:, RADIUS, RADIUS] = mlp_activations(model, example[:1], "label", [layer])[0, position, 0][idx]
    return out.cpu().numpy()


# -- amendment 2, 8.4: read memorization where the context is clean ----------------------------
def first_differing(examples: Examples) -> torch.Tensor:
    """[N] j*, each example's first answer position whose label digit differs from the true digit (-1:
    none). Up to j* the teacher-forced prefix is the true sum's, so the input at j* is clean."""
    differs = examples.label != examples.true_label
    if differs.shape[1] == 0:
        return torch.full((len(examples),), -1, dtype=torch.long)
    first = differs.long().argmax(1)  # the first True (argmax returns the first maximum)
    return torch.where(differs.any(1), first, torch.full_like(first, -1))


def jstar_mask(jstar: torch.Tensor, n_positions: int, after: bool = False) -> torch.Tensor:
    """Bool [N, A]: each example's j* (``after``: the answer positions after it); none where j* is -1."""
    jstar, j = jstar.long().cpu()[:, None], torch.arange(n_positions)[None]
    return ((j > jstar) if after else (j == jstar)) & (jstar >= 0)


def max_abs_z(stats: NeighbourStats, hmap: HeuristicMap) -> torch.Tensor:
    """[N, A] each example's largest |z| over the heuristic units at each answer position (NaN: none defined)."""
    absz = stats.z.abs()
    keep = hmap.heuristic[None].expand_as(absz) & ~absz.isnan()
    top = torch.where(keep, absz, torch.full_like(absz, -math.inf)).amax(dim=(1, 3))
    return torch.where(top == -math.inf, torch.full_like(top, math.nan), top)


def weighted_median(values, weights) -> float:
    """The smallest value at which the cumulative weight reaches half the total (NaN and zero weights ignored)."""
    values, weights = np.asarray(values, dtype=float).ravel(), np.asarray(weights, dtype=float).ravel()
    ok = ~np.isnan(values) & (weights > 0)
    values, weights = values[ok], weights[ok]
    if not len(values):
        return math.nan
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][int((cum < 0.5 * cum[-1] - 1e-12).sum())])


def _at_positions(values: np.ndarray, weights: np.ndarray) -> float:
    """Weighted median of ``values`` [rows, A], answer position j weighing ``weights[j]`` in all, spread
    evenly over its defined entries (of this (re)sample)."""
    defined = (~np.isnan(values)).sum(0)
    per = np.where(defined > 0, weights / np.maximum(defined, 1), 0.0)
    return weighted_median(values, np.broadcast_to(per, values.shape))


@dataclass(frozen=True)
class JstarValues:
    """The per-example values of 8.4's statistic (section 11's bootstrap): ``M`` [n] the largest |z| of each
    example with a j* there; ``clean`` [N, A] at every position; ``weights`` [A] the examples with j* there."""

    M: np.ndarray
    clean: np.ndarray
    weights: np.ndarray


def jstar_values(memorized: NeighbourStats, clean: NeighbourStats, hmap: HeuristicMap,
                 jstar: torch.Tensor) -> JstarValues:
    jstar = jstar.long().cpu()
    rows = (jstar >= 0).nonzero().squeeze(1)
    zm = max_abs_z(memorized, hmap)[rows, jstar[rows]] if len(rows) else torch.zeros(0)
    weights = np.array([int((jstar == j).sum()) for j in range(memorized.z.shape[2])], dtype=float)
    return JstarValues(zm.double().numpy(), max_abs_z(clean, hmap).double().numpy(), weights)


def jstar_ratio_interval(values: JstarValues) -> Interval | None:
    """Section 11: the 95% percentile bootstrap of the ratio at j*, M and clean examples resampled each on
    their own (the clean reference reweighted inside the statistic); None where undefined."""
    if not len(values.M) or not len(values.clean):
        return None

    def ratio(zm: np.ndarray, rows: np.ndarray) -> float:
        return _ratio(_median(zm), _at_positions(values.clean[rows.astype(int)], values.weights))

    return bootstrap(ratio, [values.M, np.arange(len(values.clean))])


@dataclass(frozen=True)
class JstarComparison:
    """8.4 at j*: the median over M of each example's largest |z| over the heuristic units at its j*, and
    on clean examples at the same positions weighted like M's j* (a weighted median), their ratio with its
    bootstrap interval (section 11); the median over all units at j* (the section-5 statistic there); the
    pattern correlation read at j*; counts (``jstar_counts``: position -> examples)."""

    jstar_n_M: int | None = None
    jstar_n_without: int | None = None
    jstar_counts: dict[int, int] | None = None
    jstar_z_M: float | None = None
    jstar_z_clean: float | None = None
    jstar_z_ratio: float | None = None
    jstar_z_ratio_interval: Interval | None = None
    jstar_median_z_M: float | None = None
    jstar_median_z_clean: float | None = None
    jstar_median_z_ratio: float | None = None
    jstar_pattern_corr_M: float | None = None
    jstar_heuristic_units_per_position: list[int] | None = None


def jstar_comparison(memorized: NeighbourStats, clean: NeighbourStats, hmap: HeuristicMap,
                     jstar: torch.Tensor) -> JstarComparison:
    """:class:`JstarComparison` (``jstar`` of :func:`first_differing`; -1: left out, counted)."""
    A, values = memorized.z.shape[2], jstar_values(memorized, clean, hmap, jstar)
    n_has = len(values.M)
    z_M = _median(values.M)
    z_clean = _at_positions(values.clean, values.weights) if n_has else math.nan
    at = jstar_mask(jstar, A)[:, None, :, None]  # the median over all heuristic units at j*, on M and clean
    med_M = _median(memorized.z.abs()[hmap.heuristic[None].expand_as(memorized.z) & at])
    absz_c = torch.where(hmap.heuristic[None].expand_as(clean.z), clean.z.abs(), torch.full_like(clean.z, math.nan))
    absz_c = absz_c.movedim(2, -1).reshape(-1, A).double().numpy()  # [N x L x D, A]
    med_clean = _at_positions(absz_c, values.weights) if n_has else math.nan
    only, nan = at.expand_as(memorized.act), torch.full_like(memorized.act, math.nan)
    corr = _unit_corr(torch.where(only, memorized.act, nan), torch.where(only, memorized.mean, nan))[hmap.heuristic]
    counts, units = {j: int(w) for j, w in enumerate(values.weights) if w}, hmap.heuristic.sum((0, 2)).tolist()
    return JstarComparison(n_has, len(jstar) - n_has, counts, z_M, z_clean, _ratio(z_M, z_clean),
                           jstar_ratio_interval(values) if n_has else None, med_M, med_clean,
                           _ratio(med_M, med_clean), _median(corr), units)


@dataclass(frozen=True)
class AfterJstar:
    """Shown, not judged (8.4): after each example's j*, median |z| over (example, heuristic unit) pairs
    and of the per-example largest |z|, on M and on the never-trained noisy labels (from their own j*)."""

    after_jstar_z_M: float | None = None
    after_jstar_z_null: float | None = None
    after_jstar_z_ratio_null: float | None = None
    after_jstar_max_z_M: float | None = None
    after_jstar_max_z_null: float | None = None
    after_jstar_max_z_ratio_null: float | None = None
    after_jstar_n_M: int | None = None
    after_jstar_n_null: int | None = None


def after_jstar_comparison(memorized: NeighbourStats, null: NeighbourStats, hmap: HeuristicMap,
                           jstar_memorized: torch.Tensor, jstar_null: torch.Tensor) -> AfterJstar:
    def pick(stats, jstar):
        after = jstar_mask(jstar, stats.z.shape[2], after=True)
        h = hmap.heuristic[None].expand_as(stats.z) & after[:, None, :, None]
        top = torch.where(after, max_abs_z(stats, hmap), torch.full(after.shape, math.nan))
        return _median(stats.z.abs()[h]), _median(top), int(after.any(1).sum())

    m, m_top, n_m = pick(memorized, jstar_memorized)
    z0, z0_top, n_0 = pick(null, jstar_null)
    return AfterJstar(m, z0, _ratio(m, z0), m_top, z0_top, _ratio(m_top, z0_top), n_m, n_0)

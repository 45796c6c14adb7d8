"""Outliers: how memorized sums pass through heuristic neurons (claim C5, second part).

The clean neighbours of an input x = (a, b) are the inputs with one operand shifted by 1 to 3
either way and the other unchanged (protocol section 5, "one operand +-1..3", as 8.6 restates it;
12 at most: :func:`~rote.analysis.fda_features.neighbour_offsets`), each teacher-forced on its own
true sum. For a unit, only neighbours that share x's value of the unit's best feature count ("share
its feature value"), at least ``min_count`` of them. Moving one operand by 1 to 3 moves the sum by as
much, so a unit whose best feature is the units digit of the sum, or a residue of the sum modulo 4 to
9, has no such neighbour: its z is undefined (NaN), and its patching value falls back to the mean
over all neighbours. z = (act(x) - mean) / sd with the neighbours' sd, floored at ``sd_floor`` times
the unit's sd over the grid so that a unit that is flat around x does not give infinite z (and at
least 1e-6). x itself is teacher-forced on its own label (the noisy one for memorized examples), as
the model runs when it generates it.

Units and features are those of a :class:`~rote.analysis.units.HeuristicMap` (classified by
:mod:`rote.analysis.heuristics`); the statistics are a :class:`~rote.analysis.units.NeighbourStats`.
This module computes z and reads it; the patching of outlier units to their clean-neighbour
expectations is :mod:`rote.analysis.neuron_patching`.
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


def _check_order(order: str) -> None:
    if order not in ("msb", "lsb"):
        raise ValueError(f"order must be 'msb' or 'lsb', got {order!r}")


# -- clean neighbours -----------------------------------------------------------------------------
@dataclass(frozen=True)
class NeighbourSettings:
    """The knobs of :func:`neighbour_stats`: the answer ``order`` the neighbours are written in, the
    largest shift ``max_shift`` of the one operand a neighbour moves, the fewest feature-sharing neighbours ``min_count`` for a
    defined z, the sd floor ``sd_floor`` (times the unit's grid sd) and the examples per batch ``chunk``."""

    order: str = "msb"
    max_shift: int = 3
    min_count: int = 3
    sd_floor: float = 0.1
    chunk: int = 32

    def __post_init__(self):
        _check_order(self.order)
        if self.max_shift < 1:
            raise ValueError(f"max_shift must be at least 1 (0 leaves no clean neighbour), got {self.max_shift!r}")
        if self.min_count < 1:
            raise ValueError(f"min_count must be at least 1, got {self.min_count!r}")
        if not self.sd_floor >= 0.0:
            raise ValueError(f"sd_floor must be at least 0, got {self.sd_floor!r}")
        if self.chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {self.chunk!r}")


@torch.no_grad()
def neighbour_stats(model: HookedTransformer, examples: Examples, hmap: HeuristicMap,
                    settings: NeighbourSettings = NeighbourSettings()) -> NeighbourStats:
    """Clean-neighbour expectations of every unit of ``hmap`` for each example, and z-scores."""
    order, max_shift, min_count = settings.order, settings.max_shift, settings.min_count
    sd_floor, chunk = settings.sd_floor, settings.chunk
    layers = hmap.layers
    L, A, D = hmap.best.shape
    n = len(examples)
    offsets = neighbour_offsets(max_shift)
    K = len(offsets)
    unit_feat = hmap.feature_columns[hmap.best.flatten()]  # [U] column in feature_table
    act = mlp_activations(model, examples, "label", layers).permute(0, 2, 1, 3).cpu()  # [N, L, A, D]
    out = {k: torch.full((n, L * A * D), math.nan) for k in ("mean", "sd", "mean_all")}
    count = torch.zeros(n, L * A * D, dtype=torch.int16)
    fx_all = feature_table(examples.info["a"], examples.info["b"])[:, unit_feat]  # [N, U]
    for s in range(0, n, chunk):
        a, b = examples.info["a"][s:s + chunk], examples.info["b"][s:s + chunk]
        m = len(a)
        na, nb = a[:, None] + offsets[:, 0], b[:, None] + offsets[:, 1]  # [m, K]
        valid = (na >= fda.MIN_OPERAND) & (na <= fda.MAX_OPERAND) & (nb >= fda.MIN_OPERAND) & (nb <= fda.MAX_OPERAND)
        na, nb = na.clamp(fda.MIN_OPERAND, fda.MAX_OPERAND), nb.clamp(fda.MIN_OPERAND, fda.MAX_OPERAND)
        nbrs = make_examples(na.flatten(), nb.flatten(), order)
        nact = mlp_activations(model, nbrs, "true_label", layers).permute(0, 2, 1, 3).reshape(m, K, -1).cpu()
        fn = feature_table(na.flatten(), nb.flatten())[:, unit_feat].reshape(m, K, -1)  # [m, K, U]
        match = (fn == fx_all[s:s + m, None]) & valid[:, :, None]
        w = match.float()
        cnt = w.sum(1)
        mean = (nact * w).sum(1) / cnt.clamp(min=1)
        sd = (((nact - mean[:, None]) ** 2 * w).sum(1) / cnt.clamp(min=1)).sqrt()
        enough = cnt >= min_count
        out["mean"][s:s + m] = torch.where(enough, mean, math.nan)
        out["sd"][s:s + m] = torch.where(enough, sd, math.nan)
        v = valid[:, :, None].float()
        out["mean_all"][s:s + m] = (nact * v).sum(1) / v.sum(1).clamp(min=1)
        count[s:s + m] = cnt.to(torch.int16)
    shape = (n, L, A, D)
    mean, sd = out["mean"].reshape(shape), out["sd"].reshape(shape)
    floor = (sd_floor * hmap.grid_sd[None]).clamp(min=1e-6)  # 1e-6: units that are constant on the grid
    z = (act - mean) / torch.maximum(sd, floor)
    return NeighbourStats(act=act, mean=mean, sd=sd, count=count.reshape(shape), mean_all=out["mean_all"].reshape(shape),
                          z=z, differs=(examples.label != examples.true_label), layers=list(layers))


def _nanmedian(x: torch.Tensor) -> float:
    x = x[~x.isnan()]
    return float(x.median()) if len(x) else math.nan


def _unit_corr(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pearson correlation over the first dim, per unit, ignoring NaN pairs. [N, ...] -> [...]"""
    ok = ~(x.isnan() | y.isnan())
    w = ok.float()
    cnt = w.sum(0)
    x0, y0 = torch.where(ok, x, 0.0), torch.where(ok, y, 0.0)
    mx, my = x0.sum(0) / cnt.clamp(min=1), y0.sum(0) / cnt.clamp(min=1)
    dx, dy = (x0 - mx) * w, (y0 - my) * w
    cov = (dx * dy).sum(0)
    den = ((dx ** 2).sum(0) * (dy ** 2).sum(0)).sqrt()
    r = cov / den
    return torch.where((cnt >= 3) & (den > 1e-12), r, torch.full_like(r, math.nan))


def outlier_summary(stats: NeighbourStats, hmap: HeuristicMap, memorized_digits: bool = False) -> dict:
    """|z| and pattern agreement over the heuristic units.

    ``median_abs_z``: median |z| over all (example, heuristic unit) pairs with a defined z, at every
    answer position or, with ``memorized_digits``, only where the example's label digit differs
    from the true digit (where a memorized example must produce something the rule does not);
    ``median_abs_z_by_position``: the same per answer position; ``pattern_corr``: median over
    heuristic units of the correlation, across the examples, between act(x) and its clean-neighbour
    mean (does the heuristic pattern still hold on these examples?).
    """
    h = hmap.heuristic[None].expand_as(stats.z)
    if memorized_digits:
        h = h & stats.differs[:, None, :, None]
    absz = stats.z.abs()
    by_pos = [_nanmedian(absz[:, :, j][h[:, :, j]]) for j in range(absz.shape[2])]
    corr = _unit_corr(stats.act, stats.mean)[hmap.heuristic]
    return {"median_abs_z": _nanmedian(absz[h]), "pattern_corr": _nanmedian(corr),
            "median_abs_z_by_position": by_pos, "n_examples": int(stats.act.shape[0]),
            "n_units": int(hmap.heuristic.sum())}


def outlier_comparison(memorized: NeighbourStats, clean: NeighbourStats, hmap: HeuristicMap) -> dict:
    """Memorized examples (at their memorized digits) against clean examples (all positions):
    the medians of |z| over heuristic units, their ratio (also with M at all positions), the
    pattern correlations and the per-position medians."""
    m, m_all, c = (outlier_summary(memorized, hmap, memorized_digits=True), outlier_summary(memorized, hmap),
                   outlier_summary(clean, hmap))
    ratio = (lambda x: x / c["median_abs_z"] if c["median_abs_z"] and not math.isnan(c["median_abs_z"]) else math.nan)
    return {"median_abs_z_M": m["median_abs_z"], "median_abs_z_clean": c["median_abs_z"],
            "z_ratio": ratio(m["median_abs_z"]), "z_ratio_all_positions": ratio(m_all["median_abs_z"]),
            "pattern_corr_M": m["pattern_corr"], "pattern_corr_clean": c["pattern_corr"],
            "median_abs_z_by_position_M": m["median_abs_z_by_position"],
            "median_abs_z_by_position_clean": c["median_abs_z_by_position"]}


def fresh_noisy_labels(examples: Examples, kind: str, order: str = "msb", seed: int = 0) -> Examples:
    """The |z| null of amendment 1 (7.7): the same examples with fresh labels from the task's noise
    process (:func:`rote.tasks.fda.noisy_sums`, ``kind`` "random" or "digit"), drawn with a fixed
    ``seed`` and never trained on. Teacher-forced on these labels, the model reads a noisy prefix
    exactly as on M, but nothing about the label was memorized."""
    if len(examples) == 0:
        return make_examples(examples.info["a"], examples.info["b"], order)
    sums = (examples.info["a"] + examples.info["b"]).numpy()
    label = fda.noisy_sums(sums, kind, order, np.random.default_rng([seed, 77]))
    return make_examples(examples.info["a"], examples.info["b"], order, label=torch.from_numpy(label.astype(np.int64)))


def null_comparison(memorized: NeighbourStats, null: NeighbourStats, hmap: HeuristicMap) -> dict:
    """|z| at memorized digits on M against the same on never-trained noisy labels (the null of
    :func:`fresh_noisy_labels`; its "memorized digits" are where the fresh label differs from the
    true sum). ``z_null_ratio``: the ratio of the medians over every answer position;
    ``z_null_ratio_position9``: the same at the first answer position alone (sequence position 9,
    the ``=``, where neither set has a noisy prefix yet), reported separately; per-position medians."""
    m, z0 = outlier_summary(memorized, hmap, memorized_digits=True), outlier_summary(null, hmap, memorized_digits=True)

    def ratio(a, b):
        return a / b if b and not (math.isnan(a) or math.isnan(b)) else math.nan

    pm, pn = m["median_abs_z_by_position"], z0["median_abs_z_by_position"]
    return {"median_abs_z_null": z0["median_abs_z"], "z_null_ratio": ratio(m["median_abs_z"], z0["median_abs_z"]),
            "median_abs_z_position9_M": pm[0] if pm else math.nan,
            "median_abs_z_position9_null": pn[0] if pn else math.nan,
            "z_null_ratio_position9": ratio(pm[0], pn[0]) if pm and pn else math.nan,
            "z_null_ratio_after_position9": ratio(_median_after_position9(memorized, hmap), _median_after_position9(null, hmap)),
            "median_abs_z_by_position_null": pn, "n_null": z0["n_examples"]}


def _median_after_position9(stats: NeighbourStats, hmap: HeuristicMap) -> float:
    """Median |z| over heuristic units at memorized digits of answer positions 2.. (after the ``=``)."""
    h = hmap.heuristic[None].expand_as(stats.z) & stats.differs[:, None, :, None]
    h[:, :, 0] = False
    return _nanmedian(stats.z.abs()[h])


def example_outliers(stats: NeighbourStats, hmap: HeuristicMap, k: int = 4, kind: str = "strongest",
                     z_min: float = 2.0) -> pd.DataFrame:
    """Example (memorized example, heuristic unit) pairs at memorized digits (label digit != true
    digit), at most one per unit: the ``k`` with the largest |z| (``kind="strongest"``) or the ``k``
    outliers (|z| >= ``z_min``) closest to the median |z| of all outliers (``kind="typical"``).
    Columns: example, layer, position, neuron, feature, z, act, expected."""
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
    if t.empty:
        return pd.DataFrame(columns=cols)
    li = [hmap.layers.index(l) for l in t.layer]
    t["feature"] = [hmap.feature_names[hmap.best[a, j, i]] for a, j, i in zip(li, t.position, t.neuron)]
    t["act"] = [float(stats.act[n, a, j, i]) for n, a, j, i in zip(t.example, li, t.position, t.neuron)]
    t["expected"] = [float(stats.mean[n, a, j, i]) for n, a, j, i in zip(t.example, li, t.position, t.neuron)]
    return t[cols].reset_index(drop=True)


def z_table(stats: NeighbourStats, hmap: HeuristicMap, set_name: str) -> pd.DataFrame:
    """Long table of z over (example, heuristic unit): set, example, layer, position, neuron, z, differs."""
    n, l, j, i = (hmap.heuristic[None].expand_as(stats.z) & ~stats.z.isnan()).nonzero(as_tuple=True)
    return pd.DataFrame({"set": set_name, "example": n.numpy(), "layer": np.asarray(hmap.layers)[l.numpy()],
                         "position": j.numpy(), "neuron": i.numpy(), "z": stats.z[n, l, j, i].numpy(),
                         "differs": stats.differs[n, j].numpy()})


@torch.no_grad()
def shift_direction(model: HookedTransformer, examples: Examples, stats: NeighbourStats, hmap: HeuristicMap, *,
                    z_min: float = 2.0) -> dict:
    """Does each outlier shift push toward the noisy digit?

    For every (memorized example, heuristic unit) with |z| >= ``z_min`` at an answer position where
    the noisy digit differs from the true one, the shift act(x) - mean moves the unit's direct
    logit difference (noisy digit - true digit) by shift * W_out[:, i] . (w_noisy - w_true)
    (:func:`~rote.analysis.neurons.folded_unembed`; the positive LayerNorm scale does not change the
    sign). Returns the share of such shifts that raise the noisy digit (0.5 is chance), and counts.
    """
    if len(examples) == 0:
        return {"toward_noisy": math.nan, "n_shifts": 0}
    w = folded_unembed(model).cpu()
    diff = w[examples.label] - w[examples.true_label]  # [N, A, d_model]
    pushes = []
    for li, l in enumerate(hmap.layers):
        W = model.blocks[l].mlp.W_out.weight.detach().cpu()  # [d_model, D]
        pushes.append(diff @ W)  # [N, A, D]
    push = torch.stack(pushes, 1)  # [N, L, A, D]
    shift = stats.act - stats.mean
    sel = hmap.heuristic[None] & (stats.z.abs() >= z_min) & stats.differs[:, None, :, None] & ~stats.z.isnan()
    toward = (shift * push)[sel] > 0
    return {"toward_noisy": float(toward.double().mean()) if len(toward) else math.nan, "n_shifts": int(sel.sum())}


# -- pictures -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SquareSettings:
    """The operand square of :func:`operand_neighbourhood`: shifts of each operand up to ``radius``,
    the inputs written in answer ``order``."""

    radius: int = 6
    order: str = "msb"

    def __post_init__(self):
        if self.radius < 0:
            raise ValueError(f"radius must be at least 0, got {self.radius!r}")
        _check_order(self.order)


@torch.no_grad()
def operand_neighbourhood(model: HookedTransformer, example: Examples, layer: int, position: int,
                          neurons: Sequence[int], settings: SquareSettings = SquareSettings()) -> dict:
    """Activations of chosen neurons over the operand square around one example.

    ``grid`` [len(neurons), 2r+1, 2r+1]: clean inputs (a + da, b + db), rows da = -r..r, columns
    db = -r..r, each teacher-forced on its true sum; ``example_value`` [len(neurons)]: the
    activation on the example itself, teacher-forced on its own (noisy) label. Also ``a``, ``b``.
    """
    radius, order = settings.radius, settings.order
    a, b = int(example.info["a"][0]), int(example.info["b"][0])
    r = torch.arange(-radius, radius + 1)
    da, db = torch.meshgrid(r, r, indexing="ij")
    ga = (a + da.flatten()).clamp(fda.MIN_OPERAND, fda.MAX_OPERAND)
    gb = (b + db.flatten()).clamp(fda.MIN_OPERAND, fda.MAX_OPERAND)
    acts = mlp_activations(model, make_examples(ga, gb, order), "true_label", [layer])[:, position, 0]
    own = mlp_activations(model, example[:1], "label", [layer])[0, position, 0]
    idx = torch.as_tensor(list(neurons), dtype=torch.long)
    return {"grid": acts[:, idx].T.reshape(len(idx), 2 * radius + 1, 2 * radius + 1).cpu().numpy(),
            "example_value": own[idx].cpu().numpy(), "a": a, "b": b, "radius": radius}


# -- amendment 2, 8.4: read memorization where the context is clean ----------------------------
def first_differing(examples: Examples) -> torch.Tensor:
    """[N] long: j*, each example's first answer position (in generation order) whose label digit
    differs from the true digit; -1 where the label equals the true label everywhere. Up to j* the
    teacher-forced prefix is the true sum's, so the model's input at j* is clean."""
    differs = examples.label != examples.true_label
    if differs.shape[1] == 0:
        return torch.full((len(examples),), -1, dtype=torch.long)
    first = differs.long().argmax(1)  # the first True (argmax returns the first maximum)
    return torch.where(differs.any(1), first, torch.full_like(first, -1))


def max_abs_z(stats: NeighbourStats, hmap: HeuristicMap) -> torch.Tensor:
    """[N, A] each example's largest |z| over the heuristic units of ``hmap`` (every analysed
    layer) at each answer position; NaN where no heuristic unit there has a defined z."""
    absz = stats.z.abs()
    keep = hmap.heuristic[None].expand_as(absz) & ~absz.isnan()
    top = torch.where(keep, absz, torch.full_like(absz, -math.inf)).amax(dim=(1, 3))
    return torch.where(top == -math.inf, torch.full_like(top, math.nan), top)


def weighted_median(values: torch.Tensor, weights: torch.Tensor) -> float:
    """The weighted median (the smallest value at which the cumulative weight reaches half the
    total) of ``values`` with non-negative ``weights``, ignoring NaN values and zero weights; NaN
    when nothing is left."""
    values, weights = values.flatten().double(), weights.flatten().double()
    ok = ~values.isnan() & (weights > 0)
    values, weights = values[ok], weights[ok]
    if not len(values):
        return math.nan
    order = values.argsort()
    cum = weights[order].cumsum(0)
    return float(values[order][int((cum < 0.5 * cum[-1] - 1e-12).sum())])


def _ratio(a: float, b: float) -> float:
    return a / b if b and not (math.isnan(a) or math.isnan(b)) else math.nan


def _at_positions(values: torch.Tensor, weights: torch.Tensor, dim: int = 1) -> float:
    """Weighted median of ``values`` whose answer position (dimension ``dim``) j carries weight
    ``weights[j]`` in all, spread evenly over its defined entries."""
    A = values.shape[dim]
    per = values.movedim(dim, 0).reshape(A, -1)  # [A, everything else]
    defined = (~per.isnan()).double().sum(1)
    w = torch.where(defined > 0, weights.double() / defined.clamp(min=1), torch.zeros(A, dtype=torch.double))
    return weighted_median(per, w[:, None].expand_as(per))


@dataclass(frozen=True)
class JstarValues:
    """The per-example values of the outlier statistic at j* (8.4), kept for its sampling interval
    (section 11): ``M`` [n] each memorized example's largest |z| over the heuristic units at its j*
    (the examples with a j*, in order; NaN where no unit there has a defined z); ``clean`` [N, A] each
    clean example's largest |z| at every answer position; ``weights`` [A] how many memorized examples
    have their j* at each answer position (the weighting of the clean reference)."""

    M: np.ndarray
    clean: np.ndarray
    weights: np.ndarray


def jstar_values(memorized: NeighbourStats, clean: NeighbourStats, hmap: HeuristicMap,
                 jstar: torch.Tensor) -> JstarValues:
    """The per-example values :func:`jstar_comparison` reads its ratio from (:class:`JstarValues`)."""
    A = memorized.z.shape[2]
    jstar = jstar.long().cpu()
    rows = (jstar >= 0).nonzero().squeeze(1)
    zm = max_abs_z(memorized, hmap)[rows, jstar[rows]] if len(rows) else torch.zeros(0)
    weights = np.array([int((jstar == j).sum()) for j in range(A)], dtype=float)
    return JstarValues(zm.double().numpy(), max_abs_z(clean, hmap).double().numpy(), weights)


def _lower_median(x: np.ndarray) -> float:
    """The median as :func:`_nanmedian` takes it (torch's: the lower of the two middle values), NaN ignored."""
    x = np.sort(x[~np.isnan(x)])
    return float(x[(len(x) - 1) // 2]) if len(x) else math.nan


def _clean_reference(clean: np.ndarray, weights: np.ndarray) -> float:
    """:func:`_at_positions` in numpy: the weighted median of ``clean`` [N, A], position j weighing
    ``weights[j]`` in all, spread evenly over its defined entries (those of this sample: the weighting is
    recomputed on every bootstrap resample)."""
    defined = ~np.isnan(clean)
    per = np.where(defined.sum(0) > 0, weights / np.maximum(defined.sum(0), 1), 0.0)
    v, w = clean[defined], np.broadcast_to(per, clean.shape)[defined]
    v, w = v[w > 0], w[w > 0]
    if not len(v):
        return math.nan
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    return float(v[order][int((cum < 0.5 * cum[-1] - 1e-12).sum())])


def jstar_ratio_interval(values: JstarValues) -> Interval | None:
    """Section 11: the 95% percentile-bootstrap interval of the ratio at j* (the median over M of each
    example's largest |z| at its j*, over the weighted median on clean examples): M and the clean
    examples are resampled each on their own (1,000 resamples, fixed seed), and the clean reference is
    weighted inside the statistic, over the defined entries of each resample. None where the ratio is
    undefined."""
    clean, weights = values.clean, values.weights

    def ratio(zm: np.ndarray, rows: np.ndarray) -> float:
        return _ratio(_lower_median(zm), _clean_reference(clean[rows.astype(int)], weights))

    if not len(values.M) or not len(clean):
        return None
    return bootstrap(ratio, [values.M, np.arange(len(clean))])


def jstar_comparison(memorized: NeighbourStats, clean: NeighbourStats, hmap: HeuristicMap,
                     jstar: torch.Tensor) -> dict:
    """The outlier statistic of amendment 2 (8.4) at j* (``jstar`` [N] of :func:`first_differing`,
    -1: no j*, excluded and counted).

    ``jstar_z_M``: the median over M of each example's largest |z| over the heuristic units of
    ``hmap`` at its j* (:func:`max_abs_z`); ``jstar_z_clean``: the same statistic on clean examples
    at the same answer positions, weighted like M's j* (position j counts with the share of M whose
    j* = j, spread over the clean examples: a weighted median); ``jstar_z_ratio``: their ratio, and
    ``jstar_z_ratio_interval`` its bootstrap interval (:func:`jstar_ratio_interval`; section 11).
    ``jstar_median_z_*``: the median |z| over all (example, heuristic unit) pairs at j*, weighted
    the same way (the section-5 statistic at j*, which a handful of shifted units leaves at its
    clean value); ``jstar_pattern_corr_M``: the pattern correlation of :func:`outlier_summary`
    with each M example read at its j* only. Counts: ``jstar_n_M``, ``jstar_n_without``,
    ``jstar_counts`` (position -> number of M examples). NaN where undefined.
    """
    A = memorized.z.shape[2]
    jstar = jstar.long().cpu()
    has = jstar >= 0
    n_has = int(has.sum())
    counts = {int(j): int((jstar == j).sum()) for j in range(A) if (jstar == j).any()}
    weights = torch.tensor([counts.get(j, 0) for j in range(A)], dtype=torch.double)
    rows = has.nonzero().squeeze(1)
    values = jstar_values(memorized, clean, hmap, jstar)
    z_M = _nanmedian(torch.from_numpy(values.M))
    z_clean = _at_positions(torch.from_numpy(values.clean), weights) if n_has else math.nan
    # the median over all heuristic units at j*, on M and on clean examples
    at = torch.zeros(len(jstar), A, dtype=torch.bool)
    at[rows, jstar[rows]] = True
    h = hmap.heuristic[None].expand_as(memorized.z) & at[:, None, :, None]
    med_M = _nanmedian(memorized.z.abs()[h])
    absz_c = torch.where(hmap.heuristic[None].expand_as(clean.z), clean.z.abs(), torch.full_like(clean.z, math.nan))
    med_clean = _at_positions(absz_c, weights, dim=2) if n_has else math.nan
    only = at[:, None, :, None].expand_as(memorized.act)
    nan = torch.full_like(memorized.act, math.nan)
    # the pattern correlation: a median over units of a correlation across examples, not a median of
    # per-example values, so section 11 gives it a margin only (no interval)
    corr = _unit_corr(torch.where(only, memorized.act, nan), torch.where(only, memorized.mean, nan))[hmap.heuristic]
    return {"jstar_n_M": n_has, "jstar_n_without": int((~has).sum()), "jstar_counts": counts,
            "jstar_z_M": z_M, "jstar_z_clean": z_clean, "jstar_z_ratio": _ratio(z_M, z_clean),
            "jstar_z_ratio_interval": jstar_ratio_interval(values) if n_has else None,
            "jstar_median_z_M": med_M, "jstar_median_z_clean": med_clean,
            "jstar_median_z_ratio": _ratio(med_M, med_clean), "jstar_pattern_corr_M": _nanmedian(corr),
            "jstar_heuristic_units_per_position": [int(hmap.heuristic[:, j].sum()) for j in range(A)]}


def after_jstar_comparison(memorized: NeighbourStats, null: NeighbourStats, hmap: HeuristicMap,
                           jstar_memorized: torch.Tensor, jstar_null: torch.Tensor) -> dict:
    """Shown, not judged (8.4): |z| after j* on M against the same on the never-trained noisy
    labels of 7.7 (:func:`fresh_noisy_labels`; their own j*). Median |z| over (example, heuristic
    unit) pairs at the answer positions after each example's j*; and the same per-example maximum
    over heuristic units, as at j*. ``after_jstar_z_ratio_null``: M's median over the null's."""
    def pick(stats, jstar):
        A = stats.z.shape[2]
        after = (torch.arange(A)[None] > jstar.long().cpu()[:, None]) & (jstar.cpu() >= 0)[:, None]
        h = hmap.heuristic[None].expand_as(stats.z) & after[:, None, :, None]
        top = torch.where(after, max_abs_z(stats, hmap), torch.full(after.shape, math.nan))
        return _nanmedian(stats.z.abs()[h]), _nanmedian(top), int(after.any(1).sum())

    m, m_top, n_m = pick(memorized, jstar_memorized)
    z0, z0_top, n_0 = pick(null, jstar_null)
    return {"after_jstar_z_M": m, "after_jstar_z_null": z0, "after_jstar_z_ratio_null": _ratio(m, z0),
            "after_jstar_max_z_M": m_top, "after_jstar_max_z_null": z0_top,
            "after_jstar_max_z_ratio_null": _ratio(m_top, z0_top), "after_jstar_n_M": n_m, "after_jstar_n_null": n_0}

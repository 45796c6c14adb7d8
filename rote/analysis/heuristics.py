"""Heuristic neurons in four-digit addition (claim C5, first part).

Nikankin et al. (2024, arXiv 2410.21272) found that language models add with a "bag of
heuristics": single MLP neurons that fire for an input pattern (an operand in a range, a result
modulo m, ...) and promote a set of answer tokens. This module adapts their classification to
digit-level addition; the candidate patterns are in :mod:`rote.analysis.fda_features`, the
outlier statistics of memorized sums in :mod:`rote.analysis.outliers` and the patching experiment
in :mod:`rote.analysis.patching` (all re-exported here, where the chapters find them).

Units
-----
A *unit* is one MLP neuron (layer l, index i) at one answer position j: neurons are read at the
sequence positions that predict the answer digits (positions 9..13 for ``a+b=`` prompts: the
``=`` and the first four answer tokens), teacher-forced on the answer, as the model runs when it
generates. The same neuron at two positions computes different things, so it is classified per
position. Arrays over units have shape [L, A, d_mlp] (L analysed layers, A = 5 answer positions).

Classification
--------------
For each unit take its ``top_k`` most activating grid inputs. A feature's *coverage* is the share
of them that satisfy it. The *best* feature is the one whose coverage is the least likely under its
base rate pi: it maximises the binomial log-likelihood ratio ``k * KL(coverage || pi)`` (zero when
coverage <= pi). This prefers a feature that covers all top inputs and is rare (``a1∈[3,5]`` over
``a1∈[2,6]``) and lets a broad feature with full coverage (a carry) beat a narrow one with partial
coverage. A unit is a *heuristic* when its best feature covers at least ``coverage_min`` of its
top inputs.

Amendment 2 (8.3) replaces the coverage rule by a cut calibrated on an untrained model: a unit is
a heuristic when its best-feature score exceeds the 99th percentile (:data:`CUT_QUANTILE`) of the
scores of the units at the same layer and answer position in an untrained model of another
initialization (:func:`score_cut`, :func:`with_cut`); the same cut on the untrained model of the
run's own seed gives the null share (:func:`cut_summary`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import math
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..model import HookedTransformer
from ..tasks import Examples
from .fda_features import (ANSWER_WINDOWS, FEATURE_KINDS, RANGE_WIDTHS, RESIDUE_MODULI, feature_list,  # noqa: F401
                           feature_table, make_examples, neighbour_offsets, operand_grid)
from .neurons import mlp_activations
from .outliers import (NeighbourStats, after_jstar_comparison, example_outliers, first_differing,  # noqa: F401
                       fresh_noisy_labels, jstar_comparison, max_abs_z, neighbour_stats, null_comparison,
                       operand_neighbourhood, outlier_comparison, outlier_summary, shift_direction, weighted_median,
                       z_table)
from .patching import (after_jstar_mask, dose_response, dose_summary, jstar_dose_response, jstar_mask,  # noqa: F401
                       jstar_summary, jstar_units, layer_patching, neuron_scores, patching_summary,
                       position_dose_response)

CUT_QUANTILE = 0.99  # amendment 2, 8.3: the untrained model's score quantile a heuristic unit must exceed


# -- classification -------------------------------------------------------------------------------
@dataclass
class HeuristicMap:
    """The classification of every unit (layer, answer position, neuron); arrays are [L, A, d_mlp]."""

    layers: list[int]
    feature_names: list[str]  # the candidate features (base rate within bounds)
    feature_kinds: list[str]
    feature_columns: torch.Tensor  # [F'] their columns in feature_table
    best: torch.Tensor  # long: index into feature_names
    coverage: torch.Tensor
    base_rate: torch.Tensor
    score: torch.Tensor
    heuristic: torch.Tensor  # bool
    grid_sd: torch.Tensor  # the unit's activation sd over the grid
    top_k: int
    coverage_min: float
    top_mean: torch.Tensor | None = None  # the mean of the unit's top-k grid activations
    score_cut: torch.Tensor | None = None  # [L, A] amendment 2 (8.3): heuristic = score > cut (None: coverage rule)

    def table(self) -> pd.DataFrame:
        """One row per unit: layer, position, neuron, feature, kind, coverage, base_rate, score, heuristic."""
        L, A, D = self.best.shape
        l, j, i = torch.meshgrid(torch.arange(L), torch.arange(A), torch.arange(D), indexing="ij")
        best = self.best.flatten().numpy()
        return pd.DataFrame({
            "layer": np.asarray(self.layers)[l.flatten().numpy()], "position": j.flatten().numpy(),
            "neuron": i.flatten().numpy(), "feature": np.asarray(self.feature_names, dtype=object)[best],
            "kind": np.asarray(self.feature_kinds, dtype=object)[best], "coverage": self.coverage.flatten().numpy(),
            "base_rate": self.base_rate.flatten().numpy(), "score": self.score.flatten().numpy(),
            "heuristic": self.heuristic.flatten().numpy()})

    def per_layer(self) -> pd.DataFrame:
        """Share of units per layer that are heuristics, by the kind of their best feature."""
        t = self.table()
        counts = t[t.heuristic].groupby(["layer", "kind"]).size().rename("units").reset_index()
        totals = t.groupby("layer").size()
        counts["fraction"] = counts["units"] / counts["layer"].map(totals)
        return counts

    @property
    def heuristic_fraction(self) -> float:
        return float(self.heuristic.double().mean())

    def layer_fractions(self) -> list[float]:
        return [float(x) for x in self.heuristic.double().mean(dim=(1, 2))]

    def empty_layers(self) -> list[int]:
        """The analysed layers that hold no heuristic unit at any answer position."""
        return [int(l) for li, l in enumerate(self.layers) if not bool(self.heuristic[li].any())]

    # -- neurons as units (protocol section 5: "at least 20% of neurons") ---------------------
    @property
    def home_position(self) -> torch.Tensor:
        """[L, D] each neuron's *home* answer position: the one where its top-k grid activations are
        largest on average (where it fires for its pattern)."""
        if self.top_mean is None:
            raise ValueError("this HeuristicMap was built without top_mean")
        return self.top_mean.argmax(1)

    @property
    def neuron_heuristic(self) -> torch.Tensor:
        """Bool [L, D]: a neuron is a heuristic when it is a heuristic unit at its home position.

        One classification per neuron, at the position where it fires most strongly for its top
        inputs, so that a neuron is tested once, as in section 5 ("for every MLP neuron, take its
        top-activating inputs"); counting a neuron that is a heuristic at *any* of the five
        positions would give every neuron five chances to pass."""
        home = self.home_position
        return self.heuristic.gather(1, home[:, None]).squeeze(1)

    @property
    def neuron_fraction(self) -> float:
        """The share of neurons (over the analysed layers) that are heuristics."""
        return float(self.neuron_heuristic.double().mean())

    def neuron_layer_fractions(self) -> list[float]:
        return [float(x) for x in self.neuron_heuristic.double().mean(dim=1)]

    @property
    def any_position_fraction(self) -> float:
        """The share of neurons that are a heuristic unit at one answer position at least (shown
        beside :attr:`neuron_fraction`, never judged)."""
        return float(self.heuristic.any(1).double().mean())


def _kl_score(cov: torch.Tensor, base: torch.Tensor, k: int) -> torch.Tensor:
    """k * KL(Bernoulli(cov) || Bernoulli(base)) where cov > base, else 0.

    ``xlogy`` gives the 0 * log 0 terms their limit 0: a feature that covers every top input
    (cov = 1) scores k * log(1 / base), finite (a clamp to 1 - 1e-9 rounds back to 1 in float32 and
    gave NaN, which argmax took as the best feature whatever its base rate)."""
    p = base.clamp(1e-9, 1 - 1e-9)
    c = cov.clamp(0.0, 1.0)
    kl = torch.xlogy(c, c / p) + torch.xlogy(1 - c, (1 - c) / (1 - p))
    return torch.where(cov > base, k * kl, torch.zeros_like(kl))


def classify_activations(acts: torch.Tensor, features: torch.Tensor, *, top_k: int, coverage_min: float,
                         min_base: float = 0.005, max_base: float = 0.6, names: Sequence[tuple[str, str]] | None = None,
                         layers: Sequence[int] | None = None) -> HeuristicMap:
    """Classify units from their activations on a grid.

    ``acts`` [G, ...unit dims] (e.g. [G, A, L, D] from :func:`mlp_activations`, or [G, U]) and
    ``features`` bool [G, F] (columns of :func:`feature_list` unless ``names`` is given).
    Returns a :class:`HeuristicMap` whose arrays have the unit shape permuted to [L, A, D] when the
    input was [G, A, L, D], else the unit shape as given.
    """
    names = list(names) if names is not None else feature_list()
    if acts.dim() == 4:  # [G, A, L, D] -> [G, L, A, D]
        acts = acts.permute(0, 2, 1, 3)
    unit_shape = acts.shape[1:]
    flat = acts.reshape(len(acts), -1).float().cpu()
    feats = features.cpu()
    base_all = feats.float().mean(0)
    keep = ((base_all >= min_base) & (base_all <= max_base)).nonzero().squeeze(1)
    F = feats[:, keep].float()  # [G, F']
    base = base_all[keep]
    k = min(top_k, len(flat))
    top_values, top = flat.topk(k, dim=0)
    top = top.T  # [U, k]
    cov = torch.empty(top.shape[0], len(keep))
    for s in range(0, top.shape[0], 256):  # gather in chunks: [256, k, F']
        cov[s:s + 256] = F[top[s:s + 256]].mean(1)
    score = _kl_score(cov, base[None], k)
    score = score - 1e-6 * base[None]  # ties: the rarer feature
    best = score.argmax(-1)
    u = torch.arange(len(best))
    coverage = cov[u, best]
    shape = tuple(unit_shape)
    return HeuristicMap(
        layers=list(layers) if layers is not None else list(range(shape[0])) if len(shape) == 3 else [0],
        feature_names=[names[c][0] for c in keep.tolist()], feature_kinds=[names[c][1] for c in keep.tolist()],
        feature_columns=keep, best=best.reshape(shape), coverage=coverage.reshape(shape),
        base_rate=base[best].reshape(shape), score=score[u, best].reshape(shape),
        heuristic=(coverage >= coverage_min).reshape(shape), grid_sd=flat.std(0).reshape(shape), top_k=k,
        coverage_min=coverage_min, top_mean=top_values.mean(0).reshape(shape))


def classify_neurons(model: HookedTransformer, grid: Examples, *, coverage_min: float, top_k: int = 50,
                     layers: Sequence[int] | None = None, min_base: float = 0.005,
                     max_base: float = 0.6) -> HeuristicMap:
    """Classify every MLP neuron at every answer position of ``model`` on the clean ``grid``."""
    layers = list(range(model.shape.n_layers)) if layers is None else list(layers)
    acts = mlp_activations(model, grid, "true_label", layers)  # [G, A, L, D]
    return classify_activations(acts, feature_table(grid.info["a"], grid.info["b"]), top_k=top_k,
                                coverage_min=coverage_min, min_base=min_base, max_base=max_base, layers=layers)


# -- amendment 2, 8.3: a cut calibrated on an untrained model ------------------------------------
def score_cut(reference: HeuristicMap, quantile: float = CUT_QUANTILE) -> torch.Tensor:
    """[L, A] the ``quantile`` of the best-feature scores of the units at each (layer, answer
    position) of ``reference`` (amendment 2, 8.3: an untrained model of another initialization,
    classified on the same grid)."""
    if reference.score.dim() != 3:
        raise ValueError(f"score_cut needs a [L, A, D] map, got shape {tuple(reference.score.shape)}")
    return torch.quantile(reference.score.double(), quantile, dim=-1).float()


def with_cut(hmap: HeuristicMap, cut: torch.Tensor) -> HeuristicMap:
    """``hmap`` with the heuristic rule of amendment 2 (8.3): a unit is a heuristic when its
    best-feature score exceeds ``cut`` [L, A] of its layer and answer position (strictly). The
    features, scores, home positions and neighbour statistics are those of ``hmap``; only
    ``heuristic`` changes (so :class:`~rote.analysis.outliers.NeighbourStats` computed for ``hmap``
    serve the cut map as well)."""
    cut = cut.to(hmap.score.dtype)
    return dataclasses.replace(hmap, heuristic=hmap.score > cut[..., None], score_cut=cut)


def cut_summary(trained: HeuristicMap, null: HeuristicMap) -> dict:
    """The numbers of 8.3 from two maps under the same cut (:func:`with_cut`): the trained model
    and the untrained model of the run's own seed (the null share). Neurons are the judged units
    (a neuron is a heuristic at its home position, as in section 5); (neuron, position) units are
    shown beside them. ``cut_empty_layers``: the trained model's layers with no heuristic unit."""
    return {"cut_heuristic_fraction": trained.neuron_fraction, "cut_null_fraction": null.neuron_fraction,
            "cut_heuristic_fraction_per_layer": trained.neuron_layer_fractions(),
            "cut_null_fraction_per_layer": null.neuron_layer_fractions(),
            "cut_heuristic_fraction_units": trained.heuristic_fraction,
            "cut_null_fraction_units": null.heuristic_fraction,
            "cut_heuristic_fraction_units_per_layer": trained.layer_fractions(),
            "cut_empty_layers": trained.empty_layers()}


# -- amendment 2, 8.4: everything read at the first differing digit, for one run --------------------
def jstar_analysis(model: HookedTransformer, memorized: Examples, null: Examples, stats: dict[str, NeighbourStats],
                   hmap: HeuristicMap, layer: int, m_grid: Sequence[int], *, revert_min: float, n_controls: int = 3,
                   seed: int = 0, max_examples: int | None = None) -> dict:
    """The numbers of 8.4 for one run.

    ``stats``: :class:`NeighbourStats` of ``"M"`` (``memorized``), ``"clean"`` and ``"null"``
    (``null``: never-trained noisy labels, :func:`fresh_noisy_labels`), computed for a map with the
    same features as ``hmap`` (the 8.3 cut map of :func:`with_cut`, whose heuristic units are read).
    Returns ``metrics`` (:func:`jstar_comparison`, :func:`jstar_summary` of the dose-response at j*
    in ``layer``, which ranks, patches and draws its random control from the heuristic units of
    ``hmap`` in ``layer`` at each example's j* (8.5; ``jstar_m_tried``: the m with enough of them,
    ``jstar_units_min``: the fewest at an example's j*), and the shown-only ``after_jstar_*``
    (every neuron of ``layer``): :func:`after_jstar_comparison` and the
    top-m / random-m curves of patching after j*, on M and on the null, reverted against the
    unpatched prediction), and the tables ``dose`` (at j*), ``after`` and ``after_null``.
    """
    A = memorized.label.shape[1]
    jstar, jstar_null = first_differing(memorized), first_differing(null)
    metrics = jstar_comparison(stats["M"], stats["clean"], hmap, jstar)
    metrics.update(after_jstar_comparison(stats["M"], stats["null"], hmap, jstar, jstar_null))
    kw = dict(n_controls=n_controls, seed=seed, max_examples=max_examples)
    units = hmap.heuristic[list(hmap.layers).index(layer)]  # [A, D] the 8.3 units of the layer (8.5)
    dose = jstar_dose_response(model, memorized, stats["M"], jstar, layer, m_grid, units=units, **kw)
    metrics.update(jstar_summary(dose, layer, revert_min))
    metrics["jstar_units_min"] = jstar_units(jstar, units, max_examples)
    after = position_dose_response(model, memorized, stats["M"], layer, m_grid, after_jstar_mask(jstar, A), **kw)
    after_null = position_dose_response(model, null, stats["null"], layer, m_grid, after_jstar_mask(jstar_null, A), **kw)

    def curve(table, units):
        t = table[table.units == units].sort_values("m") if len(table) else table
        return [float(x) for x in t.reverted] if len(t) else [math.nan] * len(m_grid)

    metrics.update({"after_jstar_m": [int(m) for m in m_grid], "after_jstar_patch_revert": curve(after, "top"),
                    "after_jstar_random_patch_revert": curve(after, "random"),
                    "after_jstar_null_patch_revert": curve(after_null, "top"),
                    "after_jstar_null_random_patch_revert": curve(after_null, "random"),
                    "jstar_layer": int(layer)})
    return {"metrics": metrics, "dose": dose, "after": after, "after_null": after_null, "jstar": jstar}

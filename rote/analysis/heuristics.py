"""Heuristic neurons in four-digit addition (claim C5): the classification of units.

Nikankin et al. (2024, arXiv 2410.21272) found that language models add with a "bag of heuristics":
single MLP neurons that fire for an input pattern and promote a set of answer tokens. A *unit* is one
neuron at one answer position (:mod:`rote.analysis.units`). For each unit take its ``top_k`` most
activating grid inputs; a feature's *coverage* is the share of them it covers; the *best* feature is
the least likely under its base rate pi (the largest ``k * KL(coverage || pi)``, zero when coverage <=
pi), so a rare feature covering all top inputs wins, and a broad one with full coverage (a carry) beats
a narrow one with partial coverage. Section 5: a unit is a heuristic when its best feature covers at
least ``coverage_min``. Amendment 2 (8.3): when its best-feature score exceeds the 99th percentile of
the scores at its layer and answer position in an untrained model of another initialization
(:func:`score_cut`, :func:`with_cut`); the same cut on the run's own untrained model gives the null.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import torch

from ..model import HookedTransformer
from ..tasks import Examples
from .fda_features import feature_list, feature_table
from .neurons import mlp_activations
from .units import HeuristicMap

CUT_QUANTILE = 0.99  # amendment 2, 8.3: the untrained model's score quantile a heuristic unit must exceed


# -- classification -------------------------------------------------------------------------------
def _kl_score(cov: torch.Tensor, base: torch.Tensor, k: int) -> torch.Tensor:
    """k * KL(Bernoulli(cov) || Bernoulli(base)) where cov > base, else 0 (``xlogy``: 0 log 0 = 0, so
    full coverage scores k log(1 / base), finite; a clamp to 1 - 1e-9 rounded back to 1 in float32)."""
    p = base.clamp(1e-9, 1 - 1e-9)
    c = cov.clamp(0.0, 1.0)
    kl = torch.xlogy(c, c / p) + torch.xlogy(1 - c, (1 - c) / (1 - p))
    return torch.where(cov > base, k * kl, torch.zeros_like(kl))


@dataclasses.dataclass(frozen=True)
class ClassifySettings:
    """A unit is a heuristic when its best feature covers ``coverage_min`` of its ``top_k`` top grid
    inputs; candidates: the features with a base rate in [``min_base``, ``max_base``]."""

    coverage_min: float
    top_k: int = 50
    min_base: float = 0.005
    max_base: float = 0.6

    def __post_init__(self):
        if not (0.0 <= self.coverage_min <= 1.0 and self.top_k >= 1
                and 0.0 <= self.min_base <= self.max_base <= 1.0):
            raise ValueError(f"need coverage_min, min_base <= max_base in [0, 1] and top_k >= 1: {self}")


def classify_activations(acts: torch.Tensor, features: torch.Tensor, settings: ClassifySettings, *,
                         names: Sequence[tuple[str, str]] | None = None,
                         layers: Sequence[int] | None = None) -> HeuristicMap:
    """Classify units from ``acts`` [G, ...] on a grid ([G, A, L, D] is permuted to [L, A, D]) with
    ``features`` bool [G, F] (the columns of :func:`feature_list` unless ``names`` is given)."""
    names = list(names) if names is not None else feature_list()
    if acts.dim() == 4:  # [G, A, L, D] -> [G, L, A, D]
        acts = acts.permute(0, 2, 1, 3)
    shape, flat = tuple(acts.shape[1:]), acts.reshape(len(acts), -1).float().cpu()
    base = features.cpu().float().mean(0)
    keep = ((base >= settings.min_base) & (base <= settings.max_base)).nonzero().squeeze(1)
    F, base = features.cpu()[:, keep].float(), base[keep]  # [G, F']
    k = min(settings.top_k, len(flat))
    top_values, top = flat.topk(k, dim=0)
    top = top.T  # [U, k]
    cov = torch.empty(top.shape[0], len(keep))
    for s in range(0, top.shape[0], 256):  # gather in chunks: [256, k, F']
        cov[s:s + 256] = F[top[s:s + 256]].mean(1)
    score = _kl_score(cov, base[None], k) - 1e-6 * base[None]  # ties: the rarer feature
    best = score.argmax(-1)
    u = torch.arange(len(best))
    coverage = cov[u, best]
    return HeuristicMap(
        layers=list(layers) if layers is not None else list(range(shape[0])) if len(shape) == 3 else [0],
        feature_names=[names[c][0] for c in keep.tolist()], feature_kinds=[names[c][1] for c in keep.tolist()],
        feature_columns=keep, best=best.reshape(shape), coverage=coverage.reshape(shape),
        base_rate=base[best].reshape(shape), score=score[u, best].reshape(shape),
        heuristic=(coverage >= settings.coverage_min).reshape(shape), grid_sd=flat.std(0).reshape(shape), top_k=k,
        coverage_min=settings.coverage_min, top_mean=top_values.mean(0).reshape(shape))


def classify_neurons(model: HookedTransformer, grid: Examples, settings: ClassifySettings, *,
                     layers: Sequence[int] | None = None) -> HeuristicMap:
    """Classify every MLP neuron at every answer position of ``model`` on the clean ``grid``."""
    layers = list(range(model.shape.n_layers)) if layers is None else list(layers)
    acts = mlp_activations(model, grid, "true_label", layers)  # [G, A, L, D]
    return classify_activations(acts, feature_table(grid.info["a"], grid.info["b"]), settings, layers=layers)


# -- amendment 2, 8.3: a cut calibrated on an untrained model ------------------------------------
def score_cut(reference: HeuristicMap, quantile: float = CUT_QUANTILE) -> torch.Tensor:
    """[L, A] the ``quantile`` of the best-feature scores at each (layer, answer position) of
    ``reference`` (8.3: an untrained model of another initialization, on the same grid)."""
    if reference.score.dim() != 3:
        raise ValueError(f"score_cut needs a [L, A, D] map, got shape {tuple(reference.score.shape)}")
    return torch.quantile(reference.score.double(), quantile, dim=-1).float()


def with_cut(hmap: HeuristicMap, cut: torch.Tensor) -> HeuristicMap:
    """``hmap`` under 8.3's rule: a heuristic when its score exceeds ``cut`` [L, A] strictly. Only
    ``heuristic`` changes, so neighbour statistics computed for ``hmap`` serve the cut map too."""
    cut = cut.to(hmap.score.dtype)
    return dataclasses.replace(hmap, heuristic=hmap.score > cut[..., None], score_cut=cut)


@dataclasses.dataclass(frozen=True)
class Shares:
    """Section 5 and 7.7: the share of heuristic neurons (each at its home position, judged) of the
    trained model, per layer, of (neuron, position) units and at any position, and the untrained model's."""

    heuristic_fraction: float | None = None
    heuristic_fraction_per_layer: list[float] | None = None
    heuristic_fraction_units: float | None = None
    heuristic_fraction_units_per_layer: list[float] | None = None
    heuristic_fraction_any_position: float | None = None
    n_neurons: int | None = None  # the neurons a share counts (its Wilson interval is over them)
    untrained_heuristic_fraction: float | None = None
    untrained_heuristic_fraction_units: float | None = None


def shares(trained: HeuristicMap, untrained: HeuristicMap) -> Shares:
    return Shares(trained.neuron_fraction, trained.neuron_layer_fractions(), trained.heuristic_fraction,
                  trained.layer_fractions(), trained.any_position_fraction, int(trained.neuron_heuristic.numel()),
                  untrained.neuron_fraction, untrained.heuristic_fraction)


@dataclasses.dataclass(frozen=True)
class CutShares:
    """8.3: the shares under the cut, trained against the untrained model of the run's own seed (the
    null), the trained model's layers with no heuristic unit, and the seed the cut came from."""

    cut_heuristic_fraction: float | None = None
    cut_null_fraction: float | None = None
    cut_heuristic_fraction_per_layer: list[float] | None = None
    cut_null_fraction_per_layer: list[float] | None = None
    cut_heuristic_fraction_units: float | None = None
    cut_null_fraction_units: float | None = None
    cut_heuristic_fraction_units_per_layer: list[float] | None = None
    cut_empty_layers: list[int] | None = None
    cut_untrained_seed: int | None = None
    cut_n_neurons: int | None = None


def cut_summary(trained: HeuristicMap, null: HeuristicMap, untrained_seed: int | None = None) -> CutShares:
    """8.3's numbers from two maps under the same cut (:func:`with_cut`)."""
    return CutShares(trained.neuron_fraction, null.neuron_fraction, trained.neuron_layer_fractions(),
                     null.neuron_layer_fractions(), trained.heuristic_fraction, null.heuristic_fraction,
                     trained.layer_fractions(), trained.empty_layers(), untrained_seed,
                     int(trained.neuron_heuristic.numel()))

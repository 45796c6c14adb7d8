"""Heuristic neurons in four-digit addition (claim C5, first part).

Nikankin et al. (2024, arXiv 2410.21272) found that language models add with a "bag of
heuristics": single MLP neurons that fire for an input pattern (an operand in a range, a result
modulo m, ...) and promote a set of answer tokens. This module adapts their classification to
digit-level addition, and only classifies: the candidate patterns are in
:mod:`rote.analysis.fda_features`, the units and the :class:`~rote.analysis.units.HeuristicMap` of
their classification in :mod:`rote.analysis.units`, the outlier statistics of memorized sums in
:mod:`rote.analysis.outliers` and the patching experiments in :mod:`rote.analysis.neuron_patching`.

Units
-----
A *unit* is one MLP neuron at one answer position (:mod:`rote.analysis.units`); the same neuron at
two positions computes different things, so it is classified per position.

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
    """k * KL(Bernoulli(cov) || Bernoulli(base)) where cov > base, else 0.

    ``xlogy`` gives the 0 * log 0 terms their limit 0: a feature that covers every top input
    (cov = 1) scores k * log(1 / base), finite (a clamp to 1 - 1e-9 rounds back to 1 in float32 and
    gave NaN, which argmax took as the best feature whatever its base rate)."""
    p = base.clamp(1e-9, 1 - 1e-9)
    c = cov.clamp(0.0, 1.0)
    kl = torch.xlogy(c, c / p) + torch.xlogy(1 - c, (1 - c) / (1 - p))
    return torch.where(cov > base, k * kl, torch.zeros_like(kl))


@dataclasses.dataclass(frozen=True)
class ClassifySettings:
    """The knobs of the classification: a unit is a heuristic when its best feature covers at least
    ``coverage_min`` of its ``top_k`` most activating grid inputs; only features whose base rate on
    the grid lies in [``min_base``, ``max_base``] are candidates."""

    coverage_min: float
    top_k: int = 50
    min_base: float = 0.005
    max_base: float = 0.6

    def __post_init__(self):
        if not 0.0 <= self.coverage_min <= 1.0:
            raise ValueError(f"coverage_min must be in [0, 1], got {self.coverage_min!r}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {self.top_k!r}")
        if not 0.0 <= self.min_base <= self.max_base <= 1.0:
            raise ValueError(f"need 0 <= min_base <= max_base <= 1, got min_base={self.min_base!r}, "
                             f"max_base={self.max_base!r}")


def classify_activations(acts: torch.Tensor, features: torch.Tensor, settings: ClassifySettings, *,
                         names: Sequence[tuple[str, str]] | None = None,
                         layers: Sequence[int] | None = None) -> HeuristicMap:
    """Classify units from their activations on a grid.

    ``acts`` [G, ...unit dims] (e.g. [G, A, L, D] from :func:`mlp_activations`, or [G, U]) and
    ``features`` bool [G, F] (columns of :func:`feature_list` unless ``names`` is given).
    Returns a :class:`HeuristicMap` whose arrays have the unit shape permuted to [L, A, D] when the
    input was [G, A, L, D], else the unit shape as given.
    """
    top_k, coverage_min = settings.top_k, settings.coverage_min
    min_base, max_base = settings.min_base, settings.max_base
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


def classify_neurons(model: HookedTransformer, grid: Examples, settings: ClassifySettings, *,
                     layers: Sequence[int] | None = None) -> HeuristicMap:
    """Classify every MLP neuron at every answer position of ``model`` on the clean ``grid``."""
    layers = list(range(model.shape.n_layers)) if layers is None else list(layers)
    acts = mlp_activations(model, grid, "true_label", layers)  # [G, A, L, D]
    return classify_activations(acts, feature_table(grid.info["a"], grid.info["b"]), settings, layers=layers)


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
    ``heuristic`` changes (so :class:`~rote.analysis.units.NeighbourStats` computed for ``hmap``
    serve the cut map as well)."""
    cut = cut.to(hmap.score.dtype)
    return dataclasses.replace(hmap, heuristic=hmap.score > cut[..., None], score_cut=cut)


def cut_summary(trained: HeuristicMap, null: HeuristicMap) -> dict:
    """The numbers of 8.3 from two maps under the same cut (:func:`with_cut`): the trained model
    and the untrained model of the run's own seed (the null share). Neurons are the judged units
    (a neuron is a heuristic at its home position, as in section 5); (neuron, position) units are
    shown beside them. ``cut_empty_layers``: the trained model's layers with no heuristic unit;
    ``cut_n_neurons``: the neurons the shares count (section 11: a share's Wilson interval is over them)."""
    return {"cut_heuristic_fraction": trained.neuron_fraction, "cut_null_fraction": null.neuron_fraction,
            "cut_n_neurons": int(trained.neuron_heuristic.numel()),
            "cut_heuristic_fraction_per_layer": trained.neuron_layer_fractions(),
            "cut_null_fraction_per_layer": null.neuron_layer_fractions(),
            "cut_heuristic_fraction_units": trained.heuristic_fraction,
            "cut_null_fraction_units": null.heuristic_fraction,
            "cut_heuristic_fraction_units_per_layer": trained.layer_fractions(),
            "cut_empty_layers": trained.empty_layers()}

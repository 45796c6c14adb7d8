"""Erasing an intermediate result from the residual stream: iterative nullspace projection (INLP).

INLP (Ravfogel et al. 2020) fits a linear classifier for the target, removes the directions its
weights use, and repeats on the projected activations until ``rank`` directions are gone. The
result is an orthogonal projection P = I - Q Q^T with Q [d, rank] orthonormal. The control is a
projection onto the complement of a random subspace of the same rank.

The projection is applied mean-preserving: x -> mu + (x - mu) P, with mu the clean mean at that
layer, so that only the variation along Q is removed (for the random control as well) and the
activations stay near their usual range. Layers follow :mod:`rote.analysis.lens` (0 = embeddings,
l = after block l - 1); the hook sits at ``blocks.{l-1}.hook_resid_post``.

- :func:`inlp_projection`, :func:`random_projection` -- the [d, d] matrices.
- :func:`fit_erasure` -- INLP for named targets at given layers/positions, from a model's clean
  activations; returns an :class:`Erasure` (per-layer projections and means) and its control.
- :func:`erased` -- a context manager applying an erasure through hooks (removed on exit).
- :func:`erasure_accuracy` -- exact-match accuracy of named sets with an erasure applied.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..model import HookedTransformer
from ..tasks import Examples, TaskData
from ..train import exact_match
from .lens import layer_hook_name, model_inputs, residual_stack
from .targets import intermediate_targets


def _orthonormal_basis(Q: torch.Tensor, new: torch.Tensor, tol: float = 1e-6) -> torch.Tensor:
    """Extend the orthonormal columns ``Q`` [d, k] by the directions of ``new`` [d, m] outside them."""
    for v in new.T:
        if Q.shape[1]:
            v = v - Q @ (Q.T @ v)
            v = v - Q @ (Q.T @ v)  # twice, for numerical safety
        norm = v.norm()
        if norm > tol:
            Q = torch.cat([Q, (v / norm)[:, None]], dim=1)
    return Q


def _classifier_directions(x: torch.Tensor, y: torch.Tensor, n_classes: int, weight_decay: float,
                           max_iter: int) -> torch.Tensor:
    """The row space of a multinomial logistic regression on centered ``x``, as [d, m] directions
    ordered by singular value (the class-mean component of the weights is irrelevant and removed)."""
    W = torch.zeros(x.shape[1], n_classes, requires_grad=True)
    b = torch.zeros(n_classes, requires_grad=True)
    scale = x.norm(dim=1).mean().clamp_min(1e-6)
    xs = x / scale
    opt = torch.optim.LBFGS([W, b], lr=1, max_iter=max_iter, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(xs @ W + b, y) + weight_decay * (W ** 2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    Wd = W.detach()
    Wd = Wd - Wd.mean(1, keepdim=True)
    U, S, _ = torch.linalg.svd(Wd, full_matrices=False)
    return U[:, S > S.max() * 1e-4] if S.numel() and S.max() > 0 else U[:, :0]


def inlp_basis(acts: torch.Tensor, labels: torch.Tensor, rank: int, n_classes: int | list[int] | None = None,
               per_iteration: int | None = None, weight_decay: float = 1e-4, max_iter: int = 100) -> torch.Tensor:
    """Orthonormal [d, rank] directions found by INLP for ``labels`` ([N] or [N, k]: k targets, one
    classifier each per iteration) in ``acts`` [N, d].

    Each iteration fits the classifiers on the activations projected so far and removes up to
    ``per_iteration`` of their top directions (all of them by default) until ``rank`` are gone.
    """
    acts = acts.float()
    labels = labels.long()
    if labels.dim() == 1:
        labels = labels[:, None]
    d = acts.shape[1]
    if not 0 <= rank <= d:
        raise ValueError(f"rank must be in [0, {d}], got {rank}")
    if n_classes is None:
        n_classes = [int(labels[:, j].max()) + 1 for j in range(labels.shape[1])]
    elif isinstance(n_classes, int):
        n_classes = [n_classes] * labels.shape[1]
    x = acts - acts.mean(0)
    Q = torch.zeros(d, 0)
    while Q.shape[1] < rank:
        xp = x - (x @ Q) @ Q.T
        found = [_classifier_directions(xp, labels[:, j], n_classes[j], weight_decay, max_iter)
                 for j in range(labels.shape[1])]
        # interleave the targets' directions so that each target loses its strongest ones first
        width = max(f.shape[1] for f in found)
        ordered = [f[:, i] for i in range(width) for f in found if i < f.shape[1]]
        if per_iteration is not None:
            ordered = ordered[:per_iteration]
        before = Q.shape[1]
        Q = _orthonormal_basis(Q, torch.stack(ordered, 1)[:, :rank - before] if ordered else torch.zeros(d, 0))
        if Q.shape[1] == before:  # nothing linear left to remove: fill with random directions
            Q = _orthonormal_basis(Q, torch.randn(d, rank - before, generator=torch.Generator().manual_seed(0)))
    return Q[:, :rank]


def projection_from_basis(Q: torch.Tensor) -> torch.Tensor:
    return torch.eye(Q.shape[0]) - Q @ Q.T


def inlp_projection(acts: torch.Tensor, labels: torch.Tensor, rank: int, **kwargs) -> torch.Tensor:
    """[d, d] orthogonal projection removing the ``rank`` INLP directions of ``labels`` in ``acts``."""
    return projection_from_basis(inlp_basis(acts, labels, rank, **kwargs))


def random_projection(d: int, rank: int, seed: int = 0) -> torch.Tensor:
    """[d, d] orthogonal projection removing a uniformly random ``rank``-dimensional subspace."""
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(d, rank, generator=g))
    return projection_from_basis(Q[:, :rank])


@dataclass
class Erasure:
    """Projections [d, d] and clean means [d] per layer, applied at ``positions`` (None = all)."""

    projections: dict[int, torch.Tensor]
    means: dict[int, torch.Tensor]
    positions: list[int] | None

    @property
    def rank(self) -> int:
        P = next(iter(self.projections.values()))
        return int(round(P.shape[0] - torch.trace(P).item()))


def projection_hook(P: torch.Tensor, mean: torch.Tensor | None = None, positions=None):
    """A hook function that replaces x by mean + (x - mean) P at ``positions`` (all if None)."""

    def hook(act: torch.Tensor, _point) -> torch.Tensor:
        Pd = P.to(act.device, act.dtype)
        mu = torch.zeros(act.shape[-1], device=act.device, dtype=act.dtype) if mean is None \
            else mean.to(act.device, act.dtype)
        out = act.clone()
        sel = slice(None) if positions is None else torch.as_tensor(positions, device=act.device)
        out[:, sel] = mu + (act[:, sel] - mu) @ Pd
        return out

    return hook


@contextlib.contextmanager
def erased(model: HookedTransformer, erasure: Erasure):
    """Apply ``erasure`` for the duration of the block (hooks removed on exit, also on error)."""
    hooks = [(layer_hook_name(layer), projection_hook(P, erasure.means.get(layer), erasure.positions))
             for layer, P in erasure.projections.items()]
    with model.hooks(hooks):
        yield model


def fit_erasure(model: HookedTransformer, data: TaskData, train: Examples, targets: list[str], layers: list[int],
                positions: list[int], rank: int, max_train: int = 3000, seed: int = 0, **inlp_kwargs) -> Erasure:
    """INLP at each of ``layers`` for the named targets (jointly), on clean examples' activations
    pooled over ``positions``; the erasure is applied at the same layers and positions."""
    if len(train) > max_train:
        train = train[torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))[:max_train]]
    tt = intermediate_targets(train, data)
    labels = torch.stack([tt[n].labels for n in targets], 1)  # [N, k]
    n_classes = [tt[n].n_classes for n in targets]
    acts = residual_stack(model, model_inputs(train), positions)  # [L+1, N, P, d]
    projections, means = {}, {}
    for layer in layers:
        x = acts[layer].transpose(0, 1).reshape(-1, acts.shape[-1])  # [P * N, d], position-major
        y = labels.repeat(len(positions), 1)
        projections[layer] = inlp_projection(x, y, rank, n_classes=n_classes, **inlp_kwargs)
        means[layer] = x.mean(0)
    return Erasure(projections, means, list(positions))


def random_erasure(like: Erasure, seed: int = 0) -> Erasure:
    """The control: same layers, positions, means and rank, random subspaces."""
    d = next(iter(like.projections.values())).shape[0]
    return Erasure({layer: random_projection(d, like.rank, seed * 1009 + layer) for layer in like.projections},
                   dict(like.means), like.positions)


def erasure_accuracy(model: HookedTransformer, sets: dict[str, tuple[Examples, str]],
                     erasure: Erasure | None = None) -> dict[str, float]:
    """Exact-match accuracy of each ``name -> (examples, which label)`` with ``erasure`` applied
    (none: the unmodified model). NaN for an empty set."""
    ctx = erased(model, erasure) if erasure is not None else contextlib.nullcontext()
    with ctx:
        return {name: exact_match(model, ex, which).float().mean().item() if len(ex) else math.nan
                for name, (ex, which) in sets.items()}

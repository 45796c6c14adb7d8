"""Iterative nullspace projection (INLP, Ravfogel et al. 2020), on tensors: fit a linear classifier for
the target, remove the directions its weights use, repeat until ``rank`` are gone. An :class:`Erasure`
holds per site a basis Q and the clean mean mu, applied as x -> mu + (x - mu) P with P = I - Q Q^T; the
control removes a random subspace of the same rank."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .probes import fit_probes
from .ranges import is_finite_at_least, is_whole


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


def _directions(W: torch.Tensor) -> torch.Tensor:
    """The row space of a multinomial classifier's weights W [d, C] as [d, m] directions ordered by
    singular value (the class-mean component of the weights does not affect predictions: removed)."""
    W = W - W.mean(1, keepdim=True)
    U, S, _ = torch.linalg.svd(W, full_matrices=False)
    return U[:, S > S.max() * 1e-4] if S.numel() and S.max() > 0 else U[:, :0]


@dataclass(frozen=True)
class InlpSettings:
    """Up to ``per_iteration`` directions per iteration (None: all), each classifier fitted with
    ``weight_decay`` and ``max_iter`` L-BFGS steps."""

    per_iteration: int | None = None
    weight_decay: float = 1e-3
    max_iter: int = 50

    def __post_init__(self):
        per_iteration, max_iter = self.per_iteration, self.max_iter
        ok = {"per_iteration": per_iteration is None or (is_whole(per_iteration) and per_iteration >= 1),
              "weight_decay": is_finite_at_least(self.weight_decay),
              "max_iter": is_whole(max_iter) and max_iter >= 1}
        bad = [name for name, good in ok.items() if not good]
        if bad:
            raise ValueError(f"InlpSettings.{bad[0]} is out of range (per_iteration: None or an int >= 1, weight_decay: "
                             f"a finite number >= 0, max_iter: an int >= 1), got {getattr(self, bad[0])!r}")


def inlp_bases(acts: torch.Tensor, labels: torch.Tensor, rank: int, n_classes: int | list[int] | None = None,
               settings: InlpSettings = InlpSettings()) -> torch.Tensor:
    """INLP at S sites at once: ``acts`` [S, N, d], ``labels`` [N] or [N, k] (k targets, one classifier each
    per iteration); each iteration removes the classifiers' top directions (targets interleaved, strongest
    first) until ``rank`` are gone. Returns orthonormal bases [S, d, rank]."""
    acts, labels = acts.float(), labels.long().reshape(len(labels), -1)  # labels [N, k]
    S, N, d = acts.shape
    k = labels.shape[1]
    if not 0 <= rank <= d:
        raise ValueError(f"rank must be in [0, {d}], got {rank}")
    if n_classes is None:
        n_classes = [int(labels[:, j].max()) + 1 for j in range(k)]
    elif isinstance(n_classes, int):
        n_classes = [n_classes] * k
    x = acts - acts.mean(1, keepdim=True)
    Qs = [torch.zeros(d, 0) for _ in range(S)]
    while min(Q.shape[1] for Q in Qs) < rank:
        xp = torch.stack([x[s] - (x[s] @ Qs[s]) @ Qs[s].T for s in range(S)])
        probes = fit_probes(xp.repeat_interleave(k, dim=0), labels.T.repeat(S, 1), n_classes * S,
                            settings.weight_decay, settings.max_iter, standardize=False)
        for s in range(S):
            before = Qs[s].shape[1]
            if before >= rank:
                continue
            found = [_directions(probes.W[s * k + j][:, :n_classes[j]]) for j in range(k)]
            width = max(f.shape[1] for f in found)
            ordered = [f[:, i] for i in range(width) for f in found if i < f.shape[1]]
            ordered = ordered[:settings.per_iteration]  # None: all
            new = torch.stack(ordered, 1)[:, :rank - before] if ordered else torch.zeros(d, 0)
            Qs[s] = _orthonormal_basis(Qs[s], new)
            if Qs[s].shape[1] == before:  # nothing linear left to remove: fill with random directions
                g = torch.Generator().manual_seed(s)
                Qs[s] = _orthonormal_basis(Qs[s], torch.randn(d, rank - before, generator=g))
    return torch.stack([Q[:, :rank] for Q in Qs])


def inlp_basis(acts: torch.Tensor, labels: torch.Tensor, rank: int, **kwargs) -> torch.Tensor:
    """Orthonormal [d, rank] INLP directions for ``labels`` ([N] or [N, k]) in ``acts`` [N, d];
    see :func:`inlp_bases`."""
    return inlp_bases(acts.float()[None], labels, rank, **kwargs)[0]


def random_basis(d: int, rank: int, seed: int = 0) -> torch.Tensor:
    """[d, rank] orthonormal basis of a uniformly random subspace."""
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(d, rank, generator=g))
    return Q[:, :rank]


Site = tuple[int, int]  # (layer, position)


@dataclass
class Erasure:
    """Per site (layer, position) an orthonormal basis Q [d, k] and the clean mean mu [d], applied as
    x -> x - ((x - mu) Q) Q^T; ``targets``: the results it was fitted to (for the matched control)."""

    bases: dict[Site, torch.Tensor]
    means: dict[Site, torch.Tensor]
    targets: tuple[str, ...] = ()

    @property
    def rank(self) -> int:
        return min(Q.shape[1] for Q in self.bases.values()) if self.bases else 0

    @property
    def layers(self) -> list[int]:
        return sorted({layer for layer, _ in self.bases})

    @property
    def positions(self) -> list[int]:
        return sorted({p for _, p in self.bases})

    def truncate(self, rank: int) -> "Erasure":
        """The first ``rank`` directions at every site (INLP finds them in order, so this equals
        INLP run to that rank)."""
        if rank > self.rank:
            raise ValueError(f"rank {rank} exceeds the erasure's rank {self.rank}")
        return Erasure({k: Q[:, :rank] for k, Q in self.bases.items()}, dict(self.means), self.targets)


def random_erasure(like: Erasure, seed: int = 0) -> Erasure:
    """The control: the same sites, means and rank, uniformly random subspaces."""
    bases = {site: random_basis(Q.shape[0], Q.shape[1], seed * 100_003 + i)
             for i, (site, Q) in enumerate(sorted(like.bases.items()))}
    return Erasure(bases, dict(like.means), like.targets)

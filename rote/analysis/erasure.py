"""Erasing an intermediate result from the residual stream: iterative nullspace projection (INLP).

INLP (Ravfogel et al. 2020) fits a linear classifier for the target, removes the directions its
weights use, and repeats on the projected activations until ``rank`` directions are gone. The
result is an orthogonal projection P = I - Q Q^T with Q [d, rank] orthonormal. The control is a
projection onto the complement of a random subspace of the same rank.

An erasure is fitted and applied per site (layer, position): the same result is stored in
different directions at different positions. It is applied mean-preserving: x -> mu + (x - mu) P,
with mu the clean mean at that site, so that only the variation along Q is removed (for the random
control as well) and activations stay in their usual range. Layers follow
:mod:`rote.analysis.lens` (0 = embeddings, l = after block l - 1, hook
``blocks.{l-1}.hook_resid_post``).

- :func:`inlp_projection`, :func:`random_projection` -- the [d, d] matrices (and ``*_basis``).
- :func:`erasure_sites` -- where C3 erases: the layers where a probe reads the result, at its positions.
- :func:`fit_erasure` -- INLP for named targets (:mod:`rote.analysis.targets`) at given layers and
  positions from a model's clean activations: an :class:`Erasure`; :func:`random_erasure` is its
  control.
- :func:`erased` -- a context manager applying an erasure through hooks (removed on exit).
- :func:`erasure_accuracy`, :func:`erasure_sweep` -- exact-match accuracy of named sets under an
  erasure, and over ranks against the random control.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import pandas as pd
import torch

from ..model import HookedTransformer
from ..tasks import Examples, TaskData
from ..train import accuracy
from .lens import layer_hook_name, model_inputs, residual_stack
from .probes import fit_probes, found_layers, group_curves, probe_sweep
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


def _directions(W: torch.Tensor) -> torch.Tensor:
    """The row space of a multinomial classifier's weights W [d, C] as [d, m] directions ordered by
    singular value (the class-mean component of the weights does not affect predictions: removed)."""
    W = W - W.mean(1, keepdim=True)
    U, S, _ = torch.linalg.svd(W, full_matrices=False)
    return U[:, S > S.max() * 1e-4] if S.numel() and S.max() > 0 else U[:, :0]


def inlp_bases(acts: torch.Tensor, labels: torch.Tensor, rank: int, n_classes: int | list[int] | None = None,
               per_iteration: int | None = None, weight_decay: float = 1e-3, max_iter: int = 50) -> torch.Tensor:
    """INLP at S sites at once: ``acts`` [S, N, d] (the same N examples at each site), ``labels`` [N]
    or [N, k] (k targets, one multinomial logistic-regression classifier each per iteration).
    Returns orthonormal bases [S, d, rank].

    Each iteration fits the classifiers of every site together (one L-BFGS call) on the activations
    projected so far and removes up to ``per_iteration`` of their top directions (all by default;
    the targets' directions interleaved, strongest first) until ``rank`` are gone at every site."""
    acts = acts.float()
    labels = labels.long()
    if labels.dim() == 1:
        labels = labels[:, None]
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
        probes = fit_probes(xp.repeat_interleave(k, dim=0), labels.T.repeat(S, 1), n_classes * S, weight_decay,
                            max_iter, standardize=False)
        for s in range(S):
            before = Qs[s].shape[1]
            if before >= rank:
                continue
            found = [_directions(probes.W[s * k + j][:, :n_classes[j]]) for j in range(k)]
            width = max(f.shape[1] for f in found)
            ordered = [f[:, i] for i in range(width) for f in found if i < f.shape[1]]
            if per_iteration is not None:
                ordered = ordered[:per_iteration]
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


def projection_from_basis(Q: torch.Tensor) -> torch.Tensor:
    return torch.eye(Q.shape[0]) - Q @ Q.T


def inlp_projection(acts: torch.Tensor, labels: torch.Tensor, rank: int, **kwargs) -> torch.Tensor:
    """[d, d] orthogonal projection removing the ``rank`` INLP directions of ``labels`` in ``acts``."""
    return projection_from_basis(inlp_basis(acts, labels, rank, **kwargs))


def random_basis(d: int, rank: int, seed: int = 0) -> torch.Tensor:
    """[d, rank] orthonormal basis of a uniformly random subspace."""
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(d, rank, generator=g))
    return Q[:, :rank]


def random_projection(d: int, rank: int, seed: int = 0) -> torch.Tensor:
    """[d, d] orthogonal projection removing a uniformly random ``rank``-dimensional subspace."""
    return projection_from_basis(random_basis(d, rank, seed))


Site = tuple[int, int]  # (layer, position)


@dataclass
class Erasure:
    """Directions to remove at each site (layer, position): an orthonormal basis Q [d, k] and the
    clean mean mu [d]; applied as x -> x - ((x - mu) Q) Q^T, i.e. mu + (x - mu) P."""

    bases: dict[Site, torch.Tensor]
    means: dict[Site, torch.Tensor]

    @property
    def rank(self) -> int:
        return min(Q.shape[1] for Q in self.bases.values()) if self.bases else 0

    @property
    def layers(self) -> list[int]:
        return sorted({layer for layer, _ in self.bases})

    @property
    def positions(self) -> list[int]:
        return sorted({p for _, p in self.bases})

    def projection(self, layer: int, position: int) -> torch.Tensor:
        return projection_from_basis(self.bases[layer, position])

    def truncate(self, rank: int) -> "Erasure":
        """The first ``rank`` directions at every site (INLP finds them in order, so this equals
        INLP run to that rank)."""
        if rank > self.rank:
            raise ValueError(f"rank {rank} exceeds the erasure's rank {self.rank}")
        return Erasure({k: Q[:, :rank] for k, Q in self.bases.items()}, dict(self.means))

    @classmethod
    def from_projection(cls, P: torch.Tensor, layers: list[int], positions: list[int],
                        mean: torch.Tensor | None = None) -> "Erasure":
        """One projection matrix applied at every (layer, position) given."""
        U, S, _ = torch.linalg.svd(torch.eye(P.shape[0]) - P)
        Q = U[:, S > 0.5]
        mu = torch.zeros(P.shape[0]) if mean is None else mean
        return cls({(l, p): Q for l in layers for p in positions}, {(l, p): mu for l in layers for p in positions})


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


def _layer_hook(sites: dict[int, tuple[torch.Tensor, torch.Tensor]]):
    def hook(act: torch.Tensor, _point) -> torch.Tensor:
        out = act.clone()
        for position, (Q, mu) in sites.items():
            if position < act.shape[1]:
                Q, mu = Q.to(act.device, act.dtype), mu.to(act.device, act.dtype)
                x = act[:, position]
                out[:, position] = x - ((x - mu) @ Q) @ Q.T
        return out

    return hook


@contextlib.contextmanager
def erased(model: HookedTransformer, erasure: Erasure):
    """Apply ``erasure`` for the duration of the block (hooks removed on exit, also on error)."""
    hooks = []
    for layer in erasure.layers:
        sites = {p: (Q, erasure.means[layer, p]) for (l, p), Q in erasure.bases.items() if l == layer}
        hooks.append((layer_hook_name(layer), _layer_hook(sites)))
    with model.hooks(hooks):
        yield model


def erasure_targets(task: str) -> tuple[str, list[str]]:
    """What C3 erases (protocol section 5): the name of the result (a headline group of
    :func:`~rote.analysis.targets.headline_targets`) and the targets INLP is fitted to. FDA: the four
    carries (one binary classifier each per iteration); THR: the bridge entity."""
    if task == "fda":
        return "carries", [f"carry_{i}" for i in range(4)]
    if task == "thr":
        return "bridge", ["bridge"]
    raise ValueError(f"unknown task {task!r}")


def target_positions(data: TaskData, targets: list[str]) -> list[int]:
    """The positions where the named targets are expected (their own positions)."""
    tt = intermediate_targets(data.test[:1], data)
    return sorted({tt[n].position for n in targets})


def erasure_sites(model: HookedTransformer, data: TaskData, train: Examples, clean: Examples, task: str,
                  min_over_chance: float, max_train: int = 2000, seed: int = 0) -> dict:
    """Where C3 erases (protocol section 5: "at the layer(s) and position(s) where C2 found it").

    Probes for the task's result (:func:`erasure_targets`) are trained on ``train`` and read on the
    clean examples ``clean``; the sites are the intermediate layers where they reach
    ``min_over_chance`` times chance (:func:`~rote.analysis.probes.found_layers`), at the targets'
    own positions. Returns {"group", "targets", "layers", "positions"}; chapters 04 and 05 share it."""
    group, targets = erasure_targets(task)
    sweep = probe_sweep(model, data, train, {"C": clean}, targets=targets, max_train=max_train, seed=seed)
    layers = found_layers(group_curves(sweep, task, {group: [group]}), group, min_over_chance)
    return {"group": group, "targets": targets, "layers": layers, "positions": target_positions(data, targets)}


def fit_erasure(model: HookedTransformer, data: TaskData, train: Examples, targets: list[str], layers: list[int],
                positions: list[int], rank: int, max_train: int = 2000, seed: int = 0, **inlp_kwargs) -> Erasure:
    """INLP for the named targets (jointly: each iteration removes directions of one classifier
    per target) at every (layer, position), each site fitted on clean examples' activations there.

    Per site rather than one projection pooled over positions: the residual stream stores the same
    result in different directions at different positions, and a pooled projection misses them."""
    if len(train) > max_train:
        train = train[torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))[:max_train]]
    tt = intermediate_targets(train, data)
    labels = torch.stack([tt[n].labels for n in targets], 1)  # [N, k]
    n_classes = [tt[n].n_classes for n in targets]
    acts = residual_stack(model, model_inputs(train), positions)  # [L+1, N, P, d]
    sites = [(layer, position) for layer in layers for position in positions]
    if not sites:
        return Erasure({}, {})
    x = torch.stack([acts[layer, :, positions.index(position)] for layer, position in sites])  # [S, N, d]
    Q = inlp_bases(x, labels, rank, n_classes=n_classes, **inlp_kwargs)
    return Erasure({site: Q[i] for i, site in enumerate(sites)}, {site: x[i].mean(0) for i, site in enumerate(sites)})


def random_erasure(like: Erasure, seed: int = 0) -> Erasure:
    """The control: the same sites, means and rank, uniformly random subspaces."""
    bases = {}
    for i, (site, Q) in enumerate(sorted(like.bases.items())):
        bases[site] = random_basis(Q.shape[0], Q.shape[1], seed * 100_003 + i)
    return Erasure(bases, dict(like.means))


def erasure_accuracy(model: HookedTransformer, sets: dict[str, tuple[Examples, str]],
                     erasure: Erasure | None = None) -> dict[str, float]:
    """Exact-match accuracy of each ``name -> (examples, which label)`` with ``erasure`` applied
    (none: the unmodified model). NaN for an empty set."""
    ctx = erased(model, erasure) if erasure is not None else contextlib.nullcontext()
    with ctx:
        return {name: accuracy(model, ex, which) for name, (ex, which) in sets.items()}


def erasure_sweep(model: HookedTransformer, erasure: Erasure, sets: dict[str, tuple[Examples, str]],
                  ranks: list[int], n_controls: int = 3, seed: int = 0) -> pd.DataFrame:
    """Accuracy of each set after erasing the first ``rank`` INLP directions, and after erasing
    random subspaces of the same rank (``n_controls`` draws, averaged), for every rank in
    ``ranks`` (each at most ``erasure.rank``). Rank 0 is the unmodified model.
    Rows: rank, method ("INLP" / "random"), set, accuracy."""
    rows = []
    for rank in ranks:
        if rank > erasure.rank or (rank and not erasure.bases):  # nothing to erase: no result
            rows += [{"rank": rank, "method": m, "set": s, "accuracy": math.nan} for s in sets
                     for m in ("INLP", "random")]
            continue
        if rank == 0:
            base = erasure_accuracy(model, sets)
            rows += [{"rank": 0, "method": m, "set": s, "accuracy": a} for s, a in base.items()
                     for m in ("INLP", "random")]
            continue
        inlp = erasure_accuracy(model, sets, erasure.truncate(rank))
        rows += [{"rank": rank, "method": "INLP", "set": s, "accuracy": a} for s, a in inlp.items()]
        control = [erasure_accuracy(model, sets, random_erasure(erasure.truncate(rank), seed + c))
                   for c in range(n_controls)]
        rows += [{"rank": rank, "method": "random", "set": s,
                  "accuracy": sum(c[s] for c in control) / n_controls} for s in sets]
    return pd.DataFrame(rows, columns=["rank", "method", "set", "accuracy"])


def c3_evaluation(sweep: pd.DataFrame, rank: int, overlap: dict, task: str) -> tuple[dict, dict]:
    """Claim C3's metrics and checks for one task.

    ``sweep``: :func:`erasure_sweep` rows with sets ``mem`` (M, noisy labels), ``gen`` (C, true labels)
    and for THR ``mem_unconnected``; ``rank``: the rank the claim is judged at; ``overlap``: the
    all-component entry of :func:`~rote.analysis.attribution.overlap` (``jaccard``, ``random``).
    Checks: ``erasure_mem_drop_over_control`` (mem falls at least
    ``erasure_mem_drop_over_control_min`` more under INLP than under the random control), for THR the
    same on the unconnected subset, ``overlap_min`` and ``overlap_over_random``. NaN fails."""
    from ..claims import THRESHOLDS

    th = THRESHOLDS["C3"]

    def acc(s, method, r):
        hit = sweep[(sweep.set == s) & (sweep.method == method) & (sweep["rank"] == r)].accuracy
        return float(hit.iloc[0]) if len(hit) else math.nan

    metrics: dict = {"erasure_rank": rank}
    checks: dict = {}
    for s in [x for x in ("mem", "gen", "mem_unconnected") if x in set(sweep.set)]:
        before, inlp, control = acc(s, "INLP", 0), acc(s, "INLP", rank), acc(s, "random", rank)
        drop = (before - inlp) - (before - control)
        metrics.update({f"{s}_before": before, f"{s}_inlp": inlp, f"{s}_random": control,
                        f"{s}_drop_over_control": drop})
    checks["erasure_mem_drop_over_control"] = bool(
        metrics.get("mem_drop_over_control", math.nan) >= th["erasure_mem_drop_over_control_min"])
    if task == "thr":
        checks["erasure_unconnected_mem_drop_over_control"] = bool(
            metrics.get("mem_unconnected_drop_over_control", math.nan) >= th["erasure_mem_drop_over_control_min"])
    j, rand = overlap.get("jaccard", math.nan), overlap.get("random", math.nan)
    metrics.update({"overlap": j, "overlap_random": rand, "overlap_over_random": j / rand if rand else math.nan})
    checks["overlap_min"] = bool(j >= th["overlap_min"])
    checks["overlap_over_random"] = bool(j >= th["overlap_over_random_min"] * rand)
    return metrics, checks

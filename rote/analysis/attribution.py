"""Attribution patching over attention heads and MLP neurons, top-k circuits and their overlap.

Attribution patching (Nanda 2023; Syed et al. 2023) estimates, to first order, how much a metric
changes when one component's activation is replaced by its activation on another input:
``score = (a_corrupt - a_clean) . d metric / d a`` at the clean input. Components are every
attention head (its output ``blocks.{l}.attn.hook_z[:, :, h]``) and every MLP neuron
(``blocks.{l}.mlp.hook_post[:, :, n]``), patched at all positions at once. The metric is the
teacher-forced log-probability of the chosen label (summed over answer tokens); the corrupted
input of each example is the full sequence of a randomly drawn reference example ("resampled").

Components are indexed in one flat order: all heads (layer-major), then all neurons (layer-major);
:func:`component_labels` names them.

- :func:`attribution_scores` -- per-example scores, {"heads": [N, L, H], "neurons": [N, L, d_mlp]}.
- :func:`component_scores` -- mean |score| over examples, flat [n_components].
- :func:`patching_effects`, :func:`patching_scores` -- the real thing (one component at a time), for
  checking.
- :func:`top_k`, :func:`jaccard`, :func:`random_jaccard` -- circuits and their overlap.
- :func:`overlap` -- top-k overlap of two score vectors (all, neurons, heads) with its baseline.
- :func:`component_means`, :func:`ablated`, :func:`ablation_accuracy`, :func:`random_components` --
  mean-ablation of a set of components, and a random control matched in kind and layer.
"""

from __future__ import annotations

import contextlib
import math

import torch

from ..model import HookedTransformer
from ..tasks import Examples
from ..train import accuracy
from .lens import model_inputs

BATCH = 256


def _z(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_z"


def _post(layer: int) -> str:
    return f"blocks.{layer}.mlp.hook_post"


def n_components(model: HookedTransformer) -> tuple[int, int]:
    """(number of heads, number of neurons)."""
    s = model.shape
    return s.n_layers * s.n_heads, s.n_layers * s.d_mlp


def component_labels(model: HookedTransformer) -> list[str]:
    s = model.shape
    return [f"L{l}H{h}" for l in range(s.n_layers) for h in range(s.n_heads)] + \
        [f"L{l}N{n}" for l in range(s.n_layers) for n in range(s.d_mlp)]


def resample(reference: Examples, n: int, seed: int = 0) -> Examples:
    """``n`` examples drawn uniformly with replacement from ``reference`` (the corrupted inputs)."""
    idx = torch.randint(len(reference), (n,), generator=torch.Generator().manual_seed(seed))
    return reference[idx]


def label_logprob(logits: torch.Tensor, examples: Examples, which: str) -> torch.Tensor:
    """[N] sum over answer tokens of the teacher-forced log-probability of ``examples.<which>``."""
    target = getattr(examples, which).to(logits.device)
    logp = logits[:, examples.answer_positions.to(logits.device)].log_softmax(-1)
    return logp.gather(-1, target[..., None]).squeeze(-1).sum(-1)


def _names(model: HookedTransformer) -> list[str]:
    return [_z(l) for l in range(model.shape.n_layers)] + [_post(l) for l in range(model.shape.n_layers)]


def attribution_scores(model: HookedTransformer, examples: Examples, which: str, corrupt: Examples,
                       batch_size: int = BATCH) -> dict[str, torch.Tensor]:
    """Per-example attribution patching scores of every head and neuron for the metric
    ``log P(examples.<which>)``, against ``corrupt`` (same length as ``examples``: row i is the
    resampled input of example i; its own trained label is its teacher-forced answer)."""
    if len(corrupt) != len(examples):
        raise ValueError("corrupt must hold one row per example")
    s = model.shape
    names = _names(model)
    heads, neurons = [], []
    for start in range(0, len(examples), batch_size):
        ex = examples[start:start + batch_size]
        cor = corrupt[start:start + batch_size]
        with torch.no_grad():
            _, cache_cor = model.run_with_cache(model_inputs(cor).to(model.device), names)
        acts: dict[str, torch.Tensor] = {}

        def keep(act, point):
            acts[point.name] = act

        with torch.enable_grad(), model.hooks([(n, keep) for n in names]):
            logits = model(model_inputs(ex, which).to(model.device))
            metric = label_logprob(logits, ex, which).sum()
            grads = dict(zip(names, torch.autograd.grad(metric, [acts[n] for n in names])))
        h = [((cache_cor[_z(l)] - acts[_z(l)].detach()) * grads[_z(l)]).sum((1, 3)) for l in range(s.n_layers)]
        n = [((cache_cor[_post(l)] - acts[_post(l)].detach()) * grads[_post(l)]).sum(1) for l in range(s.n_layers)]
        heads.append(torch.stack(h, 1).cpu())
        neurons.append(torch.stack(n, 1).cpu())
    if not heads:
        return {"heads": torch.zeros(0, s.n_layers, s.n_heads), "neurons": torch.zeros(0, s.n_layers, s.d_mlp)}
    return {"heads": torch.cat(heads), "neurons": torch.cat(neurons)}


def flatten(scores: dict[str, torch.Tensor]) -> torch.Tensor:
    """{"heads": [N, L, H], "neurons": [N, L, d_mlp]} -> [N, n_components] in the flat order."""
    return torch.cat([scores["heads"].flatten(1), scores["neurons"].flatten(1)], dim=1)


def component_scores(model: HookedTransformer, examples: Examples, which: str, reference: Examples,
                     seed: int = 0, batch_size: int = BATCH) -> torch.Tensor:
    """Importance of every component [n_components]: mean over examples of |attribution score|,
    with corrupted inputs resampled from ``reference``. NaN when ``examples`` is empty."""
    if len(examples) == 0:
        return torch.full((sum(n_components(model)),), math.nan)
    scores = attribution_scores(model, examples, which, resample(reference, len(examples), seed), batch_size)
    return flatten(scores).abs().mean(0)


@torch.no_grad()
def patching_effects(model: HookedTransformer, examples: Examples, which: str, corrupt: Examples,
                     components: list[int] | None = None) -> torch.Tensor:
    """Actual activation patching: for each component (flat index), the per-example change of the
    metric when that component's activation (all positions) is replaced by its corrupted one.
    Returns [N, len(components)]. Slow (one forward pass per component); meant for checks."""
    s = model.shape
    n_heads, n_neurons = n_components(model)
    components = list(range(n_heads + n_neurons)) if components is None else list(components)
    _, cache_cor = model.run_with_cache(model_inputs(corrupt).to(model.device), _names(model))
    tokens = model_inputs(examples, which).to(model.device)
    base = label_logprob(model(tokens), examples, which)
    out = []
    for c in components:
        if c < n_heads:
            name, index = _z(c // s.n_heads), (slice(None), slice(None), c % s.n_heads)
        else:
            c -= n_heads
            name, index = _post(c // s.d_mlp), (slice(None), slice(None), c % s.d_mlp)

        def patch(act, _point, name=name, index=index):
            act = act.clone()
            act[index] = cache_cor[name][index]
            return act

        with model.hooks([(name, patch)]):
            out.append(label_logprob(model(tokens), examples, which) - base)
    return torch.stack(out, 1).cpu()


def patching_scores(model: HookedTransformer, examples: Examples, which: str, reference: Examples,
                    seed: int = 0) -> torch.Tensor:
    """Like :func:`component_scores` but with real activation patching (mean |effect| of patching each
    component alone): the check of the first-order approximation. One forward pass per component."""
    if len(examples) == 0:
        return torch.full((sum(n_components(model)),), math.nan)
    return patching_effects(model, examples, which, resample(reference, len(examples), seed)).abs().mean(0)


def top_k(scores: torch.Tensor, fraction: float) -> set[int]:
    """The flat indices of the top ``fraction`` of components by score (at least one)."""
    k = max(1, round(fraction * len(scores)))
    if torch.isnan(scores).any():
        return set()
    return set(scores.topk(k).indices.tolist())


def jaccard(a: set[int], b: set[int]) -> float:
    """|a & b| / |a | b| (NaN when both are empty)."""
    union = len(a | b)
    return len(a & b) / union if union else math.nan


def random_jaccard(n: int, k1: int, k2: int | None = None) -> float:
    """Expected Jaccard index of two independent uniformly random subsets of sizes k1, k2 of n
    items (exact: the intersection size is hypergeometric)."""
    k2 = k1 if k2 is None else k2
    if k1 == 0 and k2 == 0:
        return math.nan
    total = 0.0
    for i in range(max(0, k1 + k2 - n), min(k1, k2) + 1):
        p = math.comb(k1, i) * math.comb(n - k1, k2 - i) / math.comb(n, k2)
        total += p * i / (k1 + k2 - i)
    return total


@torch.no_grad()
def component_means(model: HookedTransformer, examples: Examples) -> dict[str, torch.Tensor]:
    """Mean activation of every head output and neuron per position over ``examples`` (clean
    reference inputs): {hook name: [P, ...]}."""
    names = _names(model)
    _, cache = model.run_with_cache(model_inputs(examples).to(model.device), names)
    return {n: cache[n].mean(0) for n in names}


@contextlib.contextmanager
def ablated(model: HookedTransformer, components: set[int] | list[int], means: dict[str, torch.Tensor]):
    """Mean-ablate the given components (flat indices) at every position for the block."""
    s = model.shape
    n_heads, _ = n_components(model)
    per_hook: dict[str, list[int]] = {}
    for c in sorted(components):
        if c < n_heads:
            per_hook.setdefault(_z(c // s.n_heads), []).append(c % s.n_heads)
        else:
            c -= n_heads
            per_hook.setdefault(_post(c // s.d_mlp), []).append(c % s.d_mlp)

    def make(name, idx):
        idx = torch.tensor(idx)

        def hook(act, _point):
            act = act.clone()
            mean = means[name].to(act.device, act.dtype)
            act[:, :, idx] = mean[: act.shape[1], idx].expand(act.shape[0], *mean[: act.shape[1], idx].shape)
            return act

        return hook

    with model.hooks([(name, make(name, idx)) for name, idx in per_hook.items()]):
        yield model


def _stratum(model: HookedTransformer, c: int) -> tuple[str, int]:
    """(kind, layer) of a flat component index."""
    s = model.shape
    n_heads, _ = n_components(model)
    return ("head", c // s.n_heads) if c < n_heads else ("neuron", (c - n_heads) // s.d_mlp)


def random_components(model: HookedTransformer, k: int | set[int], seed: int = 0,
                      exclude: set[int] | None = None) -> set[int]:
    """A random control set, avoiding ``exclude``. ``k`` an int: that many components drawn
    uniformly. ``k`` a set: as many heads and neurons in each layer as that set has (a control
    that matches the kind and depth of a selection)."""
    n = sum(n_components(model))
    g = torch.Generator().manual_seed(seed)
    exclude = exclude or set()
    if isinstance(k, int):
        pool = torch.tensor([c for c in range(n) if c not in exclude], dtype=torch.long)
        return set(pool[torch.randperm(len(pool), generator=g)[:k]].tolist())
    counts: dict[tuple[str, int], int] = {}
    for c in k:
        counts[_stratum(model, c)] = counts.get(_stratum(model, c), 0) + 1
    out: set[int] = set()
    for stratum, m in sorted(counts.items()):
        pool = torch.tensor([c for c in range(n) if _stratum(model, c) == stratum and c not in exclude],
                            dtype=torch.long)
        if len(pool) < m:  # not enough outside the selection: allow overlap with it
            pool = torch.tensor([c for c in range(n) if _stratum(model, c) == stratum], dtype=torch.long)
        out |= set(pool[torch.randperm(len(pool), generator=g)[:m]].tolist())
    return out


def overlap(model: HookedTransformer, scores_a: torch.Tensor, scores_b: torch.Tensor, fraction: float
            ) -> dict[str, dict]:
    """Jaccard overlap of the top ``fraction`` of two score vectors, with the random baseline (the
    expected Jaccard of two random sets of the same sizes): over all components, over neurons only
    and over heads only. Entries: jaccard, random, k_a, k_b, n, and the two top sets."""
    n_heads, n_neurons = n_components(model)
    out = {}
    for name, idx in (("all", torch.arange(n_heads + n_neurons)), ("neurons", torch.arange(n_heads, n_heads + n_neurons)),
                      ("heads", torch.arange(n_heads))):
        a = {int(idx[i]) for i in top_k(scores_a[idx], fraction)}
        b = {int(idx[i]) for i in top_k(scores_b[idx], fraction)}
        out[name] = {"jaccard": jaccard(a, b) if a and b else math.nan,
                     "random": random_jaccard(len(idx), len(a), len(b)) if a and b else math.nan,
                     "k_a": len(a), "k_b": len(b), "n": len(idx), "top_a": a, "top_b": b}
    return out


def ablation_accuracy(model: HookedTransformer, sets: dict[str, tuple[Examples, str]], components: set[int],
                      means: dict[str, torch.Tensor]) -> dict[str, float]:
    """Exact-match accuracy of each ``name -> (examples, which label)`` with ``components``
    mean-ablated (NaN for an empty set)."""
    with ablated(model, components, means):
        return {name: accuracy(model, ex, which) for name, (ex, which) in sets.items()}

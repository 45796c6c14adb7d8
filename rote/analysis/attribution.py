"""Attribution patching over attention heads and MLP neurons, top-k circuits and their overlap.

Attribution patching (Nanda 2023; Syed et al. 2023) estimates to first order how a metric changes when
one component's activation is replaced by its activation on a resampled input:
``score = (a_corrupt - a_clean) . d metric / d a``. The metric is the teacher-forced log-probability of
the label (section 5) or its logit difference (7.5). Components: every head (``hook_z``) and neuron
(``hook_post``), patched at all positions, in one flat order (heads, then neurons; layer-major).
:func:`circuits` is C3's whole experiment: scores, overlap, statistics (7.5) and ablation."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import pandas as pd
import torch

from .. import scoring
from ..model import HookedTransformer
from ..tasks import Examples
from .patching import ablation_accuracy, component_edits, patched, patched_accuracy, patching_effects

BATCH = scoring.BATCH


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
    """[N] sum over answer tokens of the teacher-forced log-probability of ``examples.<which>``,
    from full-sequence ``logits`` [N, P, vocab]."""
    return scoring.target_logprob(logits[:, examples.answer_positions.to(logits.device)], getattr(examples, which))


def _names(model: HookedTransformer) -> list[str]:
    """The hook points of the components: every head output, then every neuron, layer-major."""
    return [model.hook_name(kind, l) for kind in ("z", "post") for l in range(model.shape.n_layers)]


METRICS = ("logprob", "logit_diff")


def target_logit_diff(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[N] sum over answer tokens of the target's logit minus the largest other logit (7.5: unlike the
    log-probability it does not saturate near one)."""
    target = target.to(logits.device)
    own = logits.gather(-1, target[..., None]).squeeze(-1)
    others = logits.scatter(-1, target[..., None], -math.inf).amax(-1)
    return (own - others).sum(-1)


def _metric(model: HookedTransformer, examples: Examples, which: str, hooks, metric: str) -> torch.Tensor:
    """[N] the attribution metric of ``examples.<which>`` through the one scorer, with gradients."""
    if metric == "logprob":
        return scoring.label_logprob(model, examples, which, hooks=hooks, grad=True)
    if metric == "logit_diff":
        return target_logit_diff(scoring.answer_logits(model, examples, which, hooks=hooks, grad=True),
                                 getattr(examples, which))
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")


def attribution_scores(model: HookedTransformer, examples: Examples, which: str, corrupt: Examples,
                       batch_size: int = BATCH, metric: str = "logprob") -> dict[str, torch.Tensor]:
    """Per-example attribution scores of every head and neuron for the metric (``"logprob"`` or
    ``"logit_diff"``) of ``examples.<which>``, against ``corrupt`` (row i: the resampled input of example i)."""
    if len(corrupt) != len(examples):
        raise ValueError("corrupt must hold one row per example")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    s = model.shape
    names = _names(model)
    z, post = [model.hook_name("z", l) for l in range(s.n_layers)], [model.hook_name("post", l) for l in range(s.n_layers)]
    heads, neurons = [], []
    for start in range(0, len(examples), batch_size):
        ex = examples[start:start + batch_size]
        cor = corrupt[start:start + batch_size]
        with torch.no_grad():
            _, cache_cor = model.run_with_cache(scoring.model_inputs(cor).to(model.device), names)
        kept: dict[str, list[torch.Tensor]] = {n: [] for n in names}

        def keep(act, point):
            kept[point.name].append(act)

        total = _metric(model, ex, which, [(n, keep) for n in names], metric).sum()
        flat = torch.autograd.grad(total, [a for n in names for a in kept[n]])
        grads, i = {}, 0
        for n in names:  # the scorer's batches, put back together
            grads[n] = torch.cat(flat[i:i + len(kept[n])])
            i += len(kept[n])
        acts = {n: torch.cat([a.detach() for a in kept[n]]) for n in names}
        h = [((cache_cor[z[l]] - acts[z[l]]) * grads[z[l]]).sum((1, 3)) for l in range(s.n_layers)]
        n = [((cache_cor[post[l]] - acts[post[l]]) * grads[post[l]]).sum(1) for l in range(s.n_layers)]
        heads.append(torch.stack(h, 1).cpu())
        neurons.append(torch.stack(n, 1).cpu())
    if not heads:
        return {"heads": torch.zeros(0, s.n_layers, s.n_heads), "neurons": torch.zeros(0, s.n_layers, s.d_mlp)}
    return {"heads": torch.cat(heads), "neurons": torch.cat(neurons)}


def flatten(scores: dict[str, torch.Tensor]) -> torch.Tensor:
    """{"heads": [N, L, H], "neurons": [N, L, d_mlp]} -> [N, n_components] in the flat order."""
    return torch.cat([scores["heads"].flatten(1), scores["neurons"].flatten(1)], dim=1)


@dataclass(frozen=True)
class AttributionSettings:
    """The ``seed`` of the resampled inputs, the attribution ``metric`` and the scorer's ``batch_size``."""

    seed: int = 0
    metric: str = "logprob"
    batch_size: int = BATCH

    def __post_init__(self):
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")


def example_importance(model: HookedTransformer, examples: Examples, which: str, reference: Examples,
                       settings: AttributionSettings = AttributionSettings()) -> torch.Tensor:
    """|attribution score| of every component for every example, [N, n_components], with corrupted
    inputs resampled from ``reference``; :func:`component_scores` is its mean over examples."""
    if len(examples) == 0:
        return torch.zeros(0, sum(n_components(model)))
    corrupt = resample(reference, len(examples), settings.seed)
    scores = attribution_scores(model, examples, which, corrupt, settings.batch_size, settings.metric)
    return flatten(scores).abs()


def component_scores(model: HookedTransformer, examples: Examples, which: str, reference: Examples,
                     settings: AttributionSettings = AttributionSettings()) -> torch.Tensor:
    """Importance of every component [n_components]: mean over examples of |attribution score|,
    with corrupted inputs resampled from ``reference``. NaN when ``examples`` is empty."""
    if len(examples) == 0:
        return torch.full((sum(n_components(model)),), math.nan)
    return example_importance(model, examples, which, reference, settings).mean(0)


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


def _ranks(x: torch.Tensor) -> torch.Tensor:
    """Ranks of ``x`` [n] (0-based), ties sharing their average rank."""
    x = x.double()
    sorted_x, order = x.sort()
    ranks = torch.empty_like(x)
    ranks[order] = torch.arange(len(x), dtype=torch.float64)
    uniq, inverse, counts = torch.unique(sorted_x, return_inverse=True, return_counts=True)
    if len(uniq) < len(x):  # average the ranks of ties
        mean_rank = torch.zeros(len(uniq), dtype=torch.float64).index_add_(0, inverse, torch.arange(len(x)).double())
        ranks[order] = (mean_rank / counts)[inverse]
    return ranks


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman rank correlation of two score vectors over all their entries (NaN if either is
    constant or holds a NaN)."""
    if len(a) != len(b) or len(a) < 2 or torch.isnan(a).any() or torch.isnan(b).any():
        return math.nan
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = float(ra.norm() * rb.norm())
    return float(ra @ rb) / den if den > 0 else math.nan


def top_jaccard(a: torch.Tensor, b: torch.Tensor, fraction: float) -> float:
    """Jaccard index of the top ``fraction`` of two score vectors (NaN if either holds a NaN)."""
    ta, tb = top_k(a, fraction), top_k(b, fraction)
    return jaccard(ta, tb) if ta and tb else math.nan


def split_half_overlap(importance: torch.Tensor, fraction: float, n_splits: int = 5, seed: int = 0) -> float:
    """The overlap ceiling (7.5): the top-``fraction`` Jaccard of the mean importance of two disjoint random
    halves of ``importance`` [N, n_components], averaged over ``n_splits`` splits (NaN below 2 examples)."""
    n = len(importance)
    if n < 2:
        return math.nan
    g = torch.Generator().manual_seed(seed)
    values = []
    for _ in range(n_splits):
        perm = torch.randperm(n, generator=g)
        half = n // 2
        values.append(top_jaccard(importance[perm[:half]].mean(0), importance[perm[half:2 * half]].mean(0), fraction))
    return sum(values) / len(values)


def bootstrap_overlap(importance_a: torch.Tensor, importance_b: torch.Tensor, fraction: float, n_boot: int = 200,
                      seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval (over examples: each set resampled with replacement) of the
    top-``fraction`` Jaccard of the mean importances of two sets of examples ([N_a, n], [N_b, n])."""
    if len(importance_a) == 0 or len(importance_b) == 0 or n_boot < 1:
        return math.nan, math.nan
    g = torch.Generator().manual_seed(seed)
    values = []
    for _ in range(n_boot):
        ia = torch.randint(len(importance_a), (len(importance_a),), generator=g)
        ib = torch.randint(len(importance_b), (len(importance_b),), generator=g)
        values.append(top_jaccard(importance_a[ia].mean(0), importance_b[ib].mean(0), fraction))
    v = torch.tensor(values, dtype=torch.float64)
    v = v[~v.isnan()]
    if not len(v):
        return math.nan, math.nan
    alpha = (1 - level) / 2
    return float(v.quantile(alpha)), float(v.quantile(1 - alpha))


@dataclass(frozen=True)
class OverlapSettings:
    """The top ``fraction`` compared, ``n_splits`` split-half draws, ``n_boot`` bootstrap resamples (0: none),
    their ``seed`` and the interval's ``level``."""

    fraction: float
    n_splits: int = 5
    n_boot: int = 200
    seed: int = 0
    level: float = 0.95

    def __post_init__(self):
        if not 0 < self.fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {self.fraction}")
        if self.n_splits < 1:
            raise ValueError(f"n_splits must be at least 1, got {self.n_splits}")
        if self.n_boot < 0:
            raise ValueError(f"n_boot must be at least 0, got {self.n_boot}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level}")


def overlap_statistics(importance_C: torch.Tensor, importance_M: torch.Tensor, settings: OverlapSettings) -> dict:
    """7.5's statistics of the overlap from per-example importances on C and M: ``jaccard`` J(M, C),
    ``random``, the ceilings ``split_half_C`` and ``split_half_M``, ``spearman``, the bootstrap interval
    ``ci_low``/``ci_high``, its ``level`` and the numbers of examples."""
    s = settings
    n = importance_C.shape[1]
    C = importance_C.mean(0) if len(importance_C) else torch.full((n,), math.nan)
    M = importance_M.mean(0) if len(importance_M) else torch.full((n,), math.nan)
    k = max(1, round(s.fraction * n))
    j = top_jaccard(C, M, s.fraction)
    lo, hi = bootstrap_overlap(importance_C, importance_M, s.fraction, s.n_boot, s.seed, s.level)
    return {"jaccard": j, "random": random_jaccard(n, k) if not math.isnan(j) else math.nan,
            "split_half_C": split_half_overlap(importance_C, s.fraction, s.n_splits, s.seed),
            "split_half_M": split_half_overlap(importance_M, s.fraction, s.n_splits, s.seed + 1),
            "spearman": spearman(C, M), "ci_low": lo, "ci_high": hi, "level": s.level,
            "n_C": len(importance_C), "n_M": len(importance_M)}


@torch.no_grad()
def component_means(model: HookedTransformer, examples: Examples) -> dict[str, torch.Tensor]:
    """Mean activation of every head output and neuron per position over ``examples`` (clean
    reference inputs): {hook name: [P, ...]}."""
    names = _names(model)
    _, cache = model.run_with_cache(scoring.model_inputs(examples).to(model.device), names)
    return {n: cache[n].mean(0) for n in names}


@contextlib.contextmanager
def ablated(model: HookedTransformer, components: set[int] | list[int], means: dict[str, torch.Tensor]):
    """Mean-ablate the given components (flat indices) at every position for the block."""
    with patched(model, component_edits(model, components, means)):
        yield model


def _stratum(model: HookedTransformer, c: int) -> tuple[str, int]:
    """(kind, layer) of a flat component index."""
    s = model.shape
    n_heads, _ = n_components(model)
    return ("head", c // s.n_heads) if c < n_heads else ("neuron", (c - n_heads) // s.d_mlp)


def random_components(model: HookedTransformer, k: int | set[int], seed: int = 0,
                      exclude: set[int] | None = None) -> set[int]:
    """A random control set avoiding ``exclude``: ``k`` components drawn uniformly, or (``k`` a set) as many
    heads and neurons in each layer as ``k`` has."""
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
    """Jaccard of the top ``fraction`` of two score vectors with its random baseline, over all components,
    neurons and heads: jaccard, random, k_a, k_b, n and the two top sets."""
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


@dataclass(frozen=True, kw_only=True)
class CircuitSettings(OverlapSettings):
    """The overlap's knobs (``seed`` also draws the resampled inputs and the controls), and at most
    ``max_examples`` examples scored, ``max_fit`` reference examples for the means, ``n_controls`` random
    neuron sets, the attribution ``metrics``."""

    max_examples: int
    max_fit: int
    n_controls: int
    metrics: tuple[str, ...] = METRICS

    def __post_init__(self):
        super().__post_init__()
        if self.max_examples < 1:
            raise ValueError(f"max_examples must be at least 1, got {self.max_examples}")
        if self.max_fit < 1:
            raise ValueError(f"max_fit must be at least 1, got {self.max_fit}")
        if self.n_controls < 0:
            raise ValueError(f"n_controls must be at least 0, got {self.n_controls}")
        for metric in self.metrics:
            if metric not in METRICS:
                raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")


def circuits(model: HookedTransformer, clean: Examples, memorized: Examples, reference: Examples,
             sets: dict[str, tuple[Examples, str]], settings: CircuitSettings) -> dict:
    """C3's circuit experiment: attribution scores on C (true answer) and M (noisy label), their top overlap,
    and the accuracy of ``sets`` with the top generalization neurons mean-ablated against random neurons
    matched in layer. Returns ``scores`` and ``overlap`` (log-prob), ``ablations`` (rows "none", "top
    generalization neurons", "random neurons (matched)") and ``by_metric[metric]`` = {"scores",
    "statistics": :func:`overlap_statistics`}."""
    fraction, seed, metrics = settings.fraction, settings.seed, settings.metrics
    C, M = clean[:settings.max_examples], memorized[:settings.max_examples]
    by_metric = {}
    for metric in dict.fromkeys(("logprob", *metrics)):
        imp_C = example_importance(model, C, "true_label", reference, AttributionSettings(seed=seed, metric=metric))
        imp_M = example_importance(model, M, "label", reference, AttributionSettings(seed=seed + 1, metric=metric))
        n = imp_C.shape[1]
        by_metric[metric] = {
            "scores": {"C": imp_C.mean(0) if len(imp_C) else torch.full((n,), math.nan),
                       "M": imp_M.mean(0) if len(imp_M) else torch.full((n,), math.nan)},
            "statistics": overlap_statistics(imp_C, imp_M, settings)}
    scores = by_metric["logprob"]["scores"]
    if "logprob" not in metrics:
        del by_metric["logprob"]
    overlaps = overlap(model, scores["C"], scores["M"], fraction)
    top_gen = overlaps["neurons"]["top_a"]
    means = component_means(model, reference[:settings.max_fit])
    rows = [{"ablated": "none", **patched_accuracy(model, sets)}]
    if top_gen:
        rows.append({"ablated": "top generalization neurons", **ablation_accuracy(model, sets, top_gen, means)})
        for c in range(settings.n_controls):
            control = random_components(model, top_gen, seed=seed + c, exclude=top_gen)
            rows.append({"ablated": "random neurons (matched)", **ablation_accuracy(model, sets, control, means)})
    ablations = pd.DataFrame(rows).groupby("ablated", sort=False).mean()
    return {"scores": scores, "overlap": overlaps, "ablations": ablations, "by_metric": by_metric}

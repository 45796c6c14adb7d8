"""Attribution patching over attention heads and MLP neurons, top-k circuits and their overlap.

Attribution patching (Nanda 2023; Syed et al. 2023) estimates to first order how a metric changes when
one component's activation is replaced by its activation on a resampled input:
``score = (a_corrupt - a_clean) . d metric / d a``. The metric is the teacher-forced log-probability of
the label (section 5) or its logit difference (7.5). Components: every head (``hook_z``) and neuron
(``hook_post``), patched at all positions, in :mod:`rote.analysis.patching`'s flat order (heads, then
neurons; layer-major). :func:`circuits` is C3's whole experiment: scores, overlap, statistics (7.5) and
ablation."""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import pandas as pd
import torch

from .. import scoring
from ..model import HookedTransformer
from ..tasks import Examples
from .patching import component_edits, component_hooks, patched_accuracy, patching_effects

METRICS = ("logprob", "logit_diff")


def n_components(model: HookedTransformer) -> tuple[int, int]:
    """(number of heads, number of neurons)."""
    s = model.shape
    return s.n_layers * s.n_heads, s.n_layers * s.d_mlp


def resample(reference: Examples, n: int, seed: int = 0) -> Examples:
    """``n`` examples drawn uniformly with replacement from ``reference`` (the corrupted inputs)."""
    idx = torch.randint(len(reference), (n,), generator=torch.Generator().manual_seed(seed))
    return reference[idx]


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
                       batch_size: int = scoring.BATCH, metric: str = "logprob") -> torch.Tensor:
    """Per-example attribution scores [N, n_components] of every head and neuron for the metric
    (``"logprob"`` or ``"logit_diff"``) of ``examples.<which>``, against ``corrupt`` (row i: the resampled
    input of example i)."""
    if len(corrupt) != len(examples):
        raise ValueError("corrupt must hold one row per example")
    names, out = component_hooks(model), []
    for start in range(0, len(examples), batch_size):
        ex, cor = examples[start:start + batch_size], corrupt[start:start + batch_size]
        with torch.no_grad():
            _, cache_cor = model.run_with_cache(scoring.model_inputs(cor).to(model.device), names)
        kept: dict[str, list[torch.Tensor]] = {n: [] for n in names}
        total = _metric(model, ex, which, [(n, lambda act, point: kept[point.name].append(act)) for n in names],
                        metric).sum()
        grads = iter(torch.autograd.grad(total, [a for n in names for a in kept[n]]))
        scores = []
        for n in names:  # the scorer's batches put back together; a head's score summed over its d_head
            grad = torch.cat([next(grads) for _ in kept[n]])
            delta = (cache_cor[n] - torch.cat([a.detach() for a in kept[n]])) * grad
            scores.append(delta.sum((1, 3)) if delta.dim() == 4 else delta.sum(1))
        out.append(torch.cat(scores, 1).cpu())
    return torch.cat(out) if out else torch.zeros(0, sum(n_components(model)))


def example_importance(model: HookedTransformer, examples: Examples, which: str, reference: Examples,
                       seed: int = 0, metric: str = "logprob") -> torch.Tensor:
    """|attribution score| (``metric``) of every component for every example, [N, n_components], with
    corrupted inputs resampled from ``reference`` with ``seed``."""
    return attribution_scores(model, examples, which, resample(reference, len(examples), seed), metric=metric).abs()


def mean_importance(importance: torch.Tensor) -> torch.Tensor:
    """A component's importance [n_components]: the mean over examples (NaN without any)."""
    return importance.mean(0) if len(importance) else torch.full(importance.shape[1:], math.nan)


def patching_scores(model: HookedTransformer, examples: Examples, which: str, reference: Examples,
                    seed: int = 0) -> torch.Tensor:
    """The :func:`mean_importance` of :func:`example_importance` (log-prob) from real activation patching (mean
    |effect| of patching each component alone): the check of the first-order approximation. One forward pass
    per component."""
    if len(examples) == 0:
        return torch.full((sum(n_components(model)),), math.nan)
    return patching_effects(model, examples, which, resample(reference, len(examples), seed)).abs().mean(0)


def top_k(scores: torch.Tensor, fraction: float) -> set[int]:
    """The flat indices of the top ``fraction`` of components by score (at least one; none with a NaN)."""
    k = max(1, round(fraction * len(scores)))
    return set() if torch.isnan(scores).any() else set(scores.topk(k).indices.tolist())


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
    return sum(math.comb(k1, i) * math.comb(n - k1, k2 - i) / math.comb(n, k2) * i / (k1 + k2 - i)
               for i in range(max(0, k1 + k2 - n), min(k1, k2) + 1))


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman rank correlation of two score vectors over all their entries (NaN if either is
    constant or holds a NaN)."""
    if len(a) != len(b) or len(a) < 2 or torch.isnan(a).any() or torch.isnan(b).any():
        return math.nan
    # 0-based ranks, ties sharing their average rank
    ra, rb = (torch.from_numpy(pd.Series(x.double().numpy()).rank().to_numpy() - 1) for x in (a, b))
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
    n, half = len(importance), len(importance) // 2
    if n < 2:
        return math.nan
    g = torch.Generator().manual_seed(seed)
    perms = [torch.randperm(n, generator=g) for _ in range(n_splits)]
    values = [top_jaccard(importance[p[:half]].mean(0), importance[p[half:2 * half]].mean(0), fraction) for p in perms]
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
    alpha = (1 - level) / 2
    return (float(v.quantile(alpha)), float(v.quantile(1 - alpha))) if len(v) else (math.nan, math.nan)


@dataclass(frozen=True)
class OverlapSettings:
    """The top ``fraction`` compared, ``n_splits`` split-half draws, ``n_boot`` bootstrap resamples (0: none),
    their ``seed`` and the interval's ``level``."""

    fraction: float
    n_splits: int = 5
    n_boot: int = 200
    seed: int = 0
    level: float = 0.95

    def _rules(self) -> list:
        """(field, whether its value is valid, the valid range in words)."""
        return [("fraction", 0 < self.fraction <= 1, "in (0, 1]"), ("n_splits", self.n_splits >= 1, "at least 1"),
                ("n_boot", self.n_boot >= 0, "at least 0"), ("level", 0 < self.level < 1, "in (0, 1)")]

    def __post_init__(self):
        for name, ok, wanted in self._rules():
            if not ok:
                raise ValueError(f"{name} must be {wanted}, got {getattr(self, name)}")


def overlap_statistics(importance_C: torch.Tensor, importance_M: torch.Tensor, settings: OverlapSettings) -> dict:
    """7.5's statistics of the overlap from per-example importances on C and M: ``jaccard`` J(M, C),
    ``random``, the ceilings ``split_half_C`` and ``split_half_M``, ``spearman``, the bootstrap interval
    ``ci_low``/``ci_high``, its ``level`` and the numbers of examples."""
    s = settings
    C, M = mean_importance(importance_C), mean_importance(importance_M)
    j, k = top_jaccard(C, M, s.fraction), max(1, round(s.fraction * len(C)))
    lo, hi = bootstrap_overlap(importance_C, importance_M, s.fraction, s.n_boot, s.seed, s.level)
    return {"jaccard": j, "random": math.nan if math.isnan(j) else random_jaccard(len(C), k),
            "split_half_C": split_half_overlap(importance_C, s.fraction, s.n_splits, s.seed),
            "split_half_M": split_half_overlap(importance_M, s.fraction, s.n_splits, s.seed + 1),
            "spearman": spearman(C, M), "ci_low": lo, "ci_high": hi, "level": s.level,
            "n_C": len(importance_C), "n_M": len(importance_M)}


@torch.no_grad()
def component_means(model: HookedTransformer, examples: Examples) -> dict[str, torch.Tensor]:
    """Mean activation of every head output and neuron per position over ``examples`` (clean
    reference inputs): {hook name: [P, ...]}."""
    _, cache = model.run_with_cache(scoring.model_inputs(examples).to(model.device), component_hooks(model))
    return {n: a.mean(0) for n, a in cache.items()}


def _stratum(model: HookedTransformer, c: int) -> tuple[str, int]:
    """(kind, layer) of a flat component index."""
    s = model.shape
    n_heads, _ = n_components(model)
    return ("head", c // s.n_heads) if c < n_heads else ("neuron", (c - n_heads) // s.d_mlp)


def random_components(model: HookedTransformer, chosen: set[int], seed: int = 0,
                      exclude: set[int] | None = None) -> set[int]:
    """A random control for ``chosen``: as many heads and neurons in each layer, drawn outside ``exclude``
    (where a layer has too few outside it, from the whole layer)."""
    g = torch.Generator().manual_seed(seed)
    out: set[int] = set()
    for stratum, m in sorted(collections.Counter(_stratum(model, c) for c in chosen).items()):
        pool = [c for c in range(sum(n_components(model))) if _stratum(model, c) == stratum]
        outside = [c for c in pool if c not in (exclude or set())]
        pool = torch.tensor(outside if len(outside) >= m else pool, dtype=torch.long)
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
    neuron sets."""

    max_examples: int
    max_fit: int
    n_controls: int

    def _rules(self) -> list:
        return super()._rules() + [("max_examples", self.max_examples >= 1, "at least 1"),
                                   ("max_fit", self.max_fit >= 1, "at least 1"),
                                   ("n_controls", self.n_controls >= 0, "at least 0")]


def circuits(model: HookedTransformer, clean: Examples, memorized: Examples, reference: Examples,
             sets: dict[str, tuple[Examples, str]], settings: CircuitSettings) -> dict:
    """C3's circuit experiment: attribution scores on C (true answer) and M (noisy label), their top overlap,
    and the accuracy of ``sets`` with the top generalization neurons mean-ablated against random neurons
    matched in layer. Returns ``scores`` and ``overlap`` (log-prob), ``ablations`` (rows "none", "top
    generalization neurons", "random neurons (matched)") and ``by_metric[metric]`` = {"scores",
    "statistics": :func:`overlap_statistics`}."""
    C, M, seed = clean[:settings.max_examples], memorized[:settings.max_examples], settings.seed
    by_metric = {}
    for metric in METRICS:
        imp_C = example_importance(model, C, "true_label", reference, seed, metric)
        imp_M = example_importance(model, M, "label", reference, seed + 1, metric)
        by_metric[metric] = {"scores": {"C": mean_importance(imp_C), "M": mean_importance(imp_M)},
                             "statistics": overlap_statistics(imp_C, imp_M, settings)}
    scores = by_metric["logprob"]["scores"]
    overlaps = overlap(model, scores["C"], scores["M"], settings.fraction)
    top_gen = overlaps["neurons"]["top_a"]
    means = component_means(model, reference[:settings.max_fit])
    rows = [{"ablated": "none", **patched_accuracy(model, sets)}]
    if top_gen:
        controls = [random_components(model, top_gen, seed + c, top_gen) for c in range(settings.n_controls)]
        rows += [{"ablated": "top generalization neurons" if i == 0 else "random neurons (matched)",
                  **patched_accuracy(model, sets, component_edits(model, chosen, means))}
                 for i, chosen in enumerate([top_gen, *controls])]
    ablations = pd.DataFrame(rows).groupby("ablated", sort=False).mean()
    return {"scores": scores, "overlap": overlaps, "ablations": ablations, "by_metric": by_metric}

"""Linear probes per layer and position, trained on clean examples' cached activations.

A probe is a multinomial logistic regression on the standardized residual stream (mean and standard
deviation from its training examples), with a small L2 penalty, fitted full-batch by L-BFGS.
Probes for all layers are fitted together as one batched problem (they share nothing but the
optimizer call). Accuracy is always reported next to the chance level: the accuracy of always
answering the most frequent class of the probe's training labels.

- :func:`fit_probes` / :class:`LinearProbes` -- the probes themselves, on tensors.
- :func:`probe_sweep` -- every target of :mod:`rote.analysis.targets` at every layer and chosen
  positions, trained on clean training examples, evaluated on named example sets (e.g. M and C).
- :func:`group_curves`, :func:`best_layer_summary` -- pooled accuracies of target groups (the C2
  headline results) per layer, and the comparison at the best layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F

from ..model import HookedTransformer
from ..tasks import Examples, TaskData
from .lens import model_inputs, residual_stack
from .targets import headline_targets, intermediate_targets


@dataclass
class LinearProbes:
    """G probes at once: logits = ((x - mean) / std) @ W + b, W [G, d, C]."""

    mean: torch.Tensor  # [G, 1, d]
    std: torch.Tensor  # [G, 1, d]
    W: torch.Tensor  # [G, d, C]
    b: torch.Tensor  # [G, 1, C]

    def logits(self, acts: torch.Tensor) -> torch.Tensor:
        """acts [G, N, d] -> [G, N, C]."""
        return ((acts - self.mean) / self.std) @ self.W + self.b

    def predict(self, acts: torch.Tensor) -> torch.Tensor:
        return self.logits(acts).argmax(-1)

    def accuracy(self, acts: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """[G] accuracies (NaN for an empty set)."""
        if acts.shape[1] == 0:
            return torch.full((acts.shape[0],), math.nan)
        return (self.predict(acts) == labels[None]).float().mean(1)


def fit_probes(acts: torch.Tensor, labels: torch.Tensor, n_classes: int, weight_decay: float = 1e-3,
               max_iter: int = 100) -> LinearProbes:
    """Fit one probe per leading index of ``acts`` [G, N, d] to ``labels`` [N] (full-batch L-BFGS)."""
    acts = acts.float()
    if acts.dim() == 2:
        acts = acts[None]
    G, N, d = acts.shape
    if N == 0:
        raise ValueError("cannot fit a probe on zero examples")
    mean = acts.mean(1, keepdim=True)
    std = acts.std(1, keepdim=True).clamp_min(1e-6) if N > 1 else torch.ones(G, 1, d)
    x = (acts - mean) / std
    W = torch.zeros(G, d, n_classes, requires_grad=True)
    b = torch.zeros(G, 1, n_classes, requires_grad=True)
    y = labels.long().expand(G, N).reshape(-1)
    opt = torch.optim.LBFGS([W, b], lr=1, max_iter=max_iter, history_size=20, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-6, tolerance_change=1e-9)

    def closure():
        opt.zero_grad()
        logits = x @ W + b
        loss = F.cross_entropy(logits.reshape(-1, n_classes), y) * G + weight_decay * (W ** 2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    return LinearProbes(mean, std, W.detach(), b.detach())


def chance_accuracy(train_labels: torch.Tensor, eval_labels: torch.Tensor) -> float:
    """Accuracy on ``eval_labels`` of always answering the most frequent training label."""
    if len(eval_labels) == 0 or len(train_labels) == 0:
        return math.nan
    majority = torch.bincount(train_labels.long()).argmax()
    return (eval_labels == majority).float().mean().item()


def _evaluation_mask(target, examples: Examples) -> torch.Tensor:
    """Examples a target is scored on: all of them, except that on noisy examples the true answer
    (a target with ``differs``) is scored only where the noisy label disagrees with it."""
    if target.differs is None:
        return torch.ones(len(examples), dtype=torch.bool)
    return target.differs | ~examples.is_noisy


def probe_sweep(model: HookedTransformer, data: TaskData, train: Examples, sets: dict[str, Examples],
                targets: list[str] | None = None, positions: list[int] | None = None,
                max_train: int = 3000, seed: int = 0, weight_decay: float = 1e-3,
                max_iter: int = 100) -> pd.DataFrame:
    """Probe each target at every layer, trained on (up to ``max_train`` of) ``train``.

    ``targets``: names from :func:`~rote.analysis.targets.intermediate_targets` (all by default).
    ``positions``: probe every target at each of these positions; None = each target at its own
    position. Returns one row per (target, layer, position, set) with ``n`` (examples scored),
    ``correct``, ``accuracy`` and ``chance`` (NaN accuracy when a set is empty).
    """
    if len(train) > max_train:
        train = train[torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))[:max_train]]
    train_t = intermediate_targets(train, data)
    names = list(train_t) if targets is None else list(targets)
    set_t = {s: intermediate_targets(ex, data) for s, ex in sets.items()}
    wanted = {n: ([train_t[n].position] if positions is None else list(positions)) for n in names}
    all_pos = sorted({p for ps in wanted.values() for p in ps})
    col = {p: i for i, p in enumerate(all_pos)}
    train_acts = residual_stack(model, model_inputs(train), all_pos)  # [L+1, N, P, d]
    set_acts = {s: residual_stack(model, model_inputs(ex), all_pos) for s, ex in sets.items()}
    rows = []
    for name in names:
        tt = train_t[name]
        for p in wanted[name]:
            probes = fit_probes(train_acts[:, :, col[p]], tt.labels, tt.n_classes, weight_decay, max_iter)
            for s, ex in sets.items():
                target = set_t[s][name]
                mask = _evaluation_mask(target, ex)
                labels = target.labels[mask]
                acts = set_acts[s][:, mask, col[p]]
                n = int(mask.sum())
                correct = (probes.predict(acts) == labels[None]).sum(1) if n else torch.zeros(acts.shape[0])
                chance = chance_accuracy(tt.labels, labels)
                for layer in range(acts.shape[0]):
                    rows.append({"target": name, "layer": layer, "position": p, "set": s, "n": n,
                                 "correct": int(correct[layer]), "accuracy": correct[layer].item() / n if n else math.nan,
                                 "chance": chance})
    return pd.DataFrame(rows)


def group_curves(sweep: pd.DataFrame, task: str, groups: dict[str, list[str]] | None = None) -> pd.DataFrame:
    """Accuracy per (group, layer, set) pooled over the group's targets, each at its own probed
    position(s) (e.g. the five answer digits): correct / n, and chance weighted by n."""
    groups = headline_targets(task) if groups is None else groups
    rows = []
    for group, members in groups.items():
        part = sweep[sweep.target.isin(members)]
        for (layer, s), g in part.groupby(["layer", "set"], sort=True):
            n = g.n.sum()
            rows.append({"group": group, "layer": int(layer), "set": s, "n": int(n),
                         "accuracy": g.correct.sum() / n if n else math.nan,
                         "chance": (g.chance * g.n).sum() / n if n else math.nan})
    return pd.DataFrame(rows, columns=["group", "layer", "set", "n", "accuracy", "chance"])


def best_layer_summary(curves: pd.DataFrame, memorized: str = "M", clean: str = "C") -> pd.DataFrame:
    """For each group, the layer where the probe reads it best on the memorized set, and there:
    accuracy on M and on C, chance on M, acc_M / acc_C and acc_M / chance (NaN when M is empty)."""
    rows = []
    for group, g in curves.groupby("group", sort=False):
        m = g[g.set == memorized].set_index("layer")
        c = g[g.set == clean].set_index("layer")
        if m.accuracy.isna().all():
            layer, acc_m, chance = None, math.nan, math.nan
        else:
            layer = int(m.accuracy.idxmax())
            acc_m, chance = float(m.accuracy[layer]), float(m.chance[layer])
        acc_c = float(c.accuracy[layer]) if layer is not None and layer in c.index else math.nan
        rows.append({"group": group, "best_layer": layer, "acc_M": acc_m, "acc_C": acc_c, "chance": chance,
                     "ratio_M_C": acc_m / acc_c if acc_c else math.nan,
                     "over_chance": acc_m / chance if chance else math.nan,
                     "n_M": int(m.n.max()) if len(m) else 0})
    return pd.DataFrame(rows)

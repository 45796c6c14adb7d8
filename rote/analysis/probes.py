"""Linear probes per layer and position, trained on clean examples' cached activations.

A probe is a multinomial logistic regression on the standardized residual stream (mean and standard
deviation from its training examples), with a small L2 penalty, fitted full-batch by L-BFGS.
Probes for all layers are fitted together as one batched problem (they share nothing but the
optimizer call). Accuracy is always reported next to the chance level: the accuracy of always
answering the most frequent class of the probe's training labels.

- :func:`fit_probes` / :class:`LinearProbes` -- the probes themselves, on tensors.
- :class:`ProbeSettings` -- how the probes of both sweeps are trained; :class:`ProbeTargets` -- what
  :func:`probe_sweep` reads.
- :func:`probe_sweep` -- every target of :mod:`rote.analysis.targets` at every layer and chosen
  positions, trained on clean training examples, evaluated on named example sets (e.g. M and C).
- :func:`group_curves`, :func:`best_layer_summary` -- pooled accuracies of target groups (the C2
  headline results) per layer, and the comparison at the best layer (claim C2's checks are computed
  from them by :func:`rote.verdicts.c2.checks`).
- :func:`position_summary` -- the same comparison for one target read at another position (THR: the
  bridge at r2, amendment 7.4).
- :func:`masked_probe_sweep` -- a target read with one class masked per example (THR: the true tail
  on M with the noisy label's class masked, on C a random wrong class; amendment 7.4).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F

from ..model import HookedTransformer
from ..scoring import model_inputs
from ..tasks import Examples, TaskData
from .lens import residual_stack
from .ranges import is_finite_at_least, is_whole
from .targets import headline_targets, intermediate_targets, joint_targets, masked_class


@contextlib.contextmanager
def single_thread():
    """Run the block with one intra-op thread (restored afterwards, also on error).

    The probes and INLP classifiers are many small full-batch steps; on such tensors the thread pool
    costs more than it gains, and on a loaded 2-core machine far more (measured: 0.14 s single-threaded
    against 3.5 s with two threads for the same THR smoke probe sweep)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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
        return (self.predict(acts) == labels[None]).double().mean(1)


def fit_probes(acts: torch.Tensor, labels: torch.Tensor, n_classes: int | list[int], weight_decay: float = 1e-3,
               max_iter: int = 50, standardize: bool = True) -> LinearProbes:
    """Fit one probe per leading index of ``acts`` [G, N, d] (full-batch L-BFGS, all G at once).

    ``labels``: [N] shared by all probes, or [G, N]; ``n_classes``: one int, or one per probe (the
    probes of different targets can be fitted together; unused classes are masked out).
    ``standardize=False`` scales each probe's inputs by one number instead of per feature, so that
    the columns of ``W`` are directions of the raw activation space (what INLP needs)."""
    acts = acts.float()
    if acts.dim() == 2:
        acts = acts[None]
    G, N, d = acts.shape
    if N == 0:
        raise ValueError("cannot fit a probe on zero examples")
    sizes = [n_classes] * G if isinstance(n_classes, int) else list(n_classes)
    C = max(sizes)
    mask = torch.zeros(G, 1, C)
    for g, k in enumerate(sizes):
        mask[g, 0, k:] = -1e4  # classes this probe does not have
    mean = acts.mean(1, keepdim=True)
    if standardize:
        std = acts.std(1, keepdim=True).clamp_min(1e-6) if N > 1 else torch.ones(G, 1, d)
    else:
        std = ((acts - mean) ** 2).mean((1, 2), keepdim=True).sqrt().clamp_min(1e-6).expand(G, 1, d)
    x = (acts - mean) / std
    W = torch.zeros(G, d, C, requires_grad=True)
    b = torch.zeros(G, 1, C, requires_grad=True)
    y = labels.long().expand(G, N).reshape(-1)
    opt = torch.optim.LBFGS([W, b], lr=1, max_iter=max_iter, history_size=20, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-6, tolerance_change=1e-9)

    def closure():
        opt.zero_grad()
        logits = x @ W + b + mask
        loss = F.cross_entropy(logits.reshape(-1, C), y) * G + weight_decay * (W ** 2).sum()
        loss.backward()
        return loss

    with torch.enable_grad(), single_thread():
        opt.step(closure)
    return LinearProbes(mean, std, W.detach(), b.detach() + mask)


def chance_accuracy(train_labels: torch.Tensor, eval_labels: torch.Tensor) -> float:
    """Accuracy on ``eval_labels`` of always answering the most frequent training label."""
    if len(eval_labels) == 0 or len(train_labels) == 0:
        return math.nan
    majority = torch.bincount(train_labels.long()).argmax()
    return (eval_labels == majority).float().mean().item()


def probe_training_set(train: Examples, max_train: int, seed: int) -> Examples:
    """Up to ``max_train`` of ``train``, drawn with ``seed`` (the same draw for every probe of a chapter)."""
    if len(train) > max_train:
        train = train[torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))[:max_train]]
    return train


@dataclass(frozen=True)
class ProbeSettings:
    """How the probes of :func:`probe_sweep` and :func:`masked_probe_sweep` are trained: on up to
    ``max_train`` training examples drawn with ``seed`` (:func:`probe_training_set`), with L2 penalty
    ``weight_decay`` and at most ``max_iter`` L-BFGS iterations (:func:`fit_probes`). ``chunk``: at most
    this many probes per L-BFGS call (:func:`probe_sweep`); ``mask_seed``: draws the wrong class masked
    on clean examples (:func:`masked_probe_sweep`)."""

    max_train: int = 3000
    seed: int = 0
    weight_decay: float = 1e-3
    max_iter: int = 50
    chunk: int = 48
    mask_seed: int = 0

    def __post_init__(self):
        for name, low in (("max_train", 1), ("seed", 0), ("max_iter", 1), ("chunk", 1), ("mask_seed", 0)):
            value = getattr(self, name)
            if not (is_whole(value) and value >= low):
                raise ValueError(f"ProbeSettings.{name} must be an int >= {low}, got {value!r}")
        wd = self.weight_decay
        if not (is_finite_at_least(wd)):
            raise ValueError(f"ProbeSettings.weight_decay must be a finite number >= 0, got {wd!r}")


@dataclass(frozen=True)
class ProbeTargets:
    """What :func:`probe_sweep` reads: the targets ``names`` of
    :func:`~rote.analysis.targets.intermediate_targets` (None: all), each at its own position and at
    every one of ``positions``, and the ``joint`` targets (results read jointly by several targets;
    None: :func:`~rote.analysis.targets.joint_targets` whose members are all probed)."""

    names: tuple[str, ...] | None = None
    positions: tuple[int, ...] = ()
    joint: dict[str, list[str]] | None = None

    def __post_init__(self):
        if isinstance(self.names, str):
            raise ValueError(f"ProbeTargets.names must be a list of target names, got the string {self.names!r}")
        if self.names is not None:
            object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "positions", tuple(self.positions))
        if not all(is_whole(p) and p >= 0 for p in self.positions):
            raise ValueError(f"ProbeTargets.positions must be ints >= 0, got {self.positions!r}")


def _evaluation_mask(target, examples: Examples) -> torch.Tensor:
    """Examples a target is scored on: all of them, except that on noisy examples the true answer
    (a target with ``differs``) is scored only where the noisy label disagrees with it."""
    if target.differs is None:
        return torch.ones(len(examples), dtype=torch.bool)
    return target.differs | ~examples.is_noisy


def probe_sweep(model: HookedTransformer, data: TaskData, train: Examples, sets: dict[str, Examples],
                targets: ProbeTargets = ProbeTargets(), settings: ProbeSettings = ProbeSettings()) -> pd.DataFrame:
    """Probe each target at every layer, trained on (up to ``settings.max_train`` of) ``train``.

    ``targets.names``: names from :func:`~rote.analysis.targets.intermediate_targets` (all by default).
    ``targets.positions``: probe every target also at each of these positions (always at its own).
    ``targets.joint``: extra rows for results read jointly by several targets at their own
    positions (default :func:`~rote.analysis.targets.joint_targets`, where all members are probed);
    their ``position`` is -1. Probes with the same number of classes are fitted together, up to
    ``settings.chunk`` per L-BFGS call (on small problems a call costs mostly fixed overhead). Returns
    one row per (target, layer, position, set)
    with ``n`` (examples scored), ``correct``, ``accuracy``, ``chance`` (NaN accuracy for an empty
    set) and ``own`` (the row is at the target's own position, or is a joint target).
    """
    train = probe_training_set(train, settings.max_train, settings.seed)
    train_t = intermediate_targets(train, data)
    names = list(train_t) if targets.names is None else list(targets.names)
    positions, joint = targets.positions, targets.joint
    if joint is None:
        joint = {k: v for k, v in joint_targets(data.task).items() if set(v) <= set(names)}
    set_t = {s: intermediate_targets(ex, data) for s, ex in sets.items()}
    wanted = {n: sorted({train_t[n].position, *(positions or [])}) for n in names}
    all_pos = sorted({p for ps in wanted.values() for p in ps})
    col = {p: i for i, p in enumerate(all_pos)}
    train_acts = residual_stack(model, model_inputs(train), all_pos)  # [L+1, N, P, d]
    set_acts = {s: residual_stack(model, model_inputs(ex), all_pos) for s, ex in sets.items()}
    n_layers = train_acts.shape[0]
    rows, own = [], {}  # own[(name, set)]: [L+1, N] correctness at the target's own position

    def add_rows(name, position, s, hits, mask, chance, own_position):
        n = int(mask.sum())
        correct = hits[:, mask].sum(1)
        for layer in range(n_layers):
            rows.append({"target": name, "layer": layer, "position": position, "own": own_position, "set": s,
                         "n": n, "correct": int(correct[layer]),
                         "accuracy": correct[layer].item() / n if n else math.nan, "chance": chance})

    jobs = [(name, p) for name in names for p in wanted[name]]
    per_chunk = max(1, settings.chunk // n_layers)
    parts = []  # jobs with the same number of classes share an L-BFGS call (no padding wasted)
    for k in sorted({train_t[name].n_classes for name, _ in jobs}):
        same = [job for job in jobs if train_t[job[0]].n_classes == k]
        parts += [same[i:i + per_chunk] for i in range(0, len(same), per_chunk)]
    for part in parts:
        probes = fit_probes(torch.cat([train_acts[:, :, col[p]] for _, p in part]),
                            torch.cat([train_t[name].labels.expand(n_layers, -1) for name, _ in part]),
                            [train_t[name].n_classes for name, _ in part for _ in range(n_layers)],
                            settings.weight_decay, settings.max_iter)
        for s, ex in sets.items():
            preds = probes.predict(torch.cat([set_acts[s][:, :, col[p]] for _, p in part]))
            for k, (name, p) in enumerate(part):
                target, tt = set_t[s][name], train_t[name]
                hits = preds[k * n_layers:(k + 1) * n_layers] == target.labels[None]  # [L+1, N]
                mask = _evaluation_mask(target, ex)
                if p == tt.position:
                    own[name, s] = (hits, mask)
                add_rows(name, p, s, hits, mask, chance_accuracy(tt.labels, target.labels[mask]), p == tt.position)
    for jname, members in joint.items():
        train_key = _joint_key([train_t[m] for m in members])
        for s, ex in sets.items():
            if not all((m, s) in own for m in members):
                continue
            hits = torch.stack([own[m, s][0] for m in members]).all(0)
            mask = torch.stack([own[m, s][1] for m in members]).all(0)
            key = _joint_key([set_t[s][m] for m in members])
            add_rows(jname, -1, s, hits, mask, chance_accuracy(train_key, key[mask]), True)
    return pd.DataFrame(rows, columns=["target", "layer", "position", "own", "set", "n", "correct", "accuracy",
                                       "chance"])


def _joint_key(members) -> torch.Tensor:
    """One integer per example for the tuple of the members' labels."""
    key = torch.zeros_like(members[0].labels)
    for t in members:
        key = key * t.n_classes + t.labels
    return key


def group_curves(sweep: pd.DataFrame, task: str, groups: dict[str, list[str]] | None = None) -> pd.DataFrame:
    """Accuracy per (group, layer, set) pooled over the group's targets, each at its own position
    (e.g. the five answer digits): correct / n, and chance weighted by n."""
    groups = headline_targets(task) if groups is None else groups
    rows = []
    for group, members in groups.items():
        part = sweep[sweep.target.isin(members) & sweep.own]
        for (layer, s), g in part.groupby(["layer", "set"], sort=True):
            n = g.n.sum()
            rows.append({"group": group, "layer": int(layer), "set": s, "n": int(n),
                         "accuracy": g.correct.sum() / n if n else math.nan,
                         "chance": (g.chance * g.n).sum() / n if n else math.nan})
    return pd.DataFrame(rows, columns=["group", "layer", "set", "n", "accuracy", "chance"])


def best_layer_summary(curves: pd.DataFrame, memorized: str = "M", clean: str = "C") -> pd.DataFrame:
    """For each group, the layer where the probe reads it best on the memorized set, and there:
    accuracy on M and on C, chance on M, acc_M / acc_C and acc_M / chance (NaN when M is empty).

    Beside them, read on C alone (protocol 8.5: C2's reachable check reads C at C's own best layer,
    never a layer chosen by M): ``best_layer_C``, the layer where the probe reads the group best on
    the clean set, and ``acc_C_best``, its accuracy there (None / NaN when C is empty)."""
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
        layer_c = None if not len(c) or c.accuracy.isna().all() else int(c.accuracy.idxmax())
        rows.append({"group": group, "best_layer": layer, "acc_M": acc_m, "acc_C": acc_c, "chance": chance,
                     "ratio_M_C": acc_m / acc_c if acc_c else math.nan,
                     "over_chance": acc_m / chance if chance else math.nan,
                     "n_M": int(m.n.max()) if len(m) else 0,
                     "best_layer_C": layer_c, "acc_C_best": float(c.accuracy[layer_c]) if layer_c is not None else math.nan})
    return pd.DataFrame(rows)


def position_summary(sweep: pd.DataFrame, target: str, position: int, group: str | None = None,
                     memorized: str = "M", clean: str = "C") -> pd.DataFrame:
    """:func:`best_layer_summary` for ``target`` read at ``position`` (a row of
    :func:`probe_sweep` with ``targets.positions`` including it), e.g. the THR bridge at r2. One row, group
    ``group`` (default ``"<target> at <position>"``); NaN accuracies when the position was not probed."""
    part = sweep[(sweep.target == target) & (sweep.position == position)]
    curves = part.assign(group=group or f"{target} at {position}")[["group", "layer", "set", "n", "accuracy",
                                                                    "chance"]]
    if not len(curves):
        return pd.DataFrame([{"group": group or f"{target} at {position}", "best_layer": None, "acc_M": math.nan,
                              "acc_C": math.nan, "chance": math.nan, "ratio_M_C": math.nan,
                              "over_chance": math.nan, "n_M": 0, "best_layer_C": None, "acc_C_best": math.nan}])
    return best_layer_summary(curves, memorized, clean)


def masked_probe_sweep(model: HookedTransformer, data: TaskData, train: Examples, sets: dict[str, Examples],
                       target: str = "tail", settings: ProbeSettings = ProbeSettings()) -> pd.DataFrame:
    """Read ``target`` at its own position with one class masked per example (amendment 7.4).

    The probes (one per layer) are trained exactly as in :func:`probe_sweep` (same training draw for
    the same ``settings.max_train`` and ``settings.seed``), without any mask. On each set, each example's
    prediction is the top-1 over the classes other than :func:`~rote.analysis.targets.masked_class` (noisy
    examples: their trained label's class; clean ones: a random wrong class drawn with
    ``settings.mask_seed``). Scored
    on the examples of :func:`probe_sweep` (on noisy ones, only where the true answer differs from the
    label). Chance is 1 / (n_classes - 1): with one wrong class hidden, a guess among the rest.

    Returns one row per (layer, set): ``n``, ``correct`` and ``accuracy`` (masked), ``accuracy_unmasked``
    (the plain top-1, as in :func:`probe_sweep`), ``reads_masked`` (share of examples whose plain top-1
    is the masked class: on M, how often the probe reads the model's output, the noisy label, instead
    of the true answer) and ``chance``."""
    train = probe_training_set(train, settings.max_train, settings.seed)
    tt = intermediate_targets(train, data)[target]
    acts = residual_stack(model, model_inputs(train), [tt.position])[:, :, 0]  # [L+1, N, d]
    layers = acts.shape[0]
    fitted = fit_probes(acts, tt.labels.expand(layers, -1), tt.n_classes, settings.weight_decay, settings.max_iter)
    chance = 1.0 / (tt.n_classes - 1)
    rows = []
    for s, ex in sets.items():
        t = intermediate_targets(ex, data)[target]
        keep = _evaluation_mask(t, ex)
        hidden = masked_class(t, ex, seed=settings.mask_seed)
        x = residual_stack(model, model_inputs(ex), [t.position])[:, :, 0]
        logits = fitted.logits(x) if len(ex) else torch.zeros(layers, 0, tt.n_classes)  # [L+1, N, C]
        plain = logits.argmax(-1)
        masked = logits.scatter(-1, hidden[None, :, None].expand(layers, -1, 1), -math.inf).argmax(-1)
        n = int(keep.sum())
        for layer in range(layers):
            hit, raw = masked[layer][keep] == t.labels[keep], plain[layer][keep]
            rows.append({"target": target, "layer": layer, "set": s, "n": n, "correct": int(hit.sum()),
                         "accuracy": hit.double().mean().item() if n else math.nan,
                         "accuracy_unmasked": (raw == t.labels[keep]).double().mean().item() if n else math.nan,
                         "reads_masked": (raw == hidden[keep]).double().mean().item() if n else math.nan,
                         "chance": chance})
    return pd.DataFrame(rows, columns=["target", "layer", "set", "n", "correct", "accuracy", "accuracy_unmasked",
                                       "reads_masked", "chance"])


def masked_summary(sweep: pd.DataFrame, group: str = "true tail, masked", memorized: str = "M",
                   clean: str = "C") -> pd.DataFrame:
    """:func:`best_layer_summary` of :func:`masked_probe_sweep` (best layer = best masked accuracy on
    M), with, at that layer, ``acc_M_unmasked`` and ``reads_masked_M`` (share of M whose unmasked read
    is the masked, i.e. the noisy, class)."""
    out = best_layer_summary(sweep.assign(group=group), memorized, clean)
    layer = out.iloc[0].best_layer
    m = sweep[sweep.set == memorized].set_index("layer")
    ok = layer is not None and not (isinstance(layer, float) and math.isnan(layer))
    out["acc_M_unmasked"] = float(m.accuracy_unmasked[int(layer)]) if ok else math.nan
    out["reads_masked_M"] = float(m.reads_masked[int(layer)]) if ok else math.nan
    return out


def found_layers(curves: pd.DataFrame, group: str, min_over_chance: float, set_name: str = "C") -> list[int]:
    """The intermediate layers (1..L-1) at which the probe reads ``group`` on ``set_name`` at least
    ``min_over_chance`` times its chance level: where the model holds the result (C3 erases there)."""
    part = curves[(curves.group == group) & (curves.set == set_name)]
    last = int(curves.layer.max()) if len(curves) else 0
    ok = part[(part.layer > 0) & (part.layer < last) & (part.accuracy > 0)
              & (part.accuracy >= min_over_chance * part.chance)]
    return sorted(int(l) for l in ok.layer)

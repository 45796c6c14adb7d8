"""Linear probes per layer and position, trained on clean examples' cached activations.

A probe is a multinomial logistic regression on the standardized residual stream with a small L2
penalty, fitted full-batch by L-BFGS, all layers at once. Accuracy always comes with chance: the share of
the scored examples in the majority class of the probe's training labels (8.6: measured on the set the
accuracy is). :func:`probe_sweep` / :func:`sweep_probes` read every target at every layer;
:func:`best_layer_summary` and :func:`position_summary` compare M and C at the best layer (C2's inputs);
:func:`masked_probe_sweep` reads a target with one class masked (7.4)."""

from __future__ import annotations

import base64
import contextlib
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ..model import HookedTransformer
from ..scoring import model_inputs
from ..tasks import Examples, TaskData
from .intervals import Interval, bootstrap
from .lens import residual_stack
from .ranges import check_fields, is_finite_at_least, is_whole, whole_at_least
from .targets import headline_targets, intermediate_targets, joint_targets, masked_class


@contextlib.contextmanager
def single_thread():
    """Run the block with one intra-op thread (restored afterwards, also on error): many small full-batch
    steps run faster so (measured 0.14 s against 3.5 s on a loaded 2-core machine)."""
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
    """Fit one probe per leading index of ``acts`` [G, N, d] (full-batch L-BFGS, all G at once); ``labels``
    [N] or [G, N], ``n_classes`` one int or one per probe. ``standardize=False`` scales by one number per probe,
    so that the columns of ``W`` are directions of the raw activation space (what INLP needs)."""
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


def chance_accuracy(labels: torch.Tensor) -> float:
    """The majority-class share of ``labels`` (8.6: on the set the accuracy is measured on; NaN on an empty
    set, never 0 on a non-empty one)."""
    if len(labels) == 0:
        return math.nan
    return (torch.unique(labels, return_counts=True)[1].max() / len(labels)).item()


def probe_training_set(train: Examples, max_train: int, seed: int) -> Examples:
    """Up to ``max_train`` of ``train``, drawn with ``seed`` (the same draw for every probe of a chapter)."""
    if len(train) > max_train:
        train = train[torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))[:max_train]]
    return train


@dataclass(frozen=True)
class ProbeSettings:
    """How the probes are trained: up to ``max_train`` examples drawn with ``seed``, L2 ``weight_decay``,
    ``max_iter`` L-BFGS steps, ``chunk`` probes per call; ``mask_seed`` draws the class masked on clean examples."""

    max_train: int = 3000
    seed: int = 0
    weight_decay: float = 1e-3
    max_iter: int = 50
    chunk: int = 48
    mask_seed: int = 0

    def __post_init__(self):
        check_fields(self, max_train=whole_at_least(1), seed=whole_at_least(0), max_iter=whole_at_least(1),
                     chunk=whole_at_least(1), mask_seed=whole_at_least(0),
                     weight_decay=(is_finite_at_least, "a finite number >= 0"))


@dataclass(frozen=True)
class ProbeTargets:
    """What :func:`probe_sweep` reads: ``names`` (None: all targets), each at its own position and at every
    one of ``positions``, and the joint targets whose members are all probed."""

    names: tuple[str, ...] | None = None
    positions: tuple[int, ...] = ()

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


@dataclass(frozen=True, eq=False)
class ProbeSweep:
    """:func:`probe_sweep`'s ``table`` and, per ``(target, position, set)``, the per-example reads behind it:
    ``hits[key] = (correct [L+1, N], scored [N])`` (numpy bools), what section 11's bootstrap resamples."""

    table: pd.DataFrame
    hits: dict

    def own_position(self, target: str) -> int | None:
        """The position at which ``target`` is read as its own (-1 for a joint target; None: not probed)."""
        own = self.table[(self.table.target == target) & self.table.own]
        return None if not len(own) else int(own.position.iloc[0])

    def counts(self, members, set_name: str, position: int | None = None) -> tuple | None:
        """Right reads [L+1, N] and scored reads [N] of ``set_name``, summed over ``members``, each at its own
        position or at ``position`` (None where a member was not probed there)."""
        right = scored = None
        for name in members:
            key = (name, self.own_position(name) if position is None else position, set_name)
            if key not in self.hits:
                return None
            hits, mask = self.hits[key]
            r, m = (hits & mask[None]).astype(np.int64), mask.astype(np.int64)
            right, scored = (r, m) if right is None else (right + r, scored + m)
        return None if right is None else (right, scored)

    def to_json(self) -> dict:
        """A JSON-safe copy (the analysis cache stores it; :meth:`from_json` reads it back)."""
        hits = [{"target": t, "position": int(p), "set": s, "shape": list(h.shape), "hits": _pack(h), "mask": _pack(m)}
                for (t, p, s), (h, m) in self.hits.items()]
        return {"columns": list(self.table.columns), "rows": self.table.to_dict("records"), "hits": hits}

    @classmethod
    def from_json(cls, value: dict) -> "ProbeSweep":
        table = pd.DataFrame(value["rows"], columns=value["columns"])
        hits = {(h["target"], h["position"], h["set"]): (_unpack(h["hits"], h["shape"]),
                                                         _unpack(h["mask"], h["shape"][1:])) for h in value["hits"]}
        return cls(table, hits)


def _pack(x: np.ndarray) -> str:
    return base64.b64encode(np.packbits(np.asarray(x, dtype=bool).ravel()).tobytes()).decode("ascii")


def _unpack(text: str, shape) -> np.ndarray:
    size = int(np.prod(shape)) if len(shape) else 1
    bits = np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8), count=size)
    return bits.astype(bool).reshape(shape)


SWEEP_COLUMNS = ["target", "layer", "position", "own", "set", "n", "correct", "accuracy", "chance"]


def probe_sweep(model: HookedTransformer, data: TaskData, train: Examples, sets: dict[str, Examples],
                targets: ProbeTargets = ProbeTargets(), settings: ProbeSettings = ProbeSettings()) -> pd.DataFrame:
    """Probe each target (``targets``) at every layer, trained on up to ``settings.max_train`` of ``train``;
    one row per (target, layer, position, set) with ``n``, ``correct``, ``accuracy``, ``chance`` and ``own``
    (its own position, or a joint target at position -1). :func:`sweep_probes` also keeps the reads."""
    return sweep_probes(model, data, train, sets, targets, settings).table


def sweep_probes(model: HookedTransformer, data: TaskData, train: Examples, sets: dict[str, Examples],
                 targets: ProbeTargets = ProbeTargets(), settings: ProbeSettings = ProbeSettings()) -> ProbeSweep:
    """:func:`probe_sweep`, with each row group's per-example reads (:class:`ProbeSweep`)."""
    train = probe_training_set(train, settings.max_train, settings.seed)
    train_t = intermediate_targets(train, data)
    names = list(train_t) if targets.names is None else list(targets.names)
    joint = {k: v for k, v in joint_targets(data.task).items() if set(v) <= set(names)}
    set_t = {s: intermediate_targets(ex, data) for s, ex in sets.items()}
    wanted = {n: sorted({train_t[n].position, *(targets.positions or [])}) for n in names}
    all_pos = sorted({p for ps in wanted.values() for p in ps})
    col = {p: i for i, p in enumerate(all_pos)}
    train_acts = residual_stack(model, model_inputs(train), all_pos)  # [L+1, N, P, d]
    set_acts = {s: residual_stack(model, model_inputs(ex), all_pos) for s, ex in sets.items()}
    n_layers = train_acts.shape[0]
    reads = {}  # (target, position, set) -> (hits [L+1, N], mask [N], chance, own)
    jobs = [(name, p) for name in names for p in wanted[name]]
    for part in _chunks(jobs, train_t, max(1, settings.chunk // n_layers)):
        probes = fit_probes(torch.cat([train_acts[:, :, col[p]] for _, p in part]),
                            torch.cat([train_t[name].labels.expand(n_layers, -1) for name, _ in part]),
                            [train_t[name].n_classes for name, _ in part for _ in range(n_layers)],
                            settings.weight_decay, settings.max_iter)
        for s, ex in sets.items():
            preds = probes.predict(torch.cat([set_acts[s][:, :, col[p]] for _, p in part]))
            for k, (name, p) in enumerate(part):
                target = set_t[s][name]
                mask = _evaluation_mask(target, ex)
                reads[name, p, s] = (preds[k * n_layers:(k + 1) * n_layers] == target.labels[None], mask,
                                     chance_accuracy(target.labels[mask]),
                                     p == train_t[name].position)
    for jname, members in joint.items():
        for s in sets:
            own = [reads.get((m, train_t[m].position, s)) for m in members]
            if None in own:
                continue
            hits, mask = torch.stack([o[0] for o in own]).all(0), torch.stack([o[1] for o in own]).all(0)
            key = _joint_key([set_t[s][m] for m in members])
            reads[jname, -1, s] = (hits, mask, chance_accuracy(key[mask]), True)
    return ProbeSweep(_sweep_rows(reads, n_layers),
                      {k: (h.numpy().astype(bool), m.numpy().astype(bool)) for k, (h, m, _, _) in reads.items()})


def _chunks(jobs: list, train_t: dict, per_chunk: int) -> list[list]:
    """The jobs (target, position) in L-BFGS calls: jobs with the same number of classes share a call (no
    padding wasted), at most ``per_chunk`` per call."""
    parts = []
    for k in sorted({train_t[name].n_classes for name, _ in jobs}):
        same = [job for job in jobs if train_t[job[0]].n_classes == k]
        parts += [same[i:i + per_chunk] for i in range(0, len(same), per_chunk)]
    return parts


def _sweep_rows(reads: dict, n_layers: int) -> pd.DataFrame:
    """:func:`probe_sweep`'s table from the per-example reads, in the order they were made."""
    rows = []
    for (name, position, s), (hits, mask, chance, own) in reads.items():
        n = int(mask.sum())
        correct = hits[:, mask].sum(1)
        for layer in range(n_layers):
            rows.append({"target": name, "layer": layer, "position": position, "own": own, "set": s, "n": n,
                         "correct": int(correct[layer]), "accuracy": correct[layer].item() / n if n else math.nan,
                         "chance": chance})
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def _joint_key(members) -> torch.Tensor:
    """One integer per example for the tuple of the members' labels."""
    key = torch.zeros_like(members[0].labels)
    for t in members:
        key = key * t.n_classes + t.labels
    return key


def group_curves(sweep: pd.DataFrame, task: str, groups: dict[str, list[str]] | None = None) -> pd.DataFrame:
    """Accuracy per (group, layer, set) pooled over the group's targets, each at its own position
    (e.g. the five answer digits): correct / n, chance weighted by n, and each target's (chance, n) in
    ``chance_parts`` (12.1: a pooled read's threshold is the mean of its targets' thresholds)."""
    groups = headline_targets(task) if groups is None else groups
    rows = []
    for group, members in groups.items():
        part = sweep[sweep.target.isin(members) & sweep.own]
        for (layer, s), g in part.groupby(["layer", "set"], sort=True):
            n = g.n.sum()
            rows.append({"group": group, "layer": int(layer), "set": s, "n": int(n),
                         "accuracy": g.correct.sum() / n if n else math.nan,
                         "chance": (g.chance * g.n).sum() / n if n else math.nan,
                         "chance_parts": tuple((float(c), int(k)) for c, k in zip(g.chance, g.n))})
    return pd.DataFrame(rows, columns=["group", "layer", "set", "n", "accuracy", "chance", "chance_parts"])


def best_layer_summary(curves: pd.DataFrame, memorized: str = "M", clean: str = "C") -> pd.DataFrame:
    """Per group, the layer where the probe reads it best on M and there: accuracy on M and C, chance on M,
    their ratios; C's own best layer, accuracy and chance (8.5, 8.6); and the counts behind them (``n_M``,
    ``n_C``, ``k_M``, ``k_C``, ``k_C_best``) for section 11's intervals."""
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
        acc_c_best = float(c.accuracy[layer_c]) if layer_c is not None else math.nan
        n_m, n_c = int(m.n.max()) if len(m) else 0, int(c.n.max()) if len(c) else 0
        parts = {"chance_parts": _chance_parts(m, layer, chance, n_m),
                 "chance_C_parts": _chance_parts(c, layer_c, float(c.chance[layer_c]) if layer_c is not None
                                                 else math.nan, n_c)}
        rows.append({**parts, "group": group, "best_layer": layer, "acc_M": acc_m, "acc_C": acc_c, "chance": chance,
                     "ratio_M_C": acc_m / acc_c if acc_c else math.nan,
                     "over_chance": acc_m / chance if chance else math.nan,
                     "n_M": n_m, "best_layer_C": layer_c, "acc_C_best": acc_c_best,
                     "chance_C": float(c.chance[layer_c]) if layer_c is not None else math.nan,
                     "n_C": n_c, "k_M": _count(acc_m, n_m), "k_C": _count(acc_c, n_c),
                     "k_C_best": _count(acc_c_best, n_c)})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


SUMMARY_COLUMNS = ["group", "best_layer", "acc_M", "acc_C", "chance", "ratio_M_C", "over_chance", "n_M", "best_layer_C",
                   "acc_C_best", "chance_C", "n_C", "k_M", "k_C", "k_C_best", "chance_parts", "chance_C_parts"]


def _chance_parts(rows: pd.DataFrame, layer, chance: float, n: int) -> tuple:
    """The (chance, n) of each target pooled at ``layer`` (:func:`group_curves`), or the one target's."""
    if layer is not None and "chance_parts" in rows and isinstance(rows.chance_parts[layer], tuple):
        return rows.chance_parts[layer]
    return ((chance, n),)


def _count(accuracy: float, n: int) -> float:
    """The right reads behind an accuracy over ``n`` reads (NaN where it is missing)."""
    return math.nan if math.isnan(accuracy) or not n else float(round(accuracy * n))


def ratio_interval(m_counts: tuple | None, c_counts: tuple | None, layer) -> Interval | None:
    """Section 11's percentile bootstrap of acc_M / acc_C at ``layer``, M and C resampled on their own, an
    example's reads kept together (``*_counts``: :meth:`ProbeSweep.counts`); None where it is undefined."""
    if m_counts is None or c_counts is None or pd.isna(layer):
        return None
    (rm, sm), (rc, sc) = m_counts, c_counts
    rm, sm, rc, sc = rm[int(layer)][sm > 0], sm[sm > 0], rc[int(layer)][sc > 0], sc[sc > 0]
    if not len(sm) or not len(sc):
        return None

    def statistic(i, j):
        i, j = i.astype(np.int64), j.astype(np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (rm[i].sum() / sm[i].sum()) / (rc[j].sum() / sc[j].sum())

    with np.errstate(divide="ignore", invalid="ignore"):
        return bootstrap(statistic, [np.arange(len(sm), dtype=float), np.arange(len(sc), dtype=float)])


def bernoulli_counts(k, n) -> tuple | None:
    """Per-example counts of a read with one trial per example, ``k`` right of ``n`` (one layer): what
    :func:`ratio_interval` resamples (the bootstrap of a share depends on k and n alone)."""
    if math.isnan(float(k)) or not n:
        return None
    right = np.zeros((1, int(n)), dtype=np.int64)
    right[0, :int(k)] = 1
    return right, np.ones(int(n), dtype=np.int64)


def pooled_interval(counts: tuple | None, layer) -> Interval | None:
    """Section 11's interval of a pooled accuracy at ``layer`` where an example gives several reads (FDA's five
    answer digits): a percentile bootstrap over examples, an example's reads kept together (its reads are not
    independent, so Wilson's interval over every read is too narrow). None where a read gives one read per
    example (Wilson's interval is the one, :func:`rote.analysis.intervals.wilson`) or it is undefined."""
    if counts is None or pd.isna(layer):
        return None
    right, scored = counts
    right, scored = right[int(layer)][scored > 0], scored[scored > 0]
    if not len(scored) or scored.max() <= 1:
        return None
    return bootstrap(lambda i: right[i.astype(np.int64)].sum() / scored[i.astype(np.int64)].sum(),
                     np.arange(len(scored), dtype=float))


def with_ratio_intervals(summary: pd.DataFrame, sweep: ProbeSweep, groups: dict[str, list[str]],
                         position: int | None = None) -> pd.DataFrame:
    """``summary`` with the bootstrap interval of acc_M / acc_C at each row's best layer on M
    (``ratio_M_C_lo``, ``ratio_M_C_hi``) and, for a read pooling several reads per example, the bootstrap
    intervals of acc_M there and of acc_C at C's own best layer (``acc_M_lo``, ``acc_M_hi``, ``acc_C_best_lo``,
    ``acc_C_best_hi``; NaN: none, :func:`pooled_interval`); ``groups``: each row's targets, at their own
    positions or ``position``."""
    columns = {k: [] for k in ("ratio_M_C", "acc_M", "acc_C_best")}
    for row in summary.itertuples():
        members = groups.get(row.group, [])
        m, c = sweep.counts(members, "M", position), sweep.counts(members, "C", position)
        for key, interval in (("ratio_M_C", ratio_interval(m, c, row.best_layer)),
                              ("acc_M", pooled_interval(m, row.best_layer)),
                              ("acc_C_best", pooled_interval(c, row.best_layer_C))):
            columns[key].append((interval.low, interval.high) if interval else (math.nan, math.nan))
    return summary.assign(**{f"{k}_{end}": [x[i] for x in v] for k, v in columns.items()
                             for i, end in enumerate(("lo", "hi"))})


def position_summary(sweep: pd.DataFrame, target: str, position: int, group: str | None = None) -> pd.DataFrame:
    """:func:`best_layer_summary` of ``target`` read at ``position`` (e.g. THR's bridge at r2): one row,
    NaN where the position was not probed."""
    group = group or f"{target} at {position}"
    part = sweep[(sweep.target == target) & (sweep.position == position)]
    if not len(part):
        empty = {name: math.nan for name in SUMMARY_COLUMNS}
        return pd.DataFrame([{**empty, "group": group, "best_layer": None, "n_M": 0, "best_layer_C": None, "n_C": 0}],
                            columns=SUMMARY_COLUMNS)
    return best_layer_summary(part.assign(group=group)[["group", "layer", "set", "n", "accuracy", "chance"]])


def masked_probe_sweep(model: HookedTransformer, data: TaskData, train: Examples, sets: dict[str, Examples],
                       target: str = "tail", settings: ProbeSettings = ProbeSettings()) -> pd.DataFrame:
    """Read ``target`` with one class masked per example (7.4): the probes of :func:`probe_sweep`, top-1
    over the classes other than :func:`~rote.analysis.targets.masked_class`. One row per (layer, set): ``n``,
    ``correct``, ``accuracy``, ``accuracy_unmasked``, ``reads_masked`` (the plain read is the masked class: on M,
    the output), ``chance`` (12.1, 8.6: the majority share of the true labels read; the masked class is never
    the true one, so always answering the majority class scores it) and ``chance_uniform`` (7.4's
    1 / (n_classes - 1))."""
    train = probe_training_set(train, settings.max_train, settings.seed)
    tt = intermediate_targets(train, data)[target]
    acts = residual_stack(model, model_inputs(train), [tt.position])[:, :, 0]  # [L+1, N, d]
    layers = acts.shape[0]
    fitted = fit_probes(acts, tt.labels.expand(layers, -1), tt.n_classes, settings.weight_decay, settings.max_iter)
    uniform = 1.0 / (tt.n_classes - 1)
    rows = []
    for s, ex in sets.items():
        t = intermediate_targets(ex, data)[target]
        keep = _evaluation_mask(t, ex)
        hidden = masked_class(t, ex, seed=settings.mask_seed)
        x = residual_stack(model, model_inputs(ex), [t.position])[:, :, 0]
        logits = fitted.logits(x) if len(ex) else torch.zeros(layers, 0, tt.n_classes)  # [L+1, N, C]
        plain = logits.argmax(-1)
        masked = logits.scatter(-1, hidden[None, :, None].expand(layers, -1, 1), -math.inf).argmax(-1)
        n, chance = int(keep.sum()), chance_accuracy(t.labels[keep])
        for layer in range(layers):
            hit, raw = masked[layer][keep] == t.labels[keep], plain[layer][keep]
            shares = {"accuracy": hit, "accuracy_unmasked": raw == t.labels[keep],
                      "reads_masked": raw == hidden[keep]}
            rows.append({"target": target, "layer": layer, "set": s, "n": n, "correct": int(hit.sum()),
                         **{k: v.double().mean().item() if n else math.nan for k, v in shares.items()},
                         "chance": chance, "chance_uniform": uniform if n else math.nan})
    return pd.DataFrame(rows, columns=["target", "layer", "set", "n", "correct", "accuracy", "accuracy_unmasked",
                                       "reads_masked", "chance", "chance_uniform"])


def masked_summary(sweep: pd.DataFrame, group: str = "true tail, masked") -> pd.DataFrame:
    """:func:`best_layer_summary` of :func:`masked_probe_sweep`, with ``acc_M_unmasked`` and ``reads_masked_M``
    at the best layer, 7.4's chance (``chance_uniform``) and the bootstrap interval of acc_M / acc_C there (one
    read per example)."""
    out = best_layer_summary(sweep.drop(columns="chance_uniform", errors="ignore").assign(group=group))
    row = out.iloc[0]
    ok = not pd.isna(row.best_layer)
    m = sweep[sweep.set == "M"].set_index("layer").loc[int(row.best_layer)] if ok else None
    counts = bernoulli_counts(row.k_M, row.n_M), bernoulli_counts(row.k_C, row.n_C)
    interval = ratio_interval(*counts, 0) if ok else None
    uniform = sweep.chance_uniform.dropna() if "chance_uniform" in sweep else pd.Series(dtype=float)
    return out.assign(chance_uniform=float(uniform.iloc[0]) if len(uniform) else math.nan,
                      acc_M_unmasked=float(m.accuracy_unmasked) if ok else math.nan,
                      reads_masked_M=float(m.reads_masked) if ok else math.nan,
                      ratio_M_C_lo=interval.low if interval else math.nan,
                      ratio_M_C_hi=interval.high if interval else math.nan)


def found_layers(curves: pd.DataFrame, group: str, min_over_chance: float, set_name: str = "C") -> list[int]:
    """The layers 1..L (8.6; the embedding holds the input, not a result) where the probe reads ``group`` on
    ``set_name`` at least ``min_over_chance`` times chance: where C3 and C4 erase."""
    part = curves[(curves.group == group) & (curves.set == set_name)]
    ok = part[(part.layer > 0) & (part.accuracy > 0) & (part.accuracy >= min_over_chance * part.chance)]
    return sorted(int(l) for l in ok.layer)

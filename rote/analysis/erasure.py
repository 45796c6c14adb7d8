"""Erasing an intermediate result from the residual stream (claim C3): where, and with what.

INLP (:mod:`rote.analysis.inlp`) is fitted per site (layer, position), as the same result is stored in
different directions at different positions, and applied mean-preserving, x -> mu + (x - mu) P with mu
the clean mean there (the random control too; :func:`rote.analysis.patching.erasure_edits`). The sites
are where C2's probes read the result on C at the required multiple of chance (8.6:
:func:`sites_from_sweep`, from C2's cached sweep). Controls of the same rank at the same sites: random
subspaces and :func:`information_matched` (7.5)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from ..model import HookedTransformer
from ..scoring import model_inputs
from ..tasks import Examples, TaskData
from .inlp import Erasure, InlpSettings, inlp_bases
from .lens import residual_stack
from .probes import found_layers, group_curves, probe_training_set
from .ranges import check_fields, is_whole, whole_at_least
from .targets import intermediate_targets

# what C3 erases (section 5), per task: the result's headline group and the targets INLP is fitted to
ERASURE_TARGETS = {"fda": ("carries", [f"carry_{i}" for i in range(4)]), "thr": ("bridge", ["bridge"])}


@dataclass(frozen=True)
class ErasureSites:
    """The named ``targets`` erased jointly at every (layer, position) of ``layers`` x ``positions``."""

    targets: tuple[str, ...]
    layers: tuple[int, ...]
    positions: tuple[int, ...]

    def __post_init__(self):
        if isinstance(self.targets, str) or not self.targets:
            raise ValueError(f"ErasureSites.targets must be a non-empty list of target names, got {self.targets!r}")
        for name in ("targets", "layers", "positions"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
            if name != "targets" and not all(is_whole(v) and v >= 0 for v in getattr(self, name)):
                raise ValueError(f"ErasureSites.{name} must be ints >= 0, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class ErasureSettings:
    """How :func:`fit_erasure` and its controls are fitted (pass both the same): ``inlp``, on up to
    ``max_train`` training examples drawn with ``seed``."""

    max_train: int = 2000
    seed: int = 0
    inlp: InlpSettings = InlpSettings()

    def __post_init__(self):
        check_fields(self, max_train=whole_at_least(1), seed=whole_at_least(0))
        if not isinstance(self.inlp, InlpSettings):
            raise ValueError(f"ErasureSettings.inlp must be an InlpSettings, got {self.inlp!r}")


def sites_from_sweep(sweep: pd.DataFrame, task: str, min_over_chance: float, clean: str = "C") -> dict:
    """The erasure sites C2's probe sweep gives (8.6): {"group", "targets", "layers" (1..L where the probe
    reads the result on ``clean`` at ``min_over_chance`` x chance; none: no site, 8.5), "positions" (where
    the targets are expected)}."""
    if task not in ERASURE_TARGETS:
        raise ValueError(f"unknown task {task!r}")
    group, targets = ERASURE_TARGETS[task]
    layers = found_layers(group_curves(sweep, task, {group: [group]}), group, min_over_chance, clean)
    own = sweep[sweep.target.isin(targets) & sweep.own]
    return {"group": group, "targets": targets, "layers": layers, "positions": sorted({int(p) for p in own.position})}


def fitting_activations(model: HookedTransformer, train: Examples) -> torch.Tensor:
    """The residual stream of the fitting examples ``train`` at every layer and position, [L+1, N, T, d]: one
    pass, from which every fit at the same examples reads its sites (the treatment and each control)."""
    return residual_stack(model, model_inputs(train))


def _fit_sites(acts: torch.Tensor, labels: torch.Tensor, n_classes: list[int], layers: list[int],
               positions: list[int], rank: int, targets: tuple[str, ...], inlp: InlpSettings) -> Erasure:
    """INLP of ``labels`` [N, k] at every (layer, position), each site on its own activations (``acts``: the
    fitting examples' :func:`fitting_activations`)."""
    sites = [(layer, position) for layer in layers for position in positions]
    if not sites:
        return Erasure({}, {}, targets)
    x = torch.stack([acts[layer, :, position] for layer, position in sites])  # [S, N, d]
    Q = inlp_bases(x, labels, rank, n_classes=n_classes, settings=inlp)
    return Erasure({site: Q[i] for i, site in enumerate(sites)}, {site: x[i].mean(0) for i, site in enumerate(sites)},
                   targets)


def _fitted(model: HookedTransformer, data: TaskData, train: Examples, sites: ErasureSites, rank: int,
            settings: ErasureSettings, acts: torch.Tensor | None) -> Erasure:
    """:func:`fit_erasure` on the drawn fitting examples ``train`` (``acts``: their activations, None: computed)."""
    tt = intermediate_targets(train, data)
    labels = torch.stack([tt[n].labels for n in sites.targets], 1)  # [N, k]
    if acts is None and sites.layers and sites.positions:
        acts = fitting_activations(model, train)
    return _fit_sites(acts, labels, [tt[n].n_classes for n in sites.targets], list(sites.layers),
                      list(sites.positions), rank, sites.targets, settings.inlp)


def fit_erasure(model: HookedTransformer, data: TaskData, train: Examples, sites: ErasureSites, rank: int,
                settings: ErasureSettings = ErasureSettings()) -> Erasure:
    """INLP of ``rank`` directions for ``sites.targets`` (jointly) at every site, each fitted on clean
    activations there (per site: a pooled projection misses the other positions' directions)."""
    return _fitted(model, data, probe_training_set(train, settings.max_train, settings.seed), sites, rank, settings,
                   None)


def fit_with_matched(model: HookedTransformer, data: TaskData, sites: ErasureSites, rank: int,
                     settings: ErasureSettings, *, n_controls: int) -> tuple[Erasure, list[Erasure] | None]:
    """:func:`fit_erasure` and its :func:`information_matched` controls, fitted on the run's clean training set
    (``data.train_clean``), its residual stream computed once for all of them: the same erasures as the two calls."""
    drawn = probe_training_set(data.train_clean, settings.max_train, settings.seed)
    acts = fitting_activations(model, drawn) if sites.layers and sites.positions else None
    erasure = _fitted(model, data, drawn, sites, rank, settings, acts)
    return erasure, _matched(model, data, drawn, erasure, settings, n_controls, acts)


# --- the information-matched control (protocol section 7.5) -------------------------------------
def input_key(examples: Examples, data: TaskData, target: str) -> tuple[torch.Tensor, int]:
    """The part of the input a target is a function of, one key per example, and the number of keys (THR
    bridge: h * n_relations + r1; FDA carry_i: 10 a_i + b_i)."""
    if data.task == "thr" and target == "bridge":
        n_relations = int(data.meta["graph"].shape[1])
        return examples.info["head"] * n_relations + examples.info["r1"], int(data.meta["graph"].size)
    if data.task == "fda" and target.startswith("carry_") and target[6:].isdigit():
        i = int(target[6:])
        a, b = examples.info["a"], examples.info["b"]
        return ((a // 10 ** i) % 10) * 10 + (b // 10 ** i) % 10, 100
    raise ValueError(f"no information-matched relabeling for target {target!r} of task {data.task!r}")


def random_relabeling(data: TaskData, target: str, generator: torch.Generator) -> tuple[torch.Tensor, int]:
    """A random function from the target's input keys to classes ([n_keys], -1 for unseen keys) and its
    classes: THR, the bridge map shuffled over the graph's (h, r1) pairs; FDA, a random balanced binary
    function of the column's digits."""
    if data.task == "thr" and target == "bridge":
        graph = torch.as_tensor(data.meta["graph"]).flatten()
        table = graph.clone()
        present = (graph >= 0).nonzero().flatten()
        table[present] = graph[present][torch.randperm(len(present), generator=generator)]
        return table.long(), int(data.meta["graph"].shape[0])
    _, n_keys = input_key(data.test[:1], data, target)  # validates the target
    table = torch.zeros(n_keys, dtype=torch.long)
    table[torch.randperm(n_keys, generator=generator)[:n_keys // 2]] = 1
    return table, 2


def matched_labels(examples: Examples, data: TaskData, targets: tuple[str, ...] | list[str],
                   seed: int) -> tuple[torch.Tensor, list[int]]:
    """Labels [N, k] of one information-matched relabeling of ``targets`` (one independent random
    function per target, :func:`random_relabeling`) and their numbers of classes."""
    g = torch.Generator().manual_seed(seed)
    cols, n_classes = [], []
    for t in targets:
        table, n = random_relabeling(data, t, g)
        labels = table[input_key(examples, data, t)[0]]
        if (labels < 0).any():
            raise ValueError(f"examples with an input key outside the graph for target {t!r}")
        cols.append(labels)
        n_classes.append(n)
    return torch.stack(cols, 1), n_classes


def information_matched(model: HookedTransformer, data: TaskData, train_examples: Examples, erasure: Erasure,
                        settings: ErasureSettings, *, n_controls: int) -> list[Erasure] | None:
    """The information-matched control (7.5): ``n_controls`` INLP erasures of the same rank at the same sites,
    fitted as ``settings`` say to a random relabeling of the same input key (:func:`matched_labels`). It
    removes as many directions that carry a look-up of the same input: if erasing the real result hurts M no
    more, the drop says nothing about the result. None for an erasure without sites (8.5: no control)."""
    train = probe_training_set(train_examples, settings.max_train, settings.seed)
    return _matched(model, data, train, erasure, settings, n_controls, None)


def _matched(model: HookedTransformer, data: TaskData, train: Examples, erasure: Erasure, settings: ErasureSettings,
             n_controls: int, acts: torch.Tensor | None) -> list[Erasure] | None:
    """:func:`information_matched` on the drawn fitting examples ``train`` (``acts``: their activations, None:
    computed here)."""
    if not erasure.bases:
        return None
    if not erasure.targets:
        raise ValueError("the erasure does not know its targets: fit it with fit_erasure")
    acts = fitting_activations(model, train) if acts is None else acts
    out = []
    for c in range(n_controls):
        seed = settings.seed * 1_000_003 + 7919 * (c + 1)
        labels, n_classes = matched_labels(train, data, erasure.targets, seed=seed)
        fitted = _fit_sites(acts, labels, n_classes, erasure.layers, erasure.positions, erasure.rank, erasure.targets,
                            settings.inlp)
        # only the treatment's sites (its layers x positions grid is what _fit_sites covers)
        out.append(Erasure({s: fitted.bases[s] for s in erasure.bases}, {s: fitted.means[s] for s in erasure.bases},
                           erasure.targets))
    return out

"""Erasing an intermediate result from the residual stream (claim C3): where, and with what.

INLP (:mod:`rote.analysis.inlp`, the mathematics) is fitted per site (layer, position): the same
result is stored in different directions at different positions. It is applied mean-preserving:
x -> mu + (x - mu) P, with mu the clean mean at that site, so that only the variation along the
removed directions goes (for the random control as well) and activations stay in their usual
range. Layers follow :mod:`rote.analysis.lens` (0 = embeddings, l = after block l - 1, hook
``blocks.{l-1}.hook_resid_post``); the hooks that apply an erasure are in
:mod:`rote.analysis.patching`.

- :func:`erasure_targets`, :func:`erasure_sites` -- what C3 erases and where: the layers where a
  probe reads the result, at its positions (computed once per run and shared by chapters 04 and
  05 through :func:`rote.analysis_cache.erasure_sites_cached`).
- :func:`fit_erasure` -- INLP for named targets (:mod:`rote.analysis.targets`) at given layers and
  positions from a model's clean activations: an :class:`Erasure`; :func:`random_erasure` is its
  control.
- :func:`erased` -- a context manager applying an erasure through hooks (removed on exit).
- :func:`erasure_accuracy`, :func:`erasure_sweep` -- exact-match accuracy of named sets under an
  erasure, and over ranks against the random control (:mod:`rote.analysis.patching`).
"""

from __future__ import annotations

import contextlib
import math

import pandas as pd
import torch

from ..model import HookedTransformer
from ..tasks import Examples, TaskData
from .inlp import (Erasure, Site, inlp_bases, inlp_basis, inlp_projection, projection_from_basis,  # noqa: F401
                   random_basis, random_erasure, random_projection)
from .lens import model_inputs, residual_stack
from .patching import erasure_accuracy, erasure_edits, erasure_sweep, patched  # noqa: F401
from .probes import found_layers, group_curves, probe_sweep
from .targets import intermediate_targets


@contextlib.contextmanager
def erased(model: HookedTransformer, erasure: Erasure):
    """Apply ``erasure`` for the duration of the block (hooks removed on exit, also on error)."""
    with patched(model, erasure_edits(model, erasure)):
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

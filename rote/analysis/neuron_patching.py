"""Neurons patched to their clean-neighbour expectations: the patching experiments of claim C5.

Every edit is a :func:`~rote.analysis.patching.set_where` on an MLP layer's ``hook_post``; the units and
their expectations are a :class:`~rote.analysis.units.HeuristicMap` and its
:class:`~rote.analysis.units.NeighbourStats`. Section 5: :func:`layer_patching` (a layer's units against
random ones); 7.7: :func:`dose_response` (each example's top-m neurons by |z| against m random ones and
another example's top m); 8.4-8.6: :func:`position_dose_response` at chosen answer positions only (each
example's first differing digit j*, over the 8.3 units there, or the positions after it), and
:func:`jstar_analysis`, every number of 8.4 for one run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from .. import scoring
from ..model import HookedTransformer
from ..tasks import Examples
from .outliers import AfterJstar, JstarComparison, after_jstar_comparison, first_differing, jstar_comparison, jstar_mask
from .patching import edit_hooks, set_where
from .units import HeuristicMap, NeighbourStats


def _share(model: HookedTransformer, examples: Examples, which: str, edits: list) -> float:
    """The share of ``examples`` whose answer is exactly their ``which`` under ``edits``."""
    return scoring.exact_match(model, examples, which, hooks=edit_hooks(edits)).cpu().double().mean().item()


# -- C5 layer patching: the units of a layer patched to clean-neighbour expectations ---------------
def _random_like(counts: torch.Tensor, n_units: int, gen: torch.Generator) -> torch.Tensor:
    """Bool [..., n_units] with ``counts[...]`` units set, chosen uniformly at random."""
    scores = torch.rand(*counts.shape, n_units, generator=gen)
    kth = scores.sort(-1).values.gather(-1, (counts[..., None] - 1).clamp(min=0))
    return (scores <= kth) & (counts[..., None] > 0)


@dataclass(frozen=True)
class LayerPatchSettings:
    """:func:`layer_patching`: the |z| from which a heuristic unit is an outlier, the random draws of each
    control and their seed."""

    z_min: float = 2.0
    n_controls: int = 3
    seed: int = 0

    def __post_init__(self):
        for name, low in (("z_min", 0.0), ("n_controls", 1)):
            if not getattr(self, name) >= low:
                raise ValueError(f"{name} must be at least {low}, got {getattr(self, name)!r}")


def layer_patching(model: HookedTransformer, memorized: Examples, stats, hmap,
                   settings: LayerPatchSettings = LayerPatchSettings()) -> pd.DataFrame:
    """Per analysed layer, one set at a time patched at the answer positions of M to its clean-neighbour
    expectations: ``outliers`` (the example's heuristic units with |z| >= ``z_min``), ``heuristics`` (all
    of them), ``all`` (the layer); the first two against a random control (``control``: as many units
    per example and position, mean over ``n_controls`` draws). Columns: layer, units, control, n_units,
    reverted (share of M no longer giving its label), recovered (share giving the true sum)."""
    cols = ["layer", "units", "control", "n_units", "reverted", "recovered"]
    if len(memorized) == 0:
        return pd.DataFrame(columns=cols)
    gen, rows = torch.Generator().manual_seed(settings.seed), []
    for li, l in enumerate(hmap.layers):
        heur = hmap.heuristic[li][None].expand(len(memorized), -1, -1)  # [N, A, D]
        z, values, hook = stats.z[:, li], stats.expected[:, li], model.hook_name("post", l)
        outl = heur & (z.abs() >= settings.z_min) & ~z.isnan()
        for name, mask in [("outliers", outl), ("heuristics", heur), ("all", torch.ones_like(heur))]:
            conditions = [(False, [mask])]
            if name != "all":
                draws = [_random_like(mask.sum(-1), mask.shape[-1], gen) for _ in range(settings.n_controls)]
                conditions.append((True, draws))
            for control, masks in conditions:
                edits = [[(hook, set_where(memorized.answer_positions, m, values))] for m in masks]
                rows.append({"layer": l, "units": name, "control": control,
                             "n_units": float(mask.sum((1, 2)).float().mean()),
                             "reverted": float(np.mean([1 - _share(model, memorized, "label", e) for e in edits])),
                             "recovered": float(np.mean([_share(model, memorized, "true_label", e) for e in edits]))})
    return pd.DataFrame(rows, columns=cols)


@dataclass(frozen=True)
class LayerPatch:
    """Section 5: one layer of :func:`layer_patching` (the last): the outlier units' revert and recovery,
    their random control's revert, every heuristic unit's and its control's, the whole layer's."""

    patch_revert_last: float | None = None
    patch_recover_last: float | None = None
    control_revert_last: float | None = None
    heuristics_revert_last: float | None = None
    heuristics_control_revert_last: float | None = None
    layer_revert_last: float | None = None
    layer_recover_last: float | None = None
    last_layer: int | None = None


def patching_summary(table: pd.DataFrame, layer: int) -> LayerPatch:
    """:class:`LayerPatch` of ``layer`` (NaN where the table is empty)."""
    def at(units: str, control: bool, metric: str) -> float:
        row = table[(table.layer == layer) & (table.units == units) & (table.control == control)] if len(table) else table
        return float(row[metric].iloc[0]) if len(row) else math.nan

    return LayerPatch(at("outliers", False, "reverted"), at("outliers", False, "recovered"),
                      at("outliers", True, "reverted"), at("heuristics", False, "reverted"),
                      at("heuristics", True, "reverted"), at("all", False, "reverted"), at("all", False, "recovered"), layer)


# -- C5 dose-response (amendment 1, 7.7): neurons as units -----------------------------------------
def neuron_scores(stats, layer_index: int) -> torch.Tensor:
    """[N, D] each neuron's largest |z| over the answer positions (-inf: undefined everywhere), for ranking."""
    absz = stats.z[:, layer_index].abs()  # [N, A, D]
    return torch.where(absz.isnan(), -math.inf, absz).max(1).values


def _top_mask(scores: torch.Tensor, m: int) -> torch.Tensor:
    """Bool [N, D]: each row's ``m`` highest-scoring neurons (ties: lower index)."""
    m = min(m, scores.shape[1])
    mask = torch.zeros_like(scores, dtype=torch.bool)
    if m > 0:
        mask.scatter_(1, scores.topk(m, dim=1).indices, True)
    return mask


def mismatch_partner(n: int, seed: int = 0) -> torch.Tensor:
    """[n] each example's partner: the next along a random permutation (never itself; empty when n < 2)."""
    if n < 2:
        return torch.zeros(0, dtype=torch.long)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    partner = torch.empty(n, dtype=torch.long)
    partner[perm] = perm.roll(-1)
    return partner


@dataclass(frozen=True)
class DoseSettings:
    """A dose-response: the doses ``m_grid``, the random draws per dose, the seed of the draws and
    partners, the first ``max_examples`` examples only (None: all), and the share for m50 (``revert_min``)."""

    m_grid: tuple[int, ...]
    n_controls: int = 3
    seed: int = 0
    max_examples: int | None = None
    revert_min: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "m_grid", tuple(self.m_grid))
        for name, value, low, high in (("every m of m_grid", min(self.m_grid, default=1), 1, math.inf),
                                       ("n_controls", self.n_controls, 1, math.inf),
                                       ("max_examples", self.max_examples, 0, math.inf),
                                       ("revert_min", self.revert_min, 0.0, 1.0)):
            if not (value is None and name in ("max_examples", "revert_min")) and not low <= value <= high:
                raise ValueError(f"{name} must be in [{low}, {high}] (or None where optional), got {value!r}")


def dose_response(model: HookedTransformer, memorized: Examples, stats, layers: Sequence[int],
                  settings: DoseSettings) -> pd.DataFrame:
    """7.7: per layer and m, each example's neurons patched at every answer position to its own
    expectations: its ``top`` m by |z|, m ``random`` ones (mean over draws), and its partner's top m
    (``mismatched``, NaN with one example). Rows: layer, m, units, reverted, recovered (top only), n."""
    cols = ["layer", "m", "units", "reverted", "recovered", "n"]
    memorized = memorized if settings.max_examples is None else memorized[:settings.max_examples]
    if len(memorized) == 0:
        return pd.DataFrame(columns=cols)
    n, gen, rows = len(memorized), torch.Generator().manual_seed(settings.seed), []
    partner = mismatch_partner(n, settings.seed)
    for l in layers:
        li = list(stats.layers).index(l)
        values, scores = stats.expected[:n, li], neuron_scores(stats, li)[:n]  # [N, A, D], [N, D]
        hook = model.hook_name("post", l)

        def score(mask: torch.Tensor, recovered: bool = False) -> tuple[float, float]:
            edits = [(hook, set_where(memorized.answer_positions, mask[:, None, :].expand_as(values), values))]
            rec = _share(model, memorized, "true_label", edits) if recovered else math.nan
            return 1 - _share(model, memorized, "label", edits), rec

        for m in settings.m_grid:
            top = _top_mask(scores, m)
            draws = [score(_top_mask(torch.rand(n, values.shape[2], generator=gen), m))
                     for _ in range(settings.n_controls)]
            for units, (rev, rec) in (("top", score(top, recovered=True)), ("random", map(np.mean, zip(*draws))),
                                      ("mismatched", score(top[partner]) if len(partner) else (math.nan, math.nan))):
                rows.append({"layer": l, "m": m, "units": units, "reverted": float(rev), "recovered": float(rec),
                             "n": n})
    return pd.DataFrame(rows, columns=cols)


@dataclass(frozen=True)
class DoseCurves:
    """A dose-response at one layer: the curves by m, m50 (the smallest m whose top-m patch reverts
    ``revert_min`` of M; None: none), the largest top-m revert and the reverts at m50."""

    curve_top: list[float] | None = None
    curve_random: list[float] | None = None
    curve_mismatched: list[float] | None = None
    curve_m: list[int] | None = None
    m50: int | None = None
    top_revert_max: float | None = None
    top_revert_m50: float | None = None
    random_revert_m50: float | None = None
    mismatched_revert_m50: float | None = None


@dataclass(frozen=True)
class DoseSummary(DoseCurves):
    """7.7: :class:`DoseCurves` of :func:`dose_response` and the examples patched (every share's denominator)."""

    dose_n: int | None = None


def dose_summary(table: pd.DataFrame, layer: int, revert_min: float) -> DoseSummary:
    t = table[table.layer == layer] if len(table) else table
    curves = {u: t[t.units == u].sort_values("m") for u in ("top", "random", "mismatched")}
    top = curves["top"]
    hit = top[top.reverted >= revert_min]
    m50 = int(hit.m.iloc[0]) if len(hit) else None

    def at(units):
        row = curves[units][curves[units].m == m50] if m50 is not None else curves[units].iloc[:0]
        return float(row.reverted.iloc[0]) if len(row) else math.nan

    return DoseSummary(*([float(x) for x in c.reverted] for c in curves.values()), [int(x) for x in top.m], m50,
                       float(top.reverted.max()) if len(top) else math.nan, at("top"), at("random"), at("mismatched"),
                       int(t.n.iloc[0]) if len(t) else 0)


# -- C5 at the first differing digit (amendment 2, 8.4) ------------------------------------------
@dataclass(frozen=True)
class Patch:
    """Where :func:`position_dose_response` patches: the neurons of ``layer`` (with ``units`` bool [A, D],
    8.5: the layer's 8.3 units per answer position, only these) at the positions ``at`` bool [N, A], a
    revert read against ``reference`` [N, A] (None: the unpatched prediction)."""

    layer: int
    at: torch.Tensor
    units: torch.Tensor | None = None
    reference: torch.Tensor | None = None

    def __post_init__(self):
        if self.layer < 0 or self.at.dim() != 2 or (self.units is not None and self.units.dim() != 2) or \
                (self.reference is not None and tuple(self.reference.shape) != tuple(self.at.shape)):
            raise ValueError("a patch needs a layer >= 0, at [N, A], units None or [A, D], reference None or [N, A]")


def _candidates(stats, li: int, rows: torch.Tensor, at: torch.Tensor,
                units: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each example's ``scores`` [n, D] (its largest |z| over its ``at`` positions) and the neurons it may
    patch, ``allowed`` [n, D]: with ``units`` those at its positions (undefined |z| ranks -1, others -inf)."""
    absz = stats.z[rows, li].abs()
    if units is None:
        absz = torch.where(absz.isnan() | ~at[:, :, None], torch.full_like(absz, -math.inf), absz)
        return absz.max(1).values, torch.ones(len(rows), absz.shape[-1], dtype=torch.bool)
    cand = at[:, :, None] & units.bool().cpu()[None]  # [n, A, D]
    absz = torch.where(cand, absz.nan_to_num(-1.0), torch.full_like(absz, -math.inf))
    return absz.max(1).values, cand.any(1)


def _doses(m_grid: Sequence[int], counts: torch.Tensor, by_units: bool) -> list[tuple[int, bool]]:
    """The doses ``(m, all)``: each m of the grid; over the 8.3 units (8.6) only up to the most units an
    example holds (``counts``), and once all of them (``all``; an extra dose where no grid m equals it)."""
    if not by_units:
        return [(int(m), False) for m in m_grid]
    most = int(counts.max()) if len(counts) else 0
    if most == 0:
        return []
    doses = [(int(m), int(m) == most) for m in m_grid if m <= most]
    return doses if any(a for _, a in doses) else doses + [(most, True)]


def _controls(scores: torch.Tensor, allowed: torch.Tensor, top: torch.Tensor, m: int, gen: torch.Generator,
              partner: torch.Tensor, n_controls: int, by_units: bool) -> tuple[list, torch.Tensor | None, int]:
    """The random masks, the mismatched one (None: one example) and how many examples have fewer than m
    to draw from. Over the 8.3 units (8.6) both draw from the example's units outside its top m: random
    uniformly, mismatched by the partner's |z| ranking (unranked units after it, in random order)."""
    n, D = scores.shape
    others = allowed & ~top if by_units else allowed

    def pick(key: torch.Tensor) -> torch.Tensor:
        return _top_mask(key.masked_fill(~others, -math.inf), m) & others

    randoms = [pick(torch.rand(n, D, generator=gen)) for _ in range(n_controls)]
    if not len(partner):
        mismatched = None
    elif by_units:
        key = scores[partner]
        fill = -2.0 - torch.rand(n, D, generator=torch.Generator().manual_seed(gen.initial_seed() + 1))
        mismatched = pick(torch.where(torch.isfinite(key), key, fill))
    else:
        mismatched = top[partner]
    return randoms, mismatched, int((others.sum(1) < m).sum())


@torch.no_grad()
def position_dose_response(model: HookedTransformer, examples: Examples, stats, patch: Patch,
                           settings: DoseSettings) -> pd.DataFrame:
    """Each example's top-m neurons by |z| over its ``patch.at`` positions, patched there only to its
    expectations (teacher-forced on its label; examples without a position left out), against the
    controls of :func:`_controls`, per dose of :func:`_doses`. Rows: layer, m, units, reverted (the
    prediction at some ``at`` position leaves the reference), recovered (top m: the true digit at every
    one), n, all, short (examples with fewer than m units to patch, or to draw the controls from)."""
    cols = ["layer", "m", "units", "reverted", "recovered", "n", "all", "short"]
    rows_kept = patch.at.bool().cpu().any(1).nonzero().squeeze(1)[:settings.max_examples]
    n, by_units = len(rows_kept), patch.units is not None
    if n == 0:
        return pd.DataFrame(columns=cols)
    ex, at = examples[rows_kept], patch.at.bool().cpu()[rows_kept]
    li = list(stats.layers).index(patch.layer)
    values = stats.expected[rows_kept, li]  # [n, A, D]
    scores, allowed = _candidates(stats, li, rows_kept, at, patch.units)
    hook = model.hook_name("post", patch.layer)

    def predict(mask: torch.Tensor | None) -> torch.Tensor:
        edits = [] if mask is None else [(hook, set_where(ex.answer_positions, at[:, :, None] & mask[:, None], values))]
        return scoring.answer_logits(model, ex, "label", hooks=edit_hooks(edits)).argmax(-1).cpu()

    ref = predict(None) if patch.reference is None else patch.reference.cpu()[rows_kept]

    def reverted(pred: torch.Tensor) -> float:
        return ((pred != ref) & at).any(1).double().mean().item()

    gen, partner = torch.Generator().manual_seed(settings.seed), mismatch_partner(n, settings.seed)
    out, counts = [], allowed.sum(1)
    for m, every in _doses(settings.m_grid, counts, by_units):
        top = allowed if every else _top_mask(scores, m) & allowed
        pred, row = predict(top), {"layer": patch.layer, "m": m, "n": n, "all": every}
        out.append({**row, "units": "top", "reverted": reverted(pred), "short": int((counts < m).sum()),
                    "recovered": ((pred == ex.true_label) | ~at).all(1).double().mean().item()})
        randoms, mismatched, short = _controls(scores, allowed, top, m, gen, partner, settings.n_controls, by_units)
        out.append({**row, "units": "random", "reverted": float(np.mean([reverted(predict(k)) for k in randoms])),
                    "recovered": math.nan, "short": short})
        rev = math.nan if mismatched is None else reverted(predict(mismatched))
        out.append({**row, "units": "mismatched", "reverted": rev, "recovered": math.nan, "short": short})
    return pd.DataFrame(out, columns=cols)


def jstar_units(jstar: torch.Tensor, units: torch.Tensor, max_examples: int | None = None) -> int | None:
    """The fewest ``units`` [A, D] at an example's j*, over the first ``max_examples`` with one (None: none)."""
    jstar = jstar.long().cpu()
    rows = (jstar >= 0).nonzero().squeeze(1)[:max_examples]
    return int(units.bool().cpu().sum(-1)[jstar[rows]].min()) if len(rows) else None


@dataclass(frozen=True)
class JstarDose(DoseCurves):
    """8.4-8.6 (in the record each name after ``jstar_``): :class:`DoseCurves` at j* (the mismatched revert at
    m50 None with one example; m50 may be the all-units dose), the true digit's recovery at m50 and its curve,
    the examples patched, the doses tried (each m up to the most 8.3 units an example holds, ``units_max``,
    and all of them), the fewest units at a j*, and the examples with fewer than m50 units outside their top
    m50 (the controls draw from them; None without m50)."""

    recovered_m50: float | None = None
    curve_recovered: list[float] | None = None
    n: int | None = None
    m_tried: list[int] | None = None
    units_min: int | None = None
    units_max: int | None = None
    short_m50: int | None = None


def jstar_summary(table: pd.DataFrame, layer: int, revert_min: float, units_min: int | None = None) -> JstarDose:
    s = dose_summary(table, layer, revert_min)
    t = table[(table.layer == layer) & (table.units == "top")] if len(table) else table
    at_m50 = table[(table.layer == layer) & (table.m == s.m50)] if len(table) and s.m50 is not None else table.iloc[:0]
    mismatched = s.mismatched_revert_m50
    if s.m50 is not None and math.isnan(mismatched):
        mismatched = None
    every, top, random = t[t["all"].astype(bool)], at_m50[at_m50.units == "top"], at_m50[at_m50.units == "random"]
    curves = {f.name: getattr(s, f.name) for f in fields(DoseCurves)}
    return JstarDose(**{**curves, "mismatched_revert_m50": mismatched},
                     recovered_m50=float(top.recovered.iloc[0]) if len(top) else math.nan,
                     curve_recovered=[float(x) for x in t.sort_values("m").recovered],
                     n=int(t.n.iloc[0]) if len(t) else 0, m_tried=list(s.curve_m), units_min=units_min,
                     units_max=int(every.m.iloc[0]) if len(every) else None,
                     short_m50=int(random.short.iloc[0]) if len(random) else None)


@dataclass(frozen=True)
class AfterJstarCurves:
    """Shown, not judged (8.4): after j*, each example's top m (and m random) neurons of ``jstar_layer``
    patched there, on M and on the never-trained null: the share whose predictions change, by m."""

    after_jstar_m: list[int] | None = None
    after_jstar_patch_revert: list[float] | None = None
    after_jstar_random_patch_revert: list[float] | None = None
    after_jstar_null_patch_revert: list[float] | None = None
    after_jstar_null_random_patch_revert: list[float] | None = None
    jstar_layer: int | None = None


@dataclass(frozen=True)
class JstarAnalysis:
    """Every result of 8.4 for one run: the comparisons, the dose-response at j* (``dose``, its table) and
    after j* on M and on the null, and each example's j*."""

    comparison: JstarComparison
    after: AfterJstar
    summary: JstarDose
    curves: AfterJstarCurves
    dose: pd.DataFrame
    jstar: torch.Tensor


def jstar_analysis(model: HookedTransformer, sets: dict[str, Examples], stats: dict[str, NeighbourStats],
                   hmap: HeuristicMap, layer: int, settings: DoseSettings) -> JstarAnalysis:
    """8.4 for one run: ``sets`` and ``stats`` of ``"M"``, ``"clean"`` and ``"null"`` (stats computed for a
    map with the features of ``hmap``, the 8.3 cut map whose units are read); ``layer`` is patched."""
    if settings.revert_min is None:
        raise ValueError("jstar_analysis needs settings.revert_min (the share of M a patch must revert for m50)")
    memorized, null = sets["M"], sets["null"]
    A = memorized.label.shape[1]
    jstar, jstar_null = first_differing(memorized), first_differing(null)
    units = hmap.heuristic[list(hmap.layers).index(layer)]  # [A, D] the 8.3 units of the layer (8.5)
    at_jstar = Patch(layer, jstar_mask(jstar, A), units, memorized.label)
    dose = position_dose_response(model, memorized, stats["M"], at_jstar, settings)
    curves = [[int(m) for m in settings.m_grid]]
    for examples, name, j in ((memorized, "M", jstar), (null, "null", jstar_null)):
        after = Patch(layer, jstar_mask(j, A, after=True))
        table = position_dose_response(model, examples, stats[name], after, settings)
        for units_name in ("top", "random"):
            t = table[table.units == units_name].sort_values("m") if len(table) else table
            curves.append([float(x) for x in t.reverted] if len(t) else [math.nan] * len(settings.m_grid))
    summary = jstar_summary(dose, layer, settings.revert_min, jstar_units(jstar, units, settings.max_examples))
    return JstarAnalysis(jstar_comparison(stats["M"], stats["clean"], hmap, jstar),
                         after_jstar_comparison(stats["M"], stats["null"], hmap, jstar, jstar_null), summary,
                         AfterJstarCurves(*curves, int(layer)), dose, jstar)

"""Neurons patched to their clean-neighbour expectations: the patching experiments of claim C5.

Every edit is a :func:`~rote.analysis.patching.set_where` on an MLP layer's ``hook_post``, applied
through the generic path of :mod:`rote.analysis.patching`. The units, their classification and
their clean-neighbour expectations are those of :mod:`rote.analysis.units` (a
:class:`~rote.analysis.units.HeuristicMap` and the :class:`~rote.analysis.units.NeighbourStats` of
:func:`rote.analysis.outliers.neighbour_stats`).

- :func:`layer_patching`, :func:`patching_summary` -- MLP units patched to clean-neighbour
  expectations, against random units (C5);
- :func:`neuron_scores`, :func:`dose_response`, :func:`dose_summary` -- each example's top-m
  neurons by |z| patched to their clean-neighbour expectations, against m random neurons and
  another example's top m (C5, amendment 1, 7.7);
- :func:`position_dose_response`, :func:`jstar_dose_response`, :func:`jstar_summary`,
  :func:`jstar_units` -- the same patched at chosen answer positions only (:func:`jstar_mask`,
  :func:`after_jstar_mask`): each memorized example's first differing digit j* (ranking and
  patching the 8.3 heuristic units there, 8.5), or the positions after it (C5, amendment 2, 8.4);
- :func:`jstar_analysis` -- every number of 8.4 for one run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from .. import scoring
from ..model import HookedTransformer
from ..tasks import Examples
from .outliers import after_jstar_comparison, first_differing, jstar_comparison, jstar_values
from .patching import edit_hooks, set_where
from .units import HeuristicMap, NeighbourStats


# -- C5 layer patching: the units of a layer patched to clean-neighbour expectations ---------------
def _random_like(counts: torch.Tensor, n_units: int, gen: torch.Generator) -> torch.Tensor:
    """Bool [..., n_units] with ``counts[...]`` units set, chosen uniformly at random."""
    scores = torch.rand(*counts.shape, n_units, generator=gen)
    kth = scores.sort(-1).values.gather(-1, (counts[..., None] - 1).clamp(min=0))
    return (scores <= kth) & (counts[..., None] > 0)


@dataclass(frozen=True)
class LayerPatchSettings:
    """The knobs of :func:`layer_patching`: the |z| from which a heuristic unit is an outlier
    (``z_min``), the random draws of each control (``n_controls``) and their ``seed``."""

    z_min: float = 2.0
    n_controls: int = 3
    seed: int = 0

    def __post_init__(self):
        if not self.z_min >= 0.0:
            raise ValueError(f"z_min must be at least 0, got {self.z_min!r}")
        if self.n_controls < 1:
            raise ValueError(f"n_controls must be at least 1, got {self.n_controls!r}")


def layer_patching(model: HookedTransformer, memorized: Examples, stats, hmap,
                   settings: LayerPatchSettings = LayerPatchSettings()) -> pd.DataFrame:
    """Layer-wise activation patching of MLP neurons to their clean-neighbour expectations, on M.

    ``stats``: :class:`~rote.analysis.units.NeighbourStats` of ``memorized``; ``hmap``: the
    :class:`~rote.analysis.units.HeuristicMap` they were computed for. For each analysed layer,
    three sets of units are patched at the answer positions (one set at a time, the other layers
    untouched):

    - ``outliers``: the layer's heuristic units whose activation on the example is an outlier
      (|z| >= ``z_min``); a different set for each example;
    - ``heuristics``: every heuristic unit of the layer;
    - ``all``: every neuron of the layer.

    Each of the first two has a random control (``control`` True): the same number of units, per
    example and answer position, drawn uniformly from the layer's neurons and patched the same
    way; mean over ``n_controls`` draws. Columns: layer, units, control, n_units (mean per
    example), reverted (share of M no longer giving the noisy label), recovered (share now giving
    the true answer). With patched values fixed, teacher-forced exact match equals greedy decoding.
    """
    z_min, n_controls, seed = settings.z_min, settings.n_controls, settings.seed
    cols = ["layer", "units", "control", "n_units", "reverted", "recovered"]
    if len(memorized) == 0:
        return pd.DataFrame(columns=cols)
    gen = torch.Generator().manual_seed(seed)
    expected = stats.expected
    n = len(memorized)
    positions = memorized.answer_positions
    rows = []
    for li, l in enumerate(hmap.layers):
        values = expected[:, li]  # [N, A, D]
        heur = hmap.heuristic[li][None].expand(n, -1, -1)  # [N, A, D]
        z = stats.z[:, li]
        outl = heur & (z.abs() >= z_min) & ~z.isnan()
        for name, mask in [("outliers", outl), ("heuristics", heur), ("all", torch.ones_like(heur))]:
            conditions = [(False, [mask])]
            if name != "all":
                counts = mask.sum(-1)  # [N, A]
                conditions.append((True, [_random_like(counts, mask.shape[-1], gen) for _ in range(n_controls)]))
            for control, masks in conditions:
                rev, rec = [], []
                for m in masks:
                    edits = [(model.hook_name("post", l), set_where(positions, m, values))]
                    rev.append(1 - scoring.exact_match(model, memorized, "label", hooks=edit_hooks(edits))
                               .cpu().double().mean().item())
                    rec.append(scoring.exact_match(model, memorized, "true_label", hooks=edit_hooks(edits))
                               .cpu().double().mean().item())
                rows.append({"layer": l, "units": name, "control": control,
                             "n_units": float(mask.sum((1, 2)).float().mean()),
                             "reverted": float(np.mean(rev)), "recovered": float(np.mean(rec))})
    return pd.DataFrame(rows, columns=cols)


def patching_summary(table: pd.DataFrame, layer: int) -> dict:
    """The numbers of one layer of :func:`layer_patching` as a flat dict: ``{units}_{metric}`` and
    ``{units}_control_{metric}`` (NaN when the table is empty)."""
    out = {}
    for units in ("outliers", "heuristics", "all"):
        for control in ((False, True) if units != "all" else (False,)):
            for metric in ("reverted", "recovered"):
                row = table[(table.layer == layer) & (table.units == units) & (table.control == control)] \
                    if len(table) else table
                out[f"{units}{'_control' if control else ''}_{metric}"] = float(row[metric].iloc[0]) if len(row) else math.nan
    return out


# -- C5 dose-response (amendment 1, 7.7): neurons as units -----------------------------------------
def neuron_scores(stats, layer_index: int) -> torch.Tensor:
    """[N, D] each example's score of every neuron of one analysed layer: its largest |z| over the
    answer positions (-inf where z is undefined at every position), for ranking."""
    absz = stats.z[:, layer_index].abs()  # [N, A, D]
    absz = torch.where(absz.isnan(), torch.full_like(absz, -math.inf), absz)
    return absz.max(1).values


def _top_mask(scores: torch.Tensor, m: int) -> torch.Tensor:
    """Bool [N, D]: each row's ``m`` highest-scoring neurons (ties: lower index)."""
    m = min(m, scores.shape[1])
    mask = torch.zeros_like(scores, dtype=torch.bool)
    if m > 0:
        mask.scatter_(1, scores.topk(m, dim=1).indices, True)
    return mask


def mismatch_partner(n: int, seed: int = 0) -> torch.Tensor:
    """[n] for each example another example (a random cyclic shift along a random permutation, so
    that no example is its own partner); empty when ``n < 2``."""
    if n < 2:
        return torch.zeros(0, dtype=torch.long)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    partner = torch.empty(n, dtype=torch.long)
    partner[perm] = perm.roll(-1)
    return partner


@dataclass(frozen=True)
class DoseSettings:
    """The knobs of a dose-response (7.7: :func:`dose_response`; 8.4: :func:`position_dose_response`,
    :func:`jstar_dose_response`, :func:`jstar_analysis`): the numbers of neurons patched
    (``m_grid``), the random draws per m (``n_controls``), the ``seed`` of the draws and of the
    mismatched partners, the first ``max_examples`` examples only (None: all), and the share of M a
    top-m patch must revert for m50 (``revert_min``; read by :func:`jstar_analysis`, which needs it)."""

    m_grid: tuple[int, ...]
    n_controls: int = 3
    seed: int = 0
    max_examples: int | None = None
    revert_min: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "m_grid", tuple(self.m_grid))
        if any(m < 1 for m in self.m_grid):
            raise ValueError(f"every m of m_grid must be at least 1, got {self.m_grid!r}")
        if self.n_controls < 1:
            raise ValueError(f"n_controls must be at least 1, got {self.n_controls!r}")
        if self.max_examples is not None and self.max_examples < 0:
            raise ValueError(f"max_examples must be None or at least 0, got {self.max_examples!r}")
        if self.revert_min is not None and not 0.0 <= self.revert_min <= 1.0:
            raise ValueError(f"revert_min must be None or in [0, 1], got {self.revert_min!r}")


def dose_response(model: HookedTransformer, memorized: Examples, stats, layers: Sequence[int],
                  settings: DoseSettings) -> pd.DataFrame:
    """Patching each memorized example's top-m neurons by |z| to their clean-neighbour expectations.

    A unit is a neuron (layer l, index i), patched at every answer position. For each layer of
    ``layers`` (among ``stats.layers``) and each m of ``m_grid``, three sets of m neurons are
    patched, one at a time, each to *this* example's clean-neighbour expectation
    (``stats.expected``):

    - ``top``: the example's m neurons with the largest |z| (:func:`neuron_scores`);
    - ``random``: m neurons of the same layer drawn uniformly (mean over ``n_controls`` draws);
    - ``mismatched``: the top m neurons of another memorized example (:func:`mismatch_partner`),
      which are outliers for some memorized example but not chosen for this one (NaN with fewer
      than two examples).

    Rows: layer, m, units ("top" | "random" | "mismatched"), reverted (share of M no longer giving
    its noisy label), recovered (share now giving the true sum; top m only, NaN for the controls), n
    (the examples patched, the denominator of both shares).
    ``max_examples``: only the first that many examples of ``memorized`` (and ``stats``) are used.
    Cost: (3 + ``n_controls``) scoring passes per layer and m.
    """
    m_grid, n_controls, seed, max_examples = settings.m_grid, settings.n_controls, settings.seed, settings.max_examples
    cols = ["layer", "m", "units", "reverted", "recovered", "n"]
    if max_examples is not None:
        memorized = memorized[:max_examples]
    if len(memorized) == 0:
        return pd.DataFrame(columns=cols)
    gen = torch.Generator().manual_seed(seed)
    n, positions = len(memorized), memorized.answer_positions
    expected = stats.expected[:n]
    partner = mismatch_partner(n, seed)
    rows = []
    for l in layers:
        li = list(stats.layers).index(l)
        values = expected[:, li]  # [N, A, D]
        A, D = values.shape[1:]
        scores = neuron_scores(stats, li)[:n]
        hook = model.hook_name("post", l)

        def score(mask: torch.Tensor, recovered: bool = False) -> tuple[float, float]:
            full = mask[:, None, :].expand(n, A, D)
            hooks = edit_hooks([(hook, set_where(positions, full, values))])
            rev = 1 - scoring.exact_match(model, memorized, "label", hooks=hooks).cpu().double().mean().item()
            rec = (scoring.exact_match(model, memorized, "true_label", hooks=hooks).cpu().double().mean().item()
                   if recovered else math.nan)
            return rev, rec

        for m in m_grid:
            top = _top_mask(scores, m)
            rev, rec = score(top, recovered=True)
            rows.append({"layer": l, "m": m, "units": "top", "reverted": rev, "recovered": rec, "n": n})
            draws = [score(_top_mask(torch.rand(n, D, generator=gen), m)) for _ in range(n_controls)]
            rows.append({"layer": l, "m": m, "units": "random", "reverted": float(np.mean([d[0] for d in draws])),
                         "recovered": float(np.mean([d[1] for d in draws])), "n": n})
            rev, rec = score(top[partner]) if len(partner) else (math.nan, math.nan)
            rows.append({"layer": l, "m": m, "units": "mismatched", "reverted": rev, "recovered": rec, "n": n})
    return pd.DataFrame(rows, columns=cols)


def dose_summary(table: pd.DataFrame, layer: int, revert_min: float) -> dict:
    """The numbers of one layer of :func:`dose_response`: ``m50`` (the smallest m whose top-m patch
    reverts at least ``revert_min`` of M; None if none does), the random and mismatched reverts at
    m50, the largest top-m revert, and the three curves (``curve_top`` etc., by m). (The examples
    patched, the denominator of every share, are the table's ``n``.)"""
    t = table[table.layer == layer] if len(table) else table
    curves = {u: t[t.units == u].sort_values("m") for u in ("top", "random", "mismatched")}
    out: dict = {f"curve_{u}": [float(x) for x in c.reverted] for u, c in curves.items()}
    out["curve_m"] = [int(x) for x in curves["top"].m]
    top = curves["top"]
    hit = top[top.reverted >= revert_min]
    m50 = int(hit.m.iloc[0]) if len(hit) else None

    def at(units):
        if m50 is None:
            return math.nan
        row = curves[units][curves[units].m == m50]
        return float(row.reverted.iloc[0]) if len(row) else math.nan

    out.update({"m50": m50, "top_revert_max": float(top.reverted.max()) if len(top) else math.nan,
                "top_revert_m50": at("top"), "random_revert_m50": at("random"),
                "mismatched_revert_m50": at("mismatched")})
    return out


# -- C5 at the first differing digit (amendment 2, 8.4) ------------------------------------------
def jstar_mask(jstar: torch.Tensor, n_positions: int) -> torch.Tensor:
    """Bool [N, A]: each example's j* (:func:`rote.analysis.outliers.first_differing`; none where -1)."""
    jstar = jstar.long().cpu()
    return (torch.arange(n_positions)[None] == jstar[:, None]) & (jstar >= 0)[:, None]


def after_jstar_mask(jstar: torch.Tensor, n_positions: int) -> torch.Tensor:
    """Bool [N, A]: the answer positions after each example's j* (none where j* is -1)."""
    jstar = jstar.long().cpu()
    return (torch.arange(n_positions)[None] > jstar[:, None]) & (jstar >= 0)[:, None]


@dataclass(frozen=True)
class PatchedNeurons:
    """The neurons a dose-response at chosen answer positions ranks and patches: those of ``layer``;
    with ``units`` bool [A, D] (8.5: the 8.3 heuristic units of the layer per answer position) only
    these, with None every neuron of the layer."""

    layer: int
    units: torch.Tensor | None = None

    def __post_init__(self):
        if self.layer < 0:
            raise ValueError(f"layer must be at least 0, got {self.layer!r}")
        if self.units is not None and self.units.dim() != 2:
            raise ValueError(f"units must be [A, D], got shape {tuple(self.units.shape)}")


@dataclass(frozen=True)
class PatchSites:
    """Where a dose-response at chosen answer positions patches, and against what: ``at`` bool
    [N, A], the positions of each example (:func:`jstar_mask`, :func:`after_jstar_mask`), and
    ``reference`` [N, A], the prediction a revert is read against (None: the unpatched prediction)."""

    at: torch.Tensor
    reference: torch.Tensor | None = None

    def __post_init__(self):
        if self.at.dim() != 2:
            raise ValueError(f"at must be [N, A], got shape {tuple(self.at.shape)}")
        if self.reference is not None and tuple(self.reference.shape) != tuple(self.at.shape):
            raise ValueError(f"reference must have the shape of at {tuple(self.at.shape)}, "
                             f"got {tuple(self.reference.shape)}")


def _candidates(stats, li: int, rows: torch.Tensor, at: torch.Tensor,
                units: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each example's ranking ``scores`` [n, D] of the neurons of layer ``li`` (its largest |z| over its
    ``at`` positions) and the neurons it may patch, ``allowed`` bool [n, D]: with ``units`` [A, D] the
    units at its ``at`` positions (8.5; one with an undefined |z| ranks below every defined one, -1, and
    one that is no candidate is never chosen, -inf), else every neuron of the layer."""
    absz = stats.z[rows, li].abs()
    D = absz.shape[-1]
    if units is None:
        absz = torch.where(absz.isnan() | ~at[:, :, None], torch.full_like(absz, -math.inf), absz)
        return absz.max(1).values, torch.ones(len(rows), D, dtype=torch.bool)
    cand = at[:, :, None] & units.bool().cpu()[None]  # [n, A, D]
    absz = torch.where(cand, absz.nan_to_num(-1.0), torch.full_like(absz, -math.inf))
    return absz.max(1).values, cand.any(1)


def _doses(m_grid: Sequence[int], counts: torch.Tensor, by_units: bool) -> list[tuple[int, bool]]:
    """The doses ``(m, all)`` of a dose-response. Every neuron of the layer (``by_units`` False): each m
    of ``m_grid``. Over the 8.3 units (8.6): each m of the grid up to the most units an example holds
    (``counts`` [n], each example patching min(m, its count)), and once all of them: ``all`` is True for
    the dose at which every example patches every unit it holds (a grid m equal to the largest count, else
    an extra dose m = the largest count). None at all where no example holds a unit."""
    if not by_units:
        return [(int(m), False) for m in m_grid]
    most = int(counts.max()) if len(counts) else 0
    if most == 0:
        return []
    doses = [(int(m), int(m) == most) for m in m_grid if m <= most]
    return doses if any(a for _, a in doses) else doses + [(most, True)]


@dataclass(frozen=True)
class _Draw:
    """How a dose-response draws its controls: the generator of the random draws, each example's
    mismatched ``partner`` (:func:`mismatch_partner`), the random draws per dose, and whether the
    candidates are the 8.3 units (``by_units``) or every neuron of the layer."""

    gen: torch.Generator
    partner: torch.Tensor
    n_controls: int
    by_units: bool


def _controls(scores: torch.Tensor, allowed: torch.Tensor, top: torch.Tensor, m: int,
              draw: _Draw) -> tuple[list[torch.Tensor], torch.Tensor | None, int]:
    """The control masks at dose m: ``n_controls`` random draws, the mismatched set (None with fewer
    than two examples), and how many examples have fewer than m units to draw from (``short``).

    Every neuron of the layer: m random neurons of the layer; mismatched = the partner's top m. Over the
    8.3 units (8.6): both drawn from the example's units outside its own top m (its ``others``), m of
    them, or all that remain where fewer do: random uniformly; mismatched in the order of the partner's
    |z| ranking (the partner's top m among them; units the partner does not rank follow in a random
    order)."""
    n, D = scores.shape
    others = allowed & ~top if draw.by_units else allowed

    def pick(key: torch.Tensor) -> torch.Tensor:
        return _top_mask(key.masked_fill(~others, -math.inf), m) & others

    randoms = [pick(torch.rand(n, D, generator=draw.gen)) for _ in range(draw.n_controls)]
    if not len(draw.partner):
        mismatched = None
    elif draw.by_units:
        key = scores[draw.partner]
        fill = -2.0 - torch.rand(n, D, generator=torch.Generator().manual_seed(draw.gen.initial_seed() + 1))
        mismatched = pick(torch.where(torch.isfinite(key), key, fill))
    else:
        mismatched = top[draw.partner]
    return randoms, mismatched, int((others.sum(1) < m).sum())


@torch.no_grad()
def position_dose_response(model: HookedTransformer, examples: Examples, stats, neurons: PatchedNeurons,
                           sites: PatchSites, settings: DoseSettings) -> pd.DataFrame:
    """Each example's top-m neurons of ``neurons.layer`` by |z| at chosen answer positions, patched there only.

    ``sites.at`` bool [N, A]: the positions of each example that are ranked on and patched (8.4: j*,
    :func:`jstar_mask`; after it: :func:`after_jstar_mask`); examples with none are left out. Neurons
    are ranked by their largest |z| over those positions (``stats`` of ``examples``) and set there, and
    only there, to the example's clean-neighbour expectations; the model stays teacher-forced on
    ``examples.label``. Per dose (:func:`_doses`): ``top`` (the example's own top m), ``random`` (mean
    over ``n_controls`` draws) and ``mismatched`` (another example's top m, NaN with fewer than two),
    drawn as :func:`_controls` says. ``neurons.units`` [A, D] (8.5, 8.6: the 8.3 units of the layer per
    answer position): only these are ranked, patched and drawn from, each example capped at the units it
    holds at its positions, and one dose patches all of them; None: every neuron of the layer.

    ``reverted``: the share of examples whose prediction at some ``at`` position differs from
    ``sites.reference`` there (8.4: the noisy label; None: the unpatched prediction); ``recovered``:
    the share giving the true digit at every ``at`` position (top m only). Rows: layer, m, units,
    reverted, recovered, n (examples), all (the dose patches every unit each example holds), short (top:
    examples holding fewer than m units, which patch all of theirs; controls: examples with fewer than m
    units outside their top m to draw from)."""
    layer, units, m_grid = neurons.layer, neurons.units, settings.m_grid
    cols = ["layer", "m", "units", "reverted", "recovered", "n", "all", "short"]
    rows_kept = sites.at.bool().cpu().any(1).nonzero().squeeze(1)[:settings.max_examples]
    n = len(rows_kept)
    if n == 0:
        return pd.DataFrame(columns=cols)
    ex, at = examples[rows_kept], sites.at.bool().cpu()[rows_kept]
    li = list(stats.layers).index(layer)
    values = stats.expected[rows_kept, li]  # [n, A, D]
    scores, allowed = _candidates(stats, li, rows_kept, at, units)
    hook, positions = model.hook_name("post", layer), ex.answer_positions

    def predict(mask: torch.Tensor | None) -> torch.Tensor:
        edits = [] if mask is None else [(hook, set_where(positions, at[:, :, None] & mask[:, None, :], values))]
        return scoring.answer_logits(model, ex, "label", hooks=edit_hooks(edits)).argmax(-1).cpu()

    ref = predict(None) if sites.reference is None else sites.reference.cpu()[rows_kept]

    def score(mask: torch.Tensor | None, recovered: bool = False) -> tuple[float, float]:
        if mask is None:
            return math.nan, math.nan
        pred = predict(mask)
        rev = ((pred != ref) & at).any(1).double().mean().item()
        return rev, ((pred == ex.true_label) | ~at).all(1).double().mean().item() if recovered else math.nan

    draw = _Draw(torch.Generator().manual_seed(settings.seed), mismatch_partner(n, settings.seed), settings.n_controls,
                 units is not None)
    out, counts = [], allowed.sum(1)
    for m, every in _doses(m_grid, counts, units is not None):
        top = allowed if every else _top_mask(scores, m) & allowed
        rev, rec = score(top, recovered=True)
        row = {"layer": layer, "m": m, "n": n, "all": every}
        out.append({**row, "units": "top", "reverted": rev, "recovered": rec, "short": int((counts < m).sum())})
        randoms, mismatched, short = _controls(scores, allowed, top, m, draw)
        out.append({**row, "units": "random", "reverted": float(np.mean([score(k)[0] for k in randoms])),
                    "recovered": math.nan, "short": short})
        out.append({**row, "units": "mismatched", "reverted": score(mismatched)[0], "recovered": math.nan,
                    "short": short})
    return pd.DataFrame(out, columns=cols)


def jstar_dose_response(model: HookedTransformer, memorized: Examples, stats, jstar: torch.Tensor,
                        neurons: PatchedNeurons, settings: DoseSettings) -> pd.DataFrame:
    """The specificity experiment of 8.4: :func:`position_dose_response` at each memorized
    example's j* only; reverted = the prediction at j* is no longer the noisy digit, recovered = it
    is the true digit. ``neurons.units`` [A, D]: the 8.3 heuristic units of ``neurons.layer`` (8.5:
    the candidates ranked, patched and drawn from; 8.6: each m of the grid up to the most units an
    example holds at its j*, each example capped at its own, and once all of them)."""
    at = jstar_mask(jstar, memorized.label.shape[1])
    return position_dose_response(model, memorized, stats, neurons, PatchSites(at, memorized.label), settings)


def jstar_units(jstar: torch.Tensor, units: torch.Tensor, max_examples: int | None = None) -> int | None:
    """The fewest candidate units (``units`` [A, D], the 8.3 units of one layer) at an example's j*,
    over the examples :func:`jstar_dose_response` patches (the first ``max_examples`` with a j*);
    None when no example has a j*."""
    jstar = jstar.long().cpu()
    rows = (jstar >= 0).nonzero().squeeze(1)
    if max_examples is not None:
        rows = rows[:max_examples]
    if not len(rows):
        return None
    return int(units.bool().cpu().sum(-1)[jstar[rows]].min())


def jstar_summary(table: pd.DataFrame, layer: int, revert_min: float, prefix: str = "jstar_") -> dict:
    """:func:`dose_summary` of a :func:`position_dose_response` table, keys prefixed with
    ``prefix`` (``jstar_m50``, ``jstar_top_revert_max``, ``jstar_top_revert_m50``,
    ``jstar_random_revert_m50``, ``jstar_mismatched_revert_m50``, ``jstar_curve_*``, ``jstar_n``), plus
    ``recovered_m50`` (the share giving the true digit under the top-m patch at m50), ``m_tried`` (the
    doses of the table, 8.6: each m of the grid up to the most 8.3 units an example holds, and the dose
    that patches all of them), ``units_max`` (the m of that last dose: the most units an example holds;
    None without units or rows), and ``short_m50`` (the examples with fewer than m50 units outside their
    top m50, from which the controls draw; None without m50). m50 may be the all-units dose.
    ``mismatched_revert_m50`` is None with fewer than two examples."""
    s = dose_summary(table, layer, revert_min)
    t = table[(table.layer == layer) & (table.units == "top")] if len(table) else table
    row = t[t.m == s["m50"]] if s["m50"] is not None else t.iloc[:0]
    s["recovered_m50"] = float(row.recovered.iloc[0]) if len(row) else math.nan
    s["curve_recovered"] = [float(x) for x in t.sort_values("m").recovered] if len(t) else []
    if s["m50"] is not None and isinstance(s["mismatched_revert_m50"], float) and math.isnan(s["mismatched_revert_m50"]):
        s["mismatched_revert_m50"] = None
    s["n"] = int(t.n.iloc[0]) if len(t) else 0
    s["m_tried"] = [int(x) for x in s["curve_m"]]
    every = t[t["all"].astype(bool)] if len(t) and "all" in t else t.iloc[:0]
    s["units_max"] = int(every.m.iloc[0]) if len(every) else None
    controls = table[(table.layer == layer) & (table.units == "random") & (table.m == s["m50"])] \
        if len(table) and s["m50"] is not None and "short" in table else table.iloc[:0]
    s["short_m50"] = int(controls.short.iloc[0]) if len(controls) else None
    return {prefix + k: v for k, v in s.items()}


# -- amendment 2, 8.4: everything read at the first differing digit, for one run --------------------
def jstar_analysis(model: HookedTransformer, sets: dict[str, Examples], stats: dict[str, NeighbourStats],
                   hmap: HeuristicMap, layer: int, settings: DoseSettings) -> dict:
    """The numbers of 8.4 for one run.

    ``sets``: the example sets ``"M"`` (memorized) and ``"null"`` (never-trained noisy labels,
    :func:`fresh_noisy_labels`); ``settings``: ``m_grid``, ``revert_min`` (needed), ``n_controls``,
    ``seed``, ``max_examples``.
    ``stats``: :class:`NeighbourStats` of ``"M"``, ``"clean"`` and ``"null"``, computed for a map with the
    same features as ``hmap`` (the 8.3 cut map of :func:`with_cut`, whose heuristic units are read).
    Returns ``metrics`` (:func:`jstar_comparison`, :func:`jstar_summary` of the dose-response at j*
    in ``layer``, which ranks, patches and draws its random control from the heuristic units of
    ``hmap`` in ``layer`` at each example's j* (8.5, 8.6; ``jstar_m_tried``: the doses tried,
    ``jstar_units_min`` and ``jstar_units_max``: the fewest and most at an example's j*), and the
    shown-only ``after_jstar_*``
    (every neuron of ``layer``): :func:`after_jstar_comparison` and the
    top-m / random-m curves of patching after j*, on M and on the null, reverted against the
    unpatched prediction), the tables ``dose`` (at j*), ``after`` and ``after_null``, ``jstar``, and
    ``z_values`` (:class:`~rote.analysis.outliers.JstarValues`: the per-example values of the ratio at
    j*, from which ``jstar_z_ratio_interval`` is bootstrapped, section 11).
    """
    if settings.revert_min is None:
        raise ValueError("jstar_analysis needs settings.revert_min (the share of M a patch must revert for m50)")
    memorized, null, m_grid = sets["M"], sets["null"], settings.m_grid
    A = memorized.label.shape[1]
    jstar, jstar_null = first_differing(memorized), first_differing(null)
    metrics = jstar_comparison(stats["M"], stats["clean"], hmap, jstar)
    metrics.update(after_jstar_comparison(stats["M"], stats["null"], hmap, jstar, jstar_null))
    units = hmap.heuristic[list(hmap.layers).index(layer)]  # [A, D] the 8.3 units of the layer (8.5)
    dose = jstar_dose_response(model, memorized, stats["M"], jstar, PatchedNeurons(layer, units), settings)
    metrics.update(jstar_summary(dose, layer, settings.revert_min))
    metrics["jstar_units_min"] = jstar_units(jstar, units, settings.max_examples)
    every = PatchedNeurons(layer)
    after = position_dose_response(model, memorized, stats["M"], every, PatchSites(after_jstar_mask(jstar, A)), settings)
    after_null = position_dose_response(model, null, stats["null"], every, PatchSites(after_jstar_mask(jstar_null, A)),
                                        settings)

    def curve(table, units):
        t = table[table.units == units].sort_values("m") if len(table) else table
        return [float(x) for x in t.reverted] if len(t) else [math.nan] * len(m_grid)

    metrics.update({"after_jstar_m": [int(m) for m in m_grid], "after_jstar_patch_revert": curve(after, "top"),
                    "after_jstar_random_patch_revert": curve(after, "random"),
                    "after_jstar_null_patch_revert": curve(after_null, "top"),
                    "after_jstar_null_random_patch_revert": curve(after_null, "random"),
                    "jstar_layer": int(layer)})
    return {"metrics": metrics, "dose": dose, "after": after, "after_null": after_null, "jstar": jstar,
            "z_values": jstar_values(stats["M"], stats["clean"], hmap, jstar)}

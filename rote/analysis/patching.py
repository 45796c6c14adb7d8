"""Replace activations, then score: every intervention of the book goes through this module.

An *edit* is ``(hook name, setter)``; a *setter* ``setter(act, rows) -> new act`` returns the
activation that replaces ``act`` for the examples ``rows`` (a slice of the scored examples; the
activation holds exactly those rows) and never modifies ``act`` in place. Edits are applied by one
generic path: :func:`edit_hooks` turns them into the scorer's per-batch hooks
(:mod:`rote.scoring`), and :func:`patched` applies them to any forward pass for the duration of a
block. Every hook is removed before these return, also on error.

Setters (the only places that write an activation):

- :func:`set_units` -- given units (heads of ``hook_z``, neurons of ``hook_post``) to fixed
  per-position values (mean ablation);
- :func:`set_where` -- at given positions, per-example values where a per-example mask is set
  (patching neurons to their clean-neighbour expectations);
- :func:`set_from` -- units to their activations in another run (activation patching);
- :func:`project_out` -- remove a subspace around a mean at given positions (INLP erasure);
- :func:`set_token_embedding` -- the token embedding at one position (resample ablation).

Experiments (each: replace activations, then score):

- :func:`patched_accuracy` -- exact-match accuracy of named sets under edits;
  :func:`erasure_accuracy`, :func:`erasure_sweep` (INLP against random subspaces, C3),
  :func:`ablation_accuracy` (mean-ablated components, C3);
- :func:`patching_effects` -- the change of log P(label) when one component at a time is
  patched to its corrupted activation (the check of attribution patching, C3);
- :func:`resample_positions`, :func:`intermediate_removal` -- the share of P(label) that an input
  position or an intermediate result carries (C4);
- :func:`layer_patching`, :func:`patching_summary` -- MLP units patched to clean-neighbour
  expectations, against random units (C5);
- :func:`neuron_scores`, :func:`dose_response`, :func:`dose_summary` -- each example's top-m
  neurons by |z| patched to their clean-neighbour expectations, against m random neurons and
  another example's top m (C5, amendment 1, 7.7);
- :func:`position_dose_response`, :func:`jstar_dose_response`, :func:`jstar_summary`,
  :func:`jstar_units` -- the same patched at chosen answer positions only: each memorized example's
  first differing digit j* (ranking and patching the 8.3 heuristic units there, 8.5), or the
  positions after it (C5, amendment 2, 8.4).
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from .. import scoring
from ..model import HookedTransformer
from ..tasks import Examples
from .inlp import Erasure, random_erasure
from .lens import layer_hook_name

Setter = Callable[[torch.Tensor, slice], torch.Tensor]
Edit = tuple[str, Setter]
Sets = dict[str, tuple[Examples, str]]  # name -> (examples, which label)


# -- the generic path -----------------------------------------------------------------------------
def edit_hooks(edits: Sequence[Edit]) -> Callable[[slice], list]:
    """The scorer's per-batch hooks for ``edits``."""
    def hooks(rows: slice) -> list:
        return [(name, lambda act, hook, setter=setter: setter(act, rows)) for name, setter in edits]

    return hooks


@contextlib.contextmanager
def patched(model: HookedTransformer, edits: Sequence[Edit], rows: slice = slice(None)):
    """Apply ``edits`` to every forward pass in the block (``rows``: the examples it runs on)."""
    with model.hooks(edit_hooks(edits)(rows)):
        yield model


# -- setters --------------------------------------------------------------------------------------
def set_units(units: torch.Tensor | Sequence[int], values: torch.Tensor) -> Setter:
    """Units ``units`` of the last dimension (neurons of ``hook_post`` [B, P, D]; heads of
    ``hook_z`` [B, P, H, d_head], the unit dimension being 2) set to ``values`` [P, ...] (e.g. clean
    means), the same for every example."""
    units = torch.as_tensor(units)

    def setter(act: torch.Tensor, rows: slice) -> torch.Tensor:
        act = act.clone()
        value = values.to(act.device, act.dtype)[: act.shape[1], units]
        act[:, :, units] = value.expand(act.shape[0], *value.shape)
        return act

    return setter


def set_where(positions: torch.Tensor, mask: torch.Tensor, values: torch.Tensor) -> Setter:
    """At ``positions``, replace the activation by ``values`` [N, len(positions), ...] where
    ``mask`` ([N, ...] per example, or [1, ...] for all) is set."""
    def setter(act: torch.Tensor, rows: slice) -> torch.Tensor:
        pos = positions.to(act.device)
        v = values[rows].to(act.device)
        m = (mask[rows] if len(mask) == len(values) else mask).to(act.device)
        act = act.clone()
        act[:, pos] = torch.where(m, v, act[:, pos])
        return act

    return setter


def set_from(source: torch.Tensor, index: tuple) -> Setter:
    """``act[index]`` (``index`` starting with the example dimension, e.g. ``(slice(None),
    slice(None), head)``) replaced by the same entries of ``source`` [N, ...] (another run's
    activations of the same examples)."""
    def setter(act: torch.Tensor, rows: slice) -> torch.Tensor:
        act = act.clone()
        act[index] = source[rows].to(act.device)[index]
        return act

    return setter


def project_out(sites: dict[int, tuple[torch.Tensor, torch.Tensor]]) -> Setter:
    """At each ``position -> (Q [d, k] orthonormal, mu [d])``: x -> x - ((x - mu) Q) Q^T."""
    def setter(act: torch.Tensor, rows: slice) -> torch.Tensor:
        out = act.clone()
        for position, (Q, mu) in sites.items():
            if position < act.shape[1]:
                Q, mu = Q.to(act.device, act.dtype), mu.to(act.device, act.dtype)
                x = act[:, position]
                out[:, position] = x - ((x - mu) @ Q) @ Q.T
        return out

    return setter


def set_token_embedding(model: HookedTransformer, position: int, tokens: torch.Tensor) -> Setter:
    """For ``hook_embed``: the token embedding at ``position`` replaced by that of ``tokens`` [N]."""
    def setter(act: torch.Tensor, rows: slice) -> torch.Tensor:
        act = act.clone()
        act[:, position] = model.embed(tokens[rows].to(act.device))
        return act

    return setter


# -- edits of the book's interventions ----------------------------------------------------------
def erasure_edits(model: HookedTransformer, erasure: Erasure) -> list[Edit]:
    """An INLP (or random-subspace) erasure at its sites, one edit per layer."""
    edits = []
    for layer in erasure.layers:
        sites = {p: (Q, erasure.means[layer, p]) for (l, p), Q in erasure.bases.items() if l == layer}
        edits.append((layer_hook_name(layer), project_out(sites)))
    return edits


def component_edits(model: HookedTransformer, components: Iterable[int], means: dict[str, torch.Tensor]) -> list[Edit]:
    """Mean ablation of components (flat indices: every head, then every neuron, layer-major; see
    :mod:`rote.analysis.attribution`) to ``means`` ({hook name: [P, ...]}), at every position."""
    s = model.shape
    n_heads = s.n_layers * s.n_heads
    per_hook: dict[str, list[int]] = {}
    for c in sorted(components):
        if c < n_heads:
            per_hook.setdefault(model.hook_name("z", c // s.n_heads), []).append(c % s.n_heads)
        else:
            c -= n_heads
            per_hook.setdefault(model.hook_name("post", c // s.d_mlp), []).append(c % s.d_mlp)
    return [(name, set_units(idx, means[name])) for name, idx in per_hook.items()]


# -- experiments ----------------------------------------------------------------------------------
def patched_accuracy(model: HookedTransformer, sets: Sets, edits: Sequence[Edit] = ()) -> dict[str, float]:
    """Exact-match accuracy of each ``name -> (examples, which label)`` under ``edits`` (NaN for
    an empty set)."""
    hooks = edit_hooks(edits)
    return {name: scoring.accuracy(model, ex, which, hooks=hooks) for name, (ex, which) in sets.items()}


def erasure_accuracy(model: HookedTransformer, sets: Sets, erasure: Erasure | None = None) -> dict[str, float]:
    """:func:`patched_accuracy` with ``erasure`` applied (none: the unmodified model)."""
    return patched_accuracy(model, sets, erasure_edits(model, erasure) if erasure is not None else ())


def ablation_accuracy(model: HookedTransformer, sets: Sets, components: set[int],
                      means: dict[str, torch.Tensor]) -> dict[str, float]:
    """:func:`patched_accuracy` with ``components`` mean-ablated."""
    return patched_accuracy(model, sets, component_edits(model, components, means))


def erasure_sweep(model: HookedTransformer, erasure: Erasure, sets: Sets, ranks: list[int], n_controls: int = 3,
                  seed: int = 0, matched: Sequence[Erasure] | None = None) -> pd.DataFrame:
    """Accuracy of each set after erasing the first ``rank`` INLP directions, and after each
    control of the same rank, for every rank in ``ranks`` (each at most ``erasure.rank``). Rank 0
    is the unmodified model. Controls: method "random", random subspaces (``n_controls`` draws,
    averaged); method "matched" when ``matched`` is given, the information-matched erasures
    (:func:`rote.analysis.erasure.information_matched`, fitted to ``erasure.rank``) truncated to
    each rank, averaged.
    Rows: rank, method ("INLP" / "random" / "matched"), set, accuracy."""
    methods = ("INLP", "random") + (("matched",) if matched is not None else ())
    rows = []
    for rank in ranks:
        if rank > erasure.rank or (rank and not erasure.bases):  # nothing to erase: no result
            rows += [{"rank": rank, "method": m, "set": s, "accuracy": math.nan} for s in sets for m in methods]
            continue
        if rank == 0:
            base = erasure_accuracy(model, sets)
            rows += [{"rank": 0, "method": m, "set": s, "accuracy": a} for s, a in base.items() for m in methods]
            continue
        inlp = erasure_accuracy(model, sets, erasure.truncate(rank))
        rows += [{"rank": rank, "method": "INLP", "set": s, "accuracy": a} for s, a in inlp.items()]
        controls = {"random": [random_erasure(erasure.truncate(rank), seed + c) for c in range(n_controls)]}
        if matched is not None:
            controls["matched"] = [m.truncate(rank) for m in matched if m.bases and m.rank >= rank]
        for method, erasures in controls.items():
            accs = [erasure_accuracy(model, sets, e) for e in erasures]
            rows += [{"rank": rank, "method": method, "set": s,
                      "accuracy": sum(a[s] for a in accs) / len(accs) if accs else math.nan} for s in sets]
    return pd.DataFrame(rows, columns=["rank", "method", "set", "accuracy"])


def component_site(model: HookedTransformer, c: int) -> tuple[str, tuple]:
    """Hook name and index (example dimension first) of component ``c`` (flat index)."""
    s = model.shape
    n_heads = s.n_layers * s.n_heads
    if c < n_heads:
        return model.hook_name("z", c // s.n_heads), (slice(None), slice(None), c % s.n_heads)
    c -= n_heads
    return model.hook_name("post", c // s.d_mlp), (slice(None), slice(None), c % s.d_mlp)


@torch.no_grad()
def patching_effects(model: HookedTransformer, examples: Examples, which: str, corrupt: Examples,
                     components: list[int] | None = None) -> torch.Tensor:
    """Actual activation patching: for each component (flat index), the per-example change of
    log P(``examples.<which>``) when that component's activation (all positions) is replaced by
    its activation on ``corrupt`` (row i: the corrupted input of example i, teacher-forced on its
    own label). Returns [N, len(components)]. One scoring pass per component; meant for checks."""
    s = model.shape
    n = s.n_layers * (s.n_heads + s.d_mlp)
    components = list(range(n)) if components is None else list(components)
    names = [model.hook_name(k, l) for k in ("z", "post") for l in range(s.n_layers)]
    _, cache_cor = model.run_with_cache(scoring.model_inputs(corrupt).to(model.device), names)
    base = scoring.label_logprob(model, examples, which)
    out = []
    for c in components:
        name, index = component_site(model, c)
        edits = [(name, set_from(cache_cor[name], index))]
        out.append(scoring.label_logprob(model, examples, which, hooks=edit_hooks(edits)) - base)
    return torch.stack(out, 1).cpu() if out else torch.zeros(len(examples), 0)


def label_probability(model: HookedTransformer, examples: Examples, which: str = "label",
                      edits: Sequence[Edit] = ()) -> torch.Tensor:
    """[N] probability of the whole answer ``examples.<which>`` (teacher-forced product over its
    tokens) under ``edits``, on the CPU."""
    if len(examples) == 0:
        return torch.zeros(0)
    return scoring.label_logprob(model, examples, which, hooks=edit_hooks(edits)).exp().cpu()


def resample_positions(model: HookedTransformer, examples: Examples, reference: Examples, *,
                       which: str = "label", n_samples: int = 3, seed: int = 0) -> pd.DataFrame:
    """Resample ablation of each prompt position in turn.

    The token embedding at position p is replaced by that of position p in a random example from
    ``reference`` (position embeddings are kept); ``n_samples`` draws per example. The answer stays
    teacher-forced on ``examples.<which>``. Returns one row per (example, position) with
    ``p_clean``, ``p_ablated`` (mean over draws) and ``drop`` = 1 - p_ablated / p_clean, the share of
    P(label) that the position removes.
    """
    cols = ["example", "position", "p_clean", "p_ablated", "drop"]
    if len(examples) == 0 or len(reference) == 0:
        return pd.DataFrame(columns=cols)
    gen = torch.Generator().manual_seed(seed)
    p_clean = label_probability(model, examples, which)
    rows = []
    for p in range(examples.prompt.shape[1]):
        ablated = torch.zeros(len(examples))
        for _ in range(n_samples):
            pick = torch.randint(len(reference), (len(examples),), generator=gen)
            edits = [(model.hook_name("embed"), set_token_embedding(model, p, reference.prompt[pick, p]))]
            ablated += label_probability(model, examples, which, edits) / n_samples
        rows.append(pd.DataFrame({"example": range(len(examples)), "position": p, "p_clean": p_clean.numpy(),
                                  "p_ablated": ablated.numpy(),
                                  "drop": (1 - ablated / p_clean.clamp(min=1e-30)).numpy()}))
    return pd.concat(rows, ignore_index=True)


def intermediate_removal(model: HookedTransformer, examples: Examples, erasure: Erasure | None,
                         controls: Sequence[Erasure] = (), *, which: str = "label") -> pd.DataFrame:
    """The share of P(label) that removing an intermediate result takes away.

    ``erasure``: INLP of the intermediate result at its sites (chapter C3); ``controls``: erasures
    of random subspaces at the same sites and rank. Returns rows (example, method "INLP" |
    "random", p_clean, p_ablated, drop), the random rows averaged over the controls; empty for an
    empty set or a missing erasure.
    """
    cols = ["example", "method", "p_clean", "p_ablated", "drop"]
    if len(examples) == 0 or erasure is None or not erasure.bases:
        return pd.DataFrame(columns=cols)
    p_clean = label_probability(model, examples, which)
    frames = []
    for method, erasures in (("INLP", [erasure]), ("random", list(controls))):
        if not erasures:
            continue
        p = torch.zeros(len(examples))
        for e in erasures:
            p += label_probability(model, examples, which, erasure_edits(model, e)) / len(erasures)
        frames.append(pd.DataFrame({"example": range(len(examples)), "method": method, "p_clean": p_clean.numpy(),
                                    "p_ablated": p.numpy(), "drop": (1 - p / p_clean.clamp(min=1e-30)).numpy()}))
    return pd.concat(frames, ignore_index=True)


def _random_like(counts: torch.Tensor, n_units: int, gen: torch.Generator) -> torch.Tensor:
    """Bool [..., n_units] with ``counts[...]`` units set, chosen uniformly at random."""
    scores = torch.rand(*counts.shape, n_units, generator=gen)
    kth = scores.sort(-1).values.gather(-1, (counts[..., None] - 1).clamp(min=0))
    return (scores <= kth) & (counts[..., None] > 0)


def layer_patching(model: HookedTransformer, memorized: Examples, stats, hmap, *, z_min: float = 2.0,
                   n_controls: int = 3, seed: int = 0) -> pd.DataFrame:
    """Layer-wise activation patching of MLP neurons to their clean-neighbour expectations, on M.

    ``stats``: :class:`~rote.analysis.outliers.NeighbourStats` of ``memorized``; ``hmap``: the
    :class:`~rote.analysis.heuristics.HeuristicMap` they were computed for. For each analysed layer,
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


def dose_response(model: HookedTransformer, memorized: Examples, stats, layers: Sequence[int], m_grid: Sequence[int],
                  *, n_controls: int = 3, seed: int = 0, max_examples: int | None = None) -> pd.DataFrame:
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
    its noisy label), recovered (share now giving the true sum; top m only, NaN for the controls).
    ``max_examples``: only the first that many examples of ``memorized`` (and ``stats``) are used.
    Cost: (3 + ``n_controls``) scoring passes per layer and m.
    """
    cols = ["layer", "m", "units", "reverted", "recovered"]
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
            rows.append({"layer": l, "m": m, "units": "top", "reverted": rev, "recovered": rec})
            draws = [score(_top_mask(torch.rand(n, D, generator=gen), m)) for _ in range(n_controls)]
            rows.append({"layer": l, "m": m, "units": "random", "reverted": float(np.mean([d[0] for d in draws])),
                         "recovered": float(np.mean([d[1] for d in draws]))})
            rev, rec = score(top[partner]) if len(partner) else (math.nan, math.nan)
            rows.append({"layer": l, "m": m, "units": "mismatched", "reverted": rev, "recovered": rec})
    return pd.DataFrame(rows, columns=cols)


def dose_summary(table: pd.DataFrame, layer: int, revert_min: float) -> dict:
    """The numbers of one layer of :func:`dose_response`: ``m50`` (the smallest m whose top-m patch
    reverts at least ``revert_min`` of M; None if none does), the random and mismatched reverts at
    m50, the largest top-m revert, and the three curves (``curve_top`` etc., by m)."""
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


@torch.no_grad()
def position_dose_response(model: HookedTransformer, examples: Examples, stats, layer: int, m_grid: Sequence[int],
                           at: torch.Tensor, reference: torch.Tensor | None = None, *, n_controls: int = 3,
                           seed: int = 0, max_examples: int | None = None,
                           units: torch.Tensor | None = None) -> pd.DataFrame:
    """Each example's top-m neurons of ``layer`` by |z| at chosen answer positions, patched there only.

    ``at`` bool [N, A]: the positions of each example that are ranked on and patched (j* in 8.4:
    :func:`jstar_mask`; the positions after it: :func:`after_jstar_mask`); examples with none are
    left out. Neurons are ranked by their largest |z| over the example's ``at`` positions
    (``stats``: :class:`~rote.analysis.outliers.NeighbourStats` of ``examples``) and set, at those
    positions only, to the example's clean-neighbour expectations, through :func:`set_where`. The
    model stays teacher-forced on ``examples.label``. Per m of ``m_grid``, as in
    :func:`dose_response`: ``top`` (the example's own top m), ``random`` (m neurons of the layer,
    mean over ``n_controls`` draws) and ``mismatched`` (the top m of another example, NaN with
    fewer than two).

    ``reverted``: the share of examples whose teacher-forced prediction at some ``at`` position
    differs from ``reference`` [N, A] there (8.4: ``examples.label``, the noisy digit; None: the
    unpatched prediction, for sets the model was never trained on); ``recovered``: the share whose
    prediction equals the true digit at every ``at`` position (top m only, NaN for the controls).
    Rows: layer, m, units, reverted, recovered, n (examples).

    ``units`` bool [A, D] (protocol 8.5: the 8.3 heuristic units of ``layer`` per answer position):
    only these are ranked and patched. An example's candidates are the units at its ``at``
    positions; ``random`` draws m of its candidates outside its own top m. An m is tried only where
    every example has at least 2m candidates (its top m and m others); the m not tried have no rows
    (they are a tail of an ascending ``m_grid``). None: every neuron of the layer, the random m drawn
    from the whole layer.
    """
    cols = ["layer", "m", "units", "reverted", "recovered", "n"]
    rows_kept = at.bool().cpu().any(1).nonzero().squeeze(1)
    if max_examples is not None:
        rows_kept = rows_kept[:max_examples]
    n = len(rows_kept)
    if n == 0:
        return pd.DataFrame(columns=cols)
    ex = examples[rows_kept]
    at = at.bool().cpu()[rows_kept]
    li = list(stats.layers).index(layer)
    values = stats.expected[rows_kept, li]  # [n, A, D]
    D = values.shape[-1]
    absz = stats.z[rows_kept, li].abs()
    if units is None:
        allowed = torch.ones(n, D, dtype=torch.bool)
        absz = torch.where(absz.isnan() | ~at[:, :, None], torch.full_like(absz, -math.inf), absz)
        scores = absz.max(1).values  # [n, D]
    else:
        # the candidates: the units at the example's ``at`` positions; one with an undefined |z| ranks
        # below every defined one (-1), one that is no candidate is never chosen (-inf)
        cand = at[:, :, None] & units.bool().cpu()[None]  # [n, A, D]
        allowed = cand.any(1)  # [n, D]
        absz = torch.where(cand, absz.nan_to_num(-1.0), torch.full_like(absz, -math.inf))
        scores = absz.max(1).values
    fewest = int(allowed.sum(1).min())
    hook, positions = model.hook_name("post", layer), ex.answer_positions
    true = ex.true_label

    def predict(mask: torch.Tensor | None) -> torch.Tensor:
        edits = [] if mask is None else [(hook, set_where(positions, at[:, :, None] & mask[:, None, :], values))]
        return scoring.answer_logits(model, ex, "label", hooks=edit_hooks(edits)).argmax(-1).cpu()

    ref = predict(None) if reference is None else reference.cpu()[rows_kept]

    def score(mask: torch.Tensor, recovered: bool = False) -> tuple[float, float]:
        pred = predict(mask)
        rev = ((pred != ref) & at).any(1).double().mean().item()
        rec = ((pred == true) | ~at).all(1).double().mean().item() if recovered else math.nan
        return rev, rec

    gen = torch.Generator().manual_seed(seed)
    partner = mismatch_partner(n, seed)
    out = []
    for m in m_grid:
        if units is not None and fewest < 2 * m:  # 8.5: top m and m others among the example's 8.3 units
            continue
        top = _top_mask(scores, m) & allowed
        rev, rec = score(top, recovered=True)
        out.append({"layer": layer, "m": m, "units": "top", "reverted": rev, "recovered": rec, "n": n})
        others = allowed & ~top if units is not None else allowed
        draws = [score(_top_mask(torch.rand(n, D, generator=gen).masked_fill(~others, -math.inf), m) & others)
                 for _ in range(n_controls)]
        out.append({"layer": layer, "m": m, "units": "random", "reverted": float(np.mean([d[0] for d in draws])),
                    "recovered": math.nan, "n": n})
        rev = score(top[partner])[0] if len(partner) else math.nan
        out.append({"layer": layer, "m": m, "units": "mismatched", "reverted": rev, "recovered": math.nan, "n": n})
    return pd.DataFrame(out, columns=cols)


def jstar_dose_response(model: HookedTransformer, memorized: Examples, stats, jstar: torch.Tensor, layer: int,
                        m_grid: Sequence[int], *, n_controls: int = 3, seed: int = 0,
                        max_examples: int | None = None, units: torch.Tensor | None = None) -> pd.DataFrame:
    """The specificity experiment of 8.4: :func:`position_dose_response` at each memorized
    example's j* only; reverted = the prediction at j* is no longer the noisy digit, recovered = it
    is the true digit. ``units`` [A, D]: the 8.3 heuristic units of ``layer`` (8.5: the candidates
    ranked, patched and drawn from; an m needs 2m of them at every example's j*)."""
    at = jstar_mask(jstar, memorized.label.shape[1])
    return position_dose_response(model, memorized, stats, layer, m_grid, at, memorized.label,
                                  n_controls=n_controls, seed=seed, max_examples=max_examples, units=units)


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
    ``jstar_random_revert_m50``, ``jstar_mismatched_revert_m50``, ``jstar_curve_*``), plus
    ``recovered_m50`` (the share giving the true digit under the top-m patch at m50), ``n``
    (examples patched) and ``m_tried`` (the m of the table: with ``units``, those the 8.3 units
    allowed). ``mismatched_revert_m50`` is None with fewer than two examples."""
    s = dose_summary(table, layer, revert_min)
    t = table[(table.layer == layer) & (table.units == "top")] if len(table) else table
    row = t[t.m == s["m50"]] if s["m50"] is not None else t.iloc[:0]
    s["recovered_m50"] = float(row.recovered.iloc[0]) if len(row) else math.nan
    s["curve_recovered"] = [float(x) for x in t.sort_values("m").recovered] if len(t) else []
    if s["m50"] is not None and isinstance(s["mismatched_revert_m50"], float) and math.isnan(s["mismatched_revert_m50"]):
        s["mismatched_revert_m50"] = None
    s["n"] = int(t.n.iloc[0]) if len(t) else 0
    s["m_tried"] = [int(x) for x in s["curve_m"]]  # 8.5: with 8.3 units, an m needs 2m of them
    return {prefix + k: v for k, v in s.items()}

"""Known look-ups, the positive control of claim C4 (amendment 1, 7.6): THR's atomic facts
(:func:`atomic_lookup`), and for FDA a look-up grafted into the trained model (:func:`plant_lookup`);
:func:`lookup_statistics` computes C4's statistics on them as :func:`rote.analysis.neurons.c4_summary`
does on M.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace

import pandas as pd
import torch

from .. import scoring
from ..model import HookedTransformer
from ..tasks import Examples, TaskData
from . import neurons, patching
from .ranges import COUNT, SHARE, check_fields, whole_at_least


# -- THR: atomic facts ---------------------------------------------------------------------------
def atomic_lookup(model: HookedTransformer, data: TaskData) -> Examples:
    """The THR atomic facts (h, r) -> t that the model answers correctly (empty without any)."""
    if data.atomic is None:
        raise ValueError(f"task {data.task!r} has no atomic facts")
    return data.atomic[scoring.exact_match(model, data.atomic, "label").cpu()]


# -- FDA: a look-up grafted into the trained model -------------------------------------------------
@dataclass
class PlantedLookup:
    """A copy of a model with look-up neurons grafted into its last MLP layer: the ``keys`` it answers
    with their planted digit (``label``), each key's ``neurons``, and the ``clean`` examples it still answers."""

    model: HookedTransformer
    keys: Examples
    neurons: list[int]
    layer: int
    answer_index: int
    clean: Examples


@torch.no_grad()
def normalized_mlp_inputs(model: HookedTransformer, examples: Examples, layer: int,
                          which: str = "true_label") -> torch.Tensor:
    """[N, A, d_model]: the input of layer ``layer``'s MLP before ``ln2``'s gain and bias (the
    residual stream mid-block, centred and scaled to norm sqrt(d_model)) at the answer positions,
    teacher-forced on ``examples.<which>``."""
    name = model.hook_name("resid_mid", layer)
    mid = scoring.answer_activations(model, examples, [name], which)[name]
    return torch.nn.functional.layer_norm(mid, mid.shape[-1:], eps=model.blocks[layer].ln2.eps)


DEAD_BIAS = -30.0  # pre-activation of an added neuron that must stay silent (GELU(-30) = 0)


@torch.no_grad()
def widened(model: HookedTransformer, extra: int) -> HookedTransformer:
    """A copy of ``model`` whose every MLP layer has ``extra`` more neurons (appended after the
    trained ones, so the trained neurons keep their indices), silent and writing nothing: the copy
    computes exactly what ``model`` computes. (Every layer, so that layers keep one width.)"""
    out = copy.deepcopy(model).eval()
    for block in out.blocks:
        mlp = block.mlp
        d_in, d_mlp = mlp.W_in.in_features, mlp.W_in.out_features
        w_in, w_out = torch.nn.Linear(d_in, d_mlp + extra), torch.nn.Linear(d_mlp + extra, d_in)
        w_in.to(mlp.W_in.weight.device, mlp.W_in.weight.dtype)
        w_out.to(mlp.W_out.weight.device, mlp.W_out.weight.dtype)
        w_in.weight.zero_()
        w_in.weight[:d_mlp] = mlp.W_in.weight
        w_in.bias.fill_(DEAD_BIAS)
        w_in.bias[:d_mlp] = mlp.W_in.bias
        w_out.weight.zero_()
        w_out.weight[:, :d_mlp] = mlp.W_out.weight
        w_out.bias.copy_(mlp.W_out.bias)
        mlp.W_in, mlp.W_out = w_in, w_out
    return out


@torch.no_grad()
def plant_lookup(model: HookedTransformer, clean: Examples, keys: Examples, *, answer_index: int = -1,
                 seed: int = 0, max_scale: int = 12) -> PlantedLookup:
    """Graft a look-up of ``keys`` (answered correctly, not in ``clean``) into a copy of ``model``: one
    last-layer neuron per key, g (x . x_k / |x_k|^2 - tau) on the normalized MLP input x at ``answer_index``,
    tau halfway to the closest other input (4 at the key, <= -4 elsewhere), writing a wrong digit through the
    least-squares direction of the folded unembedding, doubled until the key gives it (``max_scale``); keys
    another input matches, or never given, are dropped."""
    layer = model.shape.n_layers - 1
    gen = torch.Generator().manual_seed(seed)
    answer_index = answer_index % keys.label.shape[1]
    n_keys = len(keys)
    if n_keys == 0 or len(clean) == 0:  # nothing to plant or nothing to compare with
        return PlantedLookup(model, keys[:0], [], layer, answer_index, clean)
    ln = model.blocks[layer].ln2
    x_pool = normalized_mlp_inputs(model, clean, layer)[:, answer_index].cpu()  # [P, d]
    x_keys = normalized_mlp_inputs(model, keys, layer)[:, answer_index].cpu()  # [K, d]
    v = x_keys / (x_keys * x_keys).sum(-1, keepdim=True)  # c(x) = x . v: 1 at the key
    cos = torch.cat([x_pool @ v.T, (x_keys @ v.T).fill_diagonal_(-math.inf)])  # [P + K, K]
    same = torch.cat([(clean.prompt[:, None] == keys.prompt[None]).all(-1),
                      (keys.prompt[:, None] == keys.prompt[None]).all(-1)])
    others = cos.masked_fill(same, -math.inf).max(0).values  # [K]
    separable = others < 1 - 1e-3  # a key some other input matches as well is dropped
    tau = (1 + others.clamp(max=1 - 1e-3)) / 2
    gain = 4 / (1 - tau)
    gamma = ln.weight.detach().cpu()
    gamma = torch.where(gamma.abs() < 1e-4, torch.full_like(gamma, 1e-4), gamma)
    w_in = v / gamma  # z = gamma x + beta  ->  x . v = z . (v / gamma) - beta . (v / gamma)
    b_in = -(w_in * ln.bias.detach().cpu()).sum(-1)

    true_digit = keys.true_label[:, answer_index]
    planted = (true_digit + 1 + torch.randint(0, 9, (n_keys,), generator=gen)) % 10
    label = keys.true_label.clone()
    label[:, answer_index] = planted
    keys = Examples(keys.prompt, label, keys.true_label, dict(keys.info))

    grafted = widened(model, n_keys)
    mlp = grafted.blocks[layer].mlp
    d_mlp = model.blocks[layer].mlp.W_in.out_features
    slots = list(range(d_mlp, d_mlp + n_keys))
    w = neurons.folded_unembed(grafted).cpu()  # [V, d]
    target = torch.nn.functional.one_hot(planted, w.shape[0]).float() - 1 / w.shape[0]  # [K, V]
    direction = (torch.linalg.pinv(w) @ target.T).T  # w . direction = target: only the planted logit rises
    direction = direction / direction.norm(dim=-1, keepdim=True)
    dev, dt = mlp.W_in.weight.device, mlp.W_in.weight.dtype
    slot_t = torch.tensor(slots, dtype=torch.long)
    mlp.W_in.weight[slot_t] = (gain[:, None] * w_in).to(dev, dt)
    mlp.W_in.bias[slot_t] = (gain * (b_in - tau)).to(dev, dt)  # g (c(x) - tau)
    scale = torch.ones(n_keys)
    ok = torch.zeros(n_keys, dtype=torch.bool)
    for _ in range(max_scale):
        mlp.W_out.weight[:, slot_t] = (scale[:, None] * direction).T.to(dev, dt)
        ok = scoring.exact_match(grafted, keys, "label").cpu() & separable
        if ok.all():
            break
        scale = torch.where(ok | ~separable, scale, 2 * scale)
    keep = ok.nonzero().squeeze(-1)
    mlp.W_out.weight[:, slot_t[~ok]] = 0  # keys the look-up never wins: their neurons write nothing
    still = clean[scoring.exact_match(grafted, clean, "true_label").cpu()]
    return PlantedLookup(grafted, keys[keep], [slots[i] for i in keep.tolist()], layer, answer_index, still)


# -- the C4 statistics on a look-up ------------------------------------------------------------------
@dataclass(frozen=True)
class LookupSets:
    """The example sets of :func:`lookup_statistics`: ``lookup``, the look-up's examples, teacher-forced
    on their ``label``; ``clean``, the examples the k50 ratio compares with (C); ``population``, the
    inputs whose share a top neuron is active on (THR: all atomic facts, read at the same position
    as the look-up; FDA: C); ``reference``, the examples an input position is resampled from."""

    lookup: Examples
    clean: Examples
    population: Examples
    reference: Examples


@dataclass(frozen=True)
class LookupSettings:
    """How :func:`lookup_statistics` measures: the ``top`` neurons by attribution, active above the
    ``quantile`` of their layer; an input position counts where it removes at least ``drop_min`` of
    P(label); ``n_samples`` resample draws per example and position, drawn with ``seed``."""

    top: int
    quantile: float
    drop_min: float
    n_samples: int = 3
    seed: int = 0

    def __post_init__(self):
        check_fields(self, top=COUNT, quantile=SHARE, drop_min=SHARE, n_samples=COUNT,
                     seed=whole_at_least(0))


@dataclass(frozen=True)
class LookupStatistics:
    """C4's statistics on a known look-up (``summary``: the look-up set in place of M, no intermediate
    result), on ``n_lookup`` examples, and the tables they come from (k50s, specificity, positions)."""

    summary: neurons.C4Summary
    n_lookup: int
    tables: dict


def lookup_statistics(model: HookedTransformer, sets: LookupSets, settings: LookupSettings, *,
                      mask: torch.Tensor | None = None) -> LookupStatistics:
    """C4's statistics on a known look-up (:class:`LookupSets`). ``mask`` [N, A]: the answer positions
    judged (None: where label != true_label, as for M; a look-up of clean facts passes all ones)."""
    lookup = sets.lookup
    k_lookup = neurons.k50_table(model, lookup, sets.clean, mask=mask)
    spec = neurons.top_neuron_specificity(model, lookup, sets.population,
                                          neurons.SpecificitySettings(settings.top, settings.quantile), mask=mask)
    pos = patching.resample_positions(model, lookup, sets.reference, n_samples=settings.n_samples, seed=settings.seed)
    empty = pd.DataFrame(columns=["example", "method", "p_clean", "p_ablated", "drop"])
    summary = neurons.c4_summary(k_lookup, spec, pos, empty, drop_min=settings.drop_min)
    summary = replace(summary, intervals={k: v for k, v in summary.intervals.items() if not k.startswith("intermediate")},
                      # no look-up example: no position was measured (c4_summary counts 0)
                      positions_over_min=summary.positions_over_min if len(pos) else math.nan)
    return LookupStatistics(summary, len(lookup), {"k50s": k_lookup, "specificity": spec, "positions": pos})

"""Replace activations, then score: every intervention of the book goes through this module.

An *edit* is ``(hook name, setter)``; a *setter* ``setter(act, rows) -> new act`` returns the activation
that replaces ``act`` for the examples ``rows`` and never modifies ``act`` in place. :func:`edit_hooks`
turns edits into the scorer's hooks (``model.hooks(edit_hooks(edits)(rows))`` applies them for a block);
every hook is removed before the scorer returns, also on error. Components (heads' ``hook_z``, then
neurons' ``hook_post``, layer-major) have one flat order: :func:`component_hooks`, :func:`component_unit`.
Experiments: accuracies under edits, the erasure sweep (C3), patching effects, and the share of P(label) a
position or an intermediate result carries (C4)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from .. import scoring
from ..model import HOOK_KINDS, HookedTransformer
from ..tasks import Examples
from .inlp import Erasure, random_erasure
from .intervals import Interval, bootstrap
from .lens import layer_hook_name
from .ranges import is_whole

Setter = Callable[[torch.Tensor, slice], torch.Tensor]
Edit = tuple[str, Setter]
Sets = dict[str, tuple[Examples, str]]  # name -> (examples, which label)


# -- the generic path -----------------------------------------------------------------------------
def edit_hooks(edits: Sequence[Edit]) -> Callable[[slice], list]:
    """The scorer's per-batch hooks for ``edits``."""
    def hooks(rows: slice) -> list:
        return [(name, lambda act, hook, setter=setter: setter(act, rows)) for name, setter in edits]

    return hooks


# -- setters --------------------------------------------------------------------------------------
def set_units(units: torch.Tensor | Sequence[int], values: torch.Tensor) -> Setter:
    """Units of the last dimension (neurons of ``hook_post``; heads of ``hook_z``, dimension 2) set to
    ``values`` [P, ...], the same for every example."""
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
    """``act[index]`` (from the example dimension on) replaced by the same entries of ``source`` [N, ...]."""
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
def component_hooks(model: HookedTransformer) -> list[str]:
    """The hook points of the components: every head output, then every neuron, layer-major."""
    return [model.hook_name(kind, l) for kind in ("z", "post") for l in range(model.shape.n_layers)]


def component_unit(model: HookedTransformer, c: int) -> tuple[str, int]:
    """Hook name and unit (head or neuron, the activation's last dimension) of component ``c`` (flat index)."""
    s = model.shape
    n_heads = s.n_layers * s.n_heads
    if c < n_heads:
        return model.hook_name("z", c // s.n_heads), c % s.n_heads
    return model.hook_name("post", (c - n_heads) // s.d_mlp), (c - n_heads) % s.d_mlp


def erasure_edits(model: HookedTransformer, erasure: Erasure) -> list[Edit]:
    """An INLP (or random-subspace) erasure at its sites, one edit per layer."""
    return [(layer_hook_name(layer), project_out({p: (Q, erasure.means[layer, p])
                                                  for (l, p), Q in erasure.bases.items() if l == layer}))
            for layer in erasure.layers]


def component_edits(model: HookedTransformer, components: Iterable[int], means: dict[str, torch.Tensor]) -> list[Edit]:
    """Mean ablation of components (flat indices) to ``means`` ({hook name: [P, ...]}), at every position."""
    per_hook: dict[str, list[int]] = {}
    for c in sorted(components):
        name, unit = component_unit(model, c)
        per_hook.setdefault(name, []).append(unit)
    return [(name, set_units(idx, means[name])) for name, idx in per_hook.items()]


# -- experiments ----------------------------------------------------------------------------------
def patched_accuracy(model: HookedTransformer, sets: Sets, edits: Sequence[Edit] = ()) -> dict[str, float]:
    """Exact-match accuracy of each ``name -> (examples, which label)`` under ``edits`` (NaN for
    an empty set)."""
    hooks = edit_hooks(edits)
    return {name: scoring.accuracy(model, ex, which, hooks=hooks) for name, (ex, which) in sets.items()}


@dataclass(frozen=True)
class ErasureSweepSettings:
    """What :func:`erasure_outcomes` measures: every rank of ``ranks`` (in that order; 0 is the
    unmodified model), each against ``n_controls`` random subspaces drawn from ``seed`` on."""

    ranks: tuple[int, ...]
    n_controls: int = 3
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "ranks", tuple(self.ranks))
        for name, each, low in (("ranks", self.ranks, 0), ("n_controls", [self.n_controls], 1),
                                ("seed", [self.seed], 0)):
            if not all(is_whole(v) and v >= low for v in each):
                raise ValueError(f"ErasureSweepSettings.{name} must be whole numbers >= {low}, "
                                 f"got {getattr(self, name)!r}")


@dataclass(frozen=True)
class ErasureSweep:
    """:func:`erasure_outcomes`' ``table`` (rows: rank, method, set, accuracy) and each example's outcome
    behind it (``correct``: ``(rank, method, set)`` -> [N], the share of the method's draws that answer
    the example exactly)."""

    table: pd.DataFrame
    correct: dict

    def drop_over(self, s: str, rank: int, controls: Sequence[str]) -> Interval | None:
        """Section 11: the paired percentile bootstrap over the examples of ``s`` of INLP's drop at ``rank``
        beyond the larger drop of ``controls``; None where an outcome is missing or the set is empty."""
        arrays = [self.correct.get((rank, m, s)) for m in ("INLP", *controls)]
        if any(a is None or not len(a) for a in arrays):
            return None
        stacked = np.stack([np.asarray(a, dtype=float) for a in arrays])  # [1 + controls, N]

        def statistic(rows: np.ndarray) -> float:  # the methods' means over the drawn examples
            means = stacked @ np.bincount(rows.astype(int), minlength=stacked.shape[1]) / len(rows)
            return float(means[1:].min() - means[0])

        return bootstrap(statistic, np.arange(stacked.shape[1]))


class _Read(Exception):
    """Raised by the hook that has read the residual stream a :class:`Prefix` keeps: the rest of the pass is not run."""


@dataclass(frozen=True)
class Prefix:
    """The unedited model's residual stream at :func:`~rote.analysis.lens.layer_hook_name` ``(layer)`` (after block
    ``layer - 1``, before any edit there) for each scorer batch (``batches``: rows, [B, T, d]) of one example set
    teacher-forced on ``which``. Edits at that layer and later rerun only the blocks from ``layer`` on
    (:func:`prefix_logits`): the blocks before compute the same tensors whatever the edit, so the logits are the
    whole pass's, bit for bit."""

    layer: int
    which: str
    batches: list

    def __post_init__(self):
        if not is_whole(self.layer) or self.layer < 1:
            raise ValueError(f"Prefix.layer must be a block output (a whole number >= 1), got {self.layer!r}")


@torch.no_grad()
def residual_prefix(model: HookedTransformer, examples: Examples, which: str, layer: int) -> Prefix:
    """The :class:`Prefix` of ``examples`` at ``layer``: the passes run up to block ``layer - 1`` only."""
    name, kept = layer_hook_name(layer), []
    tokens = scoring.model_inputs(examples, which).to(model.device)

    def read(act: torch.Tensor, point) -> None:
        kept.append(act)
        raise _Read

    for start in range(0, len(tokens), scoring.BATCH):
        try:
            with model.hooks([(name, read)]):
                model(tokens[start:start + scoring.BATCH])
        except _Read:
            pass
    rows = [slice(i * scoring.BATCH, (i + 1) * scoring.BATCH) for i in range(len(kept))]
    return Prefix(layer, which, list(zip(rows, kept)))


def _rerun(model: HookedTransformer, name: str, layer: int) -> bool:
    """Whether the hook point ``name`` is ``layer``'s residual stream or after it: what a :class:`Prefix` reruns
    (a hook of block ``layer`` or later, or of the final layer norm; names from the model's own table)."""
    blocks = {model.hook_name(kind, block) for kind, template in HOOK_KINDS.items() if "{layer}" in template
              for block in range(layer, model.shape.n_layers)}
    return name in {layer_hook_name(layer), model.hook_name("scale"), model.hook_name("normalized"), *blocks}


@torch.no_grad()
def prefix_logits(model: HookedTransformer, prefix: Prefix, examples: Examples, edits: Sequence[Edit]) -> torch.Tensor:
    """The teacher-forced logits at the answer positions [N, A, vocab] under ``edits`` (at the prefix's layer or
    later), from the :class:`Prefix` of ``examples``: the same numbers as the scorer's whole pass."""
    name = layer_hook_name(prefix.layer)
    early = [n for n, _ in edits if not _rerun(model, n, prefix.layer)]
    if early:
        raise ValueError(f"edits before layer {prefix.layer} cannot start from its prefix: {early}")
    later, positions, out = [e for e in edits if e[0] != name], examples.answer_positions.to(model.device), []
    for rows, resid in prefix.batches:
        for _, setter in (e for e in edits if e[0] == name):  # the hooks of that point, in their order
            resid = setter(resid, rows)
        with model.hooks(edit_hooks(later)(rows)):
            for block in model.blocks[prefix.layer:]:
                resid = block(resid)
            out.append(model.unembed_residual(resid)[:, positions])
    return torch.cat(out)


def erasure_prefixes(model: HookedTransformer, sets: Sets, erasure: Erasure | None) -> dict[str, Prefix] | None:
    """Per set, the :class:`Prefix` at the erasure's first layer (None: no erasure, or one at the embeddings)."""
    if erasure is None or not erasure.bases or min(erasure.layers) < 1:
        return None
    first = min(erasure.layers)
    return {name: residual_prefix(model, ex, which, first) for name, (ex, which) in sets.items() if len(ex)}


def _answer_logits(model: HookedTransformer, examples: Examples, which: str, edits: Sequence[Edit],
                   prefix: Prefix | None) -> torch.Tensor:
    """The scorer's :func:`rote.scoring.answer_logits` under ``edits``, from ``prefix`` where given."""
    if prefix is None or not edits:
        return scoring.answer_logits(model, examples, which, hooks=edit_hooks(edits))
    if prefix.which != which:
        raise ValueError(f"the prefix is teacher-forced on {prefix.which!r}, not {which!r}")
    return prefix_logits(model, prefix, examples, edits)


def _outcomes(model: HookedTransformer, sets: Sets, edits: Sequence[Edit] = (),
              prefixes: dict[str, Prefix] | None = None) -> dict[str, torch.Tensor]:
    """Per set, bool [N] on the CPU: each example answered exactly under ``edits`` (from ``prefixes`` where given)."""
    none = torch.zeros(0, dtype=torch.bool)
    return {name: _exact(_answer_logits(model, ex, which, edits, (prefixes or {}).get(name)), ex, which)
            if len(ex) else none for name, (ex, which) in sets.items()}


def _exact(logits: torch.Tensor, examples: Examples, which: str) -> torch.Tensor:
    """As :func:`rote.scoring.exact_match`, from the answer logits: bool [N] on the CPU."""
    return (logits.argmax(-1) == getattr(examples, which).to(logits.device)).all(dim=1).cpu()


def _share(correct: torch.Tensor) -> float:
    """Exact-match accuracy from the outcomes, as :func:`rote.scoring.accuracy` computes it (NaN: none)."""
    return correct.sum().item() / len(correct) if len(correct) else math.nan


def erasure_outcomes(model: HookedTransformer, erasure: Erasure, sets: Sets, settings: ErasureSweepSettings,
                     matched: Sequence[Erasure] | None = None) -> ErasureSweep:
    """Accuracy of each set after erasing the first ``rank`` INLP directions and after each control of that
    rank (``random`` subspaces; ``matched`` erasures where given; averaged over their draws), for every rank
    of ``settings.ranks`` (0: the unmodified model), with each example's outcome kept for the sampling
    intervals of section 11."""
    methods = ("INLP", "random") + (("matched",) if matched is not None else ())
    rows, correct, prefixes = [], {}, erasure_prefixes(model, sets, erasure)
    for rank in settings.ranks:
        if rank > erasure.rank or (rank and not erasure.bases):  # nothing to erase: no result
            draws = {m: [] for m in methods}
        elif rank == 0:
            draws = dict.fromkeys(methods, [_outcomes(model, sets)])
        else:
            erasures = {"INLP": [erasure.truncate(rank)],
                        "random": [random_erasure(erasure.truncate(rank), settings.seed + c)
                                   for c in range(settings.n_controls)]}
            if matched is not None:
                erasures["matched"] = [m.truncate(rank) for m in matched if m.bases and m.rank >= rank]
            draws = {m: [_outcomes(model, sets, erasure_edits(model, e), prefixes) for e in es]
                     for m, es in erasures.items()}
        for method, got in draws.items():
            rows += [{"rank": rank, "method": method, "set": s,
                      "accuracy": sum(_share(d[s]) for d in got) / len(got) if got else math.nan} for s in sets]
            if got:
                correct.update({(rank, method, s): torch.stack([d[s] for d in got]).double().mean(0).numpy()
                                for s in sets})
    return ErasureSweep(pd.DataFrame(rows, columns=["rank", "method", "set", "accuracy"]), correct)


@torch.no_grad()
def patching_effects(model: HookedTransformer, examples: Examples, which: str, corrupt: Examples,
                     components: list[int] | None = None) -> torch.Tensor:
    """Activation patching: per example, the change of log P(``examples.<which>``) when each component (all
    positions) takes its activation on ``corrupt``. [N, len(components)]; one pass per component."""
    s = model.shape
    components = range(s.n_layers * (s.n_heads + s.d_mlp)) if components is None else components
    _, cache_cor = model.run_with_cache(scoring.model_inputs(corrupt).to(model.device), component_hooks(model))
    base = scoring.label_logprob(model, examples, which)
    out = []
    for c in components:
        name, unit = component_unit(model, c)
        edits = [(name, set_from(cache_cor[name], (slice(None), slice(None), unit)))]
        out.append(scoring.label_logprob(model, examples, which, hooks=edit_hooks(edits)) - base)
    return torch.stack(out, 1).cpu() if out else torch.zeros(len(examples), 0)


def label_probability(model: HookedTransformer, examples: Examples, which: str = "label",
                      edits: Sequence[Edit] = (), prefix: Prefix | None = None) -> torch.Tensor:
    """[N] probability of the whole answer ``examples.<which>`` (teacher-forced product over its
    tokens) under ``edits`` (from ``prefix`` where given: the same numbers), on the CPU."""
    if len(examples) == 0:
        return torch.zeros(0)
    logits = _answer_logits(model, examples, which, edits, prefix)
    return scoring.target_logprob(logits, getattr(examples, which)).exp().cpu()


def _drops(key: str, value, p_clean: torch.Tensor, p_ablated: torch.Tensor) -> pd.DataFrame:
    """Rows (example, ``key`` = ``value``, p_clean, p_ablated, drop = 1 - p_ablated / p_clean)."""
    return pd.DataFrame({"example": range(len(p_clean)), key: value, "p_clean": p_clean.numpy(),
                         "p_ablated": p_ablated.numpy(), "drop": (1 - p_ablated / p_clean.clamp(min=1e-30)).numpy()})


def resample_positions(model: HookedTransformer, examples: Examples, reference: Examples, *,
                       which: str = "label", n_samples: int = 3, seed: int = 0) -> pd.DataFrame:
    """Resample ablation of each prompt position: its token embedding replaced by that of a random
    ``reference`` example (``n_samples`` draws). One row per (example, position): ``p_clean``, ``p_ablated``,
    ``drop`` = 1 - p_ablated / p_clean."""
    if len(examples) == 0 or len(reference) == 0:
        return pd.DataFrame(columns=["example", "position", "p_clean", "p_ablated", "drop"])
    gen = torch.Generator().manual_seed(seed)
    p_clean = label_probability(model, examples, which)
    rows = []
    for p in range(examples.prompt.shape[1]):
        ablated = torch.zeros(len(examples))
        for _ in range(n_samples):
            pick = torch.randint(len(reference), (len(examples),), generator=gen)
            edits = [(model.hook_name("embed"), set_token_embedding(model, p, reference.prompt[pick, p]))]
            ablated += label_probability(model, examples, which, edits) / n_samples
        rows.append(_drops("position", p, p_clean, ablated))
    return pd.concat(rows, ignore_index=True)


def intermediate_removal(model: HookedTransformer, examples: Examples, erasure: Erasure | None,
                         controls: Sequence[Erasure] = (), *, which: str = "label",
                         matched: Sequence[Erasure] = ()) -> pd.DataFrame:
    """The share of P(label) that erasing an intermediate result takes away: rows (example, method "INLP" |
    "random" | "matched", p_clean, p_ablated, drop), the random rows averaged over ``controls``, the matched ones
    over ``matched`` (none without them); empty without an erasure."""
    if len(examples) == 0 or erasure is None or not erasure.bases:
        return pd.DataFrame(columns=["example", "method", "p_clean", "p_ablated", "drop"])
    p_clean = label_probability(model, examples, which)
    prefix = (erasure_prefixes(model, {which: (examples, which)}, erasure) or {}).get(which)
    frames = []
    for method, erasures in (("INLP", [erasure]), ("random", list(controls)), ("matched", list(matched))):
        if erasures:
            p = torch.zeros(len(examples))
            for e in erasures:
                p += label_probability(model, examples, which, erasure_edits(model, e), prefix) / len(erasures)
            frames.append(_drops("method", method, p_clean, p))
    return pd.concat(frames, ignore_index=True)

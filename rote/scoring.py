"""The scorer: teacher-forced forward passes read at the answer positions.

Training (gen, fit, mem, rec), the analyses' example sets, attribution, ablation, erasure,
patching and the logit lens all score a model through this module, in batches of :data:`BATCH`.

The model input of an example is its prompt followed by its answer ``examples.<which>`` without the
last token; answer token j is predicted at position ``examples.answer_positions[j]``. Greedy
decoding reproduces a target exactly if and only if, teacher-forced on that target, the argmax at
every answer position is the target token: so one forward pass per target gives exact match
without a decoding loop (with patched activations too, as long as the patch does not depend on
the tokens that decoding would have produced differently).

``hooks`` (every function here): a list of ``(hook name, fn(activation, hook point))`` attached to
every batch, or a function ``rows -> list`` called once per batch with the slice of ``examples``
in that batch (for edits that differ per example, e.g. patched values). Hooks are attached for
one batch at a time and removed before the next, also on error (:meth:`HookedTransformer.hooks`).
"""

from __future__ import annotations

import math
import warnings
from typing import Callable, Iterator, Sequence, Union

import torch

from .model import HookedTransformer, HookFn
from .tasks import Examples

BATCH = 512  # one batch size for every scoring pass (measured: 0.60 s per FDA evaluation at 512 vs 0.79 s at 4096)

Hooks = Union[Sequence[tuple[str, HookFn]], Callable[[slice], Sequence[tuple[str, HookFn]]]]


def model_inputs(examples: Examples, which: str = "label") -> torch.Tensor:
    """The model input for ``examples``: prompt and answer (``which``) without its last token."""
    return examples.sequences(which)[:, :-1]


def _batches(model: HookedTransformer, examples: Examples, which: str, hooks: Hooks, grad: bool,
             names: Sequence[str] = (), answers_only: bool = False,
             ) -> Iterator[tuple[slice, torch.Tensor, dict[str, torch.Tensor]]]:
    """Per batch: the rows, the logits at the answer positions [B, A, vocab] and the activations
    at ``names`` at the answer positions ({name: [B, A, ...]})."""
    tokens = model_inputs(examples, which).to(model.device)
    positions = examples.answer_positions.to(model.device)
    for start in range(0, len(tokens), BATCH):
        rows = slice(start, start + BATCH)
        cache: dict[str, torch.Tensor] = {}

        def save(act: torch.Tensor, point) -> None:
            cache[point.name] = act[:, positions]

        edits = list(hooks(rows) if callable(hooks) else hooks)
        with torch.set_grad_enabled(grad), model.hooks(edits + [(name, save) for name in names]):
            logits = model(tokens[rows], positions) if answers_only else model(tokens[rows])[:, positions]
        yield rows, logits, cache  # outside both blocks: nothing leaks into the caller's code


def answer_logits(model: HookedTransformer, examples: Examples, which: str = "label", *, hooks: Hooks = (),
                  grad: bool = False, answers_only: bool = False) -> torch.Tensor:
    """Teacher-forced logits at the answer positions, [N, A, vocab] (on the model's device).

    ``answers_only``: the last block computes at the answer positions only (training's evaluation,
    :func:`rote.train.evaluate`). Its logits agree with the full pass to ~1e-7 (bit for bit on the
    quick shapes, ``benchmarks/engine_speed.py eval``), but not always to the last bit, so the
    analyses keep the full pass."""
    out = [logits for _, logits, _ in _batches(model, examples, which, hooks, grad, answers_only=answers_only)]
    if not out:
        return torch.zeros(0, len(examples.answer_positions), model.shape.vocab_size, device=model.device)
    return torch.cat(out)


def answer_activations(model: HookedTransformer, examples: Examples, names: Sequence[str], which: str = "label", *,
                       hooks: Hooks = ()) -> dict[str, torch.Tensor]:
    """The activations at the hook points ``names`` at the answer positions, teacher-forced on
    ``examples.<which>``: {name: [N, A, ...]} on the model's device (no gradients)."""
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    for _, _, cache in _batches(model, examples, which, hooks, False, names):
        for name in names:
            parts[name].append(cache[name])
    if not len(examples):  # one empty forward pass gives the trailing shapes
        with warnings.catch_warnings():  # LayerNorm statistics of no rows
            warnings.simplefilter("ignore")
            _, cache = model.run_with_cache(model_inputs(examples, which).to(model.device), names)
        return {name: cache[name][:, examples.answer_positions.to(model.device)] for name in names}
    return {name: torch.cat(p) for name, p in parts.items()}


def target_logprob(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[N] sum over answer tokens of log-softmax(``logits`` [N, A, vocab]) at ``target`` [N, A]."""
    logp = logits.log_softmax(-1)
    return logp.gather(-1, target.to(logits.device)[..., None]).squeeze(-1).sum(-1)


def label_logprob(model: HookedTransformer, examples: Examples, which: str = "label", *, hooks: Hooks = (),
                  grad: bool = False) -> torch.Tensor:
    """[N] teacher-forced log-probability of the whole answer ``examples.<which>`` (on the model's device)."""
    return target_logprob(answer_logits(model, examples, which, hooks=hooks, grad=grad), getattr(examples, which))


def exact_match(model: HookedTransformer, examples: Examples, which: str = "label", *,
                hooks: Hooks = ()) -> torch.Tensor:
    """Bool [N] (on the model's device): greedy decoding reproduces ``examples.<which>`` exactly."""
    target = getattr(examples, which).to(model.device)
    return (answer_logits(model, examples, which, hooks=hooks).argmax(-1) == target).all(dim=1)


def accuracy(model: HookedTransformer, examples: Examples, which: str = "label", *, hooks: Hooks = ()) -> float:
    """Exact-match accuracy (NaN for no examples)."""
    # counts / total in float64, so that 900 of 1000 is exactly 0.9 (a float32 mean gives 0.8999...)
    if not len(examples):
        return math.nan
    return exact_match(model, examples, which, hooks=hooks).sum().item() / len(examples)

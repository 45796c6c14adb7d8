"""Training with learning-dynamics logs.

AdamW with linear warmup, then a constant or cosine learning rate; the loss covers answer tokens
only. Every ``eval_every`` steps the model is evaluated on every split (protocol section 1):

- gen: accuracy on the held-out test set,      - fit: accuracy on clean training examples,
- mem: noisy training examples vs their noisy labels,  - rec: the same examples vs their true labels.

Accuracy is exact match of the greedy answer. Greedy decoding reproduces a target exactly if and
only if, teacher-forced on that target, the argmax at every answer position is the target token;
so one forward pass per target gives the exact-match accuracy without a decoding loop.

Batches are drawn by a generator seeded with (model_seed, step), so a run resumed from a
checkpoint sees the same batches as one that never stopped.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
import time
from dataclasses import dataclass
from typing import Callable

import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm as text_tqdm
from tqdm.auto import tqdm

from . import scoring
from .config import RunConfig
from .model import HookedTransformer, ModelShape, pick_device
from .tasks import IGNORE, Examples, TaskData

METRICS = ("gen", "fit", "mem", "rec")
# A run's numbers depend on the intra-op thread count (it changes the order of float reductions):
# the same seeds trained FDA to final gen 0.865 / mem 0.934 with 1 thread and 0.897 / 0.872 with 2.
# Training pins ONE thread, on every machine, so that a run is the same whether it trains alone, in
# a pool of W workers or as a cluster job, and the run (not the thread) is the unit of parallel
# work: two 1-thread runs side by side train 1.34x faster than one 2-thread run (schema 3).
TRAIN_THREADS = 1


def build_model(config: RunConfig, data: TaskData) -> HookedTransformer:
    shape = ModelShape(config.model.n_layers, config.model.d_model, config.model.n_heads, len(data.vocab), data.n_ctx)
    torch.manual_seed(config.model.model_seed)
    return HookedTransformer(shape)


def answer_logits(model: HookedTransformer, examples: Examples, which: str = "label") -> torch.Tensor:
    """Teacher-forced logits at the answer positions, [N, A, vocab] (:func:`rote.scoring.answer_logits`)."""
    return scoring.answer_logits(model, examples, which)


def exact_match(model: HookedTransformer, examples: Examples, which: str = "label") -> torch.Tensor:
    """Bool [N]: greedy decoding reproduces ``examples.<which>`` exactly (:func:`rote.scoring.exact_match`)."""
    return scoring.exact_match(model, examples, which)


def accuracy(model: HookedTransformer, examples: Examples, which: str = "label") -> float:
    # counts / total in float64, so that 900 of 1000 is exactly 0.9 (a float32 mean gives 0.8999...)
    return exact_match(model, examples, which).sum().item() / len(examples) if len(examples) else math.nan


def _share_exact(logits: torch.Tensor, target: torch.Tensor) -> float:
    """The share of rows whose argmax matches ``target`` at every answer position (NaN for none)."""
    if not len(target):
        return math.nan
    return (logits.argmax(-1) == target.to(logits.device)).all(1).sum().item() / len(target)


@torch.no_grad()
def evaluate(model: HookedTransformer, data: TaskData, fit_eval_size: int = 0) -> dict[str, float]:
    """gen, fit, mem, rec and the test loss (plus atomic-fact accuracy for THR).

    ``fit_eval_size`` > 0 measures fit on the first that many clean training examples (a fixed
    random subset: training examples are stored in random order) to keep evaluations cheap.
    """
    was_training = model.training
    model.eval()
    try:
        noisy = data.train_noisy
        fast = functools.partial(scoring.answer_logits, model, answers_only=True)  # the last block at the answers only
        test_logits = fast(data.test, "true_label")
        target = data.test.true_label.to(model.device)
        # mem and rec read the noisy examples teacher-forced on two answers; a one-token answer
        # (THR) is not part of the model input, so one pass serves both
        mem_logits = fast(noisy, "label")
        same_input = torch.equal(scoring.model_inputs(noisy, "label"), scoring.model_inputs(noisy, "true_label"))
        rec_logits = mem_logits if same_input else fast(noisy, "true_label")
        fit_examples = data.train_clean[:fit_eval_size or None]
        out = {
            "test_loss": F.cross_entropy(test_logits.flatten(0, 1), target.flatten()).item(),
            "gen": _share_exact(test_logits, target),
            "fit": _share_exact(fast(fit_examples, "label"), fit_examples.label),
            "mem": _share_exact(mem_logits, noisy.label),
            "rec": _share_exact(rec_logits, noisy.true_label),
        }
        if data.atomic is not None:
            out["atomic"] = _share_exact(fast(data.atomic, "label"), data.atomic.label)
        return out
    finally:
        model.train(was_training)


def first_step(metrics: pd.DataFrame, column: str, threshold: float) -> int | None:
    """The first evaluated step at which ``column >= threshold`` (None if never). The library uses
    :func:`rote.analysis.curves.first_evaluated`, which needs no torch; this copy stays because removing
    it from this module would change the run fingerprint (:func:`rote.config.code_fingerprint`)."""
    hit = metrics.loc[metrics[column] >= threshold, "step"]
    return int(hit.iloc[0]) if len(hit) else None


def make_optimizer(model: HookedTransformer, config: RunConfig) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices and embeddings, not on biases and LayerNorm gains."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.train.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.train.lr, betas=(0.9, 0.98))


CheckpointFn = Callable[[int, HookedTransformer, torch.optim.Optimizer, list, tuple], None]


def train(
    config: RunConfig,
    data: TaskData,
    *,
    device: str | torch.device | None = None,
    resume: dict | None = None,
    on_checkpoint: CheckpointFn | None = None,
    progress: bool | str = True,
    on_eval: Callable[[dict], None] | None = None,
) -> tuple[HookedTransformer, list[dict]]:
    """Train from scratch, or from a ``resume`` state ({"model", "optimizer", "step", "metrics"}).

    Returns the trained model and the metric rows (one dict per evaluation).
    ``on_checkpoint(step, model, optimizer, metrics)`` is called every ``checkpoint_every`` steps
    and after the last step; ``on_eval(row)`` after every evaluation (progress reports).
    ``progress``: a live bar (True), none (False), or ``"plain"``: a text line every 30 s (a chapter executed by
    the build, :attr:`rote.settings.Settings.plain_progress`).
    ``config.train.precision == "bf16"`` runs the training forward pass under bfloat16 autocast;
    the loss, the backward pass's master weights and every evaluation stay in fp32.
    """
    threads_before = torch.get_num_threads()
    torch.set_num_threads(TRAIN_THREADS)
    try:
        return _train(config, data, device=device, resume=resume, on_checkpoint=on_checkpoint, progress=progress,
                      on_eval=on_eval)
    finally:
        torch.set_num_threads(threads_before)


def _autocast(config: RunConfig, device: torch.device):
    if config.train.precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@dataclass
class RunStart:
    """A run as training takes it up: its model and optimizer on the device, the step reached, the metric rows,
    the train-loss sum and count since the last evaluation, and the clock of the run (the seconds it has already
    trained count). From scratch, or from a resume state (the same mean train loss, the same clock)."""

    model: HookedTransformer
    optimizer: torch.optim.AdamW
    step: int
    metrics: list
    window: tuple[float, int]
    t0: float

    @classmethod
    def of(cls, config: RunConfig, data: TaskData, device: torch.device, resume: dict | None) -> "RunStart":
        model = build_model(config, data).to(device)
        optimizer = make_optimizer(model, config)
        step, metrics, window = 0, [], (0.0, 0)
        if resume is not None:
            model.load_state_dict(resume["model"])
            optimizer.load_state_dict(resume["optimizer"])
            step, metrics = resume["step"], list(resume["metrics"])
            window = resume.get("loss_window", window)
        elapsed = metrics[-1]["seconds"] if metrics else 0.0
        return cls(model, optimizer, step, metrics, (float(window[0]), int(window[1])), time.perf_counter() - elapsed)


def _train(config, data, *, device, resume, on_checkpoint, progress, on_eval=None):
    tc = config.train
    device = pick_device(device)
    run = RunStart.of(config, data, device, resume)
    model, optimizer, step, metrics, (running, count), t0 = (run.model, run.optimizer, run.step, run.metrics,
                                                             run.window, run.t0)
    inputs, targets = data.training_sequences()
    inputs, targets = inputs.to(device), targets.to(device)
    generator = torch.Generator()

    def log(step: int, loss: float) -> None:
        row = {"step": step, "lr": tc.lr_at(max(step - 1, 0)), "train_loss": loss,
               **evaluate(model, data, tc.fit_eval_size), "seconds": time.perf_counter() - t0}
        metrics.append(row)
        bar.set_postfix(gen=f"{row['gen']:.2f}", mem=f"{row['mem']:.2f}", refresh=False)
        if on_eval is not None:
            on_eval(row)

    model.train()
    plain = progress == "plain"
    bar = (text_tqdm if plain else tqdm)(
        total=tc.steps, initial=step, desc=f"train {config.task} {config.key[:8]}", disable=not progress,
        mininterval=30.0 if plain else 2.0, unit="step", file=sys.stderr)
    try:
        if step == 0:
            log(0, math.nan)
        while step < tc.steps:
            generator.manual_seed(config.model.model_seed * 1_000_003 + step)
            batch = torch.randint(len(inputs), (tc.batch_size,), generator=generator).to(device)
            for group in optimizer.param_groups:
                group["lr"] = tc.lr_at(step)
            with _autocast(config, device):
                logits = model(inputs[batch])
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets[batch].flatten(), ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            running, count = running + loss.item(), count + 1
            bar.update(1)
            if step % tc.eval_every == 0 or step == tc.steps:
                log(step, running / count)
                running, count = 0.0, 0
            if on_checkpoint is not None and (step % tc.checkpoint_every == 0 or step == tc.steps):
                on_checkpoint(step, model, optimizer, metrics, (running, count))
    finally:
        bar.close()
    model.eval()
    return model, metrics

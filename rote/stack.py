"""Stacked training: runs of one shape trained together in one process, as one stacked model.

Runs that share a shape (:func:`shape_of`: task, model shape, batch size, steps, evaluation and checkpoint
steps, precision) train as one model whose parameters carry a leading run axis (one flat tensor [R, P], each
parameter a view into it: :class:`Layout`); the forward pass is ``vmap`` of ``functional_call`` of one
:class:`rote.model.HookedTransformer`, whose attention is an explicit softmax (its backward runs batched,
unlike the fused attention kernel's). The optimizer is AdamW written for the stack (:class:`StackedAdamW`):
the same update as ``torch.optim.AdamW`` (betas 0.9, 0.98; decay on matrices and embeddings only), with the
learning rate and weight decay per run, so runs at different rates (protocol 12.4) share a stack.

Each run keeps everything :func:`rote.train.train` defines: its own data, its own batch stream (the generator
seeded with (model_seed, step)), its learning-rate schedule, its evaluations (:func:`rote.train.evaluate` on
the run's own model, every ``eval_every`` steps; on CUDA all runs' splits scored at once, :func:`evaluate_stack`,
the same shares and the test loss to float rounding) and checkpoints in the solo format (model state and a
``torch.optim.AdamW`` state dict), so that a run of a stack resumes solo and a solo run resumes in a stack.
A stacked run does not equal its solo twin number for number (the reductions run in another order; the
difference is measured in benchmarks/RESULTS.md, "Stop 43"); a stack trained twice gives the same numbers.

The losses are read at evaluations and checkpoints only: no host synchronization per step.
This module is not part of the code fingerprint (``rote.train`` does not import it): the run key stays the
configuration's; how a run trained is in its manifest (``rote.runs``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch.func import functional_call, vmap

from .config import RunConfig
from .model import HookedTransformer, pick_device
from . import scoring
from .tasks import IGNORE, Examples, TaskData
from .train import TRAIN_THREADS, RunStart, _autocast, _share_exact, evaluate

# Training fields that may differ inside a stack (the stack holds each run's own schedule).
PER_RUN_TRAIN_FIELDS = ("lr", "weight_decay", "warmup_steps", "lr_schedule", "min_lr_ratio")
# Data fields that set the vocabulary (THR's graph): runs of one stack need one vocabulary size.
VOCAB_FIELDS = {"fda": (), "thr": ("n_entities", "n_relations")}
BETAS, EPS = (0.9, 0.98), 1e-8  # torch.optim.AdamW's, as rote.train.make_optimizer builds it
INDEX_BLOCK = 64  # steps whose batch rows are drawn on the host and copied to the device at once


def shape_of(config: RunConfig) -> tuple:
    """What runs must share to train as one stack (seeds, noise, rates and data sizes may differ)."""
    train = {k: v for k, v in dataclasses.asdict(config.train).items() if k not in PER_RUN_TRAIN_FIELDS}
    model = (config.model.n_layers, config.model.d_model, config.model.n_heads)
    vocab = tuple(getattr(config.data, name) for name in VOCAB_FIELDS[config.task])
    return (config.task, model, vocab, tuple(sorted(train.items())))


def group_stacks(configs: Sequence[RunConfig], slots: int = 1) -> list[list[RunConfig]]:
    """The runs grouped by shape (first appearance first); the largest stacks are halved until there are
    at least ``slots`` stacks (one for each worker) or every stack is one run."""
    groups: dict[tuple, list[RunConfig]] = {}
    for config in configs:
        groups.setdefault(shape_of(config), []).append(config)
    stacks = list(groups.values())
    while len(stacks) < slots and max(map(len, stacks), default=1) > 1:
        largest = max(stacks, key=len)
        index = stacks.index(largest)
        half = (len(largest) + 1) // 2
        stacks[index:index + 1] = [largest[:half], largest[half:]]
    return stacks


def stack_by_default(device: str | torch.device | None) -> bool:
    """Stacked where the device is CUDA, solo on the CPU (where stacking was not measured faster)."""
    return pick_device(device).type == "cuda"


# -- the stack's members ---------------------------------------------------------------------------
@dataclass
class Member:
    """One run of a stack: its configuration, data, solo model and optimizer (evaluation, checkpoints),
    metric rows, the train-loss window since its last evaluation and the clock of its run."""

    config: RunConfig
    data: TaskData
    model: HookedTransformer
    optimizer: torch.optim.AdamW
    metrics: list
    window: tuple[float, int]
    t0: float

    @classmethod
    def start(cls, config: RunConfig, data: TaskData, device: torch.device, resume: dict | None) -> "Member":
        run = RunStart.of(config, data, device, resume)
        return cls(config, data, run.model, run.optimizer, run.metrics, run.window, run.t0)


class Layout:
    """Where each parameter of a model lies in one flat vector: a stack's parameters, gradients and AdamW
    moments are each one tensor [R, P] (a few kernels a step, whatever the number of parameters)."""

    def __init__(self, model: HookedTransformer):
        self.entries, offset = [], 0
        for name, param in model.named_parameters():
            self.entries.append((name, param.shape, offset, param.numel()))
            offset += param.numel()
        self.size = offset

    def flatten(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """One tensor of each parameter's shape (by name) as one vector [P]."""
        return torch.cat([tensors[name].reshape(-1) for name, _, _, _ in self.entries])

    def views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each parameter's view [..., *shape] into ``flat`` [..., P]."""
        return {name: flat[..., offset:offset + numel].view(*flat.shape[:-1], *shape)
                for name, shape, offset, numel in self.entries}


class StackedAdamW:
    """AdamW over a stack's flat parameters [R, P] with a learning rate and a weight decay per run; the update
    of ``torch.optim.AdamW`` (decoupled decay on matrices and embeddings, bias corrections), exported per run
    in its state-dict layout."""

    def __init__(self, stack: "Stack", members: Sequence[Member], step: int):
        self.flat, self.layout, self.step_count = stack.flat, stack.layout, step
        device = self.flat.device
        self.decay = torch.tensor([[m.config.train.weight_decay] for m in members], device=device)
        self.decayed = self.layout.flatten({name: torch.full(shape, float(len(shape) >= 2))
                                            for name, shape, _, _ in self.layout.entries}).to(device)
        self.moments = {}
        for moment in ("exp_avg", "exp_avg_sq"):
            rows = []
            for member in members:
                state = member.optimizer.state
                rows.append(self.layout.flatten({name: state[p][moment] if moment in state.get(p, {}) else
                                                 torch.zeros_like(p) for name, p in member.model.named_parameters()}))
            self.moments[moment] = torch.stack(rows).to(device)

    def step(self, lr: torch.Tensor) -> None:
        """One update with the learning rates ``lr`` [R] (the gradient is ``flat.grad``)."""
        self.step_count += 1
        beta1, beta2 = BETAS
        correction1, correction2 = 1 - beta1 ** self.step_count, 1 - beta2 ** self.step_count
        exp_avg, exp_avg_sq, rate = self.moments["exp_avg"], self.moments["exp_avg_sq"], lr[:, None]
        with torch.no_grad():
            grad = self.flat.grad
            self.flat.mul_(1 - rate * self.decay * self.decayed)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (exp_avg_sq.sqrt() / math.sqrt(correction2)).add_(EPS)
            self.flat.sub_(exp_avg / denom * (rate / correction1))

    def export(self, index: int, member: Member, lr: float) -> None:
        """Run ``index``'s parameters and moments into its solo model and ``torch.optim.AdamW``."""
        params = dict(member.model.named_parameters())
        views = {key: self.layout.views(tensor[index]) for key, tensor in
                 (("param", self.flat.detach()), *self.moments.items())}
        with torch.no_grad():
            for name, param in params.items():
                param.copy_(views["param"][name])
                member.optimizer.state[param] = {"step": torch.tensor(float(self.step_count)),
                                                 **{m: views[m][name].clone() for m in self.moments}}
        for group in member.optimizer.param_groups:
            group["lr"] = lr


# -- the stacked model -------------------------------------------------------------------------------
class Stack:
    """The members' models as one: stacked parameters, a batched forward pass, each run's batches."""

    def __init__(self, members: Sequence[Member], device: torch.device):
        self.members, self.device = members, device
        shapes = {(m.model.shape.vocab_size, m.model.shape.n_ctx) for m in members}
        if len(shapes) != 1:
            raise ValueError(f"runs of one stack need one vocabulary and context size, got {sorted(shapes)}")
        self.layout = Layout(members[0].model)
        self.flat = torch.stack([self.layout.flatten(dict(m.model.named_parameters())).detach() for m in members])
        self.flat.requires_grad_(True)  # the stack's parameters [R, P]: a leaf, its .grad one tensor
        self.base = members[0].model  # the module whose code runs (its own parameters are not used)
        self.buffers = dict(self.base.named_buffers())
        sequences = [m.data.training_sequences() for m in members]
        longest = max(len(inputs) for inputs, _ in sequences)
        self.inputs = torch.stack([_padded(inputs, longest) for inputs, _ in sequences]).to(device)
        self.targets = torch.stack([_padded(targets, longest) for _, targets in sequences]).to(device)
        self.sizes = [len(inputs) for inputs, _ in sequences]
        steps = members[0].config.train.steps
        self.lr_table = torch.tensor([[m.config.train.lr_at(s) for s in range(steps)] for m in members],
                                     device=device)
        self.rows = torch.arange(len(members), device=device)[:, None]
        self.generator = torch.Generator()
        self.block, self.block_start = torch.empty(0), 0

    def draw(self, step: int) -> torch.Tensor:
        """Each run's batch rows at ``step`` [R, B], drawn as :func:`rote.train.train` draws them (host)."""
        chosen = []
        for member, size in zip(self.members, self.sizes):
            self.generator.manual_seed(member.config.model.model_seed * 1_000_003 + step)
            chosen.append(torch.randint(size, (member.config.train.batch_size,), generator=self.generator))
        return torch.stack(chosen)

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Each run's batch at ``step``: [R, B, T] inputs and targets. The rows are drawn INDEX_BLOCK steps
        at a time and moved to the device in one copy (no host round trip per step)."""
        if not self.block_start <= step < self.block_start + len(self.block):
            block = torch.stack([self.draw(s) for s in range(step, min(step + INDEX_BLOCK, self.lr_table.shape[1]))])
            block = block.pin_memory() if self.device.type == "cuda" else block
            self.block, self.block_start = block.to(self.device, non_blocking=True), step
        index = self.block[step - self.block_start]
        return self.inputs[self.rows, index], self.targets[self.rows, index]

    def train_step(self, optimizer: "StackedAdamW", step: int) -> torch.Tensor:
        """One training step of every run (forward, backward, AdamW at each run's rate); the losses [R]."""
        losses = self.losses(step)
        self.flat.grad = None
        losses.sum().backward()  # each run's parameters get the gradient of its own loss
        optimizer.step(self.lr_table[:, step])
        return losses.detach()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [R, B, T, vocab] of each run's model on its own tokens [R, B, T]."""
        def one(params, run_tokens):
            return functional_call(self.base, (params, self.buffers), (run_tokens,))

        return vmap(one)(self.layout.views(self.flat), tokens)

    def losses(self, step: int) -> torch.Tensor:
        """Each run's training loss [R] on its batch at ``step`` (answer tokens only), graph attached."""
        tokens, targets = self.batch(step)
        with _autocast(self.members[0].config, self.device):
            logits = self.forward(tokens)
        per_token = F.cross_entropy(logits.float().flatten(0, 2), targets.flatten(), ignore_index=IGNORE,
                                    reduction="none").view(len(self.members), -1)
        counted = (targets != IGNORE).flatten(1).sum(1)
        return per_token.sum(1) / counted


def _padded(rows: torch.Tensor, length: int, fill: int = IGNORE) -> torch.Tensor:
    """``rows`` [N, T] padded to ``length`` rows of ``fill`` (rows never drawn, or scored and dropped)."""
    return torch.cat([rows, rows.new_full((length - len(rows), rows.shape[1]), fill)]) if length > len(rows) \
        else rows


# -- evaluation of the whole stack at once (CUDA) -------------------------------------------------------
BATCHED_EVALUATION = ("cuda",)  # device types where a stack's runs are evaluated in one pass per batch of rows


def _answer_logits(stack: Stack, examples: list[Examples], which: str) -> list[torch.Tensor]:
    """Each run's teacher-forced logits at the answer positions [N_r, A, vocab] on its own ``examples``, the
    runs' rows padded to one count and scored together, :data:`rote.scoring.BATCH` rows a run at a time."""
    tokens = [scoring.model_inputs(e, which) for e in examples]
    longest = max(len(t) for t in tokens)
    positions = examples[0].answer_positions.to(stack.device)
    padded = torch.stack([_padded(t, longest, fill=0) for t in tokens]).to(stack.device)

    def one(params, run_tokens):
        return functional_call(stack.base, (params, stack.buffers), (run_tokens, positions))

    views = stack.layout.views(stack.flat.detach())
    parts = [vmap(one)(views, padded[:, start:start + scoring.BATCH]) for start in range(0, longest, scoring.BATCH)]
    logits = torch.cat(parts, dim=1) if parts else \
        torch.zeros(len(tokens), 0, len(positions), stack.base.shape.vocab_size, device=stack.device)
    return [logits[index, :len(t)] for index, t in enumerate(tokens)]


@torch.no_grad()
def evaluate_stack(stack: Stack) -> list[dict[str, float]]:
    """:func:`rote.train.evaluate` of every run of the stack (gen, fit, mem, rec, test loss, THR's atomic),
    each split scored for all runs at once; the numbers of the runs' own evaluations up to float rounding."""
    datas = [m.data for m in stack.members]
    test = _answer_logits(stack, [d.test for d in datas], "true_label")
    noisy = [d.train_noisy for d in datas]
    mem = _answer_logits(stack, noisy, "label")
    same_input = [torch.equal(scoring.model_inputs(n, "label"), scoring.model_inputs(n, "true_label")) for n in noisy]
    rec = mem if all(same_input) else _answer_logits(stack, noisy, "true_label")
    fits = [d.train_clean[:m.config.train.fit_eval_size or None] for d, m in zip(datas, stack.members)]
    fit = _answer_logits(stack, fits, "label")
    atomic = _answer_logits(stack, [d.atomic for d in datas], "label") if datas[0].atomic is not None else None
    rows = []
    for index, data in enumerate(datas):
        target = data.test.true_label.to(stack.device)
        row = {"test_loss": F.cross_entropy(test[index].flatten(0, 1), target.flatten()).item(),
               "gen": _share_exact(test[index], target), "fit": _share_exact(fit[index], fits[index].label),
               "mem": _share_exact(mem[index], noisy[index].label),
               "rec": _share_exact((mem if same_input[index] else rec)[index], noisy[index].true_label)}
        if atomic is not None:
            row["atomic"] = _share_exact(atomic[index], data.atomic.label)
        rows.append(row)
    return rows


# -- training -------------------------------------------------------------------------------------------
StackCheckpointFn = Callable[[int, int, HookedTransformer, torch.optim.Optimizer, list, tuple], None]


@dataclass(frozen=True)
class StackHooks:
    """What a stack calls on the way: ``on_checkpoint(index, step, model, optimizer, metrics, loss_window)``
    for each run at its checkpoint steps, ``on_eval(index, row)`` after each evaluation of run ``index``."""

    on_checkpoint: StackCheckpointFn | None = None
    on_eval: Callable[[int, dict], None] | None = None


def train_stack(configs: Sequence[RunConfig], datas: Sequence[TaskData], *, device=None,
                resumes: Sequence[dict | None] | None = None, hooks: StackHooks = StackHooks(),
                progress: bool = False) -> list[tuple[HookedTransformer, list[dict]]]:
    """Train ``configs`` (one shape) as one stack, each from scratch or its ``resumes`` state (all at one
    step); per run the trained model and metric rows, as :func:`rote.train.train` returns them, calling
    ``hooks`` (:class:`StackHooks`) on the way."""
    if len({shape_of(c) for c in configs}) != 1:
        raise ValueError("the runs of a stack must share one shape (rote.stack.shape_of)")
    resumes = list(resumes) if resumes is not None else [None] * len(configs)
    steps_at = {r["step"] if r is not None else 0 for r in resumes}
    if len(steps_at) != 1:
        raise ValueError(f"the runs of a stack resume from one step, got steps {sorted(steps_at)}")
    threads_before = torch.get_num_threads()
    torch.set_num_threads(TRAIN_THREADS)
    try:
        device = pick_device(device)
        members = [Member.start(c, d, device, r) for c, d, r in zip(configs, datas, resumes)]
        _train_members(members, device, steps_at.pop(), hooks.on_checkpoint, hooks.on_eval, progress)
    finally:
        torch.set_num_threads(threads_before)
    for member in members:
        member.model.eval()
    return [(m.model, m.metrics) for m in members]


def _train_members(members: list[Member], device: torch.device, step: int, on_checkpoint, on_eval,
                   progress: bool) -> None:
    """The training loop of :func:`train_stack` from ``step``: the loop of :func:`rote.train.train`."""
    train = members[0].config.train
    stack = Stack(members, device)
    optimizer = StackedAdamW(stack, members, step)
    # the train-loss sums since the last evaluation: a float64 tensor, read at evaluations and checkpoints
    running = torch.tensor([m.window[0] for m in members], dtype=torch.float64, device=device)
    count = members[0].window[1]
    bar = _progress_bar(members, step, progress)
    try:
        if step == 0:
            _evaluate(stack, optimizer, members, 0, [math.nan] * len(members), on_eval)
        while step < train.steps:
            losses = stack.train_step(optimizer, step)
            step += 1
            running, count = running + losses.double(), count + 1
            bar.update(1)
            if step % train.eval_every == 0 or step == train.steps:
                _evaluate(stack, optimizer, members, step, (running / count).tolist(), on_eval)
                running, count = torch.zeros_like(running), 0
            if on_checkpoint is not None and (step % train.checkpoint_every == 0 or step == train.steps):
                sums = running.tolist()
                for index, member in enumerate(members):
                    optimizer.export(index, member, member.config.train.lr_at(step - 1))
                    on_checkpoint(index, step, member.model, member.optimizer, member.metrics, (sums[index], count))
    finally:
        bar.close()
    for index, member in enumerate(members):
        optimizer.export(index, member, member.config.train.lr_at(max(step - 1, 0)))


def _evaluate(stack: Stack, optimizer: StackedAdamW, members: list[Member], step: int, losses: list[float],
              on_eval) -> None:
    """Evaluate each run at ``step`` and log its row: on its own model (:func:`rote.train.evaluate`), or where
    the device is in BATCHED_EVALUATION all runs at once (:func:`evaluate_stack`)."""
    batched = evaluate_stack(stack) if stack.device.type in BATCHED_EVALUATION else None
    for index, member in enumerate(members):
        tc = member.config.train
        if batched is None:
            optimizer.export(index, member, tc.lr_at(max(step - 1, 0)))
        scores = batched[index] if batched is not None else evaluate(member.model, member.data, tc.fit_eval_size)
        row = {"step": step, "lr": tc.lr_at(max(step - 1, 0)), "train_loss": losses[index],
               **scores, "seconds": time.perf_counter() - member.t0}
        member.metrics.append(row)
        if on_eval is not None:
            on_eval(index, row)


def _progress_bar(members: list[Member], step: int, progress: bool):
    from tqdm.auto import tqdm

    config = members[0].config
    return tqdm(total=config.train.steps, initial=step, desc=f"stack {config.task} x{len(members)}",
                disable=not progress, unit="step", mininterval=2.0)


# -- the run cache: each run of a stack stored, resumed and verified on its own ---------------------------
def get_or_train_stack(configs: Sequence[RunConfig], *, device=None, progress: bool = False, root=None,
                       on_checkpoint: Callable[[RunConfig, int], None] | None = None) -> list:
    """The cached run of each of ``configs`` (one shape), training the missing ones as stacks: each run
    under its own lock, into its own ``.partial`` entry, stored with its own manifest (stacked with how many).
    Resuming: the runs whose resume states are at one step train as one stack; runs at different steps (a
    stack stopped between two runs' checkpoints) form one stack per step, so no step is trained twice."""
    import contextlib

    from . import runs
    from .fmt import entry_name
    from .tasks import build_task

    root = runs.runs_root() if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    names = {c.key: entry_name(c) for c in configs}
    with contextlib.ExitStack() as locks:
        for name in sorted(set(names.values())):
            locks.enter_context(runs._lock(root, name))
        found = {c.key: runs.lookup(c, root) for c in configs}
        todo = list({c.key: c for c in configs if found[c.key] is None}.values())
        begun = {c.key: runs._begin(root, names[c.key], c) for c in todo}
        by_step: dict[int, list[RunConfig]] = {}
        for config in todo:
            resume = begun[config.key][1]
            by_step.setdefault(resume["step"] if resume is not None else 0, []).append(config)
        for group in by_step.values():
            datas = [build_task(c) for c in group]
            checkpoints = [runs._checkpointer(begun[c.key][0], None if on_checkpoint is None else
                                              (lambda step, c=c: on_checkpoint(c, step))) for c in group]
            trained = train_stack(
                group, datas, device=device, resumes=[begun[c.key][1] for c in group], progress=progress,
                hooks=StackHooks(on_checkpoint=lambda index, *state: checkpoints[index](*state),
                                 on_eval=lambda index, row: runs._write_progress(root, names[group[index].key],
                                                                                 group[index], row)))
            how = {"device": pick_device(device).type, "stacked": len(group)}
            for config, data, (model, metrics) in zip(group, datas, trained):
                found[config.key] = runs._store(root, names[config.key], config, data, model, metrics, how)
    return [found[c.key] for c in configs]

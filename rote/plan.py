"""The run plan: every trained run a profile's chapters need, listed without training anything.

One place decides which configurations the book trains: the chapters build their runs with
:func:`units` and :func:`sweep_ratios`, and ``rote plan`` / ``rote train --plan`` / ``rote book``
list and train :func:`plan`, which is made of the same calls, so the two cannot drift apart.

- Seeds (protocol 7.1): a seed s sets data_seed = noise_seed = model_seed = s; a book of N seeds
  uses s = 0 .. N-1 (N from the argument, else ``$ROTE_SEEDS``, else 1).
- Conditions (protocol 7.3): FDA has two noise conditions, ``random`` (primary) and ``digit``
  (secondary); THR has one, written ``-``. A unit is one (task, condition, seed): its noisy run
  and its noise-free twin. A noise-free FDA run has no noise kind, so both conditions of a seed
  share one twin (``FDAConfig`` canonicalizes it), and the plan lists it once.
- The C1 sweep: runs that differ from each unit's noisy run only in the noise ratio.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Iterable, Mapping

from .config import TASKS, ConfigError, RunConfig, make_config, param_names

CONDITIONS: dict[str, tuple[str, ...]] = {"fda": ("random", "digit"), "thr": ("-",)}  # primary first (7.3)
SEED_NAMES = ("data_seed", "noise_seed", "model_seed")
PAPER_SWEEP = (0.0, 0.05, 0.1, 0.2)


def seed_list(profile: str, n_seeds: int | None = None) -> list[int]:
    """Seeds 0 .. N-1: N from ``n_seeds``, else ``$ROTE_SEEDS``, else 1."""
    if n_seeds is None:
        text = os.environ.get("ROTE_SEEDS", "").strip()
        if text:
            try:
                n_seeds = int(text)
            except ValueError:
                raise ConfigError(f"ROTE_SEEDS must be a whole number, got {text!r}") from None
        else:
            n_seeds = 1
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 1:
        raise ConfigError(f"the number of seeds must be >= 1, got {n_seeds!r}")
    return list(range(n_seeds))


def with_seed(config: RunConfig, seed: int) -> RunConfig:
    """The configuration with the seed triple (data, noise, model) set to ``seed``."""
    return config.replace(**{name: seed for name in SEED_NAMES})


@dataclass(frozen=True)
class Unit:
    """One (task, condition, seed): the noisy run and its noise-free twin."""

    task: str
    condition: str
    seed: int
    noisy: RunConfig
    clean: RunConfig


def _task_overrides(task: str, overrides: Mapping[str, object]) -> dict[str, object]:
    """The overrides that apply to ``task``: a parameter of the other task only (noise_kind for THR) is
    skipped; a name that no task knows is left in, so that make_config reports it."""
    mine = set(param_names(task))
    known = {name for t in TASKS for name in param_names(t)}
    return {k: v for k, v in overrides.items() if k in mine or k not in known}


def units(profile: str, tasks: Iterable[str] = ("fda", "thr"), seeds: list[int] | None = None,
          overrides: Mapping[str, object] | None = None,
          conditions: Mapping[str, Iterable[str]] | None = None) -> list[Unit]:
    """The units of ``tasks``: each condition (all of CONDITIONS, or ``conditions[task]``) x each seed.

    ``overrides`` are flat run parameters applied to every run; naming ``noise_kind`` selects that
    one FDA condition. Seeds are given with ``seeds``, never as overrides.
    """
    overrides = dict(overrides or {})
    named = [k for k in SEED_NAMES if k in overrides]
    if named:
        raise ConfigError(f"{', '.join(named)} cannot be overridden: use seeds (a seed s sets data_seed = "
                          f"noise_seed = model_seed = s)")
    seeds = seed_list(profile) if seeds is None else list(seeds)
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ConfigError(f"seeds must be whole numbers >= 0, got {s!r}")
    out = []
    for task in tasks:
        if task not in TASKS:
            raise ConfigError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
        task_overrides = _task_overrides(task, overrides)
        if conditions is not None and task in conditions:
            conds = tuple(conditions[task])
        elif task == "fda" and "noise_kind" in task_overrides:
            conds = (str(task_overrides["noise_kind"]),)
        else:
            conds = CONDITIONS[task]
        for cond in conds:
            if cond not in CONDITIONS[task]:
                raise ConfigError(f"unknown condition {cond!r} for {task}; choose one of {', '.join(CONDITIONS[task])}")
            params = {**task_overrides, **({"noise_kind": cond} if task == "fda" else {})}
            base = make_config(task, profile, **params)
            for seed in seeds:
                noisy = with_seed(base, seed)
                out.append(Unit(task, cond, seed, noisy, noisy.replace(noise_ratio=0.0)))
    return out


def sweep_ratios(profile: str, config: RunConfig) -> list[float]:
    """Noise ratios of the C1 sweep: 0, 0.05, 0.1, 0.2 on ``paper``, else 0 and the config's own."""
    if profile == "paper":
        return sorted(set(PAPER_SWEEP) | {config.data.noise_ratio})
    return sorted({0.0, config.data.noise_ratio})


def plan(profile: str, seeds: list[int] | None = None, overrides: Mapping[str, object] | None = None,
         tasks: Iterable[str] | None = None, sweep: Iterable[float] | None = None) -> list[RunConfig]:
    """Every distinct run the book's chapters need (units, twins, sweep), deduplicated by key, in a stable
    order: task, condition, seed; within a unit the noisy run, its twin, then the sweep (``sweep``: the
    noise ratios a chapter was given instead of :func:`sweep_ratios`)."""
    out: dict[str, RunConfig] = {}
    for unit in units(profile, tuple(tasks or TASKS), seeds, overrides):
        ratios = sweep_ratios(profile, unit.noisy) if sweep is None else [float(r) for r in sweep]
        for config in [unit.noisy, unit.clean, *(unit.noisy.replace(noise_ratio=r) for r in ratios)]:
            out.setdefault(config.key, config)
    return list(out.values())


def differs(config: RunConfig, profile: str) -> dict[str, object]:
    """The parameters of ``config`` that differ from the profile's defaults for its task."""
    base = make_config(config.task, profile).flat()
    return {k: v for k, v in config.flat().items() if base.get(k) != v}


# -- time estimates -----------------------------------------------------------------------------
# (task, n_layers, d_model, batch_size, n_ctx, precision) -> (training steps/s, seconds per evaluation)
# at 1 intra-op thread, measured on an idle 2-core Intel Xeon with AVX-512 BF16 and AMX (2026-12-01,
# `benchmarks/engine_speed.py measure --bf16`, numbers in benchmarks/RESULTS.md; evaluation is fp32
# in both). The earlier AVX2-only machine trained quick FDA at 5.54 steps/s in fp32 and ran bf16
# ~12x slower (native_precision never picks bf16 there). Other shapes fall back to a FLOP formula.
MEASURED: dict[tuple, tuple[float, float]] = {
    ("fda", 2, 128, 256, 14, "fp32"): (9.23, 0.949),
    ("fda", 2, 128, 256, 14, "bf16"): (17.75, 0.924),
    ("thr", 4, 128, 512, 3, "fp32"): (10.4, 0.467),
    ("thr", 4, 128, 512, 3, "bf16"): (18.96, 0.445),
    ("fda", 1, 32, 64, 14, "fp32"): (249.8, 0.027),
    ("fda", 1, 32, 64, 14, "bf16"): (237.8, 0.022),
    ("thr", 1, 32, 64, 3, "fp32"): (479.0, 0.004),
    ("thr", 1, 32, 64, 3, "bf16"): (397.8, 0.003),
}
FLOPS_1THREAD = 8.0e10  # effective training FLOP/s of one thread, fitted to quick FDA's 9.23 steps/s in fp32
BF16_SPEEDUP = 1.9  # bf16 autocast over fp32 per training step where bf16 is native (quick FDA 1.92x, THR 1.82x)
STEP_OVERHEAD_S = 0.003  # per-step cost beyond the matmuls (optimizer, Python), fallback formula only


def _n_ctx(config: RunConfig) -> int:
    return 14 if config.task == "fda" else 3


def _vocab(config: RunConfig) -> int:
    return 13 if config.task == "fda" else config.data.n_entities + config.data.n_relations + 6


def _eval_sequences(config: RunConfig) -> int:
    d, t = config.data, config.train
    if config.task == "fda":
        n_train = d.n_train
    else:
        n_train = d.n_train_two_hop
    noisy = round(d.noise_ratio * n_train)
    fit = min(t.fit_eval_size or n_train, n_train)
    atomic = d.n_atomic if config.task == "thr" else 0
    return d.n_test + fit + 2 * noisy + atomic


def estimate_seconds(config: RunConfig) -> float:
    """Estimated wall time of training ``config`` on one thread (table, else a FLOP formula)."""
    m, t = config.model, config.train
    n_evals = t.steps // t.eval_every + 2
    measured = MEASURED.get((config.task, m.n_layers, m.d_model, t.batch_size, _n_ctx(config), t.precision))
    if measured is not None:
        steps_per_s, eval_s = measured
    else:
        per_token = 12 * m.n_layers * m.d_model ** 2 + _vocab(config) * m.d_model
        step_flops = 6 * t.batch_size * _n_ctx(config) * per_token
        steps_per_s = 1 / (step_flops / FLOPS_1THREAD + STEP_OVERHEAD_S)
        eval_s = 2 * _eval_sequences(config) * _n_ctx(config) * per_token / FLOPS_1THREAD
        if t.precision == "bf16":
            steps_per_s *= BF16_SPEEDUP  # evaluation stays fp32
    return t.steps / steps_per_s + n_evals * eval_s


def remaining_seconds(config: RunConfig, status: str) -> float:
    """Estimated seconds still to train, given :func:`rote.runs.status`."""
    if status == "cached":
        return 0.0
    total = estimate_seconds(config)
    if status.startswith("partial "):
        done = int(status.split()[1])
        total *= max(0.0, 1 - done / config.train.steps)
    return total


def makespan(seconds: list[float], workers: int) -> float:
    """Wall time of running jobs of these lengths on ``workers`` (longest first, greedy)."""
    loads = [0.0] * max(1, workers)
    for s in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += s
    return max(loads) if seconds else 0.0


# A run in a 2-worker pool on the 2-core machine took on average 1.09x (FDA) and 1.07x (THR) its
# solo time (the 10 runs of `make book SEEDS=3 WORKERS=2`, 2026-11-30: FDA 1,069-1,135 s against
# 1,014 s alone, THR 801-889 s against 789 s): the runs share memory bandwidth and caches.
SHARED_CORE_SLOWDOWN = 1.08


def pool_seconds(seconds: list[float], workers: int) -> float:
    """Estimated wall time of training runs of these solo lengths on a local pool of ``workers``."""
    return makespan(seconds, workers) * (SHARED_CORE_SLOWDOWN if workers > 1 and len(seconds) > 1 else 1.0)


def fmt_seconds(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"

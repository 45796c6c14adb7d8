"""Run-time estimates that learn from the machine: a store of measured run times, and a probe.

Each run a worker finishes appends a record to ``<runs root>/.timings.jsonl`` (:func:`record_run`):
its shape and precision (the step cost), the machine (CPU, ISA, device, torch, threads), its wall and
CPU seconds. :class:`Estimator` predicts a run as ``overhead + steps x step_s + evaluations x eval_s``
(evaluation per scored sequence), from, in order: this machine's finished runs of the shape; a stored or
fresh :func:`probe` of the shape (a throwaway model, a few steps, one evaluation; ``ROTE_NO_PROBE=1``
turns it off); other machines' runs (first with ``workers=True``, a Slurm login node); the static table
or FLOP formula (:func:`formula_seconds`). Times are solo times on one core: CPU seconds stand in for
wall time, divided by :data:`SHARED_CORE_SLOWDOWN` when other runs shared the host.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import RunConfig
from ..fmt import entry_name, say

STORE = ".timings.jsonl"
VERSION = 2  # version 1 counted 5 tokens too many in THR's "vocab"; read() corrects it
# The probe: warm-up steps, then timed steps (their median counts) until PROBE_STEP_S of step time
# (PROBE_MIN_STEPS .. PROBE_MAX_STEPS), then one evaluation of at most PROBE_EVAL_SEQUENCES sequences.
PROBE_WARMUP_STEPS, PROBE_MIN_STEPS, PROBE_MAX_STEPS, PROBE_STEP_S = 2, 4, 30, 0.6
PROBE_EVAL_SEQUENCES = 2048
WORKER_START_S = 1.5  # a worker's CPU seconds beyond data and training (interpreter, imports, saving)


def no_probe() -> bool:
    return os.environ.get("ROTE_NO_PROBE", "").strip() not in ("", "0")


# -- what a run is -------------------------------------------------------------------------------------
def shape(config: RunConfig) -> dict:
    """What a training step costs depends on: the model, the batch, the context, the precision."""
    from ..tasks.shapes import n_ctx, vocab_size

    m, t = config.model, config.train
    return {"task": config.task, "n_layers": m.n_layers, "d_model": m.d_model, "n_heads": m.n_heads,
            "vocab": vocab_size(config), "n_ctx": n_ctx(config), "batch_size": t.batch_size, "precision": t.precision}


def eval_sequences(config: RunConfig) -> int:
    """Sequences one evaluation scores (``rote.train.evaluate``): test set, fit subset, noisy examples
    (twice for FDA, whose multi-token answers are model input) and THR's atomic facts."""
    d, t = config.data, config.train
    n_train = d.n_train if config.task == "fda" else d.n_train_two_hop
    noisy = round(d.noise_ratio * n_train)
    fit = min(t.fit_eval_size or n_train - noisy, n_train - noisy)
    return d.n_test + fit + (2 * noisy if config.task == "fda" else noisy + d.n_atomic)


def _scored(data, fit_eval_size: int) -> int:
    """Sequences ``rote.train.evaluate`` scores on ``data`` (what :func:`eval_sequences` predicts)."""
    noisy = int(data.train.is_noisy.sum())
    fit = min(fit_eval_size or len(data.train) - noisy, len(data.train) - noisy)
    passes = 2 if data.answer_len > 1 else 1
    return len(data.test) + fit + passes * noisy + (len(data.atomic) if data.atomic is not None else 0)


def _eval_subset(data, fit_eval_size: int, cap: int):
    """``data`` with every evaluated split cut to one share, about ``cap`` sequences scored:
    (data, fit_eval_size, sequences scored)."""
    import dataclasses

    total = _scored(data, fit_eval_size)
    if total <= cap:
        return data, fit_eval_size, total
    share = cap / total
    cut = lambda ex: ex[:max(1, round(len(ex) * share))]  # noqa: E731 (splits are stored in random order)
    sub = dataclasses.replace(data, train=cut(data.train), test=cut(data.test),
                              atomic=None if data.atomic is None else cut(data.atomic))
    fit = max(1, round(fit_eval_size * share)) if fit_eval_size else 0
    return sub, fit, _scored(sub, fit)


def n_evaluations(config: RunConfig) -> int:
    """Evaluations of a run: at step 0, every ``eval_every`` steps, and at the last step."""
    t = config.train
    return 1 + t.steps // t.eval_every + (1 if t.steps % t.eval_every else 0)


def _key(d: dict) -> str:
    return json.dumps(d, sort_keys=True)


# -- which machine -------------------------------------------------------------------------------------
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16")


@functools.lru_cache(maxsize=None)
def machine(device: str | None = None) -> dict:
    """This machine as the records name it: CPU model and instruction set, training device, torch
    version and training threads (``rote.train.TRAIN_THREADS``)."""
    import torch

    from ..model import pick_device
    from .provenance import cpu_info
    from ..train import TRAIN_THREADS

    cpu, flags = cpu_info(lscpu=False)
    dev, name = pick_device(device), "cpu"
    if dev.type == "cuda":
        with contextlib.suppress(Exception):
            name = f"cuda {torch.cuda.get_device_name(dev)}"
    elif dev.type != "cpu":
        name = dev.type
    return {"cpu": cpu, "isa": "+".join(f for f in ISA_FLAGS if f in flags) or "-", "device": name,
            "torch": torch.__version__.split("+")[0], "threads": TRAIN_THREADS}


def describe(m: dict) -> str:
    return f"{m.get('cpu')} ({m.get('isa')}), {m.get('device')}, torch {m.get('torch')}, {m.get('threads')} thread(s)"


# -- the store -----------------------------------------------------------------------------------------
def store_path(root: Path | str | None = None) -> Path:
    if root is None:
        from ..runs import runs_root

        root = runs_root()
    return Path(root) / STORE


def append(record: dict, root: Path | str | None = None) -> None:
    """Append one record as one line: one write on an O_APPEND descriptor under an exclusive flock, so
    that concurrent writers never interleave; a reader skips a line it cannot parse."""
    path = store_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps({"v": VERSION, **record}, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":  # a writer died mid-line: start a new one
            line = b"\n" + line
        os.write(fd, line)
    finally:
        os.close(fd)  # closing releases the lock


_NEEDED = {"run": ("machine", "shape", "steps", "n_evals", "eval_sequences", "cpu_s", "wall_s", "train_s", "eval0_s"),
           "probe": ("machine", "shape", "step_s", "eval_s", "eval_sequences", "setup_s")}


def _valid(rec) -> bool:
    if not (isinstance(rec, dict) and rec.get("v") in (1, VERSION) and rec.get("kind") in _NEEDED
            and all(k in rec for k in _NEEDED[rec["kind"]])
            and isinstance(rec["machine"], dict) and isinstance(rec["shape"], dict)):
        return False
    if rec["v"] == 1 and rec["shape"].get("task") == "thr" and isinstance(rec["shape"].get("vocab"), int):
        rec["shape"]["vocab"] -= 5  # the vocabulary as rote.tasks.shapes counts it
    try:
        _rates(rec)
    except (TypeError, ValueError, ZeroDivisionError, KeyError):
        return False
    return True


def read(root: Path | str | None = None) -> list[dict]:
    """The valid records of the store, oldest first; a corrupt, partial or foreign line is skipped."""
    try:
        data = store_path(root).read_bytes()
    except OSError:
        return []
    out = []
    for raw in data.split(b"\n"):
        try:
            rec = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            continue
        if _valid(rec):
            out.append(rec)
    return out


def _rates(rec: dict) -> tuple[float, float, float]:
    """A record as solo rates: (overhead s, s per training step, s per evaluated sequence)."""
    seqs = max(1, int(rec["eval_sequences"]))
    if rec["kind"] == "probe":
        step_s, eval_s, setup_s = float(rec["step_s"]), float(rec["eval_s"]), float(rec["setup_s"])
        if not (step_s > 0 and eval_s >= 0 and setup_s >= 0):
            raise ValueError("bad probe")
        return setup_s + WORKER_START_S, step_s, eval_s / seqs
    wall, cpu, train_s, eval0 = (float(rec[k]) for k in ("wall_s", "cpu_s", "train_s", "eval0_s"))
    steps, n_evals = int(rec["steps"]), int(rec["n_evals"])
    if not (wall > 0 and train_s > 0 and steps > 0 and n_evals > 0 and 0 <= eval0 and cpu > 0):
        raise ValueError("bad run record")
    # CPU seconds stand in for the wall time of a run that had its core to itself (on a GPU: the wall time)
    solo = min(cpu if str(rec["machine"].get("device", "cpu")) == "cpu" else wall, wall * 1.05)
    if float(rec.get("concurrent") or 0) >= 0.5:  # other runs trained beside it on this host
        solo /= SHARED_CORE_SLOWDOWN
    scale = solo / wall
    train_solo = min(train_s, wall) * scale
    eval_s = min(eval0 * scale, 0.5 * train_solo / n_evals)  # the first evaluation's time, bounded
    step_s = (train_solo - n_evals * eval_s) / steps
    if step_s <= 0:
        raise ValueError("bad run record")
    return solo - train_solo, step_s, eval_s / seqs


# -- recording a finished run (in the worker) -------------------------------------------------------------
def runs_beside(root: Path, name: str, fresh: float = 120.0) -> int:
    """How many other runs train on this host beside run ``name`` now: the ``.progress`` files of other
    runs this host wrote within ``fresh`` s (a worker asks at each checkpoint)."""
    host, now, n = os.uname().nodename, time.time(), 0
    with contextlib.suppress(OSError):
        for path in (Path(root) / ".progress").glob("*.json"):
            with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):  # torn or foreign files
                info = json.loads(path.read_text())
                recent = now - float(info.get("time", 0)) < fresh
                n += path.stem != name and info.get("host") == host and recent
    return n


@dataclass(frozen=True)
class RunTiming:
    """What a worker measured of a run: this process's ``wall_s`` and ``cpu_s`` for it, the step it
    ``resumed`` from (0: the start), and how many runs trained beside it on average (``concurrent``)."""

    wall_s: float
    cpu_s: float
    resumed: int = 0
    concurrent: float | None = None


def record_run(config: RunConfig, run, timing: RunTiming, *, root: Path | str, device=None) -> dict | None:
    """Append the record of a run this process trained (``run``: :class:`rote.runs.Run`); returns it."""
    seconds = [float(s) for s in run.metrics["seconds"]]
    if not seconds:
        return None
    rec = {"kind": "run", "time": time.time(), "host": os.uname().nodename, "machine": machine(device),
           "shape": shape(config), "name": entry_name(config), "key": config.key,
           "steps": config.train.steps, "eval_every": config.train.eval_every, "n_evals": len(seconds),
           "eval_sequences": eval_sequences(config), "wall_s": round(timing.wall_s, 3),
           "cpu_s": round(timing.cpu_s, 3), "train_s": round(seconds[-1], 3), "eval0_s": round(seconds[0], 4),
           "resumed": int(timing.resumed),
           "concurrent": None if timing.concurrent is None else round(timing.concurrent, 2)}
    with contextlib.suppress(OSError):
        rec["load1"] = round(os.getloadavg()[0], 2)
    append(rec, root)
    return rec


# -- the probe -------------------------------------------------------------------------------------------
class _Timed(Exception):
    """Stops the probe's training once its steps are timed."""


def probe(config: RunConfig, device=None) -> dict:
    """Time ``config``'s shape here: build its data, train a throwaway model with ``rote.train.train`` on it
    (evaluations cut to about PROBE_EVAL_SEQUENCES sequences) until PROBE_STEP_S of timed steps, then time
    one evaluation; this thread's CPU time on a CPU, wall time on a GPU; torch's RNG is restored after.
    Returns the probe record, not stored."""
    import torch

    from .. import train as T
    from ..model import pick_device
    from ..tasks import build_task

    dev = pick_device(device)

    def clock():
        if dev.type == "cpu":
            return time.thread_time()
        with contextlib.suppress(Exception):
            torch.cuda.synchronize(dev)
        return time.perf_counter()

    marks, timed = [], {}  # marks: the clock after the first evaluation and after each step

    def on_step(step, model, *_):
        marks.append(clock())
        steps = [b - a for a, b in zip(marks[PROBE_WARMUP_STEPS:], marks[PROBE_WARMUP_STEPS + 1:])]
        if len(steps) >= PROBE_MAX_STEPS or (len(steps) >= PROBE_MIN_STEPS and sum(steps) >= PROBE_STEP_S):
            t = clock()
            T.evaluate(model, sub, fit)
            timed.update(steps=steps, eval_s=clock() - t)
            raise _Timed

    rng, wall0 = torch.get_rng_state(), time.perf_counter()
    try:
        t = clock()
        data = build_task(config)
        setup_s = clock() - t  # the worker builds the data too; the model's first operations below warm up
        sub, fit, scored = _eval_subset(data, config.train.fit_eval_size, PROBE_EVAL_SEQUENCES)
        steps = max(config.train.steps, PROBE_WARMUP_STEPS + PROBE_MAX_STEPS + 1)
        short = config.replace(steps=steps, eval_every=steps, checkpoint_every=1, fit_eval_size=fit)
        with contextlib.suppress(_Timed):
            T.train(short, sub, device=dev, progress=False, on_checkpoint=on_step,
                    on_eval=lambda row: marks.append(clock()))
    finally:
        torch.set_rng_state(rng)
    return {"kind": "probe", "time": time.time(), "host": os.uname().nodename, "machine": machine(device),
            "shape": shape(config), "step_s": round(statistics.median(timed["steps"]), 5),
            "eval_s": round(timed["eval_s"], 4), "eval_sequences": scored, "setup_s": round(setup_s, 4),
            "probe_steps": len(marks) - 1, "probe_wall_s": round(time.perf_counter() - wall0, 3),  # against the next: the load
            "probe_clock_s": round(setup_s + sum(timed["steps"]) + timed["eval_s"], 3)}


# -- estimates -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str  # one of SOURCE_WORDS
    records: int = 0  # how many records it comes from


# where an estimate comes from, in the order the summary names them
SOURCE_WORDS = {"measured": "from finished runs on this machine", "probe_now": "timed now",
                "probe": "timed earlier on this machine", "workers": "from runs finished on {}",
                "formula": "from the static table or FLOP formula (rote/build/timings.py)"}


class Estimator:
    """Estimates of runs from the store of ``root`` (the module docstring says in which order).

    ``probe``: time an unseen shape here (default: unless ``ROTE_NO_PROBE``); ``workers``: any machine's
    finished runs first, never probe (a Slurm login node); ``exclude``: run keys left out (leave-one-out,
    ``benchmarks/estimates.py``). The store is reread when it changes."""

    def __init__(self, root: Path | str | None = None, *, probe: bool | None = None, workers: bool = False,
                 device=None, exclude: set[str] | frozenset = frozenset(), records: list[dict] | None = None):
        self.root = None if root is None else Path(root)
        self.probing = (not no_probe()) if probe is None else probe
        self.workers, self.device, self.exclude = workers, device, set(exclude)
        self._given, self._stamp, self._records, self._cache = records, None, [], {}
        self.probed_now: set[str] = set()  # shapes timed by this estimator, in probe_seconds (wall)
        self.probe_seconds, self._memory = 0.0, []  # _memory: probes that could not be stored

    def records(self) -> list[dict]:
        try:
            st = None if self._given is not None else store_path(self.root).stat()
            stamp = ("given", len(self._given)) if st is None else (st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = (None,)
        stamp += (len(self._memory),)
        if stamp != self._stamp:
            base = list(self._given) if self._given is not None else read(self.root)
            self._records = [r for r in base if r.get("key") not in self.exclude] + self._memory
            self._cache.clear()
            self._stamp = stamp
        return self._records

    def _matching(self, config: RunConfig, kind: str, machines: str) -> list[dict]:
        """Records of ``config``'s shape and ``kind`` with this machine's thread count; ``machines``:
        "here" (this machine), "others" or "any"."""
        want, me = shape(config), machine(self.device)
        return [r for r in self.records() if r["kind"] == kind and r["shape"] == want
                and not (kind == "run" and int(r.get("resumed") or 0))  # a resumed run's time covers part of it
                and {"here": r["machine"] == me, "others": r["machine"] != me}.get(machines, True)
                and r["machine"].get("threads") == me["threads"]]

    @staticmethod
    def _predict(config: RunConfig, recs: list[dict]) -> float:
        overhead, step_s, per_seq = (statistics.median(r[i] for r in map(_rates, recs)) for i in range(3))
        return max(0.0, overhead) + config.train.steps * step_s + n_evaluations(config) * per_seq * eval_sequences(config)

    def _from_workers(self, config: RunConfig, machines: str) -> Estimate | None:
        by: dict[str, list[dict]] = {}
        for r in self._matching(config, "run", machines):
            by.setdefault(_key(r["machine"]), []).append(r)
        if not by:
            return None
        # the machine that finished most of these runs (the cluster's nodes), newest on a tie
        best = max(by.values(), key=lambda rs: (len(rs), max(r.get("time", 0) for r in rs)))
        return Estimate(self._predict(config, best), "workers", len(best))

    def estimate(self, config: RunConfig) -> Estimate:
        self.records()
        if config.key not in self._cache:
            self._cache[config.key] = self._estimate(config)
        return self._cache[config.key]

    def _estimate(self, config: RunConfig) -> Estimate:
        est = self._from_workers(config, "any") if self.workers else None
        if est is not None:
            return est
        runs = self._matching(config, "run", "here")
        if runs:
            return Estimate(self._predict(config, runs), "measured", len(runs))
        if self.workers:
            return Estimate(formula_seconds(config), "formula", 0)
        probes = self._matching(config, "probe", "here")
        if not probes and self.probing:
            try:
                probes = [self._probe(config)]
            except Exception as err:  # an estimate never stops a command: the fallbacks remain
                say(f"timing {config.task} {_key(shape(config))} failed ({type(err).__name__}: {err}); "
                    f"estimating without it")
                self.probing = False
        if probes:
            source = "probe_now" if _key(shape(config)) in self.probed_now else "probe"
            return Estimate(self._predict(config, probes[-1:]), source, 1)
        return self._from_workers(config, "others") or Estimate(formula_seconds(config), "formula", 0)

    def _probe(self, config: RunConfig) -> dict:
        t = time.perf_counter()
        rec = probe(config, self.device)
        self.probe_seconds += time.perf_counter() - t
        self.probed_now.add(_key(shape(config)))
        try:
            if self._given is not None:
                raise OSError("records given")
            append(rec, self.root)
        except OSError:
            self._memory.append(rec)
        self.records()  # the store changed: reread it
        return rec

    def seconds(self, config: RunConfig) -> float:
        return self.estimate(config).seconds

    def summary(self, configs) -> str:
        """Where the estimates come from, e.g. "estimates: 9 from finished runs, 6 timed now (4.1 s)"."""
        counts = {s: 0 for s in SOURCE_WORDS}
        for config in {c.key: c for c in configs}.values():
            counts[self.estimate(config).source] += 1
        parts = [f"{counts[s]} " + SOURCE_WORDS[s].format("the workers" if self.workers else "other machines")
                 + (f" ({self.probe_seconds:.1f} s)" if s == "probe_now" else "") for s in counts if counts[s]]
        return "estimates: " + (", ".join(parts) if parts else "none")


_DEFAULT: dict[tuple, Estimator] = {}


def default_estimator(root: Path | str | None = None) -> Estimator:
    """The process's estimator for ``root`` (default: the run cache), probing unless ``ROTE_NO_PROBE``."""
    root = store_path(root).parent
    key = (str(root), no_probe())
    if key not in _DEFAULT:
        _DEFAULT[key] = Estimator(root)
    return _DEFAULT[key]


# -- the last fallback ---------------------------------------------------------------------------------
# (task, n_layers, d_model, batch_size, n_ctx, precision) -> (training steps/s, seconds per evaluation) at
# 1 thread on an idle 2-core Xeon with AVX-512 BF16 and AMX (2026-12-01, `benchmarks/engine_speed.py`,
# benchmarks/RESULTS.md; evaluation fp32; quick evaluations x issue 21's speed-up: FDA 0.63, THR 0.57).
# Other shapes fall back to a FLOP formula. Used only where nothing was measured or probed.
MEASURED: dict[tuple, tuple[float, float]] = {
    ("fda", 2, 128, 256, 14, "fp32"): (9.23, 0.598),
    ("fda", 2, 128, 256, 14, "bf16"): (17.75, 0.582),
    ("thr", 4, 128, 512, 3, "fp32"): (10.4, 0.266),
    ("thr", 4, 128, 512, 3, "bf16"): (18.96, 0.254),
    ("fda", 2, 64, 256, 14, "fp32"): (18.21, 0.374),  # X1's widths: measured under load (average ~3)
    ("fda", 2, 256, 256, 14, "fp32"): (3.05, 1.653),
    ("fda", 1, 32, 64, 14, "fp32"): (249.8, 0.027),
    ("fda", 1, 32, 64, 14, "bf16"): (237.8, 0.022),
    ("thr", 1, 32, 64, 3, "fp32"): (479.0, 0.004),
    ("thr", 1, 32, 64, 3, "bf16"): (397.8, 0.003),
}
FLOPS_1THREAD = 8.0e10  # effective training FLOP/s of one thread, fitted to quick FDA's 9.23 steps/s in fp32
BF16_SPEEDUP = 1.9  # bf16 autocast over fp32 per training step where bf16 is native (quick FDA 1.92x, THR 1.82x)
STEP_OVERHEAD_S = 0.003  # per-step cost beyond the matmuls (optimizer, Python)


def estimate_seconds(config: RunConfig, estimator=None) -> float:
    """Estimated solo seconds of training ``config`` (evaluations included), by ``estimator`` (default:
    the run cache's, :func:`default_estimator`)."""
    return (estimator or default_estimator()).seconds(config)


def formula_seconds(config: RunConfig) -> float:
    """The last fallback: the static :data:`MEASURED` table (one machine's numbers), else a FLOP formula."""
    from ..tasks.shapes import n_ctx, vocab_size

    m, t = config.model, config.train
    measured = MEASURED.get((config.task, m.n_layers, m.d_model, t.batch_size, n_ctx(config), t.precision))
    if measured is not None:
        steps_per_s, eval_s = measured
    else:
        per_token = 12 * m.n_layers * m.d_model ** 2 + vocab_size(config) * m.d_model
        steps_per_s = 1 / (6 * t.batch_size * n_ctx(config) * per_token / FLOPS_1THREAD + STEP_OVERHEAD_S)
        eval_s = 2 * eval_sequences(config) * n_ctx(config) * per_token / FLOPS_1THREAD
        steps_per_s *= BF16_SPEEDUP if t.precision == "bf16" else 1  # evaluation stays fp32
    return t.steps / steps_per_s + (t.steps // t.eval_every + 2) * eval_s


def remaining_seconds(config: RunConfig, status: str, estimator=None) -> float:
    """Estimated seconds still to train, given :func:`rote.runs.status`."""
    done = int(status.split()[1]) if status.startswith("partial ") else 0
    return 0.0 if status == "cached" else estimate_seconds(config, estimator) * max(0.0, 1 - done / config.train.steps)


def default_workers() -> int:
    """The cores this process may use: a local pool's default size."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def makespan(seconds: list[float], workers: int) -> float:
    """Wall time of running jobs of these lengths on ``workers`` (longest first, greedy)."""
    loads = [0.0] * max(1, workers)
    for s in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += s
    return max(loads) if seconds else 0.0


# A run in a 2-worker pool on the 2-core machine took 1.09x (FDA) and 1.07x (THR) its solo time
# (`make book SEEDS=3 WORKERS=2`, 2026-11-30): the runs share memory bandwidth and caches.
SHARED_CORE_SLOWDOWN = 1.08


def pool_seconds(seconds: list[float], workers: int) -> float:
    """Estimated wall time of training runs of these solo lengths on a local pool of ``workers``."""
    return makespan(seconds, workers) * (SHARED_CORE_SLOWDOWN if workers > 1 and len(seconds) > 1 else 1.0)


def fmt_seconds(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class RunCosts:
    """The run-time estimates a page shows (:class:`rote.chapters.x1.RunCosts`), from the timings stored in the runs
    folder ``root`` (the book's, :attr:`rote.settings.Settings.runs`; None: the project's)."""

    root: Path | None = None

    def estimate_seconds(self, config: RunConfig) -> float:
        return estimate_seconds(config, default_estimator(self.root))

    fmt_seconds = staticmethod(fmt_seconds)
    pool_seconds = staticmethod(pool_seconds)
    default_workers = staticmethod(default_workers)

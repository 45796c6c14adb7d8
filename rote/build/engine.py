"""The run engine: train the missing runs of a plan, W at a time, locally or on a Slurm cluster.

Each run trains in a process of its own on one intra-op thread (``rote.train.TRAIN_THREADS``), so its
numbers do not depend on how many train at once. Executors: ``local`` (worker processes, ``python -m
rote.build.engine worker``, logging to ``<runs>/.logs/``), ``slurm`` (one submitit job per run into a shared
run cache; a job is done when its result file appears or ``squeue`` says it ended, never ``sacct``:
:class:`_SlurmQueue`) and ``submitit-local`` (the Slurm code path on this machine, for tests). A worker
that dies leaves its run in ``.partial`` to resume; the others go on and the failures are returned.
Ctrl-C or SIGTERM stops every worker. Progress is read from the ``.progress`` files; run times go to
the timings store (:mod:`rote.build.timings`), whose estimates order the runs and the display.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..config import ConfigError, RunConfig, code_fingerprint
from ..fmt import entry_name, say as _say
from .timings import default_workers, estimate_seconds, fmt_seconds, makespan, remaining_seconds
# rote.runs (and torch) are imported where needed, so that checking the arguments stays fast

EXECUTORS = ("local", "slurm", "submitit-local")
POLL_S = 0.25


def check_executor(executor: str) -> None:
    """Fail with a one-line ConfigError if ``executor`` cannot run here (before anything trains)."""
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    if executor in ("slurm", "submitit-local"):
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise ConfigError("executor slurm needs the submitit package (pip install submitit)") from None
    if executor == "slurm" and shutil.which("sbatch") is None:
        raise ConfigError("executor slurm needs Slurm, but sbatch is not on PATH (use --executor local)")


@dataclass
class SlurmOptions:
    partition: str | None = None
    time_min: int = 120
    mem_gb: float = 8.0
    gpus: int = 0
    cpus: int = 1
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class EngineSettings:
    """How :func:`train_plan` trains: ``workers`` at a time (None: one per core locally, all at once on
    Slurm), on ``executor``, each on ``device``, with ``slurm`` options, with a display unless not ``progress``
    (plain lines with ``plain_progress``, :attr:`rote.settings.Settings.plain_progress`)."""

    workers: int | None = None
    executor: str = "local"
    device: str | None = None
    slurm: SlurmOptions | None = None
    progress: bool = True
    plain_progress: bool = False
    stack: bool | None = None  # runs of one shape as one stacked model (rote.stack); None: on CUDA only

    def __post_init__(self):
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"--workers must be >= 1, got {self.workers}")


@dataclass
class Outcome:
    config: RunConfig
    ok: bool
    seconds: float = 0.0
    error: str = ""
    log: str = ""

    @property
    def name(self) -> str:
        return entry_name(self.config)


# -- one run in a worker --------------------------------------------------------------------------
class CodeChanged(RuntimeError):
    """The worker's code differs from the code that made the plan (its keys would differ)."""


def _check_fingerprint(fingerprint: str | None) -> None:
    if fingerprint is not None and code_fingerprint() != fingerprint:
        raise CodeChanged(f"the training code changed since the plan was made (fingerprint {fingerprint} -> "
                          f"{code_fingerprint()}); rerun the command")


def train_one(config_dict: dict, root: str, device: str | None = None, fingerprint: str | None = None) -> dict:
    """Train (or load) one run into ``root``: a worker's and a Slurm job's body. A worker whose code
    fingerprint is not the plan's (``fingerprint``) refuses rather than store under a key the plan lacks.
    The time of a run it trains goes to the timings store; a failure there never fails the run."""
    from ..runs import get_or_train, status
    from .timings import RunTiming, record_run, runs_beside

    _check_fingerprint(fingerprint)
    config, root = RunConfig.from_dict(config_dict), Path(root)
    state = status(config, root)
    wall0, cpu0 = time.perf_counter(), _cpu_seconds()
    beside: list[int] = []  # how many other runs trained on this host, at each checkpoint
    run = get_or_train(config, root=root, device=device, progress=False,
                       on_checkpoint=lambda step: beside.append(runs_beside(root, entry_name(config))))
    if not run.cached:
        try:
            resumed = int(state.split()[1]) if state.startswith("partial ") else 0
            concurrent = sum(beside) / len(beside) if beside else None
            timing = RunTiming(time.perf_counter() - wall0, _cpu_seconds() - cpu0, resumed, concurrent)
            record_run(config, run, timing, root=root, device=device)
        except Exception as err:
            _say(f"could not record the time of {entry_name(config)}: {type(err).__name__}: {err}")
    return {"name": entry_name(config), "path": str(run.path), "cached": run.cached,
            "train_seconds": run.train_seconds}


def train_stack_job(config_dicts: list[dict], root: str, device: str | None = None,
                    fingerprint: str | None = None) -> list[dict]:
    """Train (or load) the runs of one stack into ``root`` (:func:`rote.stack.get_or_train_stack`): a stack
    worker's body. Their times do not go to the timings store (its estimates are of runs trained alone)."""
    from ..stack import get_or_train_stack

    _check_fingerprint(fingerprint)
    runs = get_or_train_stack([RunConfig.from_dict(d) for d in config_dicts], root=Path(root), device=device)
    return [{"name": entry_name(r.config), "path": str(r.path), "cached": r.cached,
             "train_seconds": r.train_seconds} for r in runs]


def _cpu_seconds() -> float:
    return sum(resource.getrusage(resource.RUSAGE_SELF)[:2])  # user and system time


def _worker_main(root: str, config_json: str, fingerprint: str, device: str | None = None, body=None) -> int:
    try:
        print(json.dumps((body or train_one)(json.loads(config_json), root, device, fingerprint)), flush=True)
    except CodeChanged as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 3
    except KeyboardInterrupt:
        print("interrupted; the run resumes from its last checkpoint next time", file=sys.stderr, flush=True)
        return 130
    return 0


# -- launchers: start a run, poll it (None: running; else (ok, error)), stop it, wait for it ----------
class _LocalJob:
    def __init__(self, config: RunConfig, root: Path, device: str | None):
        self.config, self.root, self.configs = config, root, [config]
        self._start("worker", json.dumps(config.to_dict()), device)

    def _start(self, kind: str, config_json: str, device: str | None) -> None:
        self.log = self.root / ".logs" / f"{entry_name(self.config)}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # the runs folder: an argument
        cmd = [sys.executable, "-m", "rote.build.engine", kind, str(self.root), config_json,
               code_fingerprint()] + ([device] if device else [])
        with open(self.log, "ab") as log:
            # its own session: Ctrl-C reaches the engine, which stops each worker itself
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True, preexec_fn=_die_with_parent)

    def poll(self) -> tuple[bool, str] | None:
        code = self.proc.poll()
        if code is None:
            return None
        if code == 0:
            return True, ""
        why = f"killed by signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exit code {code}"
        return False, f"{why}; last log line: {_last_line(self.log)}"

    def stop(self, sig=signal.SIGINT) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float) -> bool:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout)
        return self.proc.poll() is not None


class _StackJob(_LocalJob):
    """The runs of one stack trained in one worker process (``python -m rote.build.engine stack``)."""

    def __init__(self, configs: list[RunConfig], root: Path, device: str | None):
        self.config, self.root, self.configs = configs[0], root, configs
        self._start("stack", json.dumps([c.to_dict() for c in configs]), device)


# Slurm job states after which a job never runs again (squeue's %T). "GONE": no longer in the queue.
SLURM_ENDED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
                         "OUT_OF_MEMORY", "PREEMPTED", "GONE"})
RESULT_GRACE_S = 15.0  # how long a job that Slurm says ended may take to show its result file
SQUEUE_EVERY_S = 5.0   # one squeue call for all jobs at most this often


class _SubmititJob:
    """A run as a submitit job. On Slurm (``queue``) a job whose result file is missing is done once squeue
    has said for RESULT_GRACE_S that it ended (submitit's own watcher polls sacct, which fails without
    accounting storage); submitit's local executor knows its own processes."""

    def __init__(self, executor, config: RunConfig, root: Path, device: str | None,
                 queue: _SlurmQueue | None):
        self.config, self.root, self.queue = config, root, queue
        self.job = executor.submit(train_one, config.to_dict(), str(root), device, code_fingerprint())
        self.log = Path(str(self.job.paths.stdout))
        self.ended_at: float | None = None  # when Slurm first reported the job ended without a result

    def poll(self) -> tuple[bool, str] | None:
        if self.queue is None and not self.job.done():
            return None
        if self.queue is not None and not self._result_exists():
            state = self.queue.state(self.job.job_id)
            if state not in SLURM_ENDED:  # queued, running, completing, requeued, or squeue did not answer
                self.ended_at = None
                return None
            self.ended_at = self.ended_at or time.time()
            if time.time() - self.ended_at < RESULT_GRACE_S:  # a shared filesystem may show the file late
                return None
            how = "left the queue" if state == "GONE" else f"ended {state}"
            last = _last_line(Path(str(self.job.paths.stderr))) or _last_line(self.log)
            return False, f"job {self.job.job_id} {how} without a result; last log line: {last}"
        try:
            self.job.result()
            return True, ""
        except Exception as err:  # the job's exception, or submitit's report of a dead job
            return False, f"job {self.job.job_id} failed ({type(err).__name__}): {_job_error(err)}"

    def _result_exists(self) -> bool:
        folder = self.job.paths.folder
        with contextlib.suppress(OSError):
            folder.chmod(folder.stat().st_mode)  # refreshes an NFS client's view of the folder
        return self.job.paths.result_pickle.exists()

    def stop(self, sig=signal.SIGINT) -> None:
        with contextlib.suppress(Exception):
            self.job.cancel(check=False)

    def wait(self, timeout: float) -> bool:
        deadline = time.time() + timeout
        while not (self.job.done() if self.queue is None else self._result_exists()
                   or self.queue.state(self.job.job_id, max_age=1.0) in SLURM_ENDED):
            if time.time() >= deadline:
                return False
            time.sleep(0.2)
        return True


def _job_error(err: Exception) -> str:
    """What went wrong in a submitit error: the traceback's last line (between submitit's dashes)."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    rules = [i for i, line in enumerate(lines) if set(line) == {"-"} and len(line) >= 10]
    if len(rules) >= 2 and rules[-1] - rules[0] > 1:
        return lines[rules[-1] - 1][:300]
    return lines[-1][:300] if lines else ""


class _SlurmQueue:
    """The engine's Slurm jobs' states, from one ``squeue --states=all`` for all every few seconds; a job
    squeue no longer knows is "GONE"; when squeue fails the states stay unknown (None), said once."""

    def __init__(self):
        self.ids: set[str] = set()
        self.states: dict[str, str] = {}
        self.checked, self.warned = float("-inf"), False

    def state(self, job_id: str, max_age: float = SQUEUE_EVERY_S) -> str | None:
        self.ids.add(str(job_id))
        if time.time() - self.checked >= max_age:
            self.refresh()
        return self.states.get(str(job_id))

    def refresh(self) -> None:
        self.checked = time.time()
        ids = sorted(self.ids - {i for i, s in self.states.items() if s == "GONE"})
        if not ids:
            return
        try:
            out = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i|%T", "-j", ",".join(ids)],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as err:
            out = subprocess.CompletedProcess([], 1, "", str(err))
        if out.returncode != 0 and "Invalid job id" not in out.stderr:  # one unknown id alone is an error
            if not self.warned:
                _say(f"squeue failed ({out.stderr.strip()[:200]}); waiting for the jobs' result files")
                self.warned = True
            return
        listed = dict(line.split("|", 1) for line in out.stdout.split() if "|" in line)
        for job_id in ids:
            self.states[job_id] = listed.get(job_id, "GONE").split()[0].upper()


def _die_with_parent() -> None:
    """In a worker, before exec: SIGTERM when the engine dies, even by SIGKILL (Linux prctl)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").replace("\r", "\n").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:300] if lines else ""


def _submitit_executor(executor: str, root: Path, slurm: SlurmOptions):
    import submitit

    cluster = "slurm" if executor == "slurm" else "local"
    ex = submitit.AutoExecutor(folder=root / ".submitit" / "%j", cluster=cluster)
    params = dict(timeout_min=slurm.time_min, cpus_per_task=slurm.cpus, name="rote")
    if cluster == "slurm":
        params.update(mem_gb=slurm.mem_gb, gpus_per_node=slurm.gpus,
                      **({"slurm_partition": slurm.partition} if slurm.partition else {}), **slurm.extra)
    ex.update_parameters(**params)
    return ex


# -- progress ---------------------------------------------------------------------------------------
class Display:
    """The overall display: runs done of total, which are training (with their step), time left; a tqdm
    bar on a terminal, else a line every 30 s."""

    def __init__(self, total: int, workers: int, root: Path, enabled: bool = True, estimator=None,
                 plain: bool = False):
        self.total, self.workers, self.root, self.enabled = total, workers, root, enabled
        self.estimator, self.last, self.bar = estimator, 0.0, None
        self.plain = plain or not sys.stderr.isatty()
        if enabled and not self.plain:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="runs", unit="run", file=sys.stderr, dynamic_ncols=True)

    def line(self, done: int, running: list[RunConfig], pending: list[RunConfig], failed: int) -> str:
        from ..runs import read_progress

        parts, left, pace = [], [estimate_seconds(c, self.estimator) for c in pending], []
        for config in running:
            info = read_progress(config, self.root) or {}
            step, estimate = info.get("step", 0), estimate_seconds(config, self.estimator)
            parts.append(f"{entry_name(config)[:12]} {step}/{config.train.steps}")
            left.append(estimate * max(0.0, 1 - step / config.train.steps))
            if step > 0 and info.get("seconds") and estimate > 0:  # observed time per step against the estimate
                pace.append(info["seconds"] / step / (estimate / config.train.steps))
        eta = makespan(left, self.workers) * (sorted(pace)[len(pace) // 2] if pace else 1.0)
        training = "; training " + ", ".join(parts) if parts else ""
        return (f"{done}/{self.total} runs done" + (f", {failed} failed" if failed else "") + training
                + f"; ~{fmt_seconds(eta)} left (estimate)")

    def update(self, outcomes: list[Outcome], running: dict, pending: list, force: bool = False) -> None:
        if not self.enabled or (not force and time.time() - self.last < (30.0 if self.plain else 2.0)):
            return
        self.last = time.time()
        text = self.line(len(outcomes), [c for j in running.values() for c in getattr(j, "configs", [j.config])],
                         [c for unit in pending for c in unit], sum(not o.ok for o in outcomes))
        if self.bar is None:
            _say(text)
        else:
            self.bar.n = len(outcomes)
            self.bar.set_postfix_str(text.split("; ", 1)[1] if "; " in text else "", refresh=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# -- the engine ---------------------------------------------------------------------------------------
STAGES_MAX = 4  # rounds of train_staged: X1's plan has two (the rate selection, then each width at its rate)


def train_staged(replan: Callable[[], list[RunConfig]], settings: EngineSettings | None = None, *,
                 root: Path | None = None, on_free: Callable[[int], None] | None = None) -> list[Outcome]:
    """Train a plan that depends on runs it trains (protocol 12.4: X1's width runs train at the rate their
    selection runs chose, known once those are trained): train what ``replan()`` lists, then plan again and
    train what it adds, until it adds nothing (or a run fails); the outcomes of every run trained."""
    outcomes: list[Outcome] = []
    planned: set[str] = set()
    for _ in range(STAGES_MAX):
        configs = replan()
        if {c.key for c in configs} <= planned or any(not o.ok for o in outcomes):
            break
        if planned:
            _say(f"the plan grew after training ({len({c.key for c in configs} - planned)} runs more: "
                 "X1's widths at the rates their selection chose)")
        planned |= {c.key for c in configs}
        outcomes += train_plan(configs, settings=settings, root=root, on_free=on_free)
    return outcomes


def training_order(configs: list[RunConfig], root: Path, estimator) -> list[RunConfig]:
    """The runs of ``configs`` not cached in ``root``, in the order the engine starts (and, stacked, groups) them:
    longest first by ``estimator``'s time left (close to the ideal makespan). ``rote plan`` shows its stacks from
    this order, so that they are the stacks that train."""
    from ..runs import status

    todo = [c for c in configs if status(c, root) != "cached"]
    return sorted(todo, key=lambda c: remaining_seconds(c, status(c, root), estimator), reverse=True)


def train_plan(configs: list[RunConfig], settings: EngineSettings | None = None, *, root: Path | None = None,
               on_free: Callable[[int], None] | None = None) -> list[Outcome]:
    """Train the runs of ``configs`` not cached in ``root`` (None: the run cache) as ``settings`` say;
    the outcomes of those it trained. ``on_free(n)``: once nothing is left to start and nothing failed,
    told at every poll how many local slots are free (``rote book`` executes chapters there)."""
    settings = settings or EngineSettings()
    executor, device = settings.executor, settings.device
    check_executor(executor)
    from ..runs import runs_root, status
    from .timings import Estimator

    root = Path(root or runs_root())
    root.mkdir(parents=True, exist_ok=True)
    unique = list({c.key: c for c in configs}.values())
    if all(status(c, root) == "cached" for c in unique):
        return []
    # probes run before any worker, on an idle core
    estimator = Estimator(root, workers=executor == "slurm", device=device)
    todo = training_order(unique, root, estimator)
    # Slurm schedules the jobs: all are submitted at once unless --workers caps them; locally, one per core
    slots = settings.workers or (len(todo) if executor == "slurm" else default_workers())
    sub = _submitit_executor(executor, root, settings.slurm or SlurmOptions()) if executor != "local" else None
    queue = _SlurmQueue() if executor == "slurm" else None
    units = _units(todo, settings, slots)
    _say(f"training {len(todo)} of {len(unique)} runs ({executor}, {min(slots, len(units))} at a time"
         f"{_stacks_text(units)}); {estimator.summary(todo)}")
    display = Display(len(todo), min(slots, len(todo)), root, enabled=settings.progress, estimator=estimator,
                      plain=settings.plain_progress)
    pending, running, outcomes, started = list(units), {}, [], {}
    try:
        while pending or running:
            while pending and len(running) < slots:
                unit = pending.pop(0)
                config = unit[0]
                try:
                    running[config.key] = (_StackJob(unit, root, device) if len(unit) > 1 else
                                           _LocalJob(config, root, device) if sub is None
                                           else _SubmititJob(sub, config, root, device, queue))
                    started[config.key] = time.time()
                except Exception as err:  # e.g. sbatch refused the job: that run fails, the others go on
                    outcomes += [Outcome(c, False, 0.0, f"could not start: {type(err).__name__}: {err}") for c in unit]
                    _say(f"run {entry_name(config)} could not start: {err}")
            _collect(running, started, outcomes, display, pending)
            display.update(outcomes, running, pending)
            if on_free is not None and not pending and sub is None and all(o.ok for o in outcomes):
                on_free(max(0, slots - len(running)))
            time.sleep(POLL_S)
    except BaseException:
        _stop_all(running)
        display.close()
        _say(f"stopped {len(running)} running worker(s); unfinished runs resume from their last checkpoint")
        raise
    display.close()
    return outcomes


def _units(todo: list[RunConfig], settings: EngineSettings, slots: int) -> list[list[RunConfig]]:
    """What each worker trains: one run, or with stacking (local executor) a stack of runs of one shape,
    split on the CPU so that every worker has one (a process a core), not on a GPU (one process a stack)."""
    from ..model import pick_device
    from ..stack import group_stacks, stack_by_default

    stacked = settings.stack if settings.stack is not None else stack_by_default(settings.device)
    if not stacked or settings.executor != "local":
        return [[c] for c in todo]
    return group_stacks(todo, slots if pick_device(settings.device).type == "cpu" else 1)


def _stacks_text(units: list[list[RunConfig]]) -> str:
    stacks = [len(u) for u in units if len(u) > 1]
    return f"; {len(stacks)} stack(s) of {', '.join(map(str, stacks))} runs" if stacks else ""


def _collect(running: dict, started: dict, outcomes: list, display: Display, pending: list) -> None:
    """Move each finished job of ``running`` to ``outcomes`` (saying so where it failed)."""
    for key, job in list(running.items()):
        result = job.poll()
        if result is None:
            continue
        ok, error = result
        del running[key]
        outcomes += [Outcome(c, ok, time.time() - started[key], error, str(job.log))
                     for c in getattr(job, "configs", [job.config])]
        if not ok:
            _say(f"run {entry_name(job.config)} FAILED: {error} (log: {job.log}); "
                 "its checkpoints stay in .partial")
        display.update(outcomes, running, pending, force=True)


def _stop_all(running: dict) -> None:
    """Interrupt every running job, then kill those that do not stop within 15 s."""
    for job in running.values():
        job.stop(signal.SIGINT)
    for job in running.values():
        if not job.wait(15):
            job.stop(signal.SIGKILL)
            job.wait(5)


def report_failures(outcomes: list[Outcome]) -> int:
    """Name the failed runs on stderr; 1 if any failed, else 0."""
    failed = [o for o in outcomes if not o.ok]
    for o in failed:
        _say(f"FAILED {o.name} ({o.config.task}): {o.error}; log {o.log}")
    if failed:
        _say(f"{len(failed)} of {len(outcomes)} runs failed: {', '.join(o.name for o in failed)}; "
             f"rerun the command to resume them")
    return 1 if failed else 0


def sigterm_as_interrupt() -> None:
    """SIGTERM (a scheduler's or CI's timeout) stops the work like Ctrl-C (in the main thread)."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGTERM, handler)


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6) or sys.argv[1] not in ("worker", "stack"):
        print("usage: python -m rote.build.engine worker|stack ROOT CONFIG_JSON FINGERPRINT [DEVICE]", file=sys.stderr)
        sys.exit(2)
    sigterm_as_interrupt()
    sys.exit(_worker_main(*sys.argv[2:], body=train_stack_job if sys.argv[1] == "stack" else None))

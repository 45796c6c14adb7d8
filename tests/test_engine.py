"""The run engine (rote.build.engine): same run on every executor, concurrent writers, faults, bad input,
and cache safety (the code fingerprint in the key)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from interrupt import interruptible
from planted import recording_job
import rote.config as config_module
from rote.build import engine
from rote.config import fingerprint_sources, make_config
from rote.plan import plan, with_seed
from rote.runs import entry_name, get_or_train, lookup, read_progress, status, verify

SMOKE = dict(steps=40, eval_every=10, checkpoint_every=20)


def _cli(*args, root, env=None, **kw):
    full = {**os.environ, "ROTE_RUNS": str(root), "ROTE_PLAIN_PROGRESS": "1", **(env or {})}
    full.pop("ROTE_SEEDS", None)
    return subprocess.run([sys.executable, "-m", "rote", *args], env=full, capture_output=True, text=True, **kw)


def _weights(run):
    return torch.load(run.path / "final.pt", map_location="cpu", weights_only=True)["state_dict"]


def _same_run(a, b):
    cols = [c for c in a.metrics.columns if c != "seconds"]
    pd.testing.assert_frame_equal(a.metrics[cols], b.metrics[cols], check_exact=True)
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name


@pytest.mark.slow
def test_a_run_is_identical_alone_in_the_pool_and_on_submitit(tmp_path):
    """One thread per run: alone (in this process), in a pool of 2 local workers beside another run,
    and as a submitit job, the same configuration gives identical metrics and weights."""
    target = make_config("fda", "smoke", **SMOKE)
    other = make_config("thr", "smoke", **SMOKE)
    torch.set_num_threads(2)  # training must pin its own thread count whatever the caller set
    alone = get_or_train(target, root=tmp_path / "alone", progress=False, device="cpu")

    outcomes = engine.train_plan([target, other], engine.EngineSettings(workers=2, progress=False, device="cpu"),
                                 root=tmp_path / "pool")
    assert sorted((o.config.task, o.ok) for o in outcomes) == [("fda", True), ("thr", True)]
    pooled = lookup(target, tmp_path / "pool")

    settings = engine.EngineSettings(workers=1, executor="submitit-local", progress=False, device="cpu")
    outcomes = engine.train_plan([target], settings, root=tmp_path / "submitit")
    assert [o.ok for o in outcomes] == [True], outcomes
    distributed = lookup(target, tmp_path / "submitit")

    assert pooled is not None and distributed is not None
    assert json.loads((pooled.path / "manifest.json").read_text())["threads"] == 1
    _same_run(alone, pooled)
    _same_run(alone, distributed)
    # a second pass finds everything cached and trains nothing
    assert engine.train_plan([target, other], engine.EngineSettings(workers=2, progress=False),
                             root=tmp_path / "pool") == []


_WRITER = """
import json, sys
from pathlib import Path
from rote.config import make_config
from rote.runs import get_or_train
run = get_or_train(make_config("thr", "smoke", steps=300, eval_every=50, checkpoint_every=100),
                   root=Path(sys.argv[1]), progress=False, device="cpu")
print(json.dumps({"cached": run.cached, "path": str(run.path)}))
"""


@pytest.mark.slow
def test_concurrent_writers_from_separate_processes(tmp_path):
    """Three processes ask for the same run at once: one trains, the others wait and load it; the
    entry only ever appears whole (every time it is seen, it verifies)."""
    config = make_config("thr", "smoke", steps=300, eval_every=50, checkpoint_every=100)
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    entry, seen_whole = tmp_path / entry_name(config), 0
    while any(p.poll() is None for p in procs):
        if entry.exists():
            verify(entry, config)  # raises if anything is missing or half-written
            seen_whole += 1
        time.sleep(0.05)
    outs = [json.loads(p.stdout.read()) for p in procs]
    assert all(p.returncode == 0 for p in procs), [p.stderr.read() for p in procs]
    assert sorted(o["cached"] for o in outs) == [False, True, True]
    assert {o["path"] for o in outs} == {str(entry)}
    verify(entry, config)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("thr-")] == [entry.name]
    assert not list((tmp_path / ".partial").iterdir())
    assert not list(tmp_path.rglob("*.tmp"))


def _wait_for(predicate, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


@pytest.mark.slow
def test_killed_worker_is_named_resumable_and_the_others_finish(tmp_path):
    """`rote train --seeds 2 --workers 2`: the worker of seed 0 is killed (as by the OOM killer); seed 1
    finishes, the command names seed 0's run and exits 1, and rerunning resumes it from its checkpoint."""
    params = dict(steps=800, eval_every=25, checkpoint_every=50)
    args = ["train", "--task", "fda", "--profile", "smoke", "--seeds", "2", "--workers", "2", "--quiet"]
    for k, v in params.items():
        args += ["-p", k, str(v)]
    victim, survivor = (with_seed(make_config("fda", "smoke", **params), s) for s in (0, 1))
    env = {**os.environ, "ROTE_RUNS": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "rote", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    info = _wait_for(lambda: (p := read_progress(victim, tmp_path)) and p["step"] >= 150 and p)
    os.kill(info["pid"], signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert entry_name(victim) in err and "FAILED" in err and "SIGKILL" in err
    assert entry_name(survivor) not in err
    assert lookup(survivor, tmp_path) is not None and lookup(victim, tmp_path) is None
    assert status(victim, tmp_path).startswith("partial ")
    assert int(status(victim, tmp_path).split()[1]) >= 100
    lines = [json.loads(line) for line in out.splitlines()]
    assert {line["key"]: line.get("failed", False) for line in lines} == {victim.key: True, survivor.key: False}

    again = _cli(*args, root=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "training 1 of 2 runs" in again.stderr
    log = (tmp_path / ".logs" / f"{entry_name(victim)}.log").read_text()
    assert "resuming" in log
    assert lookup(victim, tmp_path) is not None


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 130), (signal.SIGKILL, -9)])
def test_ctrl_c_stops_every_worker_and_leaves_nothing_half_written(tmp_path, sig, code):
    """Ctrl-C, or SIGTERM (a scheduler's or CI's timeout), stops the workers and exits 130; an engine
    killed outright takes its workers with it."""
    params = ["-p", "steps", "100000", "-p", "eval_every", "25", "-p", "checkpoint_every", "50"]
    env = {**os.environ, "ROTE_RUNS": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "rote", "train", "--task", "thr", "--profile", "smoke",
                             "--seeds", "2", "--workers", "2", "--quiet", *params],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    configs = [with_seed(make_config("thr", "smoke", steps=100000, eval_every=25, checkpoint_every=50), s)
               for s in (0, 1)]
    try:
        infos = _wait_for(lambda: all((read_progress(c, tmp_path) or {}).get("step", 0) >= 100 for c in configs)
                          and [read_progress(c, tmp_path) for c in configs])
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:  # a failed wait must not leave a 100,000-step training running (its workers die with it)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err

    def gone(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    _wait_for(lambda: all(gone(info["pid"]) for info in infos), timeout=60)  # every worker is gone
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("thr-")]  # nothing in the cache
    for c in configs:
        assert status(c, tmp_path).startswith("partial ")  # each resumes from its last checkpoint


@pytest.mark.parametrize("args, message", [
    (["train", "--task", "xyz", "--workers", "2"], "unknown task"),
    (["train", "--plan", "--profile", "huge"], "unknown profile"),
    (["train", "--task", "fda", "--profile", "smoke", "--workers", "0"], "--workers must be >= 1"),
    (["train", "--task", "fda", "--profile", "smoke", "--seeds", "0"], "--seeds must be >= 1"),
    (["train", "--task", "fda", "--profile", "smoke", "--executor", "slurm"], "sbatch is not on PATH"),
    (["train", "--task", "fda", "--profile", "smoke", "--executor", "ray"], "unknown executor"),
    (["train", "--task", "fda", "--profile", "smoke", "--seeds", "2", "-p", "model_seed", "3"], "not both"),
    (["train", "--plan", "--profile", "smoke", "-p", "model_seed", "3"], "use seeds"),
    (["book", "--profile", "smoke", "--workers", "0"], "--workers must be >= 1"),
    (["book", "--profile", "smoke", "--executor", "slurm"], "sbatch is not on PATH"),
    (["plan", "--profile", "smoke", "--workers", "0"], "--workers must be >= 1"),
    (["plan", "--profile", "nope"], "unknown profile"),
])
def test_bad_input_exits_2_with_one_line_before_anything_runs(tmp_path, args, message):
    path = str(Path(sys.executable).parent)  # no sbatch here, even where Slurm is installed (test_slurm.py)
    assert not any(Path(d, "sbatch").exists() for d in path.split(os.pathsep))
    result = _cli(*args, root=tmp_path / "runs", env={"PATH": path})
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "runs").exists()


def test_worker_refuses_when_the_code_changed(tmp_path):
    config = make_config("fda", "smoke", **SMOKE)
    with pytest.raises(engine.CodeChanged, match="changed since the plan"):
        engine.train_one(config.to_dict(), str(tmp_path), "cpu", fingerprint="000000000000")
    assert not tmp_path.joinpath(entry_name(config)).exists()


def test_a_real_worker_refuses_when_the_code_changed(tmp_path, monkeypatch, capsys):
    """The plan's fingerprint reaches the worker process, which exits 3 with CodeChanged's message;
    the engine names the run with that line and nothing is trained."""
    config = make_config("fda", "smoke", **SMOKE)
    monkeypatch.setattr(engine, "code_fingerprint", lambda: "000000000000")  # the planner's code "differs"
    (outcome,) = engine.train_plan([config], engine.EngineSettings(workers=1, progress=False, device="cpu"),
                                   root=tmp_path)
    assert not outcome.ok
    assert outcome.error.startswith("exit code 3; last log line: error: the training code changed since the plan")
    assert engine.report_failures([outcome]) == 1
    err = capsys.readouterr().err
    assert f"FAILED {entry_name(config)}" in err and "changed since the plan" in err
    assert not tmp_path.joinpath(entry_name(config)).exists() and not (tmp_path / ".partial").exists()


def test_a_worker_that_raises_is_named_with_its_last_log_line(tmp_path, capsys):
    """A worker that fails with an exception (not a signal): exit code 1, and the exception's line from
    its log in the engine's report."""
    config = make_config("fda", "smoke", **SMOKE)
    (tmp_path / ".partial").write_text("a file where training needs a folder")
    (outcome,) = engine.train_plan([config], engine.EngineSettings(workers=1, progress=False, device="cpu"),
                                   root=tmp_path)
    assert not outcome.ok and outcome.error.startswith("exit code 1; last log line: NotADirectoryError")
    assert Path(outcome.log) == tmp_path / ".logs" / f"{entry_name(config)}.log"
    assert "Traceback" in Path(outcome.log).read_text()
    assert engine.report_failures([outcome]) == 1
    err = capsys.readouterr().err
    assert f"FAILED {entry_name(config)}" in err and "NotADirectoryError" in err
    assert lookup(config, tmp_path) is None


# -- cache safety -------------------------------------------------------------------------------------
@pytest.fixture
def package_copy(tmp_path):
    src = Path(config_module.__file__).parent
    dst = tmp_path / "rote"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _digest(package):
    return json.dumps(fingerprint_sources(package), sort_keys=True)


def test_fingerprint_covers_the_training_sources(package_copy):
    files = set(fingerprint_sources(package_copy))
    assert {"train.py", "config.py", "model.py", "tasks/__init__.py", "tasks/fda.py", "tasks/thr.py",
            "tasks/base.py"} <= files
    assert "runs.py" not in files and "cli.py" not in files and "claims.py" not in files


@pytest.mark.parametrize("file, edit, changes", [
    ("model.py", lambda s: s + "\nEXTRA = 1\n", True),
    ("tasks/fda.py", lambda s: s.replace("def build(", "def build_(", 1), True),
    ("train.py", lambda s: s.replace("TRAIN_THREADS = 1", "TRAIN_THREADS = 2", 1), True),
    ("config.py", lambda s: s.replace("warmup_steps: int = 100", "warmup_steps: int = 99", 1), True),
    ("tasks/thr.py", lambda s: s + "\n# a comment only\n\n\n", False),
    ("model.py", lambda s: s.replace('"""', '"""Reworded docstring. ', 1), False),
    ("config.py", lambda s: s.replace('n_train=400, n_test=100', 'n_train=401, n_test=100', 1), False),  # profile
    ("runs.py", lambda s: s + "\nEXTRA = 1\n", False),  # storage, not training
])
def test_a_change_to_a_training_source_changes_the_fingerprint(package_copy, file, edit, changes):
    before = _digest(package_copy)
    path = package_copy / file
    text = path.read_text()
    assert edit(text) != text, "the edit must apply to the current source"
    path.write_text(edit(text))
    assert (_digest(package_copy) != before) is changes


def test_plan_order_is_longest_first_in_the_pool(tmp_path, monkeypatch):
    """The pool starts the longest runs first (the greedy schedule that finishes soonest)."""
    started = []

    monkeypatch.setattr(engine, "_LocalJob", recording_job(started))
    configs = plan("smoke", [0]) + [make_config("fda", "quick")]
    engine.train_plan(configs, engine.EngineSettings(workers=1, progress=False), root=tmp_path)
    assert started[0] == configs[-1] and len(started) == len(configs)


def test_slurm_jobs_get_the_requested_resources(tmp_path, monkeypatch):
    """With Slurm's commands on PATH (stand-ins here), the sbatch script carries the options."""
    for name in ("sbatch", "srun"):
        (tmp_path / name).write_text("#!/bin/sh\nexit 1\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    engine.check_executor("slurm")  # sbatch found: no error
    import submitit.slurm.slurm as slurm

    ex = engine._submitit_executor("slurm", tmp_path / "runs", engine.SlurmOptions(
        partition="gpu", time_min=30, mem_gb=4, gpus=1))
    script = slurm._make_sbatch_string(command="python -m x", folder=str(tmp_path), **ex._executor.parameters)
    for line in ("--partition=gpu", "--time=30", "--mem=4GB", "--gpus-per-node=1", "--cpus-per-task=1"):
        assert f"#SBATCH {line}" in script


def test_a_run_that_cannot_start_fails_alone(tmp_path, monkeypatch):
    """A job the scheduler refuses is a failed run, named; the other runs still train."""
    real = engine._LocalJob
    configs = plan("smoke", [0], tasks=["thr"])

    def refuse_the_twin(config, root, device):
        if config.data.noise_ratio == 0:
            raise RuntimeError("sbatch: error: invalid partition")
        return real(config, root, device)

    monkeypatch.setattr(engine, "_LocalJob", refuse_the_twin)
    outcomes = engine.train_plan(configs, engine.EngineSettings(workers=2, progress=False, device="cpu"),
                                 root=tmp_path)
    assert {(o.config.data.noise_ratio, o.ok) for o in outcomes} == {(0.1, True), (0.0, False)}
    assert "invalid partition" in [o for o in outcomes if not o.ok][0].error
    assert engine.report_failures(outcomes) == 1


def test_a_plan_that_grows_after_training_is_trained_in_stages(monkeypatch):
    """Protocol 12.4: X1's width runs are planned at the rate their selection runs chose, known once those are
    trained, so `rote train --plan --x1` and `rote book --x1` plan again after training and train what was
    added, until the plan stops growing (train_staged)."""
    selection, width = make_config("fda", "smoke"), make_config("fda", "smoke", d_model=64)
    trained: list[list[str]] = []
    monkeypatch.setattr(engine, "train_plan", lambda configs, **kw: trained.append([c.key for c in configs]) or
                        [engine.Outcome(c, True, 1.0) for c in configs])
    plans = iter([[selection], [selection, width], [selection, width]])
    outcomes = engine.train_staged(lambda: next(plans))
    assert trained == [[selection.key], [selection.key, width.key]]  # the cached selection is skipped in train_plan
    assert [o.config.key for o in outcomes] == [selection.key, selection.key, width.key]


def test_a_staged_plan_stops_at_a_failed_run(monkeypatch):
    first, second = make_config("fda", "smoke"), make_config("fda", "smoke", d_model=64)
    calls = []
    monkeypatch.setattr(engine, "train_plan", lambda configs, **kw: calls.append(configs) or
                        [engine.Outcome(configs[0], False, 1.0, "exit code 1")])
    plans = iter([[first], [first, second]])
    assert [o.ok for o in engine.train_staged(lambda: next(plans))] == [False] and len(calls) == 1

"""``--executor slurm`` through a real Slurm: sbatch, squeue, scancel on a one-node cluster that the
``slurm_cluster`` fixture (tests/slurm_cluster.py) starts in a temporary folder.

Without root or Slurm's packages the module is skipped with the reason (``ROTE_REQUIRE_SLURM=1``, as in
CI, turns that into a failure). The cluster has no accounting storage, so ``sacct`` fails there as on
many real clusters: every test puts a ``sacct`` in front of the real one on PATH that records its calls,
and checks that the engine never needed it and printed nothing about it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

from rote.build import engine
from rote.config import code_fingerprint, make_config
from rote.plan import plan, with_seed
from rote.runs import entry_name, lookup, read_progress, status
from interrupt import interruptible  # noqa: E402
from slurm_cluster import slurm_cluster  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def sacct_spy(tmp_path):
    """A ``sacct`` first on PATH that records each call and fails like sacct without accounting storage."""
    bin_dir, calls = tmp_path / "spy-bin", tmp_path / "sacct-calls"
    bin_dir.mkdir()
    (bin_dir / "sacct").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n'
                                   'echo "Slurm accounting storage is disabled" >&2\nexit 1\n')
    (bin_dir / "sacct").chmod(0o755)
    return bin_dir, calls


def _env(cluster, spy, root: Path, **extra) -> dict:
    env = {**os.environ, "SLURM_CONF": str(cluster.conf), "PATH": f"{spy[0]}{os.pathsep}{os.environ['PATH']}",
           "ROTE_RUNS": str(root), "ROTE_RESULTS": str(root.parent / "results"), "ROTE_PLAIN_PROGRESS": "1",
           **extra}
    env.pop("ROTE_SEEDS", None)
    return env


def _rote(*args, env, **kw):
    return subprocess.run([sys.executable, "-m", "rote", *args], env=env, capture_output=True, text=True, **kw)


def _no_sacct_noise(spy, stderr: str) -> None:
    assert not spy[1].exists(), f"sacct was called: {spy[1].read_text()}"
    assert "sacct" not in stderr and "Bypassing" not in stderr, stderr


def _job_ids(root: Path) -> set[str]:
    """The Slurm job ids that submitit submitted for this cache (one folder each)."""
    folder = root / ".submitit"
    return {p.name for p in folder.iterdir() if p.name.isdigit()} if folder.exists() else set()


def _ended(cluster, jobs: set[str]) -> dict[str, str]:
    """The final states of ``jobs`` (a job may still be exiting when its result is already written)."""
    return _wait_for(lambda: (states := {j: cluster.jobs().get(j) for j in jobs}) and
                     all(s in engine.SLURM_ENDED for s in states.values()) and states, 60, f"jobs {jobs} to end")


def _same_run(a, b) -> None:
    cols = [c for c in a.metrics.columns if c != "seconds"]
    pd.testing.assert_frame_equal(a.metrics[cols], b.metrics[cols], check_exact=True)
    wa = torch.load(a.path / "final.pt", map_location="cpu", weights_only=True)["state_dict"]
    wb = torch.load(b.path / "final.pt", map_location="cpu", weights_only=True)["state_dict"]
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_the_smoke_plan_through_sbatch_equals_the_local_pool(slurm_cluster, sacct_spy, tmp_path):
    """`rote train --plan --profile smoke --seeds 1 --executor slurm`: one Slurm job per run, all COMPLETED, and
    every run identical (metrics and weights) to the same run trained by the local pool."""
    configs = plan("smoke", [0])
    root = tmp_path / "slurm-runs"
    result = _rote("train", "--plan", "--profile", "smoke", "--seeds", "1", "--executor", "slurm", "--partition",
                   slurm_cluster.partition, "--device", "cpu", "--quiet",
                   env=_env(slurm_cluster, sacct_spy, root), timeout=600)
    assert result.returncode == 0, result.stderr + slurm_cluster.logs()
    assert f"training {len(configs)} of {len(configs)} runs (slurm" in result.stderr
    _no_sacct_noise(sacct_spy, result.stderr)

    jobs = _job_ids(root)
    assert len(jobs) == len(configs)
    assert set(_ended(slurm_cluster, jobs).values()) == {"COMPLETED"}  # Slurm ran them, and they ended well

    pool = engine.train_plan(configs, engine.EngineSettings(workers=2, progress=False, device="cpu"),
                             root=tmp_path / "pool")
    assert len(pool) == len(configs) and all(o.ok for o in pool), pool
    for config in configs:
        on_slurm, local = lookup(config, root), lookup(config, tmp_path / "pool")
        assert on_slurm is not None and local is not None, entry_name(config)
        _same_run(on_slurm, local)
    summaries = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(s["key"] for s in summaries) == sorted(c.key for c in configs)


def test_a_job_cancelled_with_scancel_is_named_and_the_rerun_resumes_it(slurm_cluster, sacct_spy, tmp_path):
    """`rote train --seeds 2` on Slurm; the job of seed 0 is cancelled mid-run with scancel. Seed 1's job
    finishes, the command names seed 0's run (and its job, CANCELLED) and exits 1; a rerun submits one
    job, which resumes seed 0 from its last checkpoint."""
    # long enough that seed 0 cannot finish between reaching step 100 and the scancel (on an idle machine a
    # smoke run does ~200 steps/s: 1,000 steps raced the cancel and sometimes won)
    params = dict(steps=5000, eval_every=25, checkpoint_every=50)
    args = ["train", "--task", "fda", "--profile", "smoke", "--seeds", "2", "--workers", "2", "--executor",
            "slurm", "--partition", slurm_cluster.partition, "--device", "cpu", "--quiet"]
    for k, v in params.items():
        args += ["-p", k, str(v)]
    victim, survivor = (with_seed(make_config("fda", "smoke", **params), s) for s in (0, 1))
    root = tmp_path / "runs"
    env = _env(slurm_cluster, sacct_spy, root)
    proc = subprocess.Popen([sys.executable, "-m", "rote", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        info = _wait_for(lambda: (p := read_progress(victim, root)) and p["step"] >= 100 and p, 300,
                         "seed 0 to reach step 100")
        pidinfo = slurm_cluster.run("scontrol", "pidinfo", str(info["pid"])).stdout
        job = re.search(r"JobId=(\d+)", pidinfo).group(1)  # the Slurm job that holds the training process
        assert slurm_cluster.run("scancel", job).returncode == 0
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert _ended(slurm_cluster, {job}) == {job: "CANCELLED"}
    failed = [line for line in err.splitlines() if "FAILED" in line]
    assert failed and all(entry_name(victim) in line for line in failed), err
    assert any(f"job {job} ended CANCELLED" in line for line in failed), err
    assert entry_name(survivor) not in "\n".join(failed)
    assert lookup(survivor, root) is not None and lookup(victim, root) is None
    assert status(victim, root).startswith("partial ")
    checkpoint = int(status(victim, root).split()[1])
    assert 100 <= checkpoint < params["steps"]
    lines = [json.loads(line) for line in out.splitlines()]
    assert {line["key"]: line.get("failed", False) for line in lines} == {victim.key: True, survivor.key: False}
    _no_sacct_noise(sacct_spy, err)

    before = _job_ids(root)
    again = _rote(*args, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "training 1 of 2 runs" in again.stderr
    (resumed,) = _job_ids(root) - before
    assert _ended(slurm_cluster, {resumed}) == {resumed: "COMPLETED"}
    logs = "".join(p.read_text(errors="replace") for p in (root / ".submitit" / resumed).glob("*_log.*"))
    assert f"resuming {entry_name(victim)} from step {checkpoint}" in logs, logs[-2000:]
    assert lookup(victim, root) is not None
    _no_sacct_noise(sacct_spy, again.stderr)


def test_ctrl_c_cancels_every_job(slurm_cluster, sacct_spy, tmp_path):
    """Ctrl-C on `rote train --executor slurm` cancels its running jobs with scancel and exits 130; the
    cache gains nothing and each run keeps its checkpoints to resume from."""
    params = ["-p", "steps", "100000", "-p", "eval_every", "25", "-p", "checkpoint_every", "50"]
    configs = [with_seed(make_config("thr", "smoke", steps=100000, eval_every=25, checkpoint_every=50), s)
               for s in (0, 1)]
    root = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "rote", "train", "--task", "thr", "--profile", "smoke",
                             "--seeds", "2", "--executor", "slurm", "--partition", slurm_cluster.partition,
                             "--device", "cpu", "--quiet", *params], env=_env(slurm_cluster, sacct_spy, root),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        _wait_for(lambda: all((read_progress(c, root) or {}).get("step", 0) >= 100 for c in configs), 300,
                  "both runs to reach step 100")
        jobs = _job_ids(root)
        assert len(jobs) == 2 and {slurm_cluster.jobs().get(j) for j in jobs} == {"RUNNING"}
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:  # a failed test must not leave its 100,000-step jobs running for the rest of the session
        if proc.poll() is None:
            proc.kill()
            _, err = proc.communicate()
        left = [j for j in _job_ids(root) if slurm_cluster.jobs().get(j) not in engine.SLURM_ENDED]
        if left:
            slurm_cluster.run("scancel", *left)
    assert proc.returncode == 130, err + slurm_cluster.logs()
    assert set(_ended(slurm_cluster, jobs).values()) == {"CANCELLED"}
    assert not [p for p in root.iterdir() if p.name.startswith("thr-")]
    for c in configs:
        assert status(c, root).startswith("partial ")
    _no_sacct_noise(sacct_spy, err)


def test_a_job_running_other_code_refuses_to_train(slurm_cluster, sacct_spy, tmp_path, monkeypatch, capfd):
    """The job runs another checkout (it starts in a copy of the package whose train.py differs, as
    when a node sees other sources): its code fingerprint differs from the plan's, so it trains nothing
    and the run fails, named."""
    copy = tmp_path / "other-checkout"
    shutil.copytree(ROOT / "rote", copy / "rote", ignore=shutil.ignore_patterns("__pycache__"))
    train_py = copy / "rote" / "train.py"
    train_py.write_text(train_py.read_text() + "\nA_CHANGE_TO_TRAINING = 1\n")
    env = _env(slurm_cluster, sacct_spy, tmp_path / "runs")
    for key in ("SLURM_CONF", "PATH", "ROTE_RUNS"):
        monkeypatch.setenv(key, env[key])
    config = make_config("fda", "smoke")
    options = engine.SlurmOptions(partition=slurm_cluster.partition, mem_gb=1,
                                  extra={"slurm_setup": [f"cd {copy}", f"export PYTHONPATH={copy}"]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = engine.EngineSettings(executor="slurm", slurm=options, progress=False, device="cpu")
        outcomes = engine.train_plan([config], settings, root=tmp_path / "runs")
    assert not [w for w in caught if "submitit" in w.filename or "sacct" in str(w.message)], caught
    assert [o.ok for o in outcomes] == [False], outcomes
    error = outcomes[0].error
    assert "CodeChanged" in error and "changed since the plan" in error, error
    other = re.search(rf"fingerprint {code_fingerprint()} -> ([0-9a-f]{{12}})", error)
    assert other and other.group(1) != code_fingerprint(), error
    (job,) = _job_ids(tmp_path / "runs")
    assert str(copy / "rote") in (tmp_path / "runs" / ".submitit" / job / f"{job}_0_log.err").read_text()
    assert _ended(slurm_cluster, {job}) == {job: "FAILED"}  # submitit re-raises the job's exception
    assert lookup(config, tmp_path / "runs") is None and status(config, tmp_path / "runs") == "missing"
    assert engine.report_failures(outcomes) == 1
    _no_sacct_noise(sacct_spy, capfd.readouterr().err)


def test_the_queue_knows_running_finished_and_forgotten_jobs(slurm_cluster, monkeypatch):
    """The engine's job states come from squeue: a running job, a finished one (while slurmctld keeps it)
    and one it no longer knows ("GONE", also when it is the only id asked about, where squeue fails)."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    submit = slurm_cluster.run("sbatch", "--parsable", "-p", slurm_cluster.partition, "-o", "/dev/null",
                               "--wrap", "sleep 30")
    running = submit.stdout.strip()
    assert submit.returncode == 0 and running.isdigit(), submit.stderr
    done = slurm_cluster.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true").stdout.strip()
    try:
        _ended(slurm_cluster, {done})
        queue = engine._SlurmQueue()
        assert queue.state("999999") == "GONE"
        assert _wait_for(lambda: queue.state(running, max_age=0) == "RUNNING", 30, "the job to run")
        assert queue.state(done, max_age=0) == "COMPLETED"
        assert queue.state("999998", max_age=0) == "GONE" and queue.state(running) == "RUNNING"
    finally:
        slurm_cluster.run("scancel", running)
    assert _ended(slurm_cluster, {running}) == {running: "CANCELLED"}
    assert queue.state(running, max_age=0) == "CANCELLED"


def test_rote_book_on_slurm_trains_through_sbatch_then_executes_the_chapter(slurm_cluster, sacct_spy, tmp_path):
    """`rote book --executor slurm --chapter learning_dynamics` (one chapter, to keep the test short): the
    plan's runs train as Slurm jobs, then the chapter executes and only loads them. It runs in a copy of
    the project, so that its executed pages go to a temporary _build."""
    project = tmp_path / "project"
    for name in ("rote", "book"):
        shutil.copytree(ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__", "_build"))
    for name in ("_toc.yml", "_config.yml"):
        shutil.copy(ROOT / name, project / name)
    root = tmp_path / "runs"
    env = _env(slurm_cluster, sacct_spy, root, PYTHONPATH=str(project))
    result = _rote("book", "--profile", "smoke", "--seeds", "1", "--executor", "slurm", "--partition",
                   slurm_cluster.partition, "--chapter", "learning_dynamics", "--no-render", env=env, cwd=project,
                   timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    configs = plan("smoke", [0])  # the chapter's runs only: no X1 grid (issue 28)
    err = result.stderr
    trained = err.index(f"training {len(configs)} of {len(configs)} runs (slurm")
    executed = err.index("executing learning_dynamics (smoke)")
    assert trained < executed and "learning_dynamics: ok" in err
    jobs = _job_ids(root)
    assert len(jobs) == len(configs) and set(_ended(slurm_cluster, jobs).values()) == {"COMPLETED"}
    assert all(lookup(c, root) is not None for c in configs)
    assert list((project / "_build" / "executed" / "smoke").glob("learning_dynamics*/*.ipynb"))
    _no_sacct_noise(sacct_spy, err)

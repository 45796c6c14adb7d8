"""Stacked training in the engine and the command line: `rote train --plan --stack`, `rote plan --stack`."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from interrupt import interruptible
from rote.build import engine
from rote.config import make_config
from rote.plan import plan, with_seed
from rote.runs import lookup, status
from rote.stack import group_stacks


def test_the_engine_trains_a_plan_in_stacks_each_run_stored(tmp_path):
    configs = plan("smoke", [0], tasks=["fda"])
    settings = engine.EngineSettings(workers=1, progress=False, device="cpu", stack=True)
    outcomes = engine.train_plan(configs, settings, root=tmp_path)
    assert sorted(o.config.key for o in outcomes) == sorted(c.key for c in configs) and all(o.ok for o in outcomes)
    for config in configs:
        manifest = json.loads((tmp_path / f"fda-{config.key}" / "manifest.json").read_text())
        assert manifest["stacked"] == len(configs) > 1
    assert engine.train_plan(configs, settings, root=tmp_path) == []  # each run found on its own


def test_stacks_are_the_default_on_cuda_only_and_split_for_cpu_workers():
    configs = plan("smoke", [0, 1], tasks=["fda"])
    cpu = engine._units(configs, engine.EngineSettings(device="cpu"), slots=2)
    assert cpu == [[c] for c in configs]  # solo on the CPU unless asked
    asked = engine._units(configs, engine.EngineSettings(device="cpu", stack=True), slots=2)
    assert sorted(map(len, asked)) == [len(configs) // 2, len(configs) - len(configs) // 2]
    assert engine._units(configs, engine.EngineSettings(device="cuda"), slots=16) == [configs]
    assert engine._units(configs, engine.EngineSettings(device="cuda", stack=False), slots=16) == [[c] for c in configs]


def _cli(*args, root):
    env = {**os.environ, "ROTE_RUNS": str(root)}
    return subprocess.run([sys.executable, "-m", "rote", *args], env=env, capture_output=True, text=True)


def test_plan_shows_the_stacks(tmp_path):
    result = _cli("plan", "--profile", "smoke", "--seeds", "1", "--stack", "--workers", "1", root=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "stack" in result.stdout.splitlines()[0] and "s1 (" in result.stdout and "s2 (" in result.stdout
    assert "stacked training: the 5 missing runs in 2 stack(s)" in result.stdout
    plain = _cli("plan", "--profile", "smoke", "--seeds", "1", "--no-stack", root=tmp_path)
    assert plain.returncode == 0 and "s1 (" not in plain.stdout


def test_the_plan_shows_the_stacks_the_engine_trains(tmp_path, monkeypatch):
    from rote.build import cli

    configs = plan("smoke", [0, 1], tasks=["fda"])  # one shape; the stacks are halves of the training order
    cost = {c.key: (i % 2, i) for i, c in enumerate(configs)}  # longest first interleaves the plan's order
    monkeypatch.setattr(engine, "remaining_seconds", lambda c, state, estimator: cost[c.key])
    trained = []

    def units_then_stop(todo, settings, slots):
        trained.extend(group_stacks(todo, slots))
        raise KeyboardInterrupt  # nothing trains

    monkeypatch.setattr(engine, "_units", units_then_stop)
    with pytest.raises(KeyboardInterrupt):
        engine.train_plan(configs, engine.EngineSettings(workers=2, device="cpu", stack=True), root=tmp_path)
    monkeypatch.undo()
    monkeypatch.setattr(engine, "remaining_seconds", lambda c, state, estimator: cost[c.key])
    shown: dict[str, set] = {}
    for key, label in cli._stack_labels(configs, 2, tmp_path, estimator=None).items():
        shown.setdefault(label.split()[0], set()).add(key)
    assert sorted(map(sorted, shown.values())) == sorted(sorted(c.key for c in unit) for unit in trained)
    in_plan_order = group_stacks(configs, 2)  # what the plan showed before: other stacks than trained
    assert sorted(sorted(c.key for c in u) for u in in_plan_order) != sorted(map(sorted, shown.values()))


@pytest.mark.slow
def test_an_interrupted_stack_resumes_from_its_runs_checkpoints(tmp_path):
    """`rote train --stack` stopped by Ctrl-C (exit 130) leaves each run of the stack resumable; the rerun
    resumes them as one stack and stores each with its own manifest."""
    params = dict(steps=2000, eval_every=25, checkpoint_every=50)
    args = ["train", "--task", "thr", "--profile", "smoke", "--seeds", "2", "--workers", "1", "--stack", "--quiet"]
    for name, value in params.items():
        args += ["-p", name, str(value)]
    configs = [with_seed(make_config("thr", "smoke", **params), s) for s in (0, 1)]
    proc = subprocess.Popen([sys.executable, "-m", "rote", *args], env={**os.environ, "ROTE_RUNS": str(tmp_path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not all(status(c, tmp_path).startswith("partial ") for c in configs):
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    steps = {status(c, tmp_path) for c in configs}
    assert all(step.startswith("partial ") for step in steps)
    again = _cli(*args, root=tmp_path)
    assert again.returncode == 0, again.stderr
    log = next((tmp_path / ".logs").glob("*.log")).read_text()
    assert log.count("resuming") == 2
    for config in configs:
        run = lookup(config, tmp_path)
        stacked = json.loads((run.path / "manifest.json").read_text())["stacked"]
        assert stacked == (2 if len(steps) == 1 else 1)  # one stack, unless stopped between its runs' checkpoints

"""Stacked training in the engine and the command line: `rote train --plan --stack`, `rote plan --stack`."""

import json
import os
import subprocess
import sys

from rote.build import engine
from rote.plan import plan


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

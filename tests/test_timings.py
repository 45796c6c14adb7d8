"""Estimates that learn from the machine (rote.build.timings): run records, probes, fallbacks, the summary."""

import json
import os
import subprocess
import sys

import pytest
import torch

from rote.build import engine
from rote import plan as P
from rote.build import timings as TM
from rote.config import make_config
from planted import recording_job

SMOKE = dict(steps=40, eval_every=10, checkpoint_every=20)



@pytest.fixture(autouse=True)
def _probing_on(monkeypatch):
    """These tests probe where they mean to (tests/conftest.py turns probing off for every other test)."""
    monkeypatch.delenv("ROTE_NO_PROBE", raising=False)


def _record(config, machine=None, cpu_s=100.0, wall_s=100.0, train_s=98.0, eval0_s=0.5, **extra):
    """A run record as a worker writes it (rote.build.timings.record_run), with chosen times."""
    return {"v": TM.VERSION, "kind": "run", "time": 1.0, "host": "h", "machine": machine or TM.machine(),
            "shape": TM.shape(config), "name": f"{config.task}-{config.key}", "key": config.key,
            "steps": config.train.steps, "eval_every": config.train.eval_every,
            "n_evals": TM.n_evaluations(config), "eval_sequences": TM.eval_sequences(config), "wall_s": wall_s,
            "cpu_s": cpu_s, "train_s": train_s, "eval0_s": eval0_s, "resumed": 0, "concurrent": 0.0, **extra}


def _write(root, *records):
    root.mkdir(parents=True, exist_ok=True)
    with open(root / TM.STORE, "a") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


def _no_probe(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("probed")

    monkeypatch.setattr(TM, "probe", refuse)


def test_a_recorded_run_is_used_for_its_combination_on_this_machine_only(tmp_path, monkeypatch):
    config = make_config("fda", "smoke")
    _write(tmp_path, _record(config, cpu_s=100.0))
    _no_probe(monkeypatch)
    est = TM.Estimator(tmp_path, probe=False).estimate(config)
    assert est.source == "measured" and est.records == 1
    assert est.seconds == pytest.approx(100.0, rel=1e-6)  # the same run: its own (solo) seconds back
    # its noise-free twin and a run of twice the steps reuse the rates (steps, evaluations, sequences)
    twin = TM.Estimator(tmp_path, probe=False).estimate(config.replace(noise_ratio=0.0))
    assert twin.source == "measured" and twin.seconds < 100.0
    longer = TM.Estimator(tmp_path, probe=False).estimate(config.replace(steps=120, eval_every=20))
    assert longer.source == "measured" and 150 < longer.seconds < 200

    # another CPU model, precision or thread count: not this combination
    other_cpu = {**TM.machine(), "cpu": "Some Other CPU"}
    for record in (_record(config, machine=other_cpu),
                   _record(config, machine={**TM.machine(), "torch": "0.0.1"}),
                   _record(config, machine={**TM.machine(), "threads": 2}),
                   {**_record(config), "shape": TM.shape(config.replace(precision="bf16"))}):
        root = tmp_path / f"r{len(os.listdir(tmp_path))}"
        _write(root, record)
        est = TM.Estimator(root, probe=False).estimate(config)
        assert est.source != "measured"
        # without a probe: another machine's run of the same threads is the fallback before the formula
        same_threads = record["machine"]["threads"] == 1 and record["shape"] == TM.shape(config)
        assert est.source == ("workers" if same_threads else "formula")
        if est.source == "formula":
            assert est.seconds == TM.formula_seconds(config)


def test_cpu_seconds_stand_in_for_wall_and_a_pooled_run_is_charged_the_slowdown(tmp_path):
    config = make_config("thr", "smoke")
    loaded = _record(config, cpu_s=80.0, wall_s=160.0, train_s=150.0)  # half the CPU: another process shared it
    pooled = _record(config, cpu_s=108.0, wall_s=108.0, train_s=105.0, concurrent=1.0)  # a 2-worker pool
    _write(tmp_path / "a", loaded)
    _write(tmp_path / "b", pooled)
    assert TM.Estimator(tmp_path / "a", probe=False).seconds(config) == pytest.approx(80.0)
    assert TM.Estimator(tmp_path / "b", probe=False).seconds(config) == pytest.approx(108.0 / TM.SHARED_CORE_SLOWDOWN)


def test_an_unseen_combination_is_probed_once_then_read_from_the_store(tmp_path, monkeypatch):
    config = make_config("fda", "smoke")
    calls = []
    real = TM.probe

    def counting(*a, **k):
        calls.append(a[0].key)
        return real(*a, **k)

    monkeypatch.setattr(TM, "probe", counting)
    est = TM.Estimator(tmp_path)
    first = est.estimate(config)
    assert first.source == "probe_now" and len(calls) == 1 and first.seconds > 0
    assert est.estimate(config.replace(noise_ratio=0.0)).source == "probe_now" and len(calls) == 1  # one shape, one probe
    (rec,) = TM.read(tmp_path)
    assert rec["kind"] == "probe" and rec["machine"] == TM.machine() and rec["shape"] == TM.shape(config)
    assert rec["step_s"] > 0 and rec["eval_s"] > 0 and rec["probe_steps"] >= TM.PROBE_WARMUP_STEPS + TM.PROBE_MIN_STEPS
    # the next command reads it: no probe, the same estimate
    again = TM.Estimator(tmp_path).estimate(config)
    assert again.source == "probe" and again.seconds == first.seconds and len(calls) == 1
    # probing off, nothing stored: the static table / formula
    monkeypatch.setenv("ROTE_NO_PROBE", "1")
    off = TM.Estimator(tmp_path / "empty").estimate(config)
    assert off.source == "formula" and len(calls) == 1


def test_the_probe_trains_nothing_into_the_cache_and_restores_threads_and_rng(tmp_path):
    config = make_config("thr", "smoke")
    torch.set_num_threads(2)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    try:
        TM.Estimator(tmp_path).estimate(config)
        assert torch.get_num_threads() == 2
        assert torch.equal(torch.rand(3), expected)
    finally:
        torch.set_num_threads(1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [TM.STORE]  # no run, no .partial, no lock
    from rote.runs import status

    assert status(config, tmp_path) == "missing"


def test_corrupt_and_partial_lines_are_skipped(tmp_path, monkeypatch):
    config = make_config("fda", "smoke")
    good = _record(config, cpu_s=50.0)
    _write(tmp_path, "not json", "", "[1, 2]", json.dumps(good)[:40],  # a line cut mid-write
           {**good, "v": 99}, {k: v for k, v in good.items() if k != "cpu_s"}, {**good, "cpu_s": -1},
           {**good, "steps": "many"}, {**good, "machine": "x"}, {**good, "kind": "probe"}, good)
    with open(tmp_path / TM.STORE, "ab") as f:
        f.write(b"\xff\xfe garbage\n" + json.dumps(good).encode()[:25])  # bytes that are no text; a last partial line
    assert TM.read(tmp_path) == [good]
    TM.append({k: v for k, v in good.items() if k != "v"}, tmp_path)  # after a partial last line: a line of its own
    assert TM.read(tmp_path) == [good, good]
    _no_probe(monkeypatch)
    est = TM.Estimator(tmp_path, probe=False).estimate(config)
    assert est.source == "measured" and est.seconds == pytest.approx(50.0)
    assert TM.read(tmp_path / "nothing") == []


def test_the_summary_counts_each_source(tmp_path, monkeypatch):
    measured = make_config("fda", "smoke")
    runs = [P.with_seed(measured, s) for s in (0, 1)]
    _write(tmp_path, _record(runs[0]))
    est = TM.Estimator(tmp_path)
    probed = [make_config("thr", "smoke"), make_config("thr", "smoke", noise_ratio=0.0)]
    text = est.summary(runs + probed)
    assert text.startswith("estimates: 2 from finished runs on this machine, 2 timed now (") and text.endswith(" s)")
    assert est.probe_seconds > 0
    again = TM.Estimator(tmp_path, probe=False).summary(runs + probed + [make_config("fda", "smoke", d_model=64)])
    assert again == ("estimates: 2 from finished runs on this machine, 2 timed earlier on this machine, "
                     "1 from the static table or FLOP formula (rote/build/timings.py)")


def test_on_slurm_the_workers_runs_count_and_the_login_node_never_probes(tmp_path, monkeypatch):
    config = make_config("fda", "smoke")
    node = {**TM.machine(), "cpu": "Cluster Node CPU", "device": "cuda X"}
    _write(tmp_path, _record(config, machine=node, cpu_s=40.0, wall_s=30.0, train_s=29.0),
           _record(config, machine=node, cpu_s=40.0, wall_s=30.0, train_s=29.0))
    _no_probe(monkeypatch)
    est = TM.Estimator(tmp_path, workers=True)
    got = est.estimate(config)
    assert got.source == "workers" and got.records == 2 and got.seconds == pytest.approx(30.0)  # a GPU: wall time
    assert est.summary([config]) == "estimates: 1 from runs finished on the workers"
    assert TM.Estimator(tmp_path, workers=True).estimate(make_config("thr", "smoke")).source == "formula"


def test_a_worker_records_the_run_it_trains_and_the_estimate_uses_it(tmp_path, monkeypatch):
    config = make_config("fda", "smoke", **SMOKE)
    out = engine.train_one(config.to_dict(), str(tmp_path), "cpu")
    assert not out["cached"]
    (rec,) = TM.read(tmp_path)
    assert rec["kind"] == "run" and rec["key"] == config.key and rec["machine"] == TM.machine("cpu")
    assert rec["n_evals"] == TM.n_evaluations(config) == 5 and rec["steps"] == 40 and rec["resumed"] == 0
    assert rec["train_s"] == pytest.approx(out["train_seconds"], abs=1e-3)
    assert 0 < rec["eval0_s"] < rec["train_s"] <= rec["wall_s"] and rec["cpu_s"] > 0
    engine.train_one(config.to_dict(), str(tmp_path), "cpu")  # cached: nothing new to record
    assert len(TM.read(tmp_path)) == 1
    _no_probe(monkeypatch)
    est = TM.Estimator(tmp_path, probe=False, device="cpu").estimate(config)
    assert est.source == "measured" and est.seconds == pytest.approx(min(rec["cpu_s"], rec["wall_s"] * 1.05), rel=1e-6)


def test_a_failure_to_record_never_fails_the_run(tmp_path, monkeypatch, capsys):
    config = make_config("thr", "smoke", **SMOKE)

    def broken(*a, **k):
        raise OSError("read-only file system")

    monkeypatch.setattr(TM, "append", broken)
    out = engine.train_one(config.to_dict(), str(tmp_path), "cpu")
    assert not out["cached"] and "could not record the time" in capsys.readouterr().err


def test_concurrent_runs_on_this_host_are_sampled(tmp_path):
    import time

    (tmp_path / ".progress").mkdir()
    host = os.uname().nodename
    for name, info in {"me": {"host": host, "time": time.time()}, "other": {"host": host, "time": time.time()},
                       "stale": {"host": host, "time": time.time() - 3600},
                       "node2": {"host": host + "-x", "time": time.time()}}.items():
        (tmp_path / ".progress" / f"{name}.json").write_text(json.dumps(info))
    (tmp_path / ".progress" / "torn.json").write_text("{")
    assert TM.runs_beside(tmp_path, "me") == 1


def test_rote_plan_says_where_its_estimates_come_from(tmp_path):
    def cli(*args):
        full = {**os.environ, "ROTE_RUNS": str(tmp_path)}
        full.pop("ROTE_SEEDS", None)
        full.pop("ROTE_NO_PROBE", None)
        return subprocess.run([sys.executable, "-m", "rote", "plan", "--profile", "smoke", "--seeds", "1", *args],
                              env=full, capture_output=True, text=True)

    first = cli()
    assert first.returncode == 0, first.stderr
    assert "estimates: 5 timed now (" in first.stdout  # fda (3 runs) and thr (2) of seed 0: two shapes timed
    assert sorted(p.name for p in tmp_path.iterdir()) == [TM.STORE]  # no run trained
    second = json.loads(cli("--json").stdout)  # the next command reads the timings: instant
    assert second["estimates"] == "estimates: 5 timed earlier on this machine"
    assert all(r["estimate_s"] > 0 for r in second["runs"])


def test_the_engine_says_where_its_estimates_come_from_and_orders_by_them(tmp_path, monkeypatch, capsys):
    started = []

    monkeypatch.setattr(engine, "_LocalJob", recording_job(started))
    short, long = make_config("fda", "smoke"), make_config("fda", "smoke", steps=600, eval_every=100)
    _write(tmp_path, _record(short, cpu_s=5.0, wall_s=5.0, train_s=4.0), _record(long, cpu_s=50.0, wall_s=50.0, train_s=49.0))
    _no_probe(monkeypatch)
    engine.train_plan([short, long], engine.EngineSettings(workers=1, progress=False), root=tmp_path)
    assert started == [long, short]
    assert "training 2 of 2 runs (local, 1 at a time); estimates: 2 from finished runs on this machine" in capsys.readouterr().err


def test_the_shape_is_the_built_models_and_old_thr_records_still_match(tmp_path, monkeypatch):
    from rote.tasks import build_task

    for config in (make_config("fda", "smoke"), make_config("thr", "smoke"),
                   make_config("thr", "smoke", n_relations=9)):
        data = build_task(config)  # what rote.train.build_model gives the model
        assert (TM.shape(config)["vocab"], TM.shape(config)["n_ctx"]) == (len(data.vocab), data.n_ctx)
    config = make_config("thr", "smoke")
    old = _record(config, v=1)
    old["shape"] = {**old["shape"], "vocab": old["shape"]["vocab"] + 5}  # version 1 counted 5 tokens too many
    _write(tmp_path, old)
    _no_probe(monkeypatch)
    assert TM.Estimator(tmp_path, probe=False).estimate(config).source == "measured"


def test_one_count_of_evaluated_sequences_and_it_is_trains(monkeypatch):
    from rote import scoring, train
    from rote.tasks import build_task

    scored, real = [], scoring.answer_logits
    monkeypatch.setattr(scoring, "answer_logits",
                        lambda model, ex, *a, **k: scored.append(len(ex)) or real(model, ex, *a, **k))
    for config in (make_config("fda", "smoke"), make_config("thr", "smoke"),
                   make_config("thr", "smoke", fit_eval_size=0)):
        data, scored[:] = build_task(config), []
        train.evaluate(train.build_model(config, data), data, config.train.fit_eval_size)
        # the noisy examples are scored twice for FDA (two different model inputs), once for THR
        assert TM.eval_sequences(config) == sum(scored) == TM._scored(data, config.train.fit_eval_size), config.task
    assert not hasattr(P, "_eval_sequences")

"""The run plan (rote.plan), the canonical noise-free twin, and the `rote plan` command."""

import json
import os
import subprocess
import sys

import pytest

from rote import plan as P
from rote.build import timings as TM
from rote.config import ConfigError, FDAConfig, make_config


def test_units_cover_conditions_and_seeds_and_share_fda_twins():
    units = P.units("smoke", seeds=[0, 1])
    assert [(u.task, u.condition, u.seed) for u in units] == [
        ("fda", "random", 0), ("fda", "random", 1), ("fda", "digit", 0), ("fda", "digit", 1),
        ("thr", "-", 0), ("thr", "-", 1)]
    for u in units:
        assert u.noisy.seeds == {"data_seed": u.seed, "noise_seed": u.seed, "model_seed": u.seed}
        assert u.clean.data.noise_ratio == 0.0 and u.clean == u.noisy.replace(noise_ratio=0.0)
        if u.task == "fda":
            assert u.noisy.data.noise_kind == u.condition
    by = {(u.task, u.condition, u.seed): u for u in units}
    for seed in (0, 1):  # protocol 7.3: a noise-free twin has no noise kind; both conditions share it
        assert by["fda", "random", seed].clean.key == by["fda", "digit", seed].clean.key
        assert by["fda", "random", seed].noisy.key != by["fda", "digit", seed].noisy.key
    assert by["fda", "random", 0].clean.key != by["fda", "random", 1].clean.key


def test_plan_lists_each_run_once():
    runs = P.plan("smoke", seeds=[0, 1, 2])
    keys = [c.key for c in runs]
    # per seed: fda random, digit, one shared twin; thr noisy, twin; X1's grid only when asked for
    assert len(keys) == len(set(keys)) == 3 * 5
    assert sum(c.task == "fda" and c.data.noise_ratio == 0 and c.model.d_model == 32 for c in runs) == 3
    assert P.plan("smoke", seeds=[0, 1, 2]) == runs  # stable order
    # with X1 (tests/test_x1.py): width 16's learning-rate selection (seed 0's twin at 5 rates, 12.4; its runs
    # wait for it), noise 0.05 and 0.2 at the profile's width (width 32 at noise 0.1 is the fda random unit),
    # after the chapters' runs
    with_x1 = P.plan("smoke", seeds=[0, 1, 2], x1=True)
    assert len(with_x1) == len({c.key for c in with_x1}) == 3 * (5 + 2) + 5 and with_x1[:len(runs)] == runs
    paper = P.plan("paper", seeds=[0])  # sweep 0, 0.05, 0.1, 0.2 for each condition, twins shared
    fda = sorted((c.data.noise_kind, c.data.noise_ratio) for c in paper if c.task == "fda" and c.model.d_model == 256)
    assert fda == [("digit", 0.05), ("digit", 0.1), ("digit", 0.2), ("random", 0.0), ("random", 0.05),
                   ("random", 0.1), ("random", 0.2)]
    assert sorted(c.data.noise_ratio for c in paper if c.task == "thr") == [0.0, 0.05, 0.1, 0.2]


def test_overrides_select_condition_and_reject_seed_names():
    units = P.units("smoke", seeds=[0], overrides={"noise_kind": "digit", "noise_ratio": 0.2})
    assert [(u.task, u.condition) for u in units] == [("fda", "digit"), ("thr", "-")]
    assert all(u.noisy.data.noise_ratio == 0.2 for u in units)
    with pytest.raises(ConfigError, match="use seeds"):
        P.units("smoke", overrides={"model_seed": 1})
    with pytest.raises(ConfigError, match="unknown task"):
        P.units("smoke", tasks=["xyz"])
    with pytest.raises(ConfigError, match="unknown parameter 'colour'"):
        P.plan("smoke", overrides={"colour": "red"})
    with pytest.raises(ConfigError, match="unknown condition"):
        P.units("smoke", conditions={"fda": ["gaussian"]})


def test_seed_list(monkeypatch):
    from rote.settings import read_environment

    assert P.seed_list("quick") == [0, 1, 2] == P.protocol_seeds("quick")  # the protocol's 3 seeds (7.1)
    assert len(P.plan("smoke")) == 3 * 5
    monkeypatch.setenv("ROTE_SEEDS", "1")  # planted: the library never reads it (issue 45 part 2)
    assert P.seed_list("quick") == [0, 1, 2] and len(P.plan("smoke")) == 3 * 5
    book = read_environment({"ROTE_SEEDS": "1"})  # the command line's and the parameters cell's reading
    assert P.seed_list("quick", book.seeds) == book.seed_list == [0]  # the quick look, passed as an argument
    assert len(P.plan("smoke", book.seed_list)) == 5  # the plan follows the book's seeds, as the chapters do
    assert P.protocol_seeds("quick") == [0, 1, 2]  # whatever the book's seeds are
    assert P.seed_list("quick", 2) == [0, 1]
    for bad in (0, -1):
        with pytest.raises(ConfigError):
            P.seed_list("quick", bad)
    with pytest.raises(ConfigError, match="ROTE_SEEDS"):
        read_environment({"ROTE_SEEDS": "three"})


def test_with_seed_and_sweep_and_differs():
    c = P.with_seed(make_config("thr", "quick"), 4)
    assert c.seeds == {"data_seed": 4, "noise_seed": 4, "model_seed": 4}
    assert P.differs(c, "quick") == {"data_seed": 4, "noise_seed": 4, "model_seed": 4}
    assert P.sweep_ratios("quick", make_config("fda", "quick")) == [0.0, 0.1]
    assert P.sweep_ratios("quick", make_config("fda", "quick", noise_ratio=0.2)) == [0.0, 0.2]
    assert P.sweep_ratios("paper", make_config("fda", "paper")) == [0.0, 0.05, 0.1, 0.2]


def test_noise_free_fda_has_no_noise_kind():
    assert FDAConfig(noise_ratio=0.0, noise_kind="digit").noise_kind == "random"
    assert FDAConfig(noise_ratio=0.1, noise_kind="digit").noise_kind == "digit"
    a = make_config("fda", "smoke", noise_ratio=0.0, noise_kind="digit")
    assert a == make_config("fda", "smoke", noise_ratio=0.0) and a.key == make_config("fda", "smoke", noise_ratio=0).key


def test_precision_is_a_validated_run_parameter():
    fp32 = make_config("fda", "smoke", precision="fp32")
    assert fp32.train.precision == "fp32"
    bf16 = make_config("fda", "smoke", precision="bf16")
    assert bf16.key != fp32.key
    with pytest.raises(ConfigError, match="precision must be"):
        make_config("fda", "smoke", precision="fp8")


def test_auto_precision_resolves_per_task_and_the_key_holds_the_resolved_value(monkeypatch):
    from rote import config as C

    thr, fda = make_config("thr", "smoke"), make_config("fda", "smoke")  # the default is "auto"
    assert thr.train.precision == C.native_precision() in ("fp32", "bf16")
    assert fda.train.precision == "fp32"  # FDA's verdicts moved with precision: it stays fp32 (issue 21)
    assert thr.key == make_config("thr", "smoke", precision=C.native_precision()).key
    assert thr.to_dict()["train"]["precision"] != "auto" and fda.key == make_config("fda", "smoke", precision="fp32").key
    for native in ("fp32", "bf16"):
        monkeypatch.setattr(C, "native_precision", lambda native=native: native)
        assert make_config("thr", "smoke", precision="auto").train.precision == native
        assert make_config("fda", "smoke", precision="auto").train.precision == "fp32"
        assert make_config("thr", "smoke", precision="fp32").train.precision == "fp32"  # explicit wins
        assert make_config("fda", "smoke", precision="bf16").train.precision == "bf16"


def test_native_bf16_is_read_from_the_cpu_flags():
    from rote.config import cpu_has_native_bf16

    avx2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n"
    assert not cpu_has_native_bf16(avx2)
    assert cpu_has_native_bf16(avx2.replace("fma", "fma avx512f avx512_bf16"))
    assert cpu_has_native_bf16(avx2.replace("fma", "amx_tile amx_bf16"))
    assert not cpu_has_native_bf16("")


def test_estimates_are_positive_and_ordered():
    quick, smoke = make_config("fda", "quick"), make_config("fda", "smoke")
    assert TM.estimate_seconds(quick) > 100 * TM.estimate_seconds(smoke) > 0
    odd = make_config("fda", "quick", d_model=256, n_heads=8)  # not in the table: the FLOP formula
    assert TM.estimate_seconds(odd) > TM.estimate_seconds(quick)
    assert TM.remaining_seconds(quick, "cached") == 0
    half = quick.train.steps // 2
    assert TM.remaining_seconds(quick, f"partial {half}") == pytest.approx(TM.estimate_seconds(quick) / 2)
    assert TM.makespan([4, 3, 2, 1], 2) == 5 and TM.makespan([5, 1], 3) == 5 and TM.makespan([], 4) == 0


def _cli(*args, root):
    env = {**os.environ, "ROTE_RUNS": str(root)}
    env.pop("ROTE_SEEDS", None)
    return subprocess.run([sys.executable, "-m", "rote", *args], env=env, capture_output=True, text=True)


def test_plan_command(tmp_path):
    result = _cli("plan", "--profile", "smoke", "--seeds", "2", "--x1", "--json", root=tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["seeds"] == [0, 1] and len(out["runs"]) == 19 and out["missing"] == 19  # 2 x (5 + X1's 2) + 5
    assert out["x1"] == ["X1 width 16 waits for its learning-rate selection (5 of 5 runs of seed 0's twin not "
                         "trained): its runs are listed once they are (12.4)"]  # its runs are not listed yet
    assert {r["status"] for r in out["runs"]} == {"missing"}
    assert [r["key"] for r in out["runs"]] == [c.key for c in P.plan("smoke", [0, 1], x1=True)]
    plain = json.loads(_cli("plan", "--profile", "smoke", "--seeds", "2", "--json", root=tmp_path).stdout)
    assert [r["key"] for r in plain["runs"]] == [c.key for c in P.plan("smoke", [0, 1])] and len(plain["runs"]) == 10
    twin = [r for r in out["runs"] if r["task"] == "fda" and r["differs"].get("noise_ratio") == 0.0]
    assert len(twin) == 7 and all("noise_kind" not in r["differs"] for r in twin)  # 2 seeds at 32, 5 rates at 16
    assert sorted(r["differs"].get("d_model", 32) for r in twin) == [16] * 5 + [32, 32]
    table = _cli("plan", "--profile", "smoke", "-p", "noise_kind", "digit", root=tmp_path)
    assert table.returncode == 0 and "noise_kind=digit" in table.stdout and "missing" in table.stdout
    assert "12 runs (smoke, seeds [0, 1, 2], training precision " in table.stdout  # 3 seeds by default
    assert all(r["precision"] == P.make_config(r["task"], "smoke").train.precision for r in out["runs"])
    fp32 = _cli("plan", "--profile", "smoke", "--precision", "fp32", "--json", root=tmp_path)
    runs = json.loads(fp32.stdout)["runs"]
    assert {r["precision"] for r in runs} == {"fp32"} and all(r["differs"].get("precision", "fp32") == "fp32" for r in runs)
    assert [r["key"] for r in runs] == [c.key for c in P.plan("smoke", [0, 1, 2], {"precision": "fp32"})]
    assert not tmp_path.exists() or not any(p.name.startswith(("fda-", "thr-")) for p in tmp_path.iterdir())


def test_book_trains_what_its_chapters_ask_for():
    from rote.build.book import _needs_runs, book_plan
    from rote.build.driver import chapters

    assert "tasks" in chapters() and not _needs_runs("tasks")  # the tasks chapter trains nothing
    assert any(_needs_runs(name) for name in chapters())
    everything = list(chapters())
    assert book_plan("smoke", ["tasks"], {}, [0]) == []
    assert book_plan("smoke", everything, {}, [0, 1]) == P.plan("smoke", [0, 1])
    only = book_plan("smoke", everything, {"noise_ratio": "0.2", "tasks": "thr"}, [0])
    assert [(c.task, c.data.noise_ratio) for c in only] == [("thr", 0.2), ("thr", 0.0)]
    swept = book_plan("smoke", everything, {"tasks": "thr", "sweep_ratios": "0,0.3"}, [0])
    assert sorted(c.data.noise_ratio for c in swept) == [0.0, 0.1, 0.3]


def test_pool_estimate_charges_the_shared_core_slowdown_only_when_runs_share_the_machine():
    runs = [1000.0, 800.0, 600.0]
    assert TM.pool_seconds(runs, 1) == TM.makespan(runs, 1) == 2400.0
    assert TM.pool_seconds(runs, 2) == pytest.approx(1400.0 * TM.SHARED_CORE_SLOWDOWN)
    assert TM.pool_seconds([1000.0], 2) == 1000.0


def test_pages_state_the_training_precision():
    from rote.build import driver, site
    from rote.config import native_precision

    assert driver.chapter_precision({"profile": "smoke"}) == f"fda fp32, thr {native_precision()}"
    assert driver.chapter_precision({"overrides": {"precision": "fp32"}}) == "fp32"
    assert driver.chapter_precision({"tasks": ["fda"]}) == "fda fp32"  # an FDA-only chapter names FDA only
    assert driver.chapter_precision({"tasks": ["thr", "fda"]}) == f"fda fp32, thr {native_precision()}"
    note = site.stamp_markdown({"chapter": "tasks", "parameters": {"profile": "smoke"}, "executed": "now",
                                "seconds": 3.0, "ok": True, "precision": "bf16"})
    assert "Its runs trained in `bf16` (evaluation in fp32)." in note


def test_a_book_wide_run_parameter_skips_the_scorecard_which_runs_no_model(monkeypatch):
    from types import SimpleNamespace

    from rote.build import book, driver

    seen = {}

    def fake_run(job, profile, settings=None):
        seen[job.name] = job.params
        return SimpleNamespace(name=job.name, ok=True, seconds=0.0, error="", notebook=None)

    monkeypatch.setattr(driver, "execute_job", fake_run)
    monkeypatch.setattr(book, "book_plan", lambda *a, **k: [])
    assert book.build_book("smoke", ["tasks", "scorecard"], {"precision": "fp32"}, book.BookOptions(render=False)) == 0
    assert seen["tasks"]["overrides"] == {"precision": "fp32"}
    assert seen["scorecard"] == {"profile": "smoke"}


# -- issue 28: X1's grid only when asked, and the chapter filter trains its chapters' runs only -------------
def _x1_only(configs, profile="quick"):
    """The runs of X1's grid that C1-C5 do not need (other widths and noise ratios)."""
    base = make_config("fda", profile)
    return [c for c in configs if c.task == "fda" and (c.model.d_model != base.model.d_model
                                                      or c.data.noise_ratio not in (0.0, base.data.noise_ratio))]


def test_every_chapter_declares_the_runs_it_needs():
    from rote.build import book, driver

    assert set(book.CHAPTER_RUNS) == set(driver.chapters())
    assert {n for n, parts in book.CHAPTER_RUNS.items() if not parts} == {"tasks", "scorecard"}
    assert all(set(parts) <= set(P.PARTS) for parts in book.CHAPTER_RUNS.values())
    assert book.chapter_runs("benign_memorization") == ("x1-shared",)
    assert book.chapter_runs("benign_memorization", x1=True) == ("x1",)


def test_the_chapter_filter_trains_the_named_chapters_runs_only():
    from rote.build.book import book_plan
    from rote.build.driver import chapters

    seeds = [0, 1, 2]
    units = P.units("quick", seeds=seeds)
    ld = book_plan("quick", ["learning_dynamics"], {}, seeds)
    assert ld == P.plan("quick", seeds) and not _x1_only(ld)  # units, twins and sweep; no width-64/256 run
    assert not any(c.model.d_model in (64, 256) for c in ld)
    noisy = [u.noisy for u in units]
    for name in ("intermediate_results", "interventions", "distributed_encoding"):
        assert book_plan("quick", [name], {}, seeds) == noisy  # the noisy runs of both tasks
    assert book_plan("quick", ["outlier_heuristics"], {}, seeds) == [u.noisy for u in units if u.task == "fda"]
    shared = [c for u in units if u.task == "fda" and u.condition == "random" for c in (u.noisy, u.clean)]
    assert book_plan("quick", ["benign_memorization"], {}, seeds) == shared  # without X1: C1's runs only
    grid = book_plan("quick", ["benign_memorization"], {}, seeds, x1=True)
    assert {c.model.d_model for c in grid} == {64, 128, 256} and len(grid) == 3 * 4 + 2 * 5  # 12.4: 64, 256 wait
    union = book_plan("quick", ["interventions", "outlier_heuristics"], {}, seeds)
    assert union == noisy  # the union, each run once
    assert book_plan("quick", list(chapters()), {}, seeds) == P.plan("quick", seeds)
    assert book_plan("quick", list(chapters()), {}, seeds, x1=True) == P.plan("quick", seeds, x1=True)
    assert book_plan("quick", ["learning_dynamics"], {"seeds": "7"}, seeds) == P.plan("quick", [7])


def _planted_book(monkeypatch, tmp_path, names, **kwargs):
    """`rote book` with training and chapters planted: the runs it would train, and each chapter's parameters."""
    from rote.build import book, driver, engine, site

    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    trained, executed = [], {}
    monkeypatch.setattr(engine, "train_plan", lambda configs, **kw: trained.extend(configs) or
                        [engine.Outcome(c, True, 1.0) for c in configs])

    def chapter(job, profile, settings=None):
        executed[job.name] = job.params
        return driver.ChapterResult(job.name, True, 0.0, tmp_path / f"{job.name}.ipynb", tmp_path, "")

    monkeypatch.setattr(driver, "execute_job", chapter)
    assert book.build_book("quick", names, {}, book.BookOptions(render=False, **kwargs)) == 0
    return trained, executed


def test_book_chapter_learning_dynamics_trains_no_x1_grid(monkeypatch, tmp_path):
    trained, executed = _planted_book(monkeypatch, tmp_path, ["learning_dynamics"])
    assert list(executed) == ["learning_dynamics"]
    assert trained == P.plan("quick", [0, 1, 2]) and not _x1_only(trained)  # 3 seeds by default
    assert not any(c.model.d_model in (64, 256) for c in trained)


def test_x1_is_trained_only_when_asked(monkeypatch, tmp_path):
    trained, executed = _planted_book(monkeypatch, tmp_path, None, seeds=1)  # the whole book, 1 seed
    assert trained == P.plan("quick", [0]) and not _x1_only(trained)
    assert executed["benign_memorization"]["train_grid"] is False  # the chapter may not train its grid
    assert "train_grid" not in executed["learning_dynamics"]
    for names, kwargs in ((None, {"x1": True}), (["benign_memorization"], {})):  # --x1, or the chapter named
        trained, executed = _planted_book(monkeypatch, tmp_path, names, seeds=1, **kwargs)
        assert {c.key for c in _x1_only(trained)} == {c.key for c in _x1_only(P.plan("quick", [0], x1=True))} != set()
        assert "train_grid" not in executed["benign_memorization"]  # its default: trains the grid


def test_train_and_plan_take_x1(tmp_path):
    listed = _cli("plan", "--profile", "smoke", "--seeds", "1", "--x1", "--json", root=tmp_path)
    assert [r["key"] for r in json.loads(listed.stdout)["runs"]] == [c.key for c in P.plan("smoke", [0], x1=True)]
    wrong = _cli("train", "--task", "fda", "--profile", "smoke", "--x1", root=tmp_path)
    assert wrong.returncode == 2 and "--plan" in wrong.stderr
    helps = _cli("book", "--help", root=tmp_path).stdout
    assert "--x1" in helps and "else 3" in helps

import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from rote import claims, display, plan
from rote.build import book, driver, site, staging
from rote.config import ConfigError, make_config


def test_chapters_in_reading_order():
    names = list(driver.chapters())
    assert names[:2] == ["tasks", "learning_dynamics"] and names[-1] == "scorecard"


def test_chapter_sources_are_committed_clean():
    for path in driver.chapters().values():
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), path
        tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, path
        assert "profile" in driver.notebook_parameters(path)
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), path


def test_papermill_sees_every_assignment_of_each_parameters_cell():
    # papermill drops a parameter whose comment it cannot parse (an apostrophe, an "="): it then
    # neither validates nor documents it, and `-p` checks against the wrong list
    import ast

    for path in driver.chapters().values():
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        assigned = {t.id for node in ast.parse(cell.source).body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target])}
        assert set(driver.notebook_parameters(path)) == assigned, path


def test_resolve_parameters_accepts_chapter_and_run_parameters():
    out = driver.resolve_parameters("learning_dynamics", "smoke", {"tasks": "thr", "noise_ratio": "0.2"})
    assert out == {"profile": "smoke", "tasks": ["thr"], "overrides": {"noise_ratio": 0.2}}
    out = driver.resolve_parameters("learning_dynamics", "smoke", {"sweep_ratios": "[0, 0.3]"})
    assert out["sweep_ratios"] == [0, 0.3]


@pytest.mark.parametrize("params, message", [
    ({"colour": "red"}, "unknown parameter 'colour' for chapter 'learning_dynamics'"),
    ({"noise_ratio": "1.5"}, "noise_ratio must be in [0, 1)"),
    ({"tasks": "fda", "n_entities": "10"}, "applies to none of the chapter's tasks (fda)"),
    ({"tasks": "thr", "noise_kind": "digit"}, "applies to none of the chapter's tasks (thr)"),
    ({"tasks": "thr", "n_entities": "5"}, "graph too small"),
    ({"profile": "paper"}, "--profile"),
])
def test_resolve_parameters_rejects_bad_input(params, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        driver.resolve_parameters("learning_dynamics", "smoke", params)


def test_unknown_chapter():
    with pytest.raises(ConfigError, match="unknown chapter"):
        driver.chapter_path("nope")


def test_cli_rejects_unknown_chapter_parameter_before_running(tmp_path):
    result = subprocess.run([sys.executable, "-m", "rote", "run", "tasks", "--profile", "smoke", "-p", "bogus", "1"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "unknown parameter 'bogus'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _seed_records(claim, profile, units, passed):
    from rote.verdicts import Check, records, seed_result

    parts = __import__("rote.verdicts", fromlist=["REQUIRED_PARTS"]).REQUIRED_PARTS[claim]
    return records(claim, profile, [seed_result(u, {"x": float("nan")},
                                                [Check(f"{claim.lower()}.{i}", "a", "registered", 1.0, 0.5, passed, p)
                                                 for i, p in enumerate(parts)],
                                                [u.noisy, u.clean]) for u in units])


# The protocol's (claim, task, condition) triples, written out: C1-C4 on FDA (random and digit noise,
# amendment 1, 7.3) and THR (one condition), C5 on FDA only; X1 (section 9) on FDA random only.
PROTOCOL_RECORDS = {(c, "fda", cond) for c in ("C1", "C2", "C3", "C4", "C5") for cond in ("random", "digit")} | \
    {(c, "thr", "-") for c in ("C1", "C2", "C3", "C4")} | {("X1", "fda", "random")}


def test_claims_not_run_placeholders(tmp_path):
    records = claims.load_all("quick", root=tmp_path)
    assert len(PROTOCOL_RECORDS) == 15 and len(records) == 15
    assert {(r.claim, r.task, r.condition) for r in records} == PROTOCOL_RECORDS
    assert all(r.status == r.verdict_registered == r.verdict_amended == "not run" and r.per_seed == []
               and r.profile == "quick" for r in records)
    assert {r.claim: r.page for r in records}["C1"] == "02_learning_dynamics"


def test_claim_record_round_trip_and_status(tmp_path):
    fda, thr = plan.units("smoke", ["fda"], [0]), plan.units("smoke", ["thr"], [0])
    (rec_random, rec_digit) = _seed_records("C1", "smoke", fda, False)
    assert rec_random.status == "fail (1 seed)" and rec_random.per_seed[0]["metrics"]["x"] is None
    assert rec_random.seeds == [0] and rec_random.run_keys == [fda[0].noisy.key, fda[0].clean.key]
    assert fda[0].clean.key == fda[1].clean.key  # the two FDA conditions share the noise-free twin
    claims.save(rec_random, root=tmp_path)
    (ok,) = _seed_records("C1", "smoke", thr, True)
    claims.save(ok, root=tmp_path)
    loaded = {(r.claim, r.task, r.condition): r for r in claims.load_all("smoke", root=tmp_path, seeds=[0])}
    assert loaded[("C1", "fda", "random")].status == "fail (1 seed)"
    assert loaded[("C1", "thr", "-")].verdict_registered == "pass (1 seed)"
    assert loaded[("C1", "fda", "digit")].status == "not run" and loaded[("C2", "fda", "random")].status == "not run"
    (tmp_path / "smoke" / "C2-fda-random.seeds-0.json").write_text(json.dumps({"claim": "C2", "status": "pass"}))  # old format
    assert {(r.claim, r.task, r.condition): r for r in claims.load_all("smoke", root=tmp_path, seeds=[0])}[
        ("C2", "fda", "random")].status == "not run"
    with pytest.raises(ValueError):
        claims.ClaimRecord("C5", "thr", "-", "smoke", [], "", "", "")  # C5 is FDA only
    with pytest.raises(ValueError):
        claims.ClaimRecord("C1", "fda", "-", "smoke", [], "", "", "")  # FDA has no condition '-'


def test_records_from_other_runs_are_recognized(tmp_path):
    own_units = plan.units("smoke", ["fda"], [0], conditions={"fda": ["random"]})
    (own,) = _seed_records("C1", "smoke", own_units, True)
    other_units = plan.units("smoke", ["fda"], [0], {"n_layers": 2}, conditions={"fda": ["random"]})
    (other,) = _seed_records("C1", "smoke", other_units, True)
    assert claims.runs_are_profile_defaults(own) is True
    assert claims.runs_are_profile_defaults(other) is False
    placeholder = claims.load_all("smoke", root=tmp_path)[0]
    assert claims.runs_are_profile_defaults(placeholder) is None
    table = display.claims_table([own, other, placeholder])
    assert list(table.runs) == ["profile default", "other runs", ""]
    assert list(table.seeds) == ["0✓", "0✓", ""] and list(table.section)[0] == "02_learning_dynamics#verdict"


def test_claims_cli_json(tmp_path, monkeypatch):
    monkeypatch.setenv("ROTE_RESULTS", str(tmp_path))
    for rec in _seed_records("C1", "quick", plan.units("quick", ["fda"], [0, 1, 2]), True):
        claims.save(rec, root=tmp_path)
    result = subprocess.run([sys.executable, "-m", "rote", "claims", "--profile", "quick", "--json"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    by_key = {(r["claim"], r["task"], r["condition"]): r for r in records}
    assert by_key[("C1", "fda", "digit")]["status"] == "holds" and by_key[("C2", "thr", "-")]["status"] == "not run"
    assert by_key[("C1", "fda", "random")]["seeds"] == [0, 1, 2]
    for r in records:
        assert {"claim", "task", "condition", "profile", "seeds", "verdict_registered", "verdict_amended",
                "per_seed", "status"} <= set(r)
    assert {"seed", "checks", "registered", "amended"} <= set(by_key[("C1", "fda", "random")]["per_seed"][0])


def test_failing_chapter_is_reported_and_its_page_says_so(tmp_path, monkeypatch):
    chapters = tmp_path / "book"
    chapters.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# Broken"),
                nbformat.v4.new_code_cell("profile = 'smoke'", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("x = 1"),
                nbformat.v4.new_code_cell("raise ValueError('planted failure')")]
    nbformat.write(nb, chapters / "01_broken.ipynb")
    monkeypatch.setattr(site, "BOOK_DIR", chapters)
    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    stale = driver.output_dir("broken", "smoke", {"profile": "smoke"}) / "broken.ipynb"
    stale.parent.mkdir(parents=True)
    stale.write_text("old page")
    code = book.build_book("smoke", ["broken"], {}, book.BookOptions(render=False))
    assert code == 1
    executed = nbformat.read(stale, as_version=4)
    stamp = executed.cells[1].source
    assert "FAILED" in stamp and "planted failure" in stamp and "ValueError" in stamp
    assert executed.metadata["rote"]["ok"] is False
    assert json.loads((tmp_path / "_build" / "executed" / "smoke" / "build.json").read_text())["broken"]["ok"] is False


def test_a_failed_run_stops_the_book_before_any_chapter(tmp_path, monkeypatch, capsys):
    """`rote book`: when a run of the plan fails, no chapter executes (none would find its runs) and
    the command exits non-zero, naming the run."""
    from rote.build import engine

    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    trained = []

    def one_fails(configs, **kwargs):
        trained.extend(configs)
        return [engine.Outcome(configs[0], False, 1.0, "exit code 1; last log line: MemoryError", "x.log")] + \
            [engine.Outcome(c, True, 1.0) for c in configs[1:]]

    def must_not_run(*args, **kwargs):
        raise AssertionError("a chapter executed after a run failed")

    monkeypatch.setattr(engine, "train_plan", one_fails)
    monkeypatch.setattr(driver, "execute_job", must_not_run)
    monkeypatch.setattr(staging, "render_site", must_not_run)
    code = book.build_book("smoke", ["learning_dynamics", "tasks"], {}, book.BookOptions(render=True))
    assert code != 0 and trained
    err = capsys.readouterr().err
    assert f"FAILED {engine.entry_name(trained[0])}" in err and "MemoryError" in err
    assert "chapters not executed" in err
    assert not (tmp_path / "_build" / "executed").exists()


def test_records_whose_content_names_another_claim_than_their_file_are_refused(tmp_path, capsys):
    """A record is found by its file name; one whose content is another claim's (a copied or renamed
    file) is not shown under the wrong claim: the slot is reported and stays not run."""
    (good,) = _seed_records("C1", "smoke", plan.units("smoke", ["thr"], [0]), True)
    assert claims.save(good, root=tmp_path) == claims.record_path(tmp_path, "smoke", "C1", "thr", "-", [0])
    wrong = claims.record_path(tmp_path, "smoke", "C2", "thr", "-", [0])
    wrong.write_text(claims.record_path(tmp_path, "smoke", "C1", "thr", "-", [0]).read_text())  # C1's content
    other_task = claims.record_path(tmp_path, "smoke", "C1", "fda", "random", [0])
    other_task.write_text(wrong.read_text())
    by_key = {(r.claim, r.task, r.condition): r for r in claims.load_all("smoke", root=tmp_path, seeds=[0])}
    assert by_key[("C1", "thr", "-")].verdict_registered == "pass (1 seed)"
    assert by_key[("C2", "thr", "-")].status == "not run" and by_key[("C2", "thr", "-")].claim == "C2"
    assert by_key[("C1", "fda", "random")].status == "not run" and by_key[("C1", "fda", "random")].task == "fda"
    err = capsys.readouterr().err
    assert str(wrong) in err and str(other_task) in err and "C1" in err


def test_seeds_parameter_is_a_list_and_seed_overrides_are_refused():
    assert driver.resolve_parameters("learning_dynamics", "smoke", {"seeds": "1"})["seeds"] == [1]
    assert driver.resolve_parameters("learning_dynamics", "smoke", {"seeds": "0,2"})["seeds"] == [0, 2]
    assert driver.resolve_parameters("learning_dynamics", "smoke", {"seeds": "[0, 1]"})["seeds"] == [0, 1]
    for params, message in (({"model_seed": "1"}, "use seeds"), ({"seeds": "a"}, "whole numbers"),
                            ({"seeds": "-1"}, ">= 0")):
        with pytest.raises(ConfigError, match=message):
            driver.resolve_parameters("learning_dynamics", "smoke", params)


def test_build_times_has_its_columns_before_any_build(tmp_path):
    times = display.build_times("smoke", tmp_path / "_build")
    assert list(times.columns) == ["chapter", "seconds", "status", "executed"] and times.empty
    assert times[times.chapter != "scorecard"].empty


def test_chapters_start_on_a_core_the_plan_no_longer_needs(tmp_path, monkeypatch):
    """`rote book`: while the plan's last run trains, a free worker slot executes the chapters, in book
    order; none starts while every slot is busy, and the scorecard-like last chapter still runs last."""
    import threading

    from rote.build import engine

    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    events, started = [], threading.Event()

    def last_run_trains(configs, *, on_free=None, **kwargs):
        on_free(0)  # both slots busy: no chapter may start
        time.sleep(1.5)
        events.append("slots busy")
        on_free(1)  # one run left, one slot free
        assert started.wait(10), "no chapter started on the free slot"
        events.append("training ended")
        return [engine.Outcome(c, True, 1.0) for c in configs]

    def fake_chapter(job, profile, settings=None):
        events.append(f"chapter {job.name}")
        started.set()
        return driver.ChapterResult(job.name, True, 0.1, tmp_path / f"{job.name}.ipynb", tmp_path, "")

    monkeypatch.setattr(engine, "train_plan", last_run_trains)
    monkeypatch.setattr(driver, "execute_job", fake_chapter)
    code = book.build_book("smoke", ["learning_dynamics", "interventions"], {}, book.BookOptions(render=False))
    assert code == 0
    assert events[0] == "slots busy" and events[1] == "chapter learning_dynamics"
    assert events.index("chapter learning_dynamics") < events.index("training ended")
    assert [e for e in events if e.startswith("chapter")] == ["chapter learning_dynamics", "chapter interventions"]


def test_the_chapters_that_load_runs_are_the_ones_the_plan_trains_for():
    """`rote book` trains the plan before the chapters that load runs (those with a `seeds` parameter);
    the task chapter and the scorecard load none."""
    assert {n for n in driver.chapters() if not book._needs_runs(n)} == {"tasks", "scorecard"}
    assert book.book_plan("smoke", ["tasks", "scorecard"], {}, [0]) == []
    assert book.book_plan("smoke", ["learning_dynamics"], {}, [0])


def test_chapters_execute_at_once_on_free_cores_and_the_last_waits(monkeypatch):
    """execute_jobs: as many chapters at once as slots are free (capacity at most), in order; a `last`
    job (the scorecard) starts only after every earlier one ended; results come back in job order."""
    import threading

    lock, running, peak, log = threading.Lock(), [0], [0], []

    def fake(job, profile, settings=None):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            log.append(("start", job.name, running[0]))
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        return driver.ChapterResult(job.name, True, 0.3, Path(), Path(), "")

    monkeypatch.setattr(driver, "execute_job", fake)
    jobs = [driver.ChapterJob(n, {}) for n in ("a", "b", "c")] + [driver.ChapterJob("scorecard", {}, last=True)]
    results = driver.execute_jobs(jobs, "smoke", lambda: 2, threading.Event(), capacity=2)
    assert [r.name for r in results] == ["a", "b", "c", "scorecard"]
    assert peak[0] == 2  # two at once, never three
    assert log[-1] == ("start", "scorecard", 1)  # alone, after the others
    log.clear(), peak.__setitem__(0, 0)
    driver.execute_jobs(jobs[:3], "smoke", lambda: 1, threading.Event(), capacity=2)
    assert peak[0] == 1  # one free slot: one at a time

"""Claim records keep the seeds they came from (issue 28): a record of other seeds than the protocol's
0, 1, 2 is stored beside the default one, never over it; the scorecard shows the records of the seeds
the book was built with and lists the others."""

import json
import subprocess
import sys

from rote import claims, display, plan
from rote.build import site
from rote.verdicts import REQUIRED_PARTS, Check, records, seed_result


def _records(claim, profile, seeds, passed, task="fda"):
    units = plan.units(profile, [task], seeds)
    return records(claim, profile, [seed_result(u, {}, [Check(f"{claim.lower()}.{i}", "a", "registered", 1.0, 0.5,
                                                              passed, p) for i, p in enumerate(REQUIRED_PARTS[claim])],
                                                [u.noisy, u.clean]) for u in units])


def _row(table, claim, task, condition):
    return table[(table.claim == claim) & (table.task == task) & (table.condition == condition)].iloc[0].to_dict()


def test_a_seeds_7_record_leaves_the_3_seed_record_and_its_scorecard_row_intact(tmp_path):
    three = _records("C1", "smoke", [0, 1, 2], True)
    for rec in three:
        assert claims.save(rec, root=tmp_path) == claims.record_path(tmp_path, "smoke", "C1", "fda", rec.condition)
    before = _row(display.claims_table(claims.load_all("smoke", root=tmp_path)), "C1", "fda", "random")
    assert before["amended"] == "holds" and before["seeds"] == "0✓ 1✓ 2✓"
    seven = _records("C1", "smoke", [7], False)  # `rote run learning_dynamics -p seeds 7`
    paths = [claims.save(rec, root=tmp_path) for rec in seven]
    assert [p.name for p in paths] == ["C1-fda-random.seeds-7.json", "C1-fda-digit.seeds-7.json"]
    assert json.loads((tmp_path / "smoke" / "C1-fda-random.json").read_text())["seeds"] == [0, 1, 2]
    main = claims.load_all("smoke", root=tmp_path)
    assert len(main) == len(claims.expected("smoke"))  # one record per (claim, task, condition)
    assert _row(display.claims_table(main), "C1", "fda", "random") == before  # the scorecard's row is unchanged
    others = claims.other_records("smoke", root=tmp_path)
    assert [(r.claim, r.task, r.condition, r.seeds, r.verdict_amended) for r in others] == [
        ("C1", "fda", "random", [7], "fail (1 seed)"), ("C1", "fda", "digit", [7], "fail (1 seed)")]
    listed = display.other_records_table(others)
    assert list(listed.columns) == ["claim", "task", "condition", "seeds", "amended"]
    assert listed.iloc[0].to_dict() == {"claim": "C1", "task": "fda", "condition": "random", "seeds": "7",
                                        "amended": "fail (1 seed)"}


def test_the_book_shows_the_records_of_the_seeds_it_was_built_with(tmp_path, monkeypatch):
    for rec in _records("C1", "smoke", [0, 1, 2], True) + _records("C1", "smoke", [0], False):
        claims.save(rec, root=tmp_path)
    assert (tmp_path / "smoke" / "C1-fda-random.seeds-0.json").exists()  # a `--seeds 1` build: beside, not over
    by_default = {(r.claim, r.task, r.condition): r for r in claims.load_all("smoke", root=tmp_path)}
    assert by_default[("C1", "fda", "random")].verdict_amended == "holds"  # the protocol's 3 seeds
    monkeypatch.setenv("ROTE_SEEDS", "1")  # planted: the library never reads it, the book's seeds are passed
    assert claims.load_all("smoke", root=tmp_path) == list(by_default.values())
    book = [0]  # what `rote book --seeds 1` / `make book SEEDS=1` pass (rote.settings.Settings.seed_list)
    quick_look = {(r.claim, r.task, r.condition): r for r in claims.load_all("smoke", tmp_path, book)}
    assert quick_look[("C1", "fda", "random")].verdict_amended == "fail (1 seed)"
    assert {tuple(r.seeds) for r in claims.other_records("smoke", tmp_path, book)} == {(0, 1, 2)}
    assert claims.load_all("smoke", root=tmp_path, seeds=[0, 1, 2]) == list(by_default.values())
    book = [0, 1]  # no record of seeds 0, 1: not run, and both others listed
    assert {(r.claim, r.task, r.condition): r for r in claims.load_all("smoke", tmp_path, book)}[
        ("C1", "fda", "random")].status == "not run"
    assert len(claims.other_records("smoke", tmp_path, book)) == 4


def test_a_record_from_before_seed_suffixes_is_read_by_its_seeds(tmp_path):
    (old,) = [r for r in _records("C1", "smoke", [0], True) if r.condition == "random"]
    path = claims.record_path(tmp_path, "smoke", "C1", "fda", "random")  # a 1-seed book wrote the default path
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(claims._plain(__import__("dataclasses").asdict(old))))
    assert {(r.claim, r.condition): r for r in claims.load_all("smoke", root=tmp_path)}[("C1", "random")].status == "not run"
    assert [r.seeds for r in claims.other_records("smoke", root=tmp_path)] == [[0]]
    assert {(r.claim, r.condition): r for r in claims.load_all("smoke", root=tmp_path, seeds=[0])}[
        ("C1", "random")].verdict_amended == "pass (1 seed)"


def test_a_not_run_record_says_why_in_the_scorecard_the_box_and_the_csv(tmp_path):
    rec = claims.placeholder("X1", "fda", "random", "smoke", [0, 1, 2], "X1's grid was not trained in this build")
    claims.save(rec, root=tmp_path)
    (loaded,) = [r for r in claims.load_all("smoke", root=tmp_path) if r.claim == "X1"]
    assert loaded.status == "not run" and loaded.reason == rec.reason and loaded.seeds == [0, 1, 2]
    row = _row(display.claims_table([loaded]), "X1", "fda", "random")
    assert row["deciding checks"] == "not run: X1's grid was not trained in this build"
    assert "- not run: X1's grid was not trained in this build" in site.verdict_box([loaded], claims.CLAIMS)
    assert site.csv_rows([loaded])[0]["reason"] == rec.reason


def test_the_claims_command_takes_seeds_and_lists_the_others(tmp_path, monkeypatch):
    monkeypatch.setenv("ROTE_RESULTS", str(tmp_path))
    for rec in _records("C1", "smoke", [0, 1, 2], True, task="thr") + _records("C1", "smoke", [7], False, task="thr"):
        claims.save(rec, root=tmp_path)

    def claims_cli(*args):
        out = subprocess.run([sys.executable, "-m", "rote", "claims", "--profile", "smoke", *args],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    text = claims_cli()
    assert "Records of other seeds" in text and "fail (1 seed)" in text.split("Records of other seeds")[1]
    by_key = {(r["claim"], r["task"]): r for r in json.loads(claims_cli("--json"))}
    assert by_key[("C1", "thr")]["seeds"] == [0, 1, 2] and by_key[("C1", "thr")]["reason"] == ""
    assert {(r["claim"], r["task"]): r for r in json.loads(claims_cli("--seeds", "1", "--json"))}[
        ("C1", "thr")]["status"] == "not run"

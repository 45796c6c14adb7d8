"""A record says where it was computed and how each run behind it trained (issue 44 part 4: "its records say where
they ran"): the analysis device, host and torch of the process that saved it, and per run key the device, precision
and stacking its manifest records, read from the runs folder the chapter read."""

from __future__ import annotations

import json

from rote import claims, display, plan
from rote.fmt import run_name
from rote.model import pick_device
from rote.runs import how_trained
from rote.verdicts import REQUIRED_PARTS, Check, records, seed_result


def _record(seeds=(0, 1)):
    units = plan.units("smoke", ["thr"], list(seeds))
    (rec,) = records("C1", "smoke", [seed_result(u, {}, [Check(f"c1.{i}", "a", "registered", 1.0, 0.5, True, p)
                                                       for i, p in enumerate(REQUIRED_PARTS["C1"])],
                                                 [u.noisy, u.clean]) for u in units])
    return rec


def _plant(runs, key, manifest):
    folder = runs / run_name("thr", key)
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"files": {}, **manifest}))


def test_a_saved_record_says_where_it_ran_and_how_each_run_trained(tmp_path):
    rec, runs = _record(), tmp_path / "runs"
    keys = list(dict.fromkeys(rec.run_keys))
    assert len(keys) == 4  # seeds 0 and 1, each a noisy run and its twin
    _plant(runs, keys[0], {"device": "cuda", "precision": "bf16", "stacked": 5, "host": "gpu-box"})
    _plant(runs, keys[1], {"device": "cpu", "precision": "bf16", "stacked": 1, "host": "laptop"})
    _plant(runs, keys[2], {"precision": "fp32", "host": "old"})  # a manifest from before device and stacked
    saved = json.loads(claims.save(rec, tmp_path / "results", runs).read_text())
    ran = saved["ran"]
    assert (ran["device"], ran["host"]) == (pick_device().type, __import__("os").uname().nodename) and ran["torch"]
    assert ran["runs"] == {keys[0]: {"device": "cuda", "precision": "bf16", "stacked": 5, "host": "gpu-box"},
                           keys[1]: {"device": "cpu", "precision": "bf16", "stacked": 1, "host": "laptop"},
                           keys[2]: {"precision": "fp32", "host": "old"}, keys[3]: None}
    (loaded,) = [r for r in claims.load_all("smoke", tmp_path / "results", seeds=[0, 1]) if r.claim == "C1"
                 and r.task == "thr"]
    sentence = display.ran_sentence(loaded)
    assert sentence.startswith(f"Computed on {pick_device().type} (") and "from 4 runs" in sentence
    for part in ("1 trained on cuda in bf16, stacked by 5", "1 trained on cpu in bf16, solo",
                 "1 trained in fp32, where and whether stacked not recorded",
                 "1 trained not in the runs folder it was read from"):
        assert part in sentence


def test_a_record_without_seeds_or_from_before_says_nothing_of_where(tmp_path):
    placeholder = claims.placeholder("C1", "thr", "-", "smoke")
    assert claims.how_computed(placeholder) == {} and display.ran_sentence(placeholder) == ""
    assert display.ran_sentence(_record()) == ""  # not saved yet: no stamp, no sentence
    stamped = claims.ClaimRecord(**{**_record().__dict__, "ran": {"device": "mps"}})
    assert json.loads(claims.save(stamped, tmp_path).read_text())["ran"] == {"device": "mps"}  # kept as given


def test_a_solo_run_trained_here_reads_as_solo_on_this_device(smoke_runs):
    run = smoke_runs["thr"]
    how = how_trained("thr", run.config.key, run.path.parent)
    assert how == {"device": "cpu", "precision": run.config.train.precision, "stacked": 1,
                   "host": __import__("os").uname().nodename}
    assert how_trained("thr", "0" * 16, run.path.parent) is None


def test_a_chapter_shows_its_records_as_saved_with_where_they_ran(tmp_path, monkeypatch):
    from rote import chapters
    from rote.settings import Settings

    rec, shown = _record(), []
    monkeypatch.setattr(chapters.verdicts, "records", lambda claim, profile, results: [rec])
    monkeypatch.setattr(display, "show_record", shown.append)
    monkeypatch.setattr(chapters, "glue_finding", lambda *a, **k: None)
    settings = Settings(results=tmp_path / "results", runs=tmp_path / "runs")
    (returned,) = chapters.verdict("C1", "smoke", [], "c1_checks", settings)
    assert shown == [returned] and returned.ran["device"] == pick_device().type and returned.judging
    assert display.ran_sentence(returned).startswith("Computed on")  # the sentence a reader sees above the checks

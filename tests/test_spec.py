"""A claim is declared once (rote/specs/<claim>.py) and an amendment is data (issue 35): every table of
claims follows the specs, a bad spec fails when it is built, and a claim planted by a test (a spec, a
trivial check, a two-cell notebook) reaches the plan, the parameter checks, the verdict layer, the record
names and the scorecard, and a planted third amendment gives its record three readings."""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from pathlib import Path

import pytest
import yaml

from rote import claims, display, plan, verdicts
from rote.build import book, driver, site
from rote.chapters import params as chapter_params
from rote.spec import BEYOND_GROUP, PAPER_GROUP, ClaimSpec, Threshold
from rote.specs import amendment_names, register, specs, unregister

ROOT = Path(__file__).resolve().parents[1]
CAPTIONS = {PAPER_GROUP: "Replication", BEYOND_GROUP: "Beyond the paper"}  # _toc.yml's part of each group


def _spec(**changes) -> ClaimSpec:
    fields = dict(id="P9", title="A planted claim", tasks=("fda",), notebook="99_planted", runs=("noisy",),
                  parts=("effect",), thresholds={"t": Threshold(0.5, moved=(("12", 0.6),))},
                  amendments=("8", "12"))
    return ClaimSpec(**{**fields, **changes})


def test_the_toc_lists_every_claims_notebook_in_its_group_in_order():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = {part["caption"]: [c["file"] for c in part["chapters"]] for part in toc["parts"]}
    for s in specs():
        assert f"book/{s.notebook}" in files[CAPTIONS[s.group]], f"_toc.yml lacks book/{s.notebook} ({s.id})"
    listed = [f for part in files.values() for f in part]
    assert [f for f in listed if f.removeprefix("book/") in {s.notebook for s in specs()}] == \
        [f"book/{s.notebook}" for s in specs()]


def test_every_claim_has_its_modules_notebook_and_plan_parts():
    for s in specs():
        assert (ROOT / "book" / f"{s.notebook}.ipynb").exists()
        for layer in ("verdicts", "chapters"):
            assert (ROOT / "rote" / layer / f"{s.module}.py").exists(), f"rote/{layer}/{s.module}.py ({s.id})"
        assert set(s.runs) <= set(plan.PARTS)
        assert set(claims.THRESHOLDS[s.id]) == set(s.thresholds)
    assert set(book.CHAPTER_RUNS) == set(driver.chapters()) == set(chapter_params.CHAPTER_PARAMS)


@pytest.mark.parametrize("changes, named", [
    ({"parts": ()}, "parts"), ({"thresholds": {}}, "thresholds"), ({"tasks": ("abc",)}, "tasks"),
    ({"notebook": "planted"}, "notebook"), ({"title": " "}, "title"), ({"id": "p9"}, "id"),
    ({"amendments": ("8",)}, "threshold t"), ({"fails_only_on": "c1.order"}, "fails_only_on"),
    ({"thresholds": {"t": Threshold(0.5, "7.5")}, "amendments": ("8",)}, "threshold t"),
])
def test_a_spec_with_a_missing_or_inconsistent_field_fails_naming_it(changes, named):
    with pytest.raises(ValueError, match=f"ClaimSpec '.*': {named}"):
        _spec(**changes)


def test_the_registry_refuses_a_second_claim_with_the_same_names():
    for changes in ({"id": "C1"}, {"notebook": "02_learning_dynamics"}, {"notebook": "98_learning_dynamics"}):
        with pytest.raises(ValueError, match="is already C1's"):
            register(_spec(**changes))
    assert "P9" not in claims.CLAIMS


def test_a_threshold_holds_its_values_by_section():
    t = Threshold(0.5, moved=(("12", 0.6),))
    assert (t.as_of("5"), t.as_of("8"), t.as_of("12"), t.as_of()) == (0.5, 0.5, 0.6, 0.6)
    assert Threshold(0.95, "7.4").as_of("5") is None and Threshold(0.95, "7.4").as_of("7") == 0.95
    with pytest.raises(ValueError, match="must increase"):
        Threshold(0.5, "8", moved=(("7", 0.4),))
    rows = {(r["claim"], r["threshold"]): r for r in claims.threshold_rows()}
    assert rows[("C2", "lens_interval_level")] == {"claim": "C2", "threshold": "lens_interval_level", "registered": 0.95,
                                                   "section": "7.4", "amended": 0.95, "amended in": ""}
    assert rows[("X1", "rise_max")]["section"] == "9"


# -- the planted claim ------------------------------------------------------------------------------------
PARAMETERS = 'profile = "quick"\ntasks = ["fda"]\nseeds = None\n'


def _planted_checks(value: float) -> list[verdicts.Check]:
    """The planted claim's trivial check: ``value`` against each value its threshold had (the one a later
    amendment moved stays, superseded there), and a null check amendment 2 added, left unresolved."""
    t = claims.SPECS["P9"].thresholds["t"]
    out = []
    for i, (section, threshold) in enumerate(t.values):
        kind, last = "registered" if i == 0 else "amended", i == len(t.values) - 1
        check = verdicts.at_least(verdicts.CheckLabel("p9.t" if last else f"p9.t.{section}", f"value vs t ({section})",
                                                      kind, "effect"), value, threshold, missing="not measured")
        check = check.since(section)
        out.append(check if last else verdicts.supersede(check, f"{t.moved[i][0]}: moved", t.moved[i][0]))
    null = verdicts.Check("p9.null", "a null", "null", None, 0.1, None, "effect", reason="planted").since("8")
    return out + [null]


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """The planted claim P9: its spec in the registry, its chapter module (parameters) and its notebook
    (a parameters cell and one more), removed again afterwards."""
    from rote.chapters.params import ChapterParams, param, seed_list, task_list

    @dataclasses.dataclass(frozen=True)
    class Params(ChapterParams):
        tasks: list = param(["fda"], task_list(("fda",)))
        seeds: list | None = param(None, seed_list())

    module = types.ModuleType("rote.chapters.p9")
    module.Params = Params
    monkeypatch.setitem(sys.modules, "rote.chapters.p9", module)
    cells = [{"cell_type": "code", "source": PARAMETERS, "metadata": {"tags": ["parameters"]}, "outputs": [], "id": "p0",
              "execution_count": None},
             {"cell_type": "code", "source": "print(tasks)", "metadata": {}, "outputs": [], "execution_count": None,
              "id": "p1"}]
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "99_planted.ipynb").write_text(json.dumps(
        {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
         "nbformat": 4, "nbformat_minor": 5}))
    monkeypatch.setattr(site, "BOOK_DIR", tmp_path / "book")
    spec = register(_spec())
    yield spec
    unregister(spec.id)


def test_a_planted_claim_reaches_the_plan_parameters_verdicts_records_and_scorecard(planted, tmp_path):
    assert claims.CLAIMS["P9"] == "A planted claim" and "P9" in claims.CLAIM_CHAPTERS
    assert book.chapter_runs("planted") == ("noisy",) and book.CHAPTER_RUNS["planted"] == ("noisy",)
    runs = book.book_plan("smoke", ["planted"], {}, [0])
    assert [(c.task, c.data.noise_kind, c.data.noise_ratio > 0) for c in runs] == [("fda", "random", True), ("fda", "digit", True)]
    assert chapter_params.chapter_params("planted").defaults() == {"profile": "quick", "settings": {}, "tasks": ["fda"],
                                                                   "seeds": None}
    with pytest.raises(Exception, match="tasks must be"):
        driver.resolve_parameters("planted", "smoke", {"tasks": "thr"})
    unit = plan.units("smoke", ["fda"], [0])[0]
    checks = _planted_checks(0.55)
    assert verdicts.claim_of(checks) == "P9" and verdicts.REQUIRED_PARTS["P9"] == ("effect",)
    (rec,) = verdicts.records("P9", "smoke", [verdicts.seed_result(unit, {"value": 0.55}, checks, [unit.noisy])])
    path = claims.save(rec, tmp_path / "results")
    assert path.name == "P9-fda-random.seeds-0.json"
    assert [(p.claim, p.condition) for p in claims.expected("smoke") if p.claim == "P9"] == [("P9", "random"), ("P9", "digit")]
    loaded = [r for r in claims.load_all("smoke", tmp_path / "results", seeds=[0]) if r.claim == "P9"]
    assert [bool(r.per_seed) for r in loaded] == [True, False]  # the digit condition: not run
    row = display.claims_table(loaded).iloc[0]
    assert (row.claim, row.task, row.condition, row.group, row.section) == ("P9", "fda", "random", PAPER_GROUP,
                                                                           "99_planted#verdict")


def test_a_planted_third_amendment_moves_a_threshold_and_the_record_shows_three_readings(planted, tmp_path):
    assert amendment_names() == {"7": "amendment 1", "8": "amendment 2", "12": "amendment 3"}
    assert claims.THRESHOLDS["P9"] == {"t": 0.6} and claims.SPECS["P9"].values("5") == {"t": 0.5}
    unit = plan.units("smoke", ["fda"], [0])[0]
    (rec,) = verdicts.records("P9", "smoke", [verdicts.seed_result(unit, {}, _planted_checks(0.55), [unit.noisy])])
    claims.save(rec, tmp_path)
    (loaded,) = [r for r in claims.load_all("smoke", tmp_path, seeds=[0]) if r.claim == "P9" and r.per_seed]
    expected = {"registered": "pass (1 seed)", "amendment 2": "unresolved (1 seed)", "amendment 3": "fail (1 seed)"}
    assert verdicts.readings(rec) == verdicts.readings(loaded) == expected
    assert (loaded.verdict_registered, loaded.verdict_amended) == ("pass (1 seed)", "fail (1 seed)")
    stored = {c["id"]: c for c in loaded.per_seed[0]["checks"]}
    assert stored["p9.t.5"]["history"] == [["5", "registered"], ["12", "superseded"]]  # beyond section5 and was
    assert stored["p9.t"]["history"] == [["12", "amended"]] and "history" not in stored["p9.null"]
    change = verdicts.amendment_change(loaded, "12")
    assert change == {"amendment2": "unresolved (1 seed)", "amendment3": "fail (1 seed)",
                      "why": "added by amendment 3: p9.t (fail)"}


def test_a_real_claims_checks_keep_their_record_form():
    """section5 and was say a real check's history; its record has no history field (records stay as they were)."""
    check = verdicts.supersede(verdicts.Check("c5.share.registered", "s", "registered", 0.3, 0.2, True, "heuristic share"),
                               "8.3: cut", "8.3")
    assert (check.section5, check.was, check.history) == (True, "registered", (("5", "registered"), ("8.3", "superseded")))
    assert "history" not in check.to_dict()
    assert verdicts.Check(**check.to_dict()).history == (("5", "registered"), ("8", "superseded"))
    assert [verdicts.counts_in(check, r) for r in ("registered", "7", "amended")] == [True, True, False]


def test_records_refuse_checks_of_another_claim():
    unit = plan.units("smoke", ["fda"], [0])[0]
    wrong = [verdicts.Check("c9.x", "x", "registered", 1.0, 0.5, True, "ordering")]
    with pytest.raises(ValueError, match="the checks of C1, seed 0, are no claim's"):
        verdicts.records("C1", "smoke", [verdicts.seed_result(unit, {}, wrong, [unit.noisy])])


def test_one_spec_module_imported_alone_registers_every_spec():
    import subprocess
    import sys

    code = "from rote.specs import c5; from rote.specs import SPECS; print(c5.SPEC.id, len(SPECS))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "C5" and int(out[1]) >= 6

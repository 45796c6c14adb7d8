"""The stability build of protocol 10 on smoke, end to end (slow: it trains and executes chapters)."""

import json

import pytest

from rote import claims, display, stability
from rote.build import book, site


def _records(root):
    out = {}
    for path in sorted((root / "smoke").glob("*.json")):
        if path.name.endswith(".stability.json"):
            continue
        rec = json.loads(path.read_text())
        rec.pop("created")
        out[path.name] = rec
    return out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_smoke_stability_build_keeps_the_default_records_and_writes_an_entry_per_row(tmp_path, monkeypatch):
    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    monkeypatch.setenv("ROTE_PLAIN_PROGRESS", "1")
    results = claims.results_root()
    assert book.build_book("smoke", ["learning_dynamics"], {}, book.BookOptions(render=False, seeds=1)) == 0
    before = _records(results)
    assert before, "the default build wrote no record"
    assert book.build_book("smoke", ["learning_dynamics"], {},
                           book.BookOptions(render=False, seeds=1, stability=True)) == 0
    assert _records(results) == before  # the stability build never changes a default record
    why_not = stability.precision_not_run()
    rows = [r for r in claims.load_all("smoke", seeds=[0]) if r.claim == "C1"]
    assert len(rows) == 3
    for rec in rows:
        entry = claims.load_stability(rec)
        assert entry is not None, f"no stability entry for {rec.claim} {rec.task} {rec.condition}"
        assert entry["status"] in ("stable", "fragile", "not run")
        seeds = entry["changes"]["seeds"]
        assert seeds["moved_verdict"] is not None and seeds["verdict"] != "not run"  # seeds 3, 4 ran
        precision = entry["changes"]["precision"]
        if why_not:  # no native bf16: that half is not run, with the reason
            assert precision["verdict"] == "not run" and "native bf16" in precision["reason"]
            assert entry["status"] in ("not run", "fragile")
        else:
            assert precision["moved_verdict"] is not None
            twin = claims.load_all("smoke", book.stability_root("precision"), seeds=[0])
            twin = next(t for t in twin if (t.claim, t.task, t.condition) == (rec.claim, rec.task, rec.condition))
            assert twin.per_seed[0]["precision"] == stability.other_precision(rec.task)
    table = display.claims_table(claims.load_all("smoke", seeds=[0]))
    assert "stability" in table.columns
    assert set(table[table.claim == "C1"].stability) <= {"stable", "not run", "fragile (precision)",
                                                          "fragile (seeds)", "fragile (precision, seeds)"}

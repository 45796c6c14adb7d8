"""A record judged by other code than today's is shown as ``stale``, with the command that rebuilds it, and never
as a verdict (issue 43 part 5): on the scorecard (its table, heat map and other seeds), on the front page and in
``rote claims``. Records carry the fingerprint of the judging code (specs, verdicts, claims, analyses)."""

from __future__ import annotations

import json
import subprocess
import sys

from rote import claims, display, plan, plots
from rote.build import frontpage, site
from rote.config import fingerprint_sources
from rote.verdicts import REQUIRED_PARTS, Check, records, seed_result

OLD = "0123456789ab"  # a judging-code fingerprint that is not today's


def _record(claim="C1", task="thr", seeds=(0,), profile="smoke"):
    units = plan.units(profile, [task], list(seeds))
    (rec,) = records(claim, profile, [seed_result(u, {}, [Check(f"{claim.lower()}.{i}", "a", "registered", 1.0, 0.5,
                                                                True, p) for i, p in enumerate(REQUIRED_PARTS[claim])],
                                                  [u.noisy, u.clean]) for u in units])
    return rec


def _shown_row(root, claim="C1", task="thr"):
    (rec,) = [r for r in claims.load_shown("smoke", root, seeds=[0]) if (r.claim, r.task) == (claim, task)]
    return rec


def test_a_record_saved_today_is_current_and_one_of_older_judging_code_is_stale(tmp_path):
    claims.save(_record(), tmp_path)
    rec = _shown_row(tmp_path)
    assert rec.judging == claims.judging_code() and rec.verdict_amended == "pass (1 seed)" and rec.per_seed
    claims.save(_record().__class__(**{**_record().__dict__, "judging": OLD}), tmp_path)
    raw, stale = [r for r in claims.load_all("smoke", tmp_path, seeds=[0]) if (r.claim, r.task) == ("C1", "thr")][0], \
        _shown_row(tmp_path)
    assert raw.judging == OLD and raw.verdict_amended == "pass (1 seed)"  # the stored record is kept as it is
    assert (stale.status, stale.verdict_amended, stale.verdict_registered) == ("stale", "stale", "stale")
    assert stale.per_seed == [] and stale.seeds == [0]  # no seed's checks: it counts as no verdict anywhere
    assert "python -m rote book --profile smoke --chapter learning_dynamics --seeds 1" in stale.reason
    assert OLD in stale.reason and claims.judging_code() in stale.reason


def test_a_record_from_before_the_judging_fingerprint_is_stale(tmp_path):
    path = claims.save(_record(), tmp_path)
    data = json.loads(path.read_text())
    del data["judging"]
    path.write_text(json.dumps(data))
    assert _shown_row(tmp_path).status == "stale" and "not recorded" in _shown_row(tmp_path).reason


def test_the_scorecard_and_its_heat_map_show_stale_not_a_verdict(tmp_path):
    claims.save(_record().__class__(**{**_record().__dict__, "judging": OLD}), tmp_path)
    table = display.claims_table(claims.load_shown("smoke", tmp_path, seeds=[0]))
    row = table[(table.claim == "C1") & (table.task == "THR".lower())].iloc[0]
    assert (row.amended, row.registered, row.seeds) == ("stale", "stale", "")
    assert row["deciding checks"].startswith("stale: judged by code other than today's") and "--chapter" in row[
        "deciding checks"]
    assert plots._shade("stale") != plots._shade("stale")  # NaN: grey, neither holds nor fails
    source = "".join("".join(c["source"]) for c in json.loads((site.BOOK_DIR / "scorecard.ipynb").read_text())["cells"])
    assert "records = claims.load_shown(profile, book.results, book.seed_list)" in source  # the page's settings
    assert "claims.shown(claims.other_records(profile, book.results, book.seed_list))" in source


def test_the_front_page_says_stale_with_the_command(tmp_path):
    claims.save(_record().__class__(**{**_record().__dict__, "judging": OLD}), tmp_path)
    shown = claims.load_shown("smoke", tmp_path, seeds=[0])
    text = frontpage.results_markdown(frontpage.Build("smoke", (0,), (0, 1, 2), tuple(shown)))
    sentence = next(line for line in text.splitlines() if line.startswith("- **C1**"))
    assert "is stale (judged by older code) for THR (judged by code other than today's" in sentence
    assert "holds" not in sentence and "passes" not in sentence
    assert "the others say *not run* or *stale*" in text
    assert "| THR | - | stale | stale |" in text


def test_the_claims_command_shows_stale(tmp_path, monkeypatch):
    monkeypatch.setenv("ROTE_RESULTS", str(tmp_path))
    claims.save(_record().__class__(**{**_record().__dict__, "judging": OLD}), tmp_path)
    out = subprocess.run([sys.executable, "-m", "rote", "claims", "--profile", "smoke", "--seeds", "1", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    (row,) = [r for r in json.loads(out.stdout) if (r["claim"], r["task"]) == ("C1", "thr")]
    assert row["status"] == "stale" and row["per_seed"] == [] and "--chapter learning_dynamics" in row["reason"]


def test_the_judging_code_covers_the_specs_verdicts_claims_and_analyses():
    package = claims.Path(claims.__file__).resolve().parent
    roots = tuple(p.relative_to(package).as_posix() for pattern in claims.JUDGING_MODULES
                  for p in sorted(package.glob(pattern)))
    covered = set(fingerprint_sources(package, roots))
    assert {"spec.py", "claims.py", "specs/c3.py", "verdicts/core.py", "verdicts/x1.py", "analysis/intervals.py"} \
        <= covered
    assert "site.py" not in covered and "plots.py" not in covered  # the book's display is not judging code
    assert len(claims.judging_code()) == 12


def test_a_record_of_other_seeds_rebuilds_by_its_own_seeds():
    rec = _record(seeds=(7,))
    assert claims.rebuild_command(rec) == "python -m rote run learning_dynamics --profile smoke -p seeds '[7]'"

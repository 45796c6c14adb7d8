"""The front page's generated parts (rote.build.frontpage) on planted claim records: the sentence per claim,
the table of every row, the build-time sentence, and staging them into the site's intro."""

import dataclasses

import pytest
import yaml

from rote import claims, plan, stability
from rote.build import driver, frontpage, site, staging, timings
from rote.verdicts import REQUIRED_PARTS, Check, records, seed_result

OUTCOMES = {"pass": True, "fail": False, "unresolved": None}


def _checks(claim, outcome, registered_fails=False):
    """One registered check per required part, all with ``outcome``; ``registered_fails``: a section-5
    check that the amended reading supersedes fails too (the registered reading fails, the amended not)."""
    ids = [f"{claim.lower()}.{i}" for i in range(len(REQUIRED_PARTS[claim]))]
    if claim == "X1":
        ids[0] = "x1.cost_largest"  # X1 fails across seeds only on this check (protocol 9)
    checks = [Check(i, f"check {i}", "registered", 1.0, 0.5, OUTCOMES[outcome], part)
              for i, part in zip(ids, REQUIRED_PARTS[claim])]
    if registered_fails:
        checks.append(Check(f"{claim.lower()}.old", "old", "superseded", 0.1, 0.5, False, REQUIRED_PARTS[claim][0],
                            section5=True, reason="7.5: replaced"))
    return checks


def _planted(claim, task, condition, outcomes, registered_fails=False, profile="quick"):
    """The record of ``claim`` on ``task`` / ``condition`` whose seeds 0, 1, ... have ``outcomes``."""
    units = [u for u in plan.units(profile, [task], list(range(len(outcomes)))) if u.condition == condition]
    (rec,) = records(claim, profile, [seed_result(u, {}, _checks(claim, o, registered_fails), [u.noisy, u.clean])
                                      for u, o in zip(units, outcomes)])
    return dataclasses.replace(rec, code="planted")  # one code computed them all (8.6: stability compares like with like)


def _build(planted, profile="quick"):
    """The build's records: the planted ones, a ``not run`` placeholder for every other row."""
    mine = {(r.claim, r.task, r.condition): r for r in planted}
    return [mine.get((p.claim, p.task, p.condition), p) for p in claims.expected(profile)]


def _rows(planted):
    return frontpage.rows(_build(planted))


P, F, U = "pass", "fail", "unresolved"


def test_a_claim_that_holds_in_one_condition_fails_in_another_and_is_mixed_on_thr():
    rows = _rows([_planted("C1", "fda", "random", [F, F, F]), _planted("C1", "fda", "digit", [P, P, P]),
                  _planted("C1", "thr", "-", [P, P, F])])
    assert frontpage.claim_sentence("C1", rows) == \
        "C1 holds for FDA `digit`; it fails for FDA `random`; it is mixed for THR (2 pass, 1 fail)."


def test_every_row_alike_is_said_once():
    rows = _rows([_planted("C2", t, c, [P, P, P]) for t, c in (("fda", "random"), ("fda", "digit"), ("thr", "-"))])
    assert frontpage.claim_sentence("C2", rows) == \
        "C2 holds for every task and condition (FDA `random`, FDA `digit`, THR)."
    assert frontpage.claim_sentence("C3", rows) == \
        "C3 has not run yet for every task and condition (FDA `random`, FDA `digit`, THR)."


def test_unresolved_and_missing_rows_say_so_with_the_chapters_reason():
    x1 = claims.placeholder("X1", "fda", "random", "quick", [0, 1, 2], "X1's grid was not trained in this build")
    rows = _rows([_planted("C5", "fda", "random", [U, U, U]), x1])
    assert frontpage.claim_sentence("C5", rows) == \
        "C5 is unresolved for FDA `random`; it has not run yet for FDA `digit`."
    assert frontpage.claim_sentence("X1", rows) == \
        "X1 has not run yet for FDA `random` (X1's grid was not trained in this build)."


def test_a_one_seed_build_passes_rather_than_holds():
    rows = _rows([_planted("C4", "fda", "random", [P]), _planted("C4", "fda", "digit", [F]),
                  _planted("C4", "thr", "-", [P])])
    assert [r.amended for r in rows if r.claim == "C4"] == ["pass (1 seed)", "fail (1 seed)", "pass (1 seed)"]
    assert frontpage.claim_sentence("C4", rows) == \
        "C4 passes for FDA `random` and THR; it fails for FDA `digit` (1 seed)."


def test_the_registered_reading_is_named_where_its_word_differs():
    rows = _rows([_planted("C3", "fda", "random", [P, P, P], registered_fails=True),
                  _planted("C3", "fda", "digit", [P, P, P]), _planted("C3", "thr", "-", [P, P, P])])
    assert frontpage.claim_sentence("C3", rows) == ("C3 holds for every task and condition (FDA `random`, FDA "
                                                    "`digit`, THR); in the registered reading it fails for FDA `random`.")
    assert frontpage.claim_sentence("X1", frontpage.rows([_planted("X1", "fda", "random", [P, P, P],
                                                                   registered_fails=True)])) == \
        "X1 holds for FDA `random`."  # X1 has one reading (no amendment): its registered word is not named


def test_a_planted_change_of_records_changes_the_sentence_and_the_table():
    before = _rows([_planted("C1", "fda", "random", [P, P, P])])
    after = _rows([_planted("C1", "fda", "random", [P, F, P])])
    assert "holds for FDA `random`" in frontpage.claim_sentence("C1", before)
    assert "is mixed for FDA `random` (2 pass, 1 fail)" in frontpage.claim_sentence("C1", after)
    row = lambda rows: next(line for line in frontpage.results_table(rows) if "| FDA | random |" in line and "C1" in line)
    assert row(before) == "| {doc}`C1 <02_learning_dynamics>` | FDA | random | holds | holds |"
    assert row(after) == ("| {doc}`C1 <02_learning_dynamics>` | FDA | random | mixed: 2 pass, 1 fail, 0 unresolved "
                          "| mixed: 2 pass, 1 fail, 0 unresolved |")


def test_the_table_has_a_row_per_record_and_stability_only_where_computed(tmp_path):
    planted = [_planted("C2", "fda", "random", [P, P, P]), _planted("C2", "fda", "digit", [P, P, F])]
    build = _build(planted)
    table = frontpage.results_table(frontpage.rows(build, root=tmp_path))
    assert table[0] == "| claim | task | condition | amended | registered |"
    assert len(table) == 2 + len(claims.expected("quick"))
    assert "| {doc}`C5 <06_outlier_heuristics>` | FDA | digit | not run | not run |" in table
    entry = stability.stability(planted[0], None, _planted("C2", "fda", "random", [P, F, P, P, F]))
    claims.save_stability(planted[0], entry.to_dict(), root=tmp_path)
    rows = frontpage.rows(build, root=tmp_path)
    table = frontpage.results_table(rows)
    assert table[0] == "| claim | task | condition | amended | registered | stability |"
    assert "| {doc}`C2 <03_intermediate_results>` | FDA | random | holds | holds | fragile (seeds) |" in table
    assert "| {doc}`C2 <03_intermediate_results>` | FDA | digit | mixed: 2 pass, 1 fail, 0 unresolved " \
           "| mixed: 2 pass, 1 fail, 0 unresolved | not run |" in table  # ran, but no entry
    assert "| {doc}`C3 <04_interventions>` | FDA | random | not run | not run |  |" in table  # never ran
    assert frontpage.claim_sentence("C2", rows) == \
        "C2 holds for FDA `random` (fragile: seeds); it is mixed for FDA `digit` (2 pass, 1 fail); " \
        "it has not run yet for THR."


def test_results_section_names_the_seeds_every_claim_and_the_table():
    build = _build([_planted("C1", "fda", "random", [P, P, P])])
    text = frontpage.results_markdown(frontpage.Build("quick", (0, 1, 2), (0, 1, 2), tuple(build)))
    assert text.startswith("This build of the `quick` profile ran seeds 0, 1 and 2 (the protocol's seeds); "
                           "1 of its 15 claim records holds verdicts; the others say *not run*.")
    bullets = [line for line in text.splitlines() if line.startswith("- ")]
    assert [b.split("**")[1] for b in bullets] == list(claims.CLAIMS)  # C1 .. C5, X1
    assert bullets[0] == ("- **C1** ({doc}`Generalize first, then memorize; the memorization is benign "
                          "<02_learning_dynamics>`) holds for FDA `random`; it has not run yet for FDA `digit` and THR.")
    assert "| claim | task | condition | amended | registered |" in text
    assert "was not computed for this build" in text  # no stability entry
    one = frontpage.results_markdown(frontpage.Build("quick", (0,), (0, 1, 2),
                                                     tuple(_build([_planted("C1", "fda", "random", [P])]))))
    assert "ran seed 0 (not the protocol's seeds 0, 1 and 2: a quick look" in one


class _Estimator:
    """Planted estimates: ``source`` for every run, ``seconds`` each."""

    def __init__(self, source, seconds=600.0):
        self.source, self.s = source, seconds

    def estimate(self, config):
        from rote.build.timings import Estimate

        return Estimate(self.s, self.source, 1)

    def summary(self, configs):
        return f"estimates: {len(list(configs))} from the static table or FLOP formula (rote/build/timings.py)"


def test_build_time_says_where_its_estimate_comes_from():
    n = len(plan.plan("quick", [0, 1, 2]))
    measured = frontpage.build_time_markdown(frontpage.Build("quick", (0, 1, 2), (0, 1, 2), chapter_seconds=725.0),
                                             _Estimator("measured"), workers=2)
    hours = timings.fmt_seconds(timings.pool_seconds([600.0] * n, 2))
    assert measured.startswith(f"A cold build of the `quick` profile (`python -m rote book --profile quick`, seeds "
                               f"0, 1 and 2, nothing cached, X1's grid aside) trains {n} runs: about {hours} on the "
                               "build machine's 2 cores, estimated from the runs of the same shapes")
    assert "Executing the chapters took 12.1 min (each chapter's latest execution" in measured
    formula = frontpage.build_time_markdown(frontpage.Build("quick", (0,), (0, 1, 2)), _Estimator("formula"), workers=1)
    assert "by the plan's estimate, not a measurement of a build" in formula and "static table" in formula
    assert "1 core," in formula and "Executing the chapters" not in formula


def test_fill_replaces_between_the_markers_and_keeps_them():
    text = "a\n<!-- rote:x -->\nold\n<!-- /rote:x -->\nb\n"
    filled = frontpage.fill(text, "rote:x", "new")
    assert filled == "a\n<!-- rote:x -->\nnew\n<!-- /rote:x -->\nb\n"
    assert frontpage.fill(filled, "rote:x", "newer") == "a\n<!-- rote:x -->\nnewer\n<!-- /rote:x -->\nb\n"
    assert frontpage.fill("no marker", "rote:x", "new") == "no marker"
    with pytest.raises(ValueError, match="never closes"):
        frontpage.fill("<!-- rote:x -->\nold", "rote:x", "new")


def test_the_source_intro_has_both_places_and_links_only_protocol_targets_that_stage():
    import re

    source = (site.BOOK_DIR / "intro.md").read_text()
    for marker in (frontpage.RESULTS, frontpage.BUILD_TIME, frontpage.AMENDMENTS):
        assert f"<!-- {marker} -->" in source and f"<!-- /{marker} -->" in source
    assert "whole book in minutes" not in source and "has not been built yet" not in source
    assert "**Amendment 1**" not in source  # the list of amendments is generated from their table
    listed = claims.amendments_markdown(frontpage.protocol_anchor)
    linked = set(re.findall(r"\{ref\}`[^`<]*<(protocol-[0-9-]+)>`", source + listed))
    assert linked == {frontpage.protocol_anchor(s) for s in frontpage.LINKED_SECTIONS}
    staged = frontpage.protocol_markdown()
    assert linked and all(f"({a})=" in staged for a in linked)
    assert "(protocol-8-5)=\n### 8.5 " in staged and "(protocol-7)=\n## 7. Amendment 1" in staged


def test_stage_site_writes_the_results_into_the_intro_and_stages_the_protocol(tmp_path, monkeypatch):
    monkeypatch.setenv("ROTE_SITE", str(tmp_path / "site"))
    from rote.settings import Settings

    book = Settings(profile="smoke", seeds=1, results=tmp_path / "results")  # `rote book --seeds 1`, $ROTE_RESULTS
    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    for rec in (_planted("C1", "fda", "random", [P], profile="smoke"), _planted("C1", "thr", "-", [F], profile="smoke")):
        claims.save(rec, book.results)
    for chapter, seconds in (("tasks", 30.0), ("learning_dynamics", 50.0)):  # the chapters' latest executions
        driver._record_build("smoke", chapter, {"seconds": seconds, "ok": True, "executed": "now"})
    staged = staging.stage_site("smoke", book)
    intro = (staged / "book" / "intro.md").read_text()
    results = intro.split("<!-- rote:results -->")[1].split("<!-- /rote:results -->")[0]
    assert "When the site is built" not in results  # the source's stand-in is replaced
    assert "ran seed 0 (not the protocol's seeds 0, 1 and 2" in results
    assert "passes for FDA `random`; it fails for THR; it has not run yet for FDA `digit` (1 seed)." in results
    assert "| {doc}`C1 <02_learning_dynamics>` | FDA | random | pass (1 seed) | pass (1 seed) |" in results
    timing = intro.split("<!-- rote:build-time -->")[1].split("<!-- /rote:build-time -->")[0]
    assert "A cold build of the `smoke` profile" in timing and "trains" in timing
    assert "Executing the chapters took 80 s (each chapter's latest execution" in timing
    assert "python -m rote book --profile smoke" in intro  # the static page note stays
    listed = intro.split("<!-- rote:amendments -->")[1].split("<!-- /rote:amendments -->")[0]
    assert "- **Amendment 3** ({ref}`section 12 <protocol-12>`, 2026-12-04): " in listed  # from the table
    assert "- **Clarification 8.5** ({ref}`section 8.5 <protocol-8-5>`, 2026-12-01): " in listed
    protocol = (staged / "book" / "protocol.md").read_text()
    assert protocol.startswith("# Replication protocol\n\n```{note}") and "(protocol-7)=\n## 7. Amendment 1" in protocol
    assert "book/protocol" in (staged / "_toc.yml").read_text()

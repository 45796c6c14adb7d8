"""Amendments are data all the way down (issue 43 part 2): a planted amendment "99" that moves one of C3's
thresholds, written only into the spec data (the threshold's ``moved`` and the table of amendments), leaves
the registered check at its registered value, moves the amended one, records both with their sections, and
the chapter's glued prose says which is which."""

from __future__ import annotations

import pytest

from rote import specs as spec_package, verdicts
from rote.spec import Addition, Threshold, thresholds_as_of
from rote.specs import SPECS, amendment_names
from rote.verdicts.core import Check, moved_checks
from test_verdicts_c3 import GOOD, _stats, _sweep

NAME, PLANTED = "overlap_over_random_min", 30.0  # 30 x random: the overlap of 0.6 passes 3 x, fails 30 x


@pytest.fixture
def planted(monkeypatch):
    """Amendment "99" moves C3's overlap-over-random threshold: spec data only."""
    registered = SPECS["C3"].thresholds[NAME]
    monkeypatch.setitem(SPECS["C3"].thresholds, NAME, Threshold(registered.value, registered.section,
                                                                 moved=(("99", PLANTED),)))
    monkeypatch.setattr(spec_package, "AMENDMENTS", spec_package.AMENDMENTS + (
        Addition("99", "amendment", "2027-01-01", "planted by a test", "moves one threshold of C3"),))
    return registered.value


def _checks():
    return verdicts.c3.checks(_sweep(GOOD), 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))[1]


def test_without_a_move_the_checks_are_built_once_and_record_no_section_beyond_the_amendments():
    checks = _checks()
    assert not [c for c in checks if "@" in c.id]
    assert SPECS["C3"].moves() == () and SPECS["C3"].amended_in == SPECS["C3"].amendments


def test_the_registered_check_keeps_its_value_and_the_amended_one_moves(planted):
    checks = _checks()
    before, after = verdicts.find(checks, "c3.overlap.random"), verdicts.find(checks, "c3.overlap.random@99")
    assert before.threshold == pytest.approx(planted * 0.03) and before.passed is True
    assert before.history == (("5", "registered"), ("99", "superseded"))
    assert after.threshold == pytest.approx(PLANTED * 0.03) and after.passed is False
    assert after.history == (("99", "amended"),) and f"vs {PLANTED} x random" in after.name
    assert verdicts.seed_verdict(checks, "registered") == "pass" and verdicts.seed_verdict(checks, "8") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "fail"
    untouched = verdicts.find(checks, "c3.overlap.registered")  # reads overlap_min, which did not move
    assert untouched.history == (("5", "registered"),)


def test_the_record_shows_both_with_their_sections_and_the_readings_name_the_amendment(planted):
    from rote import plan

    u = plan.units("smoke", ["fda"], [0])[0]
    (rec,) = verdicts.records("C3", "smoke", [verdicts.seed_result(u, {}, _checks(), [u.noisy])])
    stored = {c["id"]: c for c in rec.per_seed[0]["checks"]}
    assert stored["c3.overlap.random"]["history"] == [["5", "registered"], ["99", "superseded"]]
    assert stored["c3.overlap.random@99"]["history"] == [["99", "amended"]]
    assert amendment_names()["99"] == "amendment 4" and SPECS["C3"].amended_in[-1] == "99"
    assert verdicts.readings(rec) == {"registered": "pass (1 seed)", "amendment 1": "pass (1 seed)",
                                      "amendment 2": "pass (1 seed)", "amendment 4": "fail (1 seed)"}
    change = verdicts.amendment_change(rec)
    assert change == {"amendment2": "pass (1 seed)", "amendment4": "fail (1 seed)",
                      "why": "added by amendment 4: c3.overlap.random@99 (fail)"}
    assert (rec.verdict_registered, rec.verdict_amended) == ("pass (1 seed)", "fail (1 seed)")
    assert verdicts.amendment_moves(rec) == [{"amendment": "amendment 4", "before": "pass (1 seed)",
                                              "after": "fail (1 seed)", "why": change["why"]}]  # the scorecard's rows


def test_the_glued_prose_quotes_the_registered_value_and_says_which_reading_reads_which(planted, monkeypatch):
    from rote import chapters
    from rote.chapters import c3

    glued = {}
    monkeypatch.setattr(chapters, "glue_values", glued.update)
    c3.glue_thresholds()
    assert glued["c3_over_random"] == planted  # the method text's registered value, not the moved one
    text = glued["c3_amended_thresholds"].data
    assert f"`{NAME}` is {planted:g} as registered (section 5), which the registered reading judges by" in text
    assert f"{PLANTED:g} as of amendment 4 (section 99), which the amended reading judges by" in text


def test_the_unplanted_chapter_glues_no_amended_threshold(monkeypatch):
    from rote import chapters
    from rote.chapters import c3

    glued = {}
    monkeypatch.setattr(chapters, "glue_values", glued.update)
    c3.glue_thresholds()
    assert glued["c3_amended_thresholds"].data == ("No amendment moved a threshold of C3: the registered and the "
                                                   "amended reading judge by the same values.")
    assert glued["c3_over_random"] == SPECS["C3"].thresholds[NAME].value


def test_thresholds_are_read_as_of_the_section_a_reading_builds():
    t = Threshold(1.0, moved=(("8", 2.0),))
    assert [t.read(s) for s in ("5", "7", "8", "8.2", None)] == [1.0, 1.0, 2.0, 2.0, 2.0]
    assert Threshold(0.5, "7.5").read("5") == 0.5  # added by an amendment: its check reads it as added
    with thresholds_as_of("5"):
        assert SPECS["C3"].read()[NAME] == SPECS["C3"].thresholds[NAME].value
    with pytest.raises(ValueError):
        with thresholds_as_of("five"):
            pass


def _check(check_id, threshold, passed, history):
    return Check(check_id, f"check {check_id}", history[-1][1], 0.5, threshold, passed, "p", history=history)


def test_a_check_added_in_or_after_the_moving_section_reads_the_new_value_without_a_copy():
    before = [_check("p9.a", 0.4, True, (("5", "registered"),)), _check("p9.b", 0.4, True, (("8.2", "amended"),)),
              _check("p9.c", 0.4, True, (("5", "registered"), ("7", "superseded")))]
    after = [_check("p9.a", 0.6, False, (("5", "registered"),)), _check("p9.b", 0.6, False, (("8.2", "amended"),)),
             _check("p9.c", 0.6, False, (("5", "registered"), ("7", "superseded")))]
    merged = {c.id: c for c in moved_checks(before, after, "8")}
    assert set(merged) == {"p9.a", "p9.a@8", "p9.b", "p9.c"}
    assert merged["p9.b"].threshold == 0.6  # added in 8.2, after the move: no registered value to keep
    assert merged["p9.c"] == before[2]  # superseded before the move: kept as it was, no copy
    assert merged["p9.a"].kind == "superseded" and merged["p9.a@8"].history == (("8", "amended"),)


def test_the_amendment_table_names_the_amendments_and_dates_amendment_3():
    table = {a.section: a for a in spec_package.additions()}
    assert amendment_names() == {"7": "amendment 1", "8": "amendment 2", "12": "amendment 3"}
    assert table["12"].date == "2026-12-04" and table["12"].kind == "amendment"
    assert set(s.split(".")[0] for spec in SPECS.values() for s in spec.amended_in) <= set(table)
    with pytest.raises(ValueError, match="whole section"):
        Addition("8.7", "amendment", "2026-12-01", "t", "s")


def test_a_copy_keeps_the_changes_after_the_move_and_a_check_only_the_moved_build_makes_starts_there():
    before = [_check("p9.a", 0.4, True, (("5", "registered"), ("8.6", "superseded")))]
    after = [_check("p9.a", 0.6, False, (("5", "registered"), ("8.6", "superseded"))),
             _check("p9.d", 0.6, False, (("7.5", "amended"),))]
    merged = {c.id: c for c in moved_checks(before, after, "8.2")}
    assert merged["p9.a"].history == (("5", "registered"), ("8.2", "superseded"))
    assert merged["p9.a@8.2"].history == (("8.2", "amended"), ("8.6", "superseded"))  # its own later change kept
    assert merged["p9.d"].history == (("8.2", "amended"),)  # built only with the moved value: from 8.2 on
    assert {c.id for c in moved_checks(before, after[:1], "8")} == {"p9.a"}  # 8.6 is amendment 2's: no copy

"""C5's checks (amendment 1, 7.7; amendment 2, 8.3 and 8.4) from made-up analysis outputs: pass, fail,
unresolved, superseded."""

import dataclasses
import math

import pytest

from rote import verdicts
from rote.claims import THRESHOLDS

T = THRESHOLDS["C5"]


def _metrics(**changes) -> verdicts.c5.C5Metrics:
    good = {"heuristic_fraction": 0.87, "untrained_heuristic_fraction": 0.75,  # the section-5 rule, as on quick
            "z_ratio": 1.1, "pattern_corr_M": 0.7, "z_null_ratio": 1.0,  # all positions: the noisy prefix
            "patch_revert_last": 0.77, "control_revert_last": 0.39,  # the registered patching, as measured on quick
            "m50": 10, "top_revert_max": 0.9, "random_revert_m50": 0.2, "mismatched_revert_m50": 0.3,
            # amendment 2
            "cut_heuristic_fraction": 0.3, "cut_null_fraction": 0.01,
            "jstar_n_M": 40, "jstar_z_ratio": 3.0, "jstar_pattern_corr_M": 0.8,
            "jstar_m50": 5, "jstar_top_revert_max": 0.8, "jstar_random_revert_m50": 0.02,
            "jstar_mismatched_revert_m50": 0.05}
    return verdicts.c5.from_record(**{**good, **changes})


def _check(checks, check_id):
    found = verdicts.find(checks, check_id)
    assert found is not None, [c.id for c in checks]
    return found


def test_thresholds_of_the_amendments():
    assert T["m_grid"] == (1, 2, 5, 10, 25, 50, 100, 200)
    assert T["untrained_share_factor_min"] == 2.0
    assert T["patch_revert_min"] == 0.5 and T["control_revert_max"] == 0.1  # section 5 numbers unmoved


def test_amended_pass_at_jstar_while_the_all_position_checks_are_superseded():
    metrics, checks = verdicts.c5.checks(_metrics())
    superseded = {c.id for c in checks if c.kind == "superseded"}
    assert superseded == {"c5.share.registered", "c5.share.untrained", "c5.z.registered", "c5.z.untrained_labels",
                          "c5.pattern", "c5.patch.registered", "c5.patch.random.registered", "c5.dose.top",
                          "c5.dose.random", "c5.dose.mismatched"}
    assert all(c.reason for c in checks if c.kind == "superseded")
    # the 7.7 checks fail on these numbers, and no longer count anywhere (they were never section 5)
    assert _check(checks, "c5.dose.random").passed is False and not _check(checks, "c5.dose.random").section5
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    # the registered reading is section 5 as written: |z| 1.1 < 2 and the random control fail it
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert {c.part for c in checks} == set(verdicts.REQUIRED_PARTS["C5"])
    assert metrics == _metrics() and metrics.jdose.m50 == 5


@pytest.mark.parametrize("change,check_id", [
    ({"cut_heuristic_fraction": 0.15}, "c5.share"),
    ({"cut_null_fraction": 0.2}, "c5.share.null"),  # 0.3 < 2 x 0.2
    ({"jstar_z_ratio": 1.3}, "c5.z"),
    ({"jstar_pattern_corr_M": 0.4}, "c5.pattern.jstar"),
    ({"jstar_top_revert_max": 0.4, "jstar_m50": None}, "c5.specificity"),
    ({"jstar_random_revert_m50": 0.3}, "c5.specificity.random"),
    ({"jstar_mismatched_revert_m50": 0.1}, "c5.specificity.mismatched"),  # "under 0.1": 0.1 itself fails
])
def test_each_deciding_check_can_fail(change, check_id):
    _, checks = verdicts.c5.checks(_metrics(**change))
    assert _check(checks, check_id).passed is False
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_the_null_share_threshold_is_twice_the_untrained_share_under_the_same_cut():
    _, checks = verdicts.c5.checks(_metrics(cut_heuristic_fraction=0.3, cut_null_fraction=0.14))
    c = _check(checks, "c5.share.null")
    assert c.threshold == pytest.approx(0.28) and c.passed is True and c.kind == "null"


def test_no_m_reaching_half_at_jstar_fails_specificity_and_leaves_its_controls_without_an_m():
    _, checks = verdicts.c5.checks(_metrics(jstar_m50=None, jstar_top_revert_max=0.3, jstar_random_revert_m50=math.nan,
                                     jstar_mismatched_revert_m50=math.nan))
    assert _check(checks, "c5.specificity").passed is False  # every m of the grid tried: m50 does not exist
    for s in (".random", ".mismatched"):  # 8.5: no m50, no m to read a control at: a missing value, not a fail
        c = _check(checks, f"c5.specificity{s}")
        assert c.passed is None and "no m50" in c.reason
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_the_section5_pattern_correlation_is_superseded_by_the_reading_at_jstar():
    """Amendment 2, 8.5: C5's pattern check is read at j* over the 8.3 units; the section-5 correlation over
    every answer position with the section-5 units stays shown, superseded (before: it kept deciding)."""
    _, checks = verdicts.c5.checks(_metrics(pattern_corr_M=0.4))  # fails section 5's 0.5, at j* 0.8 passes
    c = _check(checks, "c5.pattern")
    assert c.kind == "superseded" and c.passed is False and c.section5 and c.was == "registered"
    assert "8.5" in c.reason and "c5.pattern.jstar" in c.reason
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert verdicts.seed_verdict(checks, "registered") == "fail"  # section 5 as written
    assert verdicts.seed_verdict(checks, "7") == "fail"  # amendment 1 counted it
    _, checks = verdicts.c5.checks(_metrics(pattern_corr_M=0.9, jstar_pattern_corr_M=0.3))
    assert _check(checks, "c5.pattern.jstar").passed is False and verdicts.seed_verdict(checks, "amended") == "fail"


def test_specificity_that_no_dose_reaches_fails_also_where_larger_m_were_not_tried():
    """8.6: the top-m patch at j* is tried at every m of the grid up to the most 8.3 units an example holds,
    and once with all of them; where no dose reverts half of M, specificity fails. Before (8.5's reading),
    no m50 with some m of the grid untried (an m needed 2m units at every j*) was unresolved."""
    short = dict(jstar_m50=None, jstar_top_revert_max=0.3, jstar_random_revert_m50=math.nan,
                 jstar_mismatched_revert_m50=math.nan, jstar_m_tried=[1, 2, 5, 12], jstar_units_min=3,
                 jstar_units_max=12)  # 12: the dose at which every example patches all of its units
    _, checks = verdicts.c5.checks(_metrics(**short))
    c = _check(checks, "c5.specificity")
    assert c.passed is False and c.value == 0.3 and c.margin == pytest.approx(-0.2) and not c.reason
    assert verdicts.seed_verdict(checks, "amended") == "fail"
    # no memorized example holds a unit at its j*: nothing to patch, unresolved with that case
    _, checks = verdicts.c5.checks(_metrics(**{**short, "jstar_m_tried": [], "jstar_units_min": 0, "jstar_units_max": None,
                                               "jstar_top_revert_max": math.nan}))
    c = _check(checks, "c5.specificity")
    assert c.passed is None and "nothing to patch" in c.reason
    # m50 reached at the all-units dose (not an m of the grid): a pass, m50 = that dose
    _, checks = verdicts.c5.checks(_metrics(**{**short, "jstar_top_revert_max": 0.6, "jstar_m50": 12,
                                               "jstar_random_revert_m50": 0.0, "jstar_mismatched_revert_m50": 0.0,
                                               "jstar_short_m50": 0}))
    assert _check(checks, "c5.specificity").passed is True and verdicts.seed_verdict(checks, "amended") == "pass"
    with pytest.raises(ValueError):  # any other m outside the grid is no dose
        verdicts.c5.from_record(jstar_m50=13, jstar_units_max=12)


def test_a_control_with_too_few_units_outside_the_top_m50_is_unresolved():
    """8.6: at m50 the controls draw m50 units from the example's 8.3 units outside its top m50; where an
    example holds fewer, each control is unresolved with the reason (its value stays shown)."""
    _, checks = verdicts.c5.checks(_metrics(jstar_n=40, jstar_short_m50=3, jstar_random_revert_m50=0.3))
    for s in (".random", ".mismatched"):
        c = _check(checks, f"c5.specificity{s}")
        assert c.passed is None and "8.6: 3 of 40 memorized examples hold fewer than m50 = 5" in c.reason
        assert c.value is not None
    assert _check(checks, "c5.specificity").passed is True
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"
    _, checks = verdicts.c5.checks(_metrics(jstar_n=40, jstar_short_m50=0))
    assert verdicts.seed_verdict(checks, "amended") == "pass"


def test_a_single_memorized_example_leaves_the_mismatched_control_unresolved():
    _, checks = verdicts.c5.checks(_metrics(jstar_mismatched_revert_m50=None))
    c = _check(checks, "c5.specificity.mismatched")
    assert c.passed is None and "second memorized example" in c.reason
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_no_memorized_example_with_a_differing_digit_makes_the_jstar_parts_unresolved():
    _, checks = verdicts.c5.checks(_metrics(jstar_n_M=0, jstar_z_ratio=None, jstar_pattern_corr_M=None, jstar_m50=None,
                                     jstar_top_revert_max=None, jstar_random_revert_m50=None,
                                     jstar_mismatched_revert_m50=None))
    jstar = [c for c in checks if c.id in ("c5.z", "c5.pattern.jstar", "c5.specificity", "c5.specificity.random",
                                          "c5.specificity.mismatched")]
    assert all(c.passed is None and "j*" in c.reason for c in jstar)
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_a_missing_83_classification_is_unresolved_not_a_fail():
    _, checks = verdicts.c5.checks(_metrics(cut_heuristic_fraction=None, cut_null_fraction=None))
    assert _check(checks, "c5.share").passed is None and _check(checks, "c5.share").reason
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_superseded_section5_checks_count_in_the_registered_reading_only():
    _, checks = verdicts.c5.checks(_metrics(z_ratio=2.5, control_revert_last=0.05))
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    _, checks = verdicts.c5.checks(_metrics(z_ratio=2.5, patch_revert_last=0.2, control_revert_last=0.05))
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "amended") == "pass"


def test_missing_analyses_leave_every_check_unresolved_with_its_case():
    _, checks = verdicts.c5.checks(verdicts.c5.from_record())
    assert all(c.passed is None and c.reason for c in checks)  # 8.5: a NaN never decides, in either reading
    assert verdicts.seed_verdict(checks, "registered") == "unresolved"
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_the_metrics_are_typed_fields_validated_when_built():
    m = _metrics()
    stored = verdicts.flat(m)  # what a record stores under per_seed[i]["metrics"]: each group's fields inline
    assert list(stored) == [f.metadata.get("group", "") + g.name for f in dataclasses.fields(verdicts.c5.C5Metrics)
                            for g in (dataclasses.fields(f.default_factory) if "group" in f.metadata else [f])]
    assert stored["jstar_m50"] == 5 and m.jdose.m50 == 5
    assert stored["jstar_units_min"] is None  # not given: None, and the checks that read it say why
    with pytest.raises(TypeError):
        verdicts.c5.from_record(jstar_m51=1)  # no number outside the fields
    for bad in (dict(n_memorized=-1), dict(jstar_n_M=2.5), dict(n_shifts=True), dict(cut_null_fraction=1.5),
                dict(jstar_m50=3)):  # 3 is not an m of the grid
        with pytest.raises(ValueError):
            verdicts.c5.from_record(**bad)
    assert math.isnan(verdicts.c5.from_record(heuristic_fraction=math.nan).shares.heuristic_fraction)

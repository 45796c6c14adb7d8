"""C5's checks (amendment 1, 7.7) from made-up analysis outputs: pass, fail, unresolved, superseded."""

import pytest

from rote import verdicts
from rote.claims import THRESHOLDS

T = THRESHOLDS["C5"]


def _metrics(**changes):
    good = {"heuristic_fraction": 0.4, "untrained_heuristic_fraction": 0.1, "z_ratio": 3.0, "pattern_corr_M": 0.7,
            "patch_revert_last": 0.77, "control_revert_last": 0.39,  # the registered patching, as measured on quick
            "m50": 10, "top_revert_max": 0.9, "random_revert_m50": 0.02, "mismatched_revert_m50": 0.05,
            "z_null_ratio": 2.5}
    return {**good, **changes}


def _check(checks, prefix):
    found = [c for c in checks if c.name.startswith(prefix)]
    assert len(found) == 1, [c.name for c in checks]
    return found[0]


def test_thresholds_of_the_amendment():
    assert T["m_grid"] == (1, 2, 5, 10, 25, 50, 100, 200)
    assert T["untrained_share_factor_min"] == 2.0
    assert T["patch_revert_min"] == 0.5 and T["control_revert_max"] == 0.1  # section 5 numbers unmoved


def test_amended_pass_while_registered_patching_is_superseded():
    metrics, checks = verdicts.c5(_metrics())
    kinds = {c.name: c.kind for c in checks}
    assert kinds["patching the last layer reverts M"] == "superseded"
    assert kinds["random control reverts M"] == "superseded"
    assert sorted(kinds.values()).count("null") == 2 and sorted(kinds.values()).count("control") == 2
    assert not any("not computed" in c.name for c in checks)  # no pending placeholder left
    # the registered random control fails (0.39 >= 0.1): registered reading fails, amended passes
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert metrics["m50"] == 10


@pytest.mark.parametrize("change,prefix", [
    ({"random_revert_m50": 0.3}, "7.7: m random"),
    ({"mismatched_revert_m50": 0.1}, "7.7: another example"),  # "under 0.1": 0.1 itself fails
    ({"z_null_ratio": 1.2}, "7.7: median |z|"),
    ({"untrained_heuristic_fraction": 0.25}, "7.7: heuristic share"),  # 0.4 < 2 x 0.25
    ({"heuristic_fraction": 0.15, "untrained_heuristic_fraction": 0.0}, "heuristic share of neurons"),
])
def test_each_amended_check_can_fail(change, prefix):
    _, checks = verdicts.c5(_metrics(**change))
    assert _check(checks, prefix).passed is False
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_untrained_share_threshold_is_twice_the_untrained_share():
    _, checks = verdicts.c5(_metrics(heuristic_fraction=0.3, untrained_heuristic_fraction=0.14))
    c = _check(checks, "7.7: heuristic share")
    assert c.threshold == pytest.approx(0.28) and c.passed is True


def test_no_m_reaching_half_fails_both_specificity_checks():
    _, checks = verdicts.c5(_metrics(m50=None, top_revert_max=0.3, random_revert_m50=float("nan"),
                                     mismatched_revert_m50=float("nan")))
    assert _check(checks, "7.7: top-m patch").passed is False
    assert _check(checks, "7.7: m random").passed is False
    assert _check(checks, "7.7: another example").passed is False
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_a_single_memorized_example_leaves_the_mismatched_control_unresolved():
    _, checks = verdicts.c5(_metrics(mismatched_revert_m50=float("nan")))
    assert _check(checks, "7.7: another example").passed is None
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_superseded_checks_count_in_the_registered_reading_only():
    _, checks = verdicts.c5(_metrics(control_revert_last=0.05))
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    _, checks = verdicts.c5(_metrics(patch_revert_last=0.2, control_revert_last=0.05))
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "amended") == "pass"


def test_missing_analysis_fails():
    _, checks = verdicts.c5({})
    assert all(c.passed is False for c in checks)

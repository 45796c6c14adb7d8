"""Chapter 06's paragraphs on the specificity at j* under 8.6 (rote.chapters.c5.jstar_text and
amended_notes), on planted numbers: the doses tried (up to the most 8.3 units an example holds, and all of
them), a fail where no dose reverts half of M, controls unresolved where units run short, and the |z|
ratio's interval in the metrics never reaching the prose as a number."""

import math
from collections import namedtuple
from types import SimpleNamespace

from rote import verdicts
from rote.analysis import intervals
from rote.chapters import ClaimResult, c5

Unit = namedtuple("Unit", "task condition seed")  # hashable, like rote.plan.Unit
JSTAR = {"jstar_n_M": 40, "jstar_n_without": 2, "jstar_counts": {0: 30, 1: 10}, "jstar_z_M": 3.0, "jstar_z_clean": 1.0,
         "jstar_z_ratio": 3.0, "jstar_z_ratio_interval": intervals.Interval(2.5, 3.5, "bootstrap"),
         "jstar_median_z_ratio": 1.0, "jstar_pattern_corr_M": 0.8, "jstar_n": 40, "jstar_units_min": 12,
         "jstar_units_max": 60, "jstar_m_tried": [1, 2, 5, 10, 25, 50, 60], "jstar_m50": 5, "jstar_top_revert_m50": 0.6,
         "jstar_random_revert_m50": 0.02, "jstar_mismatched_revert_m50": 0.03, "jstar_recovered_m50": 0.4,
         "jstar_top_revert_max": 0.9, "jstar_short_m50": 0, "after_jstar_z_ratio_null": 1.1}


def test_jstar_text_names_the_doses_and_the_examples_short_of_units():
    units = [Unit("fda", "random", 0), Unit("fda", "random", 1)]
    metrics = {units[0]: verdicts.c5.from_record(**JSTAR),
               units[1]: verdicts.c5.from_record(**{**JSTAR, "jstar_m50": 50, "jstar_short_m50": 7})}
    text = c5.jstar_text({("fda", "random"): units}, metrics, {u: {"M": 42} for u in units})
    assert "from 12 / 12 to 60 / 60 units at an example's j*" in text
    assert "gives m50 = 5 / 50" in text
    assert "fewer than m50 units outside their top m50, from which the controls draw: seed 1: 7" in text
    assert "Interval" not in text and "bootstrap" not in text


def test_amended_notes_say_a_missing_m50_is_a_fail_and_short_controls_unresolved():
    units = [Unit("fda", "digit", 0), Unit("fda", "digit", 1), Unit("fda", "digit", 2)]
    fields = {k: v for k, v in JSTAR.items() if k != "jstar_counts"}
    metrics = {units[0]: verdicts.c5.from_record(**{**fields, "n_memorized": 42, "jstar_m50": None,
                                                  "jstar_top_revert_max": 0.3, "jstar_random_revert_m50": math.nan,
                                                  "jstar_mismatched_revert_m50": math.nan, "jstar_short_m50": None}),
               units[1]: verdicts.c5.from_record(**{**fields, "n_memorized": 42, "jstar_short_m50": 4}),
               units[2]: verdicts.c5.from_record(**{**fields, "n_memorized": 42, "jstar_m50": None, "jstar_m_tried": [],
                                                  "jstar_top_revert_max": math.nan, "jstar_units_max": None})}
    claim = ClaimResult("C5", metrics, {u: verdicts.c5.checks(m)[1] for u, m in metrics.items()})
    text = c5.amended_notes(units, claim)
    assert "s0" in text and "up to all the 8.3 units of the last layer each example holds there (at most 60), so " \
        "m50 does not exist and the specificity check fails (8.6)" in text
    assert "at m50 = 5, 4 memorized examples hold fewer than 5 8.3 units outside their own top m50, so both controls " \
        "are unresolved (8.6)" in text
    assert "nothing to patch" in text
    assert verdicts.find(claim.checks[units[0]], "c5.specificity").passed is False
    assert verdicts.find(claim.checks[units[1]], "c5.specificity.random").passed is None


def test_registered_values_glue_one_entry_per_condition_with_the_reading_its_check_chooses():
    units = [Unit("fda", "random", 0), Unit("fda", "random", 1)]
    numbers = {"n_memorized": 40, "heuristic_fraction": 0.87, "heuristic_fraction_per_layer": [0.8, 0.9],
               "z_ratio": 1.1, "pattern_corr_M": 0.7, "shift_toward_noisy": 0.9, "n_shifts": 400,
               "patch_revert_last": 0.77, "control_revert_last": 0.39}
    metrics = {u: verdicts.c5.from_record(**numbers) for u in units}
    claim = ClaimResult("C5", metrics, {u: verdicts.c5.checks(m)[1] for u, m in metrics.items()})
    hmap = SimpleNamespace(per_layer=lambda: __import__("pandas").DataFrame(columns=["layer", "kind", "fraction"]))
    glued = c5.registered_values({("fda", "random"): units}, claim, {u: hmap for u in units})
    assert glued["c5_reg_share"] == "FDA, random noise: 0.87 / 0.87"
    assert glued["c5_reg_share_reading"].endswith("make up at least the required share of the neurons")
    assert "less far out than the claim requires" in glued["c5_reg_z_reading"]
    assert glued["c5_reg_shift_side"] == "FDA, random noise: more often than chance"
    assert glued["c5_reg_seeds"] == "FDA, random noise: seeds 0 / 1, |M| = 40 / 40"
    assert "no layer has heuristic units" in glued["c5_reg_kinds"]

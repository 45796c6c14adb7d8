"""Amendment 3, 12.1: C2's chance thresholds a probe can reach. Per target min(5 x chance, (1 + chance) / 2),
chance the target's majority share on the examples read (the masked tail's too); a pooled read against the
mean of its targets' thresholds; the registered reading keeps 5 x chance. Planted summaries and sweeps."""

import math

import pandas as pd
import pytest

from rote import verdicts
from rote.analysis import probes
from rote.analysis.probes import SWEEP_COLUMNS
from rote.specs.c2 import SPEC

LENS = pd.DataFrame({"layer": [0, 1, 2, 3], "p_true": [0.1, 0.6, 0.5, 0.1], "p_noisy": [0.1, 0.2, 0.3, 0.8]})
LENS_VERDICT = {"true_ahead_intermediate": True, "noisy_only_last": True, "takeover_layer": 3}
SHARE = pd.DataFrame({"layer": range(4), "n": 100, "ahead": [50, 80, 90, 10], "share": [0.5, 0.8, 0.9, 0.1],
                      "null": 0.5})


def _digits_sweep(chances, accuracy=0.9, n=100):
    """Five answer digits at their own positions, layers 0-2, on M and C: each target ``chances[j]`` on both
    sets, accuracy 0.1 at layer 0 and ``accuracy`` at layers 1 and 2."""
    rows = []
    for j, chance in enumerate(chances):
        for s in ("M", "C"):
            for layer, acc in enumerate((0.1, accuracy, accuracy)):
                rows.append({"target": f"digit_{j}", "layer": layer, "position": 9 + j, "own": True, "set": s,
                             "n": n, "correct": round(n * acc), "accuracy": round(n * acc) / n, "chance": chance})
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def _judge(sweep):
    curves = probes.group_curves(sweep, "fda", {"answer digits": [f"digit_{j}" for j in range(5)]})
    summary = probes.best_layer_summary(curves)
    return verdicts.c2.checks("fda", 100, 100, verdicts.c2.ProbeReads(summary),
                              verdicts.c2.LensReads(LENS_VERDICT, LENS, SHARE))


def test_a_pool_whose_leading_digit_is_a_near_binary_carry_can_pass_the_amended_check():
    """FDA's answer digits: the leading digit's majority share 0.6, the other four 10-class digits 0.1. The
    pooled chance is 0.2 and 5 x 0.2 = 1.0 is out of any probe's reach (registered: a fail; amendment 2:
    unresolved). 12.1: the mean of (1 + 0.6) / 2 = 0.8 and four 5 x 0.1 = 0.5 is 0.56, which 0.9 reaches."""
    _, checks = _judge(_digits_sweep([0.6, 0.1, 0.1, 0.1, 0.1]))
    chance, capped = (verdicts.find(checks, f"c2.probe.answer_digits.{k}") for k in ("chance", "chance.capped"))
    assert chance.threshold == pytest.approx(1.0) and chance.passed is False and chance.section5
    assert capped.threshold == pytest.approx((0.8 + 4 * 0.5) / 5) and capped.passed is True
    assert capped.kind == "amended" and capped.history == (("12", "amended"),)
    reach = verdicts.find(checks, "c2.probe.answer_digits.reachable.capped")
    assert reach.kind == "validity" and reach.passed is True and reach.threshold == pytest.approx(0.56)
    old_reach = verdicts.find(checks, "c2.probe.answer_digits.reachable")
    assert old_reach.threshold == pytest.approx(1.0) and old_reach.passed is False
    assert verdicts.kind_as_of(old_reach, "8") == "validity" and old_reach.kind == "superseded"
    assert verdicts.seed_verdict(checks, "registered") == "fail"  # section 5: 5 x chance, unchanged
    assert verdicts.seed_verdict(checks, "8") == "unresolved"  # amendment 2 (8.2): out of reach
    assert verdicts.seed_verdict(checks, "amended") == "pass"  # as of 12
    assert verdicts.near_checks(checks) == []  # the superseded 8.2 check no longer counts as near
    # the mean of the thresholds, not the cap of the pooled chance: (1 + 0.2) / 2 = 0.6 would fail 0.58
    _, checks = _judge(_digits_sweep([0.6, 0.1, 0.1, 0.1, 0.1], accuracy=0.58))
    assert verdicts.find(checks, "c2.probe.answer_digits.chance.capped").passed is True


def test_a_ten_class_target_keeps_its_threshold_and_gets_no_capped_check():
    """10-class digits: 5 x 0.1 = 0.5 is already at most (1 + 0.1) / 2 = 0.55: nothing moves."""
    _, checks = _judge(_digits_sweep([0.1] * 5, accuracy=0.52))
    chance = verdicts.find(checks, "c2.probe.answer_digits.chance")
    assert chance.threshold == pytest.approx(0.5) and chance.kind == "registered" and chance.passed is True
    assert not [c for c in checks if ".capped" in c.id]
    assert verdicts.seed_verdict(checks, "registered") == verdicts.seed_verdict(checks, "amended") == "pass"
    assert verdicts.c2.chance_threshold([(0.1, 100)]) == verdicts.c2.chance_threshold([(0.1, 100)], capped=False)


def test_the_pooled_threshold_weights_each_target_by_its_reads():
    """The pool's accuracy and chance weight each target by the reads it gives (on M a digit is read only where
    the noisy label differs), so its threshold does too: where nothing moves it is 5 x the pooled chance."""
    parts = [(0.6, 100), (0.1, 300)]
    assert verdicts.c2.chance_threshold(parts) == pytest.approx((100 * 0.8 + 300 * 0.5) / 400)
    assert verdicts.c2.chance_threshold(parts, capped=False) == pytest.approx(5 * (0.6 * 100 + 0.1 * 300) / 400)
    assert verdicts.c2.chance_threshold([(0.6, 0), (0.1, 10)]) == pytest.approx(0.5)  # a target without reads
    assert math.isnan(verdicts.c2.chance_threshold([(math.nan, 10), (0.1, 10)]))  # a chance missing: missing
    assert math.isnan(verdicts.c2.chance_threshold([(0.1, 0)]))
    assert SPEC.values("8").get("probe_halfway_share") is None and SPEC.values()["probe_halfway_share"] == 0.5


def test_the_masked_tail_reads_its_majority_share_from_12_1_and_7_4s_chance_before():
    """Planted masked tail: 7.4's chance 1 / 49 (5 x = 0.10, which M's 0.6 passes); the true tails read on M
    are 30% one entity, so 12.1's threshold is min(1.5, 0.65) = 0.65, which 0.6 does not reach."""
    tail = {"best_layer": 3, "acc_M": 0.6, "acc_C": 0.7, "chance": 0.3, "chance_uniform": 1 / 49,
            "acc_M_unmasked": 0.05, "reads_masked_M": 0.9, "best_layer_C": 3, "acc_C_best": 0.7, "chance_C": 0.05}
    r2 = {"best_layer": 3, "acc_M": 0.7, "acc_C": 0.8, "chance": 0.02, "best_layer_C": 3, "acc_C_best": 0.8,
          "chance_C": 0.02}
    summary = pd.DataFrame([{"group": g, "best_layer": 1, "acc_M": 1.0, "acc_C": 1.0, "chance": 0.02,
                             "best_layer_C": 1, "acc_C_best": 1.0, "chance_C": 0.02} for g in ("bridge", "true tail")])
    _, checks = verdicts.c2.checks("thr", 20, 100, verdicts.c2.ProbeReads(summary, r2, tail),
                                   verdicts.c2.LensReads(LENS_VERDICT, LENS, SHARE))
    before, capped = (verdicts.find(checks, f"c2.probe.tail_masked.{k}") for k in ("chance", "chance.capped"))
    assert before.threshold == pytest.approx(5 / 49) and before.passed is True
    assert capped.threshold == pytest.approx(0.65) and capped.passed is False
    reach = verdicts.find(checks, "c2.probe.tail_masked.reachable.capped")
    assert reach.threshold == pytest.approx(0.25) and reach.passed is True  # C's own majority share, 0.05
    assert verdicts.seed_verdict(checks, "8") == "pass" and verdicts.seed_verdict(checks, "amended") == "fail"
    assert verdicts.find(checks, "c2.probe.bridge_r2.chance.capped") is None  # 5 x 0.02: nothing moves


def test_the_chapter_says_where_12_1_moved_a_threshold():
    from rote.chapters import c2

    _, moved = _judge(_digits_sweep([0.6, 0.1, 0.1, 0.1, 0.1]))
    _, still = _judge(_digits_sweep([0.1] * 5))
    text = c2.capped_sentence([moved, still], "answer_digits")
    assert "12.1" in text and "0.56" in text and "1 seed where" in text and "reached by M on 1" in text
    assert c2.capped_sentence([still], "answer_digits") == ""


def test_a_pooled_accuracy_is_resampled_by_example_never_wilson_over_every_read():
    """Issue 43 part 5: five digit reads per example are not independent. Planted: 60 of 100 examples read all
    five digits right, 40 none: Wilson over 500 reads is much narrower than the bootstrap over 100 examples,
    which the check now holds (named ``bootstrap``); a pooled row without it has no interval."""
    import numpy as np

    from rote.analysis import intervals

    counts = (np.array([[5] * 60 + [0] * 40]), np.full(100, 5))
    pooled = probes.pooled_interval(counts, 0)
    wilson = intervals.wilson(300, 500)
    assert pooled.method == "bootstrap" and pooled.high - pooled.low > 1.8 * (wilson.high - wilson.low)
    assert probes.pooled_interval((np.array([[1] * 60 + [0] * 40]), np.ones(100)), 0) is None  # one read each
    row = {"group": "answer digits", "best_layer": 1, "acc_M": 0.6, "acc_C": 0.9, "chance": 0.1, "best_layer_C": 1,
           "acc_C_best": 0.9, "chance_C": 0.1, "n_M": 500, "k_M": 300, "n_C": 500, "k_C_best": 450,
           "chance_parts": ((0.1, 100),) * 5, "chance_C_parts": ((0.1, 100),) * 5,
           "acc_M_lo": pooled.low, "acc_M_hi": pooled.high}
    _, checks = verdicts.c2.checks("fda", 100, 100, verdicts.c2.ProbeReads(pd.DataFrame([row])),
                                   verdicts.c2.LensReads(LENS_VERDICT, LENS, SHARE))
    chance, reach = (verdicts.find(checks, f"c2.probe.answer_digits.{k}") for k in ("chance", "reachable"))
    assert chance.interval == (pooled.low, pooled.high) and chance.method == "bootstrap"
    assert reach.interval is None  # pooled, no bootstrap given: no interval rather than Wilson's over 500 reads


def test_a_capped_threshold_out_of_cs_reach_leaves_the_capped_check_unresolved_as_8_2_says():
    """Binary-like digits (majority share 0.6 each): 12.1's threshold 0.8 on M and on C; C reaches only 0.7,
    so the capped chance check is unresolved in the amended reading, its stand-in named after it."""
    _, checks = _judge(_digits_sweep([0.6] * 5, accuracy=0.7))
    reach = verdicts.find(checks, "c2.probe.answer_digits.reachable.capped")
    assert reach.passed is False and reach.threshold == pytest.approx(0.8) and reach.reason.startswith("12.1")
    capped = verdicts.find(checks, "c2.probe.answer_digits.chance.capped")
    stand_in = verdicts.find(checks, "c2.probe.answer_digits.chance.capped.amended")
    assert capped.kind == "superseded" and "judged as c2.probe.answer_digits.chance.capped.amended" in capped.reason
    assert stand_in.passed is None and stand_in.kind == "amended" and stand_in.history == (("12", "amended"),)
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"
    assert len({c.id for c in checks}) == len(checks)

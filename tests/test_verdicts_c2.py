"""Claim C2's checks under amendment 7.4, on made-up analysis outputs: pass, fail, unresolved and
superseded."""

import dataclasses
import json
import math

import pandas as pd
import pytest

from rote import verdicts
from rote.analysis import intervals
from rote.claims import THRESHOLDS


def _summary(rows):
    """Summary rows (group, acc_M, acc_C, chance), best layer 1 on M and on C (C's own best: the same), chance
    measured on C the same as on M."""
    return pd.DataFrame([{"group": g, "best_layer": 1, "acc_M": m, "acc_C": c, "chance": ch, "best_layer_C": 1,
                          "acc_C_best": c, "chance_C": ch} for g, m, c, ch in rows])


LENS = pd.DataFrame({"layer": [0, 1, 2, 3], "p_true": [0.1, 0.6, 0.5, 0.1], "p_noisy": [0.1, 0.2, 0.3, 0.8]})
LENS_VERDICT = {"true_ahead_intermediate": True, "noisy_only_last": True, "takeover_layer": 3}


def _share(ahead, n=100, null=0.5, layers=4):
    """An ahead_share table: ``ahead`` per layer (layer 0 first)."""
    return pd.DataFrame({"layer": range(layers), "n": n, "ahead": ahead, "share": [a / n if n else math.nan for a in ahead], "null": null})


def _by(checks, *ids):
    hits = [verdicts.find(checks, i) for i in ids]
    assert None not in hits, [c.id for c in checks]
    return hits


def _pair(checks, key):
    return _by(checks, f"c2.probe.{key}.ratio", f"c2.probe.{key}.chance")


def _thr(bridge_r2, masked_tail, share, registered=(("bridge", 1.0, 1.0, 0.02), ("true tail", 0.1, 0.9, 0.02))):
    return verdicts.c2.checks("thr", 20, 100, verdicts.c2.ProbeReads(_summary(registered), bridge_r2, masked_tail),
                              verdicts.c2.LensReads(LENS_VERDICT, LENS, share))


def _fda(summary, share, n_C=100):
    return verdicts.c2.checks("fda", 20, n_C, verdicts.c2.ProbeReads(summary),
                              verdicts.c2.LensReads(LENS_VERDICT, LENS, share))


GOOD_R2 = {"best_layer": 3, "acc_M": 0.7, "acc_C": 0.8, "chance": 0.02, "best_layer_C": 3, "acc_C_best": 0.8,
           "chance_C": 0.02}
GOOD_TAIL = {"best_layer": 3, "acc_M": 0.6, "acc_C": 0.7, "chance": 1 / 49, "acc_M_unmasked": 0.05,
             "reads_masked_M": 0.9, "best_layer_C": 3, "acc_C_best": 0.7, "chance_C": 1 / 49}


def test_thr_amended_checks_pass_and_registered_r1_and_unmasked_are_superseded():
    metrics, checks = _thr(GOOD_R2, GOOD_TAIL, _share([50, 80, 90, 10]))
    r1 = _pair(checks, "bridge")
    unmasked = _pair(checks, "true_tail")
    assert {c.kind for c in r1 + unmasked} == {"superseded"}
    assert [c.passed for c in unmasked] == [False, True]  # 0.1 < 0.8 x 0.9; 0.1 >= 5 x 0.02
    assert not any(c.kind == "registered" and c.id.startswith("c2.probe") for c in checks)
    r2, tail = _pair(checks, "bridge_r2"), _pair(checks, "tail_masked")
    assert {c.kind for c in r2 + tail} == {"amended"} and all(c.passed for c in r2 + tail)
    assert tail[1].threshold == pytest.approx(THRESHOLDS["C2"]["probe_over_chance_min"] / 49)
    null = _by(checks, "c2.lens.null")[0]
    assert null.kind == "null" and null.passed is True and null.threshold == 0.5
    assert metrics.lens_share.share_best_layer == 2 and metrics.lens_share.share == pytest.approx(0.9)
    assert metrics.tail_masked.reads_noisy_M == 0.9 and metrics.bridge_r2.acc_M == 0.7
    # the unmasked tail fails the registered reading; the masked one passes the amended reading
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "amended") == "pass"


def test_thr_bridge_at_r2_and_masked_tail_fail_on_their_own_numbers():
    look_up_tail = dict(GOOD_TAIL, acc_M=0.05)  # masked, M is at chance (a look-up)
    lost_bridge = dict(GOOD_R2, acc_M=0.3)  # M reads the bridge much worse than C at r2
    _, checks = _thr(lost_bridge, look_up_tail, _share([50, 80, 90, 10]))
    r2, tail = _pair(checks, "bridge_r2"), _pair(checks, "tail_masked")
    assert [c.passed for c in r2] == [False, True] and [c.passed for c in tail] == [False, False]
    assert verdicts.seed_verdict(checks, "amended") == "fail"
    assert verdicts.seed_verdict(checks, "registered") == "fail"  # unchanged by the amendment's inputs


def test_lens_null_fails_when_the_interval_reaches_the_prior():
    # share 0.6 on n = 30 is above the null 0.5, but its Wilson lower bound (~0.42) is not
    _, checks = _thr(GOOD_R2, GOOD_TAIL, _share([10, 18, 17, 2], n=30))
    null = _by(checks, "c2.lens.null")[0]
    low = intervals.wilson_bounds(18, 30)[0]
    assert null.passed is False and null.value == pytest.approx(0.6) and null.interval[0] == pytest.approx(low)
    assert 0.4 < low < 0.5 and null.margin == pytest.approx(low - 0.5)
    # the same share on n = 300 clears it
    _, checks = _thr(GOOD_R2, GOOD_TAIL, _share([100, 180, 170, 20], n=300))
    assert _by(checks, "c2.lens.null")[0].passed is True
    # a prior that already favours the true token: a high share is not enough
    _, checks = _thr(GOOD_R2, GOOD_TAIL, _share([50, 80, 90, 10], null=0.9))
    assert _by(checks, "c2.lens.null")[0].passed is False


def test_lens_null_uses_intermediate_layers_only():
    # the embedding (layer 0) and the last layer are never the best intermediate layer
    metrics, checks = _fda(_summary([("carries", 0.9, 0.9, 0.1)]), _share([100, 40, 45, 100]))
    assert metrics.lens_share.share_best_layer == 2 and _by(checks, "c2.lens.null")[0].passed is False
    # a 1-layer model has no intermediate layer: the check fails
    metrics, checks = _fda(_summary([("carries", 0.9, 0.9, 0.1)]), _share([100, 100], layers=2))
    assert _by(checks, "c2.lens.null")[0].passed is False
    assert metrics.lens_share.intermediate_layers == 0 and metrics.lens_share.share_n == 100


def test_missing_inputs_and_empty_sets_are_unresolved_with_their_case():
    _, checks = _thr(None, None, None)
    amended = [c for c in checks if c.kind in ("amended", "null")]
    assert len(amended) == 3 and all(c.passed is None and c.reason for c in amended)
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"
    # no memorized example: NaN accuracies and n = 0 are unresolved, each with its case (8.5: a NaN never decides)
    nan = {"best_layer": None, "acc_M": math.nan, "acc_C": 0.8, "chance": 0.02, "acc_C_best": 0.8, "chance_C": 0.02}
    _, checks = _thr(nan, dict(nan, chance=1 / 49), _share([0, 0, 0, 0], n=0, null=math.nan))
    judged = [c for c in checks if c.kind in ("amended", "null")]
    assert judged and all(c.passed is None for c in judged)
    assert {c.reason for c in judged} == {verdicts.c2.C2_NO_M, "no memorized example with a differing token: no share to read"}
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_an_empty_C_set_leaves_its_probe_target_unresolved_and_says_so():
    summary = _summary([("carries", 0.9, 0.9, 0.1), ("answer digits", 0.9, math.nan, 0.1)])
    _, checks = _fda(summary, _share([50, 80, 90, 10]), n_C=0)
    ratio, chance = _pair(checks, "answer_digits")
    assert ratio.passed is None and ratio.reason == verdicts.c2.C2_NO_C
    assert verdicts.find(checks, "c2.probe.answer_digits.chance.amended").passed is None
    assert verdicts.find(checks, "c2.probe.answer_digits.reachable").passed is None
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_fda_keeps_its_registered_probe_checks_and_gets_the_lens_null():
    summary = _summary([("carries", 0.85, 0.9, 0.1), ("answer digits", 0.6, 0.9, 0.1)])
    _, checks = _fda(summary, _share([50, 80, 90, 10]))
    assert {c.kind for c in checks} == {"registered", "null", "validity"}
    assert verdicts.seed_verdict(checks, "amended") == "fail"  # the digits fail 0.6 < 0.72 in both readings
    summary = _summary([("carries", 0.85, 0.9, 0.1), ("answer digits", 0.8, 0.9, 0.1)])
    _, checks = _fda(summary, _share([50, 80, 90, 10]))
    assert verdicts.seed_verdict(checks, "amended") == "pass"


def test_wilson_interval_known_values():
    lo, hi = intervals.wilson_bounds(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
    assert intervals.wilson_bounds(0, 10)[0] == 0.0 and intervals.wilson_bounds(10, 10)[1] == 1.0
    for n in (1, 7, 30, 1000):
        for k in range(0, n + 1, max(1, n // 7)):
            low, high = intervals.wilson_bounds(k, n)
            assert 0 <= low <= k / n <= high <= 1
    assert all(math.isnan(x) for x in intervals.wilson_bounds(0, 0))
    narrow = intervals.wilson_bounds(80, 100, 0.5)
    assert narrow[0] > lo and narrow[1] < hi


def test_chance_check_out_of_reach_of_a_true_claim_is_unresolved_as_of_amendment_2_only():
    # the quick `digit` seed 1: chance 0.195, so 5 x chance = 0.977 is above C's 0.954: even M = C fails
    summary = _summary([("carries", 0.9, 0.9, 0.1), ("answer digits", 0.951, 0.954, 0.1954)])
    metrics, checks = _fda(summary, _share([50, 80, 90, 10]))
    # 12.1 caps the threshold at (1 + 0.1954) / 2 = 0.598: C reaches it (the amended reading's reachability)
    assert metrics.carries.chance_reachable is True and metrics.answer_digits.chance_reachable is True
    digits, reach = _by(checks, "c2.probe.answer_digits.chance", "c2.probe.answer_digits.reachable")
    assert digits.passed is False and digits.section5 and digits.kind == "superseded"  # section 5 as written
    assert reach.passed is False and "out of reach" in reach.reason and reach.threshold == pytest.approx(5 * 0.1954)
    assert verdicts.kind_as_of(reach, "8") == "validity" and reach.kind == "superseded"  # 12.1 replaced it
    amended = verdicts.find(checks, "c2.probe.answer_digits.chance.amended")
    assert amended.passed is None and verdicts.kind_as_of(amended, "8") == "amended"
    assert "out of reach" in amended.reason
    carries = _by(checks, "c2.probe.carries.chance")[0]
    assert carries.kind == "registered" and carries.passed is True  # reachable: untouched
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "8") == "unresolved"  # amendment 2: never a pass, and no longer a fail
    assert verdicts.seed_verdict(checks, "amended") == "pass"  # 12.1: 0.951 >= 0.598 on M, C reaches it too
    # the 8.2 rule reads C and chance only: an M that clears 5 x chance is no pass either
    summary = _summary([("carries", 0.9, 0.9, 0.1), ("answer digits", 0.99, 0.954, 0.1954)])
    _, checks = _fda(summary, _share([50, 80, 90, 10]))
    assert verdicts.seed_verdict(checks, "8") == "unresolved"
    assert verdicts.c2.chance_reachable(0.95, 0.19) is True and verdicts.c2.chance_reachable(0.59, 0.19) is False
    assert verdicts.c2.chance_reachable(math.nan, 0.1) is None
    # amendment 7.4's pairs are validated too (an amended check is made unresolved in place); 12.1 caps 5 x 0.2
    # = 1.0 at 0.6 there, so the 7.4 bridge at r2 (M 0.7, C 0.8) passes in the amended reading
    metrics, checks = _thr(dict(GOOD_R2, chance=0.2, chance_C=0.2), GOOD_TAIL, _share([50, 80, 90, 10]))
    assert metrics.bridge_r2.chance_reachable is True and metrics.tail_masked.chance_reachable is True
    original, stand_in = _by(checks, "c2.probe.bridge_r2.chance", "c2.probe.bridge_r2.chance.amended")
    assert original.kind == "superseded" and original.passed is False and stand_in.passed is None  # 0.7 < 5 x 0.2
    assert verdicts.seed_verdict(checks, "8") == "unresolved"
    assert verdicts.seed_verdict(checks, "7") == "fail"  # what amendment 1 said
    assert verdicts.seed_verdict(checks, "amended") == "pass"


def test_the_reachable_check_reads_c_at_cs_own_best_layer_never_the_layer_m_chose():
    """8.5 (reading 8.2): a true claim can reach 5 x chance when C, at C's own best layer, does. Planted: M's best
    layer is one where C is weak (0.4 < 5 x 0.09 = 0.45, below 12.1's half-way point: nothing moves), C's own
    best layer reaches 0.97. Before, the check read C at M's layer, failed, and left the chance check
    unresolved; now it passes and the chance check decides."""
    row = {"group": "answer digits", "best_layer": 1, "acc_M": 0.3, "acc_C": 0.4, "chance": 0.09, "best_layer_C": 2,
           "acc_C_best": 0.97, "chance_C": 0.09}
    metrics, checks = _fda(pd.DataFrame([row]), _share([50, 80, 90, 10]))
    reach, chance = _by(checks, "c2.probe.answer_digits.reachable", "c2.probe.answer_digits.chance")
    assert reach.kind == "validity" and reach.passed is True and reach.value == 0.97
    assert reach.threshold == pytest.approx(5 * 0.09)  # the same chance as before
    assert chance.kind == "registered" and chance.passed is False  # 0.3 < 0.45: the claim's own check decides
    assert verdicts.find(checks, "c2.probe.answer_digits.chance.amended") is None
    assert metrics.answer_digits.best_layer_C == 2 and metrics.answer_digits.acc_C_best == 0.97
    assert metrics.answer_digits.chance_reachable is True
    # the ratio check still reads C at M's best layer, as section 5 does
    assert _by(checks, "c2.probe.answer_digits.ratio")[0].threshold == pytest.approx(0.8 * 0.4)
    assert verdicts.seed_verdict(checks, "amended") == "fail"
    # and where C's own best layer is below 5 x chance too, the chance check is unresolved, as before
    _, checks = _fda(pd.DataFrame([dict(row, acc_C_best=0.42)]), _share([50, 80, 90, 10]))
    assert verdicts.find(checks, "c2.probe.answer_digits.chance.amended").passed is None


def test_metrics_are_typed_and_record_exactly_the_keys_the_inputs_give():
    fda, _ = _fda(_summary([("carries", 0.9, 0.9, 0.1), ("answer digits", 0.8, 0.9, 0.1)]), _share([50, 80, 90, 10]))
    record = fda.record()
    reads = ("best_layer", "acc_M", "acc_C", "chance", "best_layer_C", "acc_C_best", "chance_C", "chance_reachable")
    assert list(record) == ["n_M", "n_C", *[f"{key}_{k}" for key in ("carries", "answer_digits") for k in reads],
                            "lens_takeover_layer", "lens_p_true_by_layer", "lens_p_noisy_by_layer",
                            "lens_share_best_layer", "lens_share", "lens_share_lo", "lens_share_hi", "lens_share_null",
                            "lens_share_n", "lens_share_by_layer", "lens_intermediate_layers"]
    assert list(record)[:3] == ["n_M", "n_C", "carries_best_layer"] and list(record)[-1] == "lens_intermediate_layers"
    assert not any(k.startswith(("bridge", "true_tail", "tail_masked")) for k in record)
    assert record["lens_share_lo"] == fda.lens_share.share_lo and record["answer_digits_acc_M"] == 0.8
    # no intermediate layer: the share's interval and curve are not in the record
    one_block, _ = _fda(_summary([("carries", 0.9, 0.9, 0.1)]), _share([100, 100], layers=2))
    assert not {"lens_share_lo", "lens_share_hi", "lens_share_by_layer", "answer_digits_acc_M"} & set(one_block.record())
    thr, _ = _thr(GOOD_R2, GOOD_TAIL, _share([50, 80, 90, 10]))
    assert thr.record()["tail_masked_reads_noisy_M"] == 0.9 and "carries_acc_M" not in thr.record()
    assert thr.reachable == {"bridge": True, "true_tail": True, "bridge_r2": True, "tail_masked": True}
    json.dumps(thr.record())  # JSON-safe: nothing absent is left in it


def test_metrics_and_inputs_are_checked_when_made():
    with pytest.raises(ValueError, match="count examples"):
        verdicts.c2.C2Metrics(n_M=-1, n_C=3)
    with pytest.raises(TypeError):
        verdicts.c2.ProbeRead(acc_M=0.5)  # a probe read is given whole or not at all
    with pytest.raises(ValueError, match="given together"):
        verdicts.c2.LensShare(share_best_layer=1, share=0.5, share_lo=0.4, share_null=0.3, share_n=5,
                              intermediate_layers=2)
    with pytest.raises(ValueError, match="no probe read colour"):
        verdicts.c2.ProbeReads(_summary([("colour", 0.9, 0.9, 0.1)]))
    with pytest.raises(ValueError, match="verdict"):
        verdicts.c2.LensReads(None, LENS)
    with pytest.raises(ValueError, match="p_true"):
        verdicts.c2.LensReads(LENS_VERDICT, LENS.drop(columns="p_true"))


def test_a_lens_not_given_leaves_the_lens_checks_unresolved_and_the_probes_read():
    metrics, checks = verdicts.c2.checks("fda", 20, 100, verdicts.c2.ProbeReads(_summary([("carries", 0.9, 0.9, 0.1)])),
                                         None)
    lens = [c for c in checks if c.part == "lens"]
    assert [c.id for c in lens] == ["c2.lens.ahead", "c2.lens.last", "c2.lens.null"]
    assert all(c.passed is None and "not given to the verdict" in c.reason for c in lens)
    assert metrics.reachable == {"carries": True} and "lens_takeover_layer" not in metrics.record()
    assert _by(checks, "c2.probe.carries.ratio")[0].passed is True

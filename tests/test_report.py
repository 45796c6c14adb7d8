"""The sentences results choose (rote.report), on planted checks: every seed passes, none, some,
unresolved, a missing value, a check that was not computed."""

import math
from collections import namedtuple
from types import SimpleNamespace

import pytest

from rote import report, verdicts
from rote.verdicts import Check


def _check(passed, check_id="c9.x", value=0.5, threshold=0.3, kind="amended", part="erasure", reason="", section5=None):
    return Check(check_id, f"display name of {check_id}", kind, value, threshold, passed, part, section5=section5,
                 reason=reason)


# -- numbers and names ------------------------------------------------------------------------------
def test_values_are_written_in_seed_order_and_a_missing_one_says_so():
    assert report.values([0.834, 0.912, 0.88]) == "0.83 / 0.91 / 0.88"
    assert report.values([0.5, None, math.nan], ".3g") == "0.5 / n/a / n/a"
    assert report.values([1200.4, None], ".0f", missing="never") == "1200 / never"
    assert report.num(float("nan")) == report.MISSING and report.num(3, "d") == "3"


def test_measured_and_ratio():
    assert report.measured(0.0) and report.measured(True) and not report.measured(None)
    assert not report.measured(float("nan"))
    assert report.ratio(1.0, 4.0) == 0.25 and report.ratio(1.0, 0.0) == math.inf
    assert math.isnan(report.ratio(0.0, 0.0)) and math.isnan(report.ratio(None, 1.0))


def test_names_of_units_conditions_seeds_and_layers():
    unit = SimpleNamespace(task="fda", condition="random", seed=2)
    assert report.label(unit) == "FDA random s2"
    assert report.label(SimpleNamespace(task="thr", condition="-", seed=0)) == "THR s0"
    assert report.where("fda", "digit") == "FDA, digit noise" and report.where("thr", "-") == "THR"
    assert report.seeds_head([0, 1, 2]) == "seed 0 / 1 / 2"
    assert report.seeds_head([0, 1], plural=True) == "seeds 0 / 1" and report.seeds_head([4], plural=True) == "seed 4"
    assert report.layers_text([]) == "no layer" and report.layers_text([3]) == "layer 3"
    assert report.layers_text([1, 2]) == "layers 1, 2"


# -- how many seeds ----------------------------------------------------------------------------------
def test_how_many_seeds():
    assert report.how_many(3, 3) == "every seed"
    assert report.how_many(0, 3) == "no seed"
    assert report.how_many(1, 3) == "1 of 3 seeds"


def test_outcomes_are_spelled_as_the_verdicts_spell_them():
    assert [report.outcome(_check(p)) for p in (True, False, None)] == [verdicts.OUTCOME_WORDS[p] for p in (True, False, None)]
    assert report.outcome(None) == "not computed"
    assert report.outcome(_check(True).to_dict()) == "pass"  # a check as stored in a record


@pytest.mark.parametrize("outcomes, on, passes", [
    ((True, True, True), "on every seed", "every seed passes"),
    ((False, False, False), "on no seed", "0 of 3 seeds pass"),
    ((True, False, True), "on 2 of 3 seeds", "2 of 3 seeds pass"),
    ((True, None, True), "on 2 of 3 seeds", "2 of 3 seeds pass"),  # unresolved is not a pass
    ((True, "missing", True), "on 2 of 3 seeds", "2 of 3 seeds pass"),  # a seed without the check
])
def test_passes_counts_the_passing_seeds(outcomes, on, passes):
    checks = [None if o == "missing" else _check(o) for o in outcomes]
    assert report.passes(checks) == passes


def test_tally_counts_each_outcome_and_missing_checks():
    checks = [_check(True), _check(False), _check(None), None]
    assert report.tally(checks) == {"pass": 1, "fail": 1, "unresolved": 1, "not computed": 1}


def test_checks_of_finds_each_seeds_check_by_id_not_by_name():
    seed0 = [_check(True, "c4.k50"), _check(False, "c4.k50.lookup")]
    seed1 = [_check(False, "c4.k50.lookup")]
    found = report.checks_of([seed0, seed1], "c4.k50")
    assert found[0].id == "c4.k50" and found[1] is None
    assert report.checks_of([seed0], "display name of c4.k50") == [None]


@pytest.mark.parametrize("outcomes, text", [
    ((True, True), "so it holds"),
    ((False, False), "so it does not"),
    ((True, False), "so it holds on 1 of 2 seeds only"),
    ((None, None), "so it does not"),  # unresolved on every seed: no seed passes
])
def test_choose_picks_the_sentence_by_the_seeds_outcomes(outcomes, text):
    assert report.choose([_check(o) for o in outcomes], "so it holds", "so it does not") == text


def test_choose_says_when_nothing_was_measured():
    assert report.choose([_check(False)], "yes", "no", computed=False) == "which this build could not measure"


@pytest.mark.parametrize("vals, thresholds, text", [
    ([0.9, 0.8], [0.5, 0.5], "every seed reaches it"),
    ([0.1, 0.2], [0.5, 0.5], "0 of 2 seeds reach it"),
    ([0.9, 0.2, 0.5], [0.5, 0.5, 0.5], "2 of 3 seeds reach it"),  # equal to the threshold reaches it
    ([0.9, math.nan], [0.5, 0.5], "1 of 2 seeds reach it (1 without a value)"),
    ([0.9, 0.9], [0.5, math.nan], "1 of 2 seeds reach it (1 without a value)"),
])
def test_reach_counts_values_against_their_thresholds(vals, thresholds, text):
    assert report.reach(vals, thresholds) == text


def test_reach_names_why_a_value_is_missing():
    assert report.reach([math.nan], [0.5], "without memorized examples to read") == \
        "0 of 1 seeds reach it (1 without memorized examples to read)"


def test_versus_writes_value_threshold_outcome_and_reason():
    assert report.versus(_check(True, value=0.61234, threshold=0.2)) == "0.612 vs 0.2: pass"
    assert report.versus(_check(None, value=None, threshold=0.2, reason="no j*")) == "n/a vs 0.2: unresolved (no j*)"
    assert report.versus(_check(False, value=0.1, threshold=None)) == "0.1 vs n/a: fail"
    assert report.versus(None) == "not computed"


def test_registered_not_passed_lists_each_check_with_its_seeds():
    every = {0: [_check(True, "c4.k50", kind="registered")], 1: [_check(True, "c4.k50", kind="registered")]}
    assert report.registered_not_passed(every) == "Every registered check passes on every seed."
    some = {0: [_check(False, "c4.k50", kind="registered"), _check(False, "c4.intermediate", kind="amended")],
            1: [_check(True, "c4.k50", kind="registered")],
            2: [_check(None, "c4.k50", kind="registered")]}
    assert report.registered_not_passed(some) == "Registered checks not passed: c4.k50 (seeds 0, 2)."
    superseded = {0: [verdicts.supersede(_check(False, "c5.z.registered", kind="registered"), "8.4", "8.4")]}
    assert report.registered_not_passed(superseded, key="name", note=" (superseded by 8.4)") == \
        "Registered checks not passed (superseded by 8.4): display name of c5.z.registered (seed 0)."


# -- against chance ------------------------------------------------------------------------------------
@pytest.mark.parametrize("share, n, text", [
    (0.9, 100, "more often than chance"),
    (0.1, 100, "less often than chance"),
    (0.55, 100, "indistinguishable from chance"),  # within 1.96 x 0.05 of one half
    (0.9, 4, "indistinguishable from chance"),  # too few trials to tell
    (0.9, 0, "no outlier shifts to count"),
    (math.nan, 10, "no outlier shifts to count"),
])
def test_chance_side_reads_the_interval_of_a_share(share, n, text):
    assert report.chance_side(share, n) == text


# -- the verdict of a part -------------------------------------------------------------------------------
def _seed(*outcomes, part="erasure"):
    return [_check(o, f"c3.e{i}", value=0.1 * i, part=part) for i, o in enumerate(outcomes)]


def test_part_outcome_follows_the_seed_verdict_rule_within_the_part():
    assert report.part_outcome(_seed(True, True), "erasure") == "pass"
    assert report.part_outcome(_seed(True, False, None), "erasure") == "fail"  # a fail outweighs unresolved
    assert report.part_outcome(_seed(True, None), "erasure") == "unresolved"
    assert report.part_outcome(_seed(True), "overlap") == "unresolved"  # no counted check of the part
    superseded = [verdicts.supersede(_check(False, "c3.old", kind="registered"), "7.5", "7.5"), _check(True, "c3.new")]
    assert report.part_outcome(superseded, "erasure") == "pass"  # a superseded check does not count
    assert report.part_outcome(superseded, "erasure", "registered") == "fail"  # ... in the registered reading it does
    validity = [_check(False, "c3.ceiling", kind="validity"), _check(True, "c3.new")]
    assert report.part_outcome(validity, "erasure") == "pass"  # validity checks never decide


def test_part_summary_on_every_seed():
    assert report.part_summary({0: _seed(True), 1: _seed(True)}, "erasure") == \
        "pass on every seed"
    assert report.part_summary({0: _seed(True)}, "erasure") == "pass"


def test_part_summary_names_the_checks_that_decide_it():
    text = report.part_summary({0: _seed(True, False), 1: _seed(False, False)}, "erasure")
    assert text == ("fail on every seed (c3.e1 fails on seeds 0-1: 0.1 vs 0.3; "
                    "c3.e0 fails on seed 1: 0 vs 0.3)")


def test_part_summary_mixed_unresolved_and_missing():
    text = report.part_summary({0: _seed(True), 1: _seed(False), 2: _seed(None), 3: _seed(True, part="other")},
                               "erasure")
    assert text.startswith("pass on 1 of 4 seeds, fail on 1 of 4 seeds, "
                           "unresolved on 2 of 4 seeds (")
    assert text.endswith("(c3.e0 fails on seed 1: 0 vs 0.3; c3.e0 is unresolved on seed 2: 0 vs 0.3; "
                         "no check decides it on seed 3)")


def test_part_summary_reads_stored_records_too():
    stored = {0: [c.to_dict() for c in _seed(True, None)]}
    assert report.part_summary(stored, "erasure") == \
        "unresolved (c3.e1 is unresolved on seed 0: 0.1 vs 0.3)"


def test_a_part_no_check_decides_is_unresolved_only_where_the_claim_requires_it():
    lookup_passes = [verdicts.supersede(_check(True, "c4.k50", kind="registered", part="k50"), "8.1", "8.1"),
                     _check(False, "c4.k50.lookup", kind="validity", part="k50")]
    assert report.part_outcome(lookup_passes, "k50") == "not counted"  # C4 does not require its look-up statistics
    assert report.part_outcome(lookup_passes, "intermediate") == "unresolved"  # ... but requires this part
    assert report.part_summary({0: lookup_passes, 1: lookup_passes}, "k50") == \
        "not counted on every seed"


def test_per_seed_names_the_seeds_beside_the_values():
    assert report.per_seed([0.834, 0.912, 0.88], [0, 1, 2]) == "0.83, 0.91 and 0.88 on seeds 0-2"
    assert report.per_seed([0.8], [3]) == "0.80 on seed 3"
    assert report.per_seed([None, 0.5], [0, 2], ".1f") == "not computed and 0.5 on seeds 0 and 2"
    assert report.per_seed([math.nan, None], [0, 1]) == "not computed on seeds 0-1"
    assert report.seed_range([0, 2, 5]) == "seeds 0, 2 and 5"


def test_decided_parts_per_task_and_condition():
    Unit = namedtuple("Unit", "task condition seed")
    fda, thr = [Unit("fda", "random", 0), Unit("fda", "random", 1)], [Unit("thr", "-", 0)]
    checks = {fda[0]: _seed(True), fda[1]: ({}, _seed(False)), thr[0]: _seed(None, part="overlap")}  # either form
    text = report.decided_parts({("fda", "random"): fda, ("thr", "-"): thr}, checks, ["erasure"])
    assert text.splitlines()[0] == ("**What this decides**, part by part of the claim (amended reading; the Verdict "
                                    "section has every check):")
    assert "- **FDA, random noise**: *erasure*: pass on 1 of 2 seeds, fail on 1 of 2 seeds (c3.e0 fails on seed 1: " \
           "0 vs 0.3)." in text
    assert "- **THR**: *erasure*: unresolved (no check decides it on seed 0)." in text
    two_parts = report.decided_parts({("thr", "-"): thr}, {thr[0]: _seed(True) + _seed(False, part="overlap")},
                                     ["erasure", "overlap"])
    assert two_parts.endswith("- **THR**: *erasure*: pass; *overlap*: fail (c3.e0 fails on seed 0: 0 vs 0.3).")


def test_a_boolean_check_value_is_written_as_itself():
    lens = [Check("c2.lens.ahead", "lens", "registered", False, True, False, "lens")]
    assert report.part_summary({0: lens}, "lens") == "fail (c2.lens.ahead fails on seed 0: False vs True)"
    assert report.versus(lens[0]) == "False vs True: fail"


def test_part_summary_gives_each_seeds_threshold_where_they_differ_and_the_reason_once():
    per_seed = {s: [_check(None, "c2.probe.x.ratio", value=None, threshold=None, part="probes", reason="no C")]
                for s in (0, 1, 2)}
    assert report.part_summary(per_seed, "probes") == \
        "unresolved on every seed (c2.probe.x.ratio is unresolved on seeds 0-2: no C)"
    per_seed = {0: [_check(False, "c2.probe.y.ratio", 0.333, 0.533, part="probes")],
                1: [_check(False, "c2.probe.y.ratio", 0.0, 0.436, part="probes")]}
    assert report.part_summary(per_seed, "probes") == ("fail on every seed "
                                                       "(c2.probe.y.ratio fails on seeds 0-1: 0.333 vs 0.533, 0 vs 0.436)")


def test_choose_by_finds_each_seeds_check_by_id_and_says_when_nothing_was_measured():
    per_seed = [[_check(True, "c4.k50"), _check(False, "c4.activity")], [_check(False, "c4.k50")]]
    assert report.choose_by(per_seed, "c4.k50", "so it holds", "so it does not", [1.0, 0.2]) == \
        "so it holds on 1 of 2 seeds only"
    assert report.choose_by(per_seed, "c4.activity", "yes", "no") == "no"  # seed 1 has no such check: not a pass
    assert report.choose_by(per_seed, "c4.k50", "yes", "no", [math.nan, None]) == "which this build could not measure"
    assert report.seed_word([0]) == "seed" and report.seed_word([0, 1]) == "seeds"


def test_part_summary_lists_different_values_against_one_threshold():
    per_seed = {s: [_check(False, "c1.mem", value=v, threshold=0.9, part="final mem")] for s, v in enumerate((0.2, 0.5))}
    assert report.part_summary(per_seed, "final mem") == "fail on every seed (c1.mem fails on seeds 0-1: 0.2 and 0.5 vs 0.9)"

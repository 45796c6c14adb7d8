"""rote.verdicts.c4 on made-up analysis outputs: pass, fail, unresolved and superseded (amendment 1, 7.6)."""

import math

from rote import verdicts
from rote.claims import THRESHOLDS

T = THRESHOLDS["C4"]
GOOD = {"k50_M": 10.0, "k50_C": 12.0, "top_activity_median": 0.2, "positions_over_min": 3,
        "intermediate_drop": 0.6, "intermediate_matched_drop": 0.1, "intermediate_control_drop": 0.05}
LOOKUP = {"k50_M": 1.0, "k50_C": 12.0, "top_activity_median": 0.0, "positions_over_min": 1, "n_lookup": 40}


def by_name(checks):
    return {c.name: c for c in checks}


def test_threshold_of_the_amendment():
    assert T["intermediate_over_matched_min"] == 0.2


def test_all_pass_when_the_lookup_fails_every_statistic():
    metrics, checks = verdicts.c4(GOOD, LOOKUP)
    assert not [c for c in checks if c.name.endswith("(not computed yet)")]  # no pending placeholder
    assert [c.kind for c in checks].count("control") == 3 and [c.kind for c in checks].count("amended") == 1
    assert all(c.passed for c in checks) and not [c for c in checks if c.kind == "superseded"]
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert metrics["intermediate_over_matched"] == 0.5 and metrics["lookup_k50_M"] == 1.0
    c = by_name(checks)["7.6 look-up control: k50 ratio on a known look-up fails the statistic"]
    assert c.value == 1.0 and c.threshold == T["k50_ratio_min"] * 12.0


def test_intermediate_over_matched_control_fails():
    _, checks = verdicts.c4({**GOOD, "intermediate_matched_drop": 0.5}, LOOKUP)
    c = by_name(checks)["7.6: intermediate drop over information-matched control"]
    assert c.kind == "amended" and c.passed is False and math.isclose(c.value, 0.1)
    assert verdicts.seed_verdict(checks, "registered") == "pass"  # registered intermediate check still passes
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_matched_control_missing_is_unresolved():
    _, checks = verdicts.c4({**GOOD, "intermediate_matched_drop": math.nan, "matched_available": False}, LOOKUP)
    c = [c for c in checks if c.kind == "amended"][0]
    assert c.passed is None and "not available" in c.name
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"
    # computed but NaN (no erasure sites): fails like the registered check
    _, checks = verdicts.c4({**GOOD, "intermediate_drop": math.nan, "intermediate_matched_drop": math.nan}, LOOKUP)
    assert by_name(checks)["7.6: intermediate drop over information-matched control"].passed is False


def test_statistic_that_calls_the_lookup_distributed_is_superseded():
    lookup = {**LOOKUP, "k50_M": 11.0, "positions_over_min": 2}  # k50 and positions pass on the look-up
    _, checks = verdicts.c4(GOOD, lookup)
    kinds = {c.name: c.kind for c in checks}
    assert kinds[f"median k50 on M vs {T['k50_ratio_min']} x median k50 on C"] == "superseded"
    assert kinds[f"input positions removing >= {T['drop_min']} of P(noisy)"] == "superseded"
    assert kinds["median activity fraction of top neurons"] == "registered"
    c = by_name(checks)
    assert c["7.6 look-up control: k50 ratio on a known look-up fails the statistic"].passed is False
    assert c["7.6 look-up control: top-neuron activity on a known look-up fails the statistic"].passed is True
    assert verdicts.seed_verdict(checks, "registered") == "pass"  # superseded checks pass in the registered reading
    assert verdicts.seed_verdict(checks, "amended") == "fail"  # ... and the claim cannot pass on them


def test_registered_fail_stays_a_fail_in_both_readings():
    _, checks = verdicts.c4({**GOOD, "top_activity_median": 0.01}, LOOKUP)
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_lookup_not_computed_is_unresolved():
    for lookup in (None, {}, {**LOOKUP, "n_lookup": 0},
                   {"k50_M": math.nan, "k50_C": math.nan, "top_activity_median": math.nan,
                    "positions_over_min": math.nan, "n_lookup": 5}):
        _, checks = verdicts.c4(GOOD, lookup)
        controls = [c for c in checks if c.kind == "control"]
        assert len(controls) == 3 and all(c.passed is None for c in controls)
        assert not [c for c in checks if c.kind == "superseded"]
        assert verdicts.seed_verdict(checks, "registered") == "pass"
        assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_tables_are_not_metrics():
    metrics, _ = verdicts.c4(GOOD, {**LOOKUP, "tables": {"k50s": object()}})
    assert "lookup_tables" not in metrics

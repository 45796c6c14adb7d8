"""rote.verdicts.c4 on made-up analysis outputs: pass, fail, unresolved and superseded (amendment 1, 7.6)."""

import math
from dataclasses import asdict, fields

import pytest

from rote import verdicts
from rote.verdicts.core import flat
from c4_inputs import c4_checks, c4_inputs  # tests/c4_inputs.py
from rote.analysis.neurons import C4Summary
from rote.claims import THRESHOLDS

T = THRESHOLDS["C4"]
GOOD = {"k50_M": 10.0, "k50_C": 12.0, "top_activity_median": 0.2, "positions_over_min": 3,
        "intermediate_drop": 0.6, "intermediate_matched_drop": 0.1, "intermediate_control_drop": 0.05}
LOOKUP = {"k50_M": 1.0, "k50_C": 12.0, "top_activity_median": 0.0, "positions_over_min": 1, "n_lookup": 40}


def by_id(checks):
    return {c.id: c for c in checks}


def test_threshold_of_the_amendment():
    assert T["intermediate_over_matched_min"] == 0.2


def test_all_pass_when_the_lookup_fails_every_statistic():
    metrics, checks = c4_checks(GOOD, LOOKUP)
    assert [c.kind for c in checks].count("validity") == 3 and [c.kind for c in checks].count("amended") == 1
    assert all(c.passed for c in checks) and not [c for c in checks if c.kind == "superseded"]
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert metrics.intermediate_over_matched == 0.5 and metrics.lookup.lookup_k50_M == 1.0
    c = by_id(checks)["c4.k50.lookup"]
    assert c.value == 1.0 and c.threshold == T["k50_ratio_min"] * 12.0
    assert metrics.verdict_rests_on == ["k50", "activity", "positions", "intermediate"]


def test_intermediate_over_matched_control_fails():
    _, checks = c4_checks({**GOOD, "intermediate_matched_drop": 0.5}, LOOKUP)
    c = by_id(checks)["c4.intermediate"]
    assert c.kind == "amended" and c.passed is False and math.isclose(c.value, 0.1)
    assert verdicts.seed_verdict(checks, "registered") == "pass"  # registered intermediate check still passes
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_matched_control_missing_is_unresolved():
    _, checks = c4_checks({**GOOD, "intermediate_matched_drop": math.nan, "matched_available": False}, LOOKUP)
    c = by_id(checks)["c4.intermediate"]
    assert c.passed is None and "could not be computed" in c.reason
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"
    # no erasure site (8.5): both intermediate checks unresolved, with the reason, never failed by the NaN
    _, checks = c4_checks({**GOOD, "intermediate_drop": math.nan, "intermediate_matched_drop": math.nan,
                             "intermediate_control_drop": math.nan, "erasure_layers": [], "matched_available": False},
                            LOOKUP)
    for check_id in ("c4.intermediate", "c4.intermediate.registered"):
        c = by_id(checks)[check_id]
        assert c.passed is None and c.value is None and c.reason == verdicts.c4.C4_NO_SITE
        assert "no layer carries the intermediate result at 5 x chance on C" in c.reason
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"
    assert verdicts.seed_verdict(checks, "registered") == "unresolved"


def test_statistic_that_calls_the_lookup_distributed_is_superseded_and_does_not_decide():
    lookup = {**LOOKUP, "k50_M": 11.0, "positions_over_min": 2}  # k50 and positions pass on the look-up
    metrics, checks = c4_checks(GOOD, lookup)
    c = by_id(checks)
    assert c["c4.k50"].kind == "superseded" and c["c4.positions"].kind == "superseded"
    assert c["c4.k50"].section5 and c["c4.k50"].reason  # still counts as written in section 5
    assert c["c4.activity"].kind == "registered"
    assert c["c4.k50.lookup"].passed is False and c["c4.activity.lookup"].passed is True
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    # amendment 2, 8.1: the failed validity checks never decide: the claim passes on what still counts
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert metrics.verdict_rests_on == ["activity", "intermediate"]
    # a superseded statistic that fails on M takes nothing away either ...
    _, checks = c4_checks({**GOOD, "k50_M": 1.0}, lookup)
    assert by_id(checks)["c4.k50"].passed is False
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "amended") == "pass"


def test_when_no_statistic_is_validated_the_verdict_rests_on_the_intermediate_dependency_alone():
    lookup = {**LOOKUP, "k50_M": 11.0, "top_activity_median": 0.3, "positions_over_min": 4}
    metrics, checks = c4_checks(GOOD, lookup)
    assert metrics.rests_on_intermediate_alone and metrics.verdict_rests_on == ["intermediate"]
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    _, checks = c4_checks({**GOOD, "intermediate_matched_drop": 0.55}, lookup)
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_registered_fail_stays_a_fail_in_both_readings():
    _, checks = c4_checks({**GOOD, "top_activity_median": 0.01}, LOOKUP)
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_a_statistic_whose_lookup_was_not_measured_does_not_decide_and_leaves_no_seed_unresolved():
    """Amendment 2, 8.5 (reading 8.1): a look-up statistic whose positive control was not measured is
    not validated, so it does not count in the amended reading; it does not make the seed unresolved
    either (before: an unresolved stand-in ``c4.<statistic>.amended`` made every such seed unresolved)."""
    for lookup in (None, {}, {**LOOKUP, "n_lookup": 0},
                   {"k50_M": math.nan, "k50_C": math.nan, "top_activity_median": math.nan,
                    "positions_over_min": math.nan, "n_lookup": 5}):
        metrics, checks = c4_checks(GOOD, lookup)
        validity = [c for c in checks if c.kind == "validity"]
        assert len(validity) == 3 and all(c.passed is None and c.reason for c in validity)
        c = by_id(checks)
        assert not any(f"c4.{s}.amended" in c for s in verdicts.c4.LOOKUP_STATISTICS)
        for s in verdicts.c4.LOOKUP_STATISTICS:
            assert c[f"c4.{s}"].kind == "superseded" and c[f"c4.{s}"].section5 and c[f"c4.{s}"].was == "registered"
            assert "8.5" in c[f"c4.{s}"].reason and "not measured" in c[f"c4.{s}"].reason
        assert metrics.rests_on_intermediate_alone and metrics.verdict_rests_on == ["intermediate"]
        assert verdicts.seed_verdict(checks, "registered") == "pass"
        assert verdicts.seed_verdict(checks, "amended") == "pass"  # decided by the intermediate dependency
        # ... which still decides: a failing intermediate dependency fails the seed
        _, checks = c4_checks({**GOOD, "intermediate_matched_drop": 0.55}, lookup)
        assert verdicts.seed_verdict(checks, "amended") == "fail"
        # and the registered reading still counts the statistic as section 5 wrote it
        _, checks = c4_checks({**GOOD, "top_activity_median": 0.01}, lookup)
        assert verdicts.seed_verdict(checks, "registered") == "fail"
        assert verdicts.seed_verdict(checks, "amended") == "pass"
    # one statistic measured on the look-up, the others not: only the measured one can decide
    _, checks = c4_checks({**GOOD, "k50_M": 1.0}, {**LOOKUP, "top_activity_median": math.nan,
                                                     "positions_over_min": math.nan})
    c = by_id(checks)
    assert c["c4.k50"].kind == "registered" and c["c4.k50"].passed is False
    assert c["c4.activity"].kind == "superseded" and c["c4.positions"].kind == "superseded"
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_tables_are_not_metrics():
    metrics, _ = c4_checks(GOOD, {**LOOKUP, "tables": {"k50s": object()}})
    assert "lookup_tables" not in flat(metrics)


def test_the_metrics_are_every_number_of_the_record_and_nothing_else():
    """C4Metrics holds every key the record stores (asdict: the same keys in the same order, the same
    values), a number not given is None, and an unknown key or a count that is no count is refused."""
    summary = {"k50_M": 10.0, "k50_C": 12.0, "k50_ratio": 10 / 12, "top_activity_median": 0.2,  # c4_summary's order
               "position_drops": [0.3, 0.3, 0.3, 0.1], "positions_over_min": 3, "max_position_drop": 0.3,
               "intermediate_drop": 0.6, "intermediate_control_drop": 0.05, "intermediate_matched_drop": 0.1,
               "n_memorized": 30, "n_clean": 100, "n_positions": 4, "erasure_layers": [1], "erasure_rank": 8,
               "matched_available": True}
    lookup = {"k50_M": 1.0, "k50_C": 12.0, "k50_ratio": 1 / 12, "top_activity_median": 0.0, "position_drops": [0.1],
              "positions_over_min": 1, "max_position_drop": 0.1, "n_lookup": 40, "tables": {}}
    metrics, _ = c4_checks(summary, lookup)
    assert isinstance(metrics, verdicts.c4.C4Metrics)
    assert list(flat(metrics)) == [*summary, *(f"lookup_{k}" for k in lookup if k != "tables"),
                                     "intermediate_over_matched", "lookup_superseded", "verdict_rests_on",
                                     "rests_on_intermediate_alone"]
    assert len(flat(metrics)) == 28 and len(fields(verdicts.c4.C4Metrics)) <= 25
    assert flat(metrics)["position_drops"] == [0.3, 0.3, 0.3, 0.1] and metrics.lookup.lookup_n_lookup == 40
    assert c4_checks(GOOD, None)[0].lookup.lookup_k50_M is None and metrics.lookup_superseded == []
    with pytest.raises(TypeError):
        c4_checks({**GOOD, "k50": 1.0}, LOOKUP)
    with pytest.raises(ValueError, match="n_memorized"):
        c4_checks({**GOOD, "n_memorized": -1}, LOOKUP)


def test_the_chapter_computes_matched_available_and_passes_the_sites_to_the_verdict():
    """Chapter C4 no longer hard-codes ``matched_available: True``: it is whether the information-matched
    control was computed (never where there is no site, 8.5), and the erasure sites go to the verdict."""
    from collections import namedtuple
    from types import SimpleNamespace

    import pandas as pd

    from rote.chapters import ClaimResult
    from rote.chapters import c4 as chapter

    u = ("fda", "random", 0)  # a unit: anything hashable
    build = SimpleNamespace(units=[u], sets={u: {"M": [0] * 20, "C": [0] * 30}})
    empty = pd.DataFrame(columns=["example", "method", "p_clean", "p_ablated", "drop"])
    summary = {u: C4Summary(**{**GOOD, "position_drops": [0.3, 0.3, 0.3], "intermediate_drop": math.nan,
                             "intermediate_matched_drop": math.nan, "intermediate_control_drop": math.nan})}
    lookup = c4_inputs({}, LOOKUP)[1]
    siteless = chapter.Dependency({u: None}, {u: {"layers": []}}, {u: empty}, rank=8)
    result = chapter.evaluate(build, chapter.C4Sections(summary, siteless, {u: lookup}))
    assert isinstance(result, ClaimResult) and result.claim == "C4"
    metrics, checks = result.metrics[u], result.checks[u]
    setting = metrics.setting
    assert setting.matched_available is False and setting.erasure_layers == [] and setting.erasure_rank == 8
    assert setting.n_memorized == 20 and setting.n_clean == 30 and setting.n_positions == 3
    assert by_id(checks)["c4.intermediate"].reason == verdicts.c4.C4_NO_SITE
    assert result.evaluations[u] == (flat(metrics), checks)  # what the chapter's sentences read
    # with a site and the control computed
    rows = pd.DataFrame({"example": [0, 0, 0], "method": ["INLP", "random", "matched"], "p_clean": 1.0,
                         "p_ablated": [0.4, 0.95, 0.9], "drop": [0.6, 0.05, 0.1]})
    summary = {u: C4Summary(**{**GOOD, "position_drops": [0.3, 0.3, 0.3]})}
    sited = chapter.Dependency({u: None}, {u: {"layers": [1]}}, {u: rows}, rank=8)  # read from the table
    result = chapter.evaluate(build, chapter.C4Sections(summary, sited, {u: lookup}))
    assert result.metrics[u].setting.matched_available is True and by_id(result.checks[u])["c4.intermediate"].passed is True
    no_draw = chapter.Dependency({u: None}, {u: {"layers": [1]}}, {u: rows[rows.method != "matched"]}, rank=8)
    assert chapter.evaluate(build, chapter.C4Sections(summary, no_draw, {u: lookup})).metrics[u].setting.matched_available is False
    # the record stores the metrics as their dict
    Unit, Config, Train = namedtuple("Unit", "task condition seed noisy"), namedtuple("Config", "train key"), \
        namedtuple("Train", "precision")
    v = Unit("fda", "random", 0, Config(Train("fp32"), "run"))
    seeds = chapter.results(SimpleNamespace(units=[v]), ClaimResult("C4", {v: result.metrics[u]}, {v: result.checks[u]}))
    assert seeds[0]["metrics"] == flat(result.metrics[u]) and seeds[0]["run_keys"] == ["run"]


def test_the_chapters_parameters_are_checked():
    from rote.chapters import c4 as chapter
    from rote.config import ConfigError

    assert chapter.Params(erasure_rank=8).erasure_rank == 8
    with pytest.raises(ConfigError, match="erasure_rank"):
        chapter.Params(erasure_rank=0)
    with pytest.raises(ValueError, match="same units"):
        chapter.Dependency({1: None}, {2: {}}, {1: None}, rank=8)
    dependency = chapter.Dependency({1: None}, {1: {"layers": []}}, {1: None}, rank=8)
    with pytest.raises(ValueError, match="same units"):
        chapter.C4Sections({1: {}}, dependency, {2: {}})


# -- section 11: margins and sampling intervals -----------------------------------------------------------
def _iv(low, high):
    from rote.analysis.intervals import Interval

    return Interval(low, high, "bootstrap")


INTERVALS = {"k50": _iv(8.0, 12.0), "activity": _iv(0.1, 0.3), "positions": _iv(2.0, 4.0),
             "intermediate": _iv(0.5, 0.7), "intermediate_over_matched": _iv(0.4, 0.6)}
LOOKUP_INTERVALS = {"k50": _iv(1.0, 2.0), "activity": _iv(0.0, 0.01), "positions": _iv(0.0, 2.0)}


def test_every_check_has_its_margin_and_the_summaries_intervals():
    metrics, checks = c4_checks({**GOOD, "intervals": INTERVALS}, {**LOOKUP, "intervals": LOOKUP_INTERVALS})
    c = by_id(checks)
    for check_id, key in (("c4.k50", "k50"), ("c4.activity", "activity"), ("c4.positions", "positions"),
                          ("c4.intermediate.registered", "intermediate"),
                          ("c4.intermediate", "intermediate_over_matched")):
        assert c[check_id].interval == (INTERVALS[key].low, INTERVALS[key].high) and c[check_id].method == "bootstrap"
        assert c[check_id].margin == pytest.approx(c[check_id].value - c[check_id].threshold)
    assert c["c4.k50"].near is False and c["c4.positions"].near is True  # the count's interval reaches 2
    # a validity check's margin is positive where the look-up fails the statistic (the check passes)
    for stat in verdicts.c4.LOOKUP_STATISTICS:
        v = c[f"c4.{stat}.lookup"]
        assert v.margin == pytest.approx(v.threshold - v.value) and (v.margin > 0) == v.passed
        assert v.interval == (LOOKUP_INTERVALS[stat].low, LOOKUP_INTERVALS[stat].high)
    assert c["c4.positions.lookup"].near is True  # its interval reaches the threshold: near, and still passes
    # near decides nothing; the intervals are no metric of the record
    _, plain = c4_checks(GOOD, LOOKUP)
    assert [(x.id, x.passed, x.margin) for x in plain] == [(x.id, x.passed, x.margin) for x in checks]
    assert verdicts.seed_verdict(checks, "amended") == verdicts.seed_verdict(plain, "amended") == "pass"
    assert "c4.positions" in verdicts.near_checks(checks) and not verdicts.near_checks(plain)
    assert "intervals" not in flat(metrics) and "lookup_intervals" not in flat(metrics)


def test_an_unresolved_check_keeps_no_interval_where_the_intervention_cannot_run():
    siteless = {**GOOD, "intermediate_drop": math.nan, "intermediate_matched_drop": math.nan, "erasure_layers": [],
                "matched_available": False, "intervals": INTERVALS}
    _, checks = c4_checks(siteless, LOOKUP)
    for check_id in ("c4.intermediate", "c4.intermediate.registered"):
        c = by_id(checks)[check_id]
        assert c.passed is None and c.margin is None and c.interval is None and c.near is None


def test_the_chapter_hands_the_intervals_of_its_summaries_to_the_verdict():
    """End to end on made-up tables: c4_summary's intervals reach the checks (nothing recomputed)."""
    import numpy as np
    from types import SimpleNamespace

    import pandas as pd

    from rote.analysis import neurons
    from rote.chapters import c4 as chapter

    rng = np.random.default_rng(0)
    k50s = pd.DataFrame({"set": ["M"] * 30 + ["C"] * 30, "example": list(range(30)) * 2,
                         "k50": np.r_[rng.integers(6, 14, 30), rng.integers(10, 14, 30)].astype(float)})
    spec = pd.DataFrame({"example": np.arange(30), "activity": rng.random(30)})
    pos = pd.DataFrame({"example": np.tile(np.arange(30), 2), "position": np.repeat([0, 1], 30),
                        "drop": rng.normal(0.4, 0.1, 60)})
    inter = pd.DataFrame({"example": np.tile(np.arange(30), 3), "method": np.repeat(["INLP", "random", "matched"], 30),
                          "drop": np.r_[rng.normal(0.6, 0.1, 30), rng.normal(0.05, 0.05, 30),
                                        rng.normal(0.1, 0.1, 30)]})
    u = ("fda", "random", 0)
    summary = {u: neurons.c4_summary(k50s, spec, pos, inter, drop_min=T["drop_min"])}
    build = SimpleNamespace(units=[u], sets={u: {"M": [0] * 30, "C": [0] * 30}})
    depends = chapter.Dependency({u: pos}, {u: {"layers": [1]}}, {u: inter}, rank=8)
    result = chapter.evaluate(build, chapter.C4Sections(summary, depends, {u: c4_inputs({}, LOOKUP)[1]}))
    c = by_id(result.checks[u])
    assert c["c4.intermediate"].interval == (summary[u].intervals["intermediate_over_matched"].low,
                                             summary[u].intervals["intermediate_over_matched"].high)
    assert c["c4.k50"].method == "bootstrap" and c["c4.k50"].interval[0] <= c["c4.k50"].value <= c["c4.k50"].interval[1]

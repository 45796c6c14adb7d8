"""Amendment 3, 12.2 and 12.3 on planted learning curves: a noise-free twin that did not train, or a noisy run
whose mem still rises at the end, is a `validity` check that fails. It never decides; the checks that read that
run are unresolved in the amended reading (values shown), the registered reading stays as it was, and X1's
unresolved checks carry no margin (issue 43, part 5)."""

import math

import numpy as np
import pandas as pd
import pytest

from rote.build import timings
from rote import verdicts
from rote.analysis import curves
from rote.chapters import x1
from test_verdicts import _by, _c1_tables  # planted C1 tables (tests/test_verdicts.py)

GEN = [0.0, 0.95, 0.99, 0.97, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
MEM = [0.0, 0.0, 0.0, 0.3, 0.9, 0.95, 0.9, 0.95, 0.95, 0.95]  # plateaued: the last 5 against those to 90%
RISING = [0.0] * 10 + [0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 0.95]  # still rising at the end


# -- the measure (rote.analysis.curves.plateau) -----------------------------------------------------------
def test_plateau_reads_the_last_five_against_the_five_ending_at_90_percent_of_the_steps():
    table = pd.DataFrame({"step": np.arange(20) * 50, "mem": RISING})
    p = curves.plateau(table)
    assert p.at_step == 850  # 90% of 950 is 855: the last evaluation at or before it
    assert p.final == pytest.approx(np.mean(RISING[-5:])) and p.earlier == pytest.approx(np.mean(RISING[13:18]))
    assert p.rise == pytest.approx(p.final - p.earlier)
    with_nan = table.assign(mem=[*RISING[:15], math.nan, *RISING[16:]])
    assert math.isnan(curves.plateau(with_nan).earlier) and math.isnan(curves.plateau(with_nan).final)
    short = table.iloc[:5]  # five evaluations: none left for the earlier window
    assert math.isnan(curves.plateau(short).earlier) and not math.isnan(curves.plateau(short).final)
    assert curves.plateau(table.drop(columns="mem")).at_step is None
    with pytest.raises(ValueError, match="at_step"):
        curves.Plateau(0.5, 0.5, -1)


# -- C1 ---------------------------------------------------------------------------------------------------
def _c1(gen=GEN, mem=MEM, twin=0.97):
    return verdicts.c1.checks(*_c1_tables(gen, mem, [twin] * len(gen)), eval_every=50)


def test_c1_a_twin_that_did_not_train_leaves_the_benign_gap_unresolved():
    _, good = _c1()
    assert _by(good, "c1.twin_trained").passed is True and verdicts.find(good, "c1.benign.amended") is None
    _, checks = _c1(twin=0.07)
    twin = _by(checks, "c1.twin_trained")
    assert twin.kind == "validity" and twin.passed is False and twin.value == pytest.approx(0.07)
    assert twin.history == (("12.2", "validity"),) and "did not train" in twin.reason
    benign = _by(checks, "c1.benign.amended")
    assert benign.passed is None and benign.value == pytest.approx(0.95) and "did not train" in benign.reason
    assert _by(checks, "c1.benign").kind == "superseded" and _by(checks, "c1.benign").passed is True  # shown
    assert _by(checks, "c1.mem").passed is True and _by(checks, "c1.gen").passed is True  # they read no twin
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"
    assert verdicts.seed_verdict(checks, "registered") == "pass"  # section 5 as written: the twin is not read
    assert verdicts.seed_verdict(checks, "8") == "pass"  # as of amendment 2: nothing moved


def test_c1_a_curve_still_rising_makes_the_final_checks_and_the_benign_gap_unresolved_with_their_values():
    gen = [0.0, 0.5, 0.95, 0.99] + [0.95] * 16
    metrics, checks = _c1(gen=gen, mem=RISING)
    flat = _by(checks, "c1.plateau")
    assert flat.kind == "validity" and flat.passed is False and flat.history == (("12.3", "validity"),)
    assert flat.value == pytest.approx(np.mean(RISING[-5:]) - np.mean(RISING[13:18])) and flat.threshold == 0.05
    assert "has not finished memorizing" in flat.reason and metrics.mem_at_90 == pytest.approx(np.mean(RISING[13:18]))
    for check_id, value in (("c1.mem", metrics.final_mem), ("c1.gen", 0.95), ("c1.benign", 0.95)):
        stand_in = _by(checks, f"{check_id}.amended")
        assert stand_in.passed is None and stand_in.value == pytest.approx(value)  # the value shown
        assert "has not finished memorizing" in stand_in.reason and stand_in.kind == "amended"
        assert _by(checks, check_id).kind == "superseded"
    assert _by(checks, "c1.order").passed is True  # the ordering reads no final value
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"
    # the validity check never decides: a fail it finds stays a fail of the check it validates elsewhere
    _, plateaued = _c1()
    assert _by(plateaued, "c1.plateau").passed is True and verdicts.seed_verdict(plateaued, "amended") == "pass"


def test_c1_a_validity_check_that_cannot_be_measured_leaves_its_checks_unresolved_with_the_reason():
    gen, mem = GEN[:5], MEM[:5]  # five evaluations: only four of them end at 90% of the steps
    _, checks = _c1(gen=gen, mem=mem)
    assert _by(checks, "c1.plateau").passed is None and "could not be measured" in _by(checks, "c1.plateau").reason
    assert _by(checks, "c1.mem.amended").passed is None


# -- X1 ---------------------------------------------------------------------------------------------------
def _noisy(final_gen, mem_end=0.97, rising=False, n=30, every=10):
    i = np.arange(n)
    gen = np.where(i < 5, i / 5 * 0.8, np.where(i >= 12, final_gen, 0.98))
    mem = np.linspace(0.0, mem_end, n) if rising else np.where(i >= 12, mem_end, 0.0)
    return pd.DataFrame({"step": i * every, "gen": gen, "mem": mem, "rec": 1 - mem, "fit": np.ones(n)})


def _twin(final_gen=1.0, n=30, every=10):
    i = np.arange(n)
    return pd.DataFrame({"step": i * every, "gen": np.where(i < 5, i / 5 * 0.8, final_gen), "mem": np.nan,
                         "rec": np.nan, "fit": np.ones(n)})


def _x1(costs, twins=None, rising_at=(), seeds=(0, 1, 2), widths=(16, 32, 64)):
    """A study on planted curves: per width the cost (the twin ends at ``twins[i]``, default 1.0); a width in
    ``rising_at`` has a noisy run whose mem still rises at the end."""
    g = x1.grid("smoke", seeds=list(seeds), widths=list(widths))
    twins = twins or [1.0] * len(widths)
    # 12.4: every selection twin at a width ends where that width's twin does (a tie: the largest rate)
    metrics = {c.key: _twin(twins[widths.index(c.model.d_model)]) for c in g.selection_configs}
    g = x1.resolved(g, metrics)
    for u in g.width_units + g.ratio_units:
        if u.noisy.model.d_model in widths and u.noisy.data.noise_ratio == g.noise_ratio:
            i = widths.index(u.noisy.model.d_model)
            metrics[u.noisy.key] = _noisy(1.0 - costs[i], rising=widths[i] in rising_at)
            metrics[u.clean.key] = _twin(twins[i])
    (rec,) = x1.study(g, metrics, timings).records()
    return rec


def test_x1_a_twin_that_did_not_train_at_the_largest_width_is_unresolved_never_holds():
    # the twin at width 64 ends at gen 0.07 while the noisy run ends at 0.82: a "cost" of -0.75
    rec = _x1([0.1, 0.08, 0.18], twins=[1.0, 1.0, 0.07])
    assert rec.verdict_registered == "holds"  # section 9 as registered reads -0.75 and passes it (shown)
    assert rec.verdict_amended == "unresolved"
    seed = rec.per_seed[0]
    largest = verdicts.find(seed["checks"], "x1.cost_largest.amended")
    assert largest["passed"] is None and largest["value"] == pytest.approx(-0.75) and largest["margin"] is None
    assert "the noise-free twin at width 64 did not train" in largest["reason"]
    rising = verdicts.find(seed["checks"], "x1.not_rising.amended")
    assert rising["passed"] is None and rising["margin"] is None and "width 64 did not train" in rising["reason"]
    twin = verdicts.find(seed["checks"], "x1.twin_trained.w64")
    assert twin["kind"] == "validity" and twin["passed"] is False and twin["value"] == pytest.approx(0.07)
    assert verdicts.find(seed["checks"], "x1.twin_trained.w16")["passed"] is True
    assert seed["metrics"]["invalid"] == {"64": twin["reason"]}


def test_x1_a_twin_that_did_not_train_at_a_small_width_leaves_only_the_steps_touching_it_unresolved():
    # width 16's twin did not train: a cost of -0.9 there makes a "rise" of 1.0 to width 32 (a fail as registered)
    rec = _x1([0.1, 0.1, 0.04], twins=[0.0, 1.0, 1.0])
    assert rec.verdict_registered == "mixed: 0 pass, 3 fail, 0 unresolved"
    assert rec.verdict_amended == "unresolved"
    rising = verdicts.find(rec.per_seed[0]["checks"], "x1.not_rising.amended")
    assert rising["passed"] is None and "width 16 did not train" in rising["reason"]
    assert verdicts.find(rec.per_seed[0]["checks"], "x1.cost_largest")["passed"] is True  # width 64 is read
    # a rise elsewhere still fails: 32 -> 64 rises by 0.1
    rec = _x1([0.1, 0.0, 0.1], twins=[0.0, 1.0, 1.0])
    assert verdicts.find(rec.per_seed[0]["checks"], "x1.not_rising.amended")["passed"] is False


def test_x1_a_noisy_run_still_memorizing_leaves_its_width_unresolved():
    rec = _x1([0.2, 0.1, 0.04], rising_at=(64,))
    assert rec.verdict_registered == "holds" and rec.verdict_amended == "unresolved"
    seed = rec.per_seed[0]
    flat = verdicts.find(seed["checks"], "x1.plateau.w64")
    assert flat["passed"] is False and "the noisy run at width 64 has not finished memorizing" in flat["reason"]
    largest = verdicts.find(seed["checks"], "x1.cost_largest.amended")
    assert largest["passed"] is None and largest["value"] == pytest.approx(0.04) and largest["margin"] is None
    assert "has not finished memorizing" in largest["reason"]
    assert _x1([0.2, 0.1, 0.04]).verdict_amended == "holds"  # the same costs, every run plateaued


def test_an_unresolved_x1_check_has_no_margin():
    rec = _x1([0.2, 0.1, 0.04], twins=[1.0, 1.0, 1.0], seeds=(0,))
    assert all(c["margin"] is not None for c in rec.per_seed[0]["checks"] if c["passed"] is not None)
    # width 16 does not memorize: its mem check and the rise that touches it are unresolved, without a margin
    _, checks = verdicts.x1.checks(pd.DataFrame({
        "width": [16, 32], "seed": 0, "gen_twin": 0.99, "gen_noisy": [0.89, 0.95], "cost": [0.1, 0.04],
        "mem": [0.3, 0.97], "mem_at_90": [0.3, 0.97], "mem_at_90_step": 90}))
    for check_id in ("x1.mem.w16", "x1.not_rising"):
        assert _by(checks, check_id).passed is None and _by(checks, check_id).margin is None


def test_x1_an_unresolved_cost_at_the_largest_width_never_makes_the_amended_reading_fail():
    # every seed fails on a rise (16 -> 32); at width 64 the noisy run still memorizes at the end (12.3), so its
    # cost of 0.3 no longer counts in the amended reading: "fails" (protocol 9) needs the cost to fail there
    rec = _x1([0.02, 0.15, 0.3], rising_at=(64,))
    assert rec.verdict_registered == "fails"  # section 9 as registered: the cost at 64 fails on every seed
    assert [s["amended"] for s in rec.per_seed] == ["fail"] * 3
    assert rec.verdict_amended == "mixed: 0 pass, 3 fail, 0 unresolved"
    assert verdicts.find(rec.per_seed[0]["checks"], "x1.cost_largest.amended")["passed"] is None

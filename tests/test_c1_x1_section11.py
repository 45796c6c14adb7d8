"""Protocol 8.6 and section 11 for C1 and X1 on planted learning curves: a NaN among the last 5
evaluations makes "final" missing (unresolved, never the mean of the others); every deciding check
records its margin, and where its share comes from a sample of examples, its 95% interval (Wilson for
a share, Newcombe for a difference of two, shifted onto the value's scale)."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from rote.build import timings
from rote import plan, verdicts
from rote.analysis import curves, intervals
from rote.chapters import c1, x1
from rote.tasks import build_task
from test_verdicts import _by, _c1_tables  # one helper for planted C1 tables (tests/test_verdicts.py)
from test_x1 import _selection  # 12.4's selection, planted (tests/test_x1.py)

NAN = math.nan
GEN = [0.0, 0.95, 0.99, 0.97, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
MEM = [0.0, 0.0, 0.0, 0.3, 0.9, 0.95, 0.9, 0.95, 0.95, 0.95]


def _tables(gen=GEN, mem=MEM, clean_gen=None, every=50):
    return _c1_tables(gen, mem, clean_gen or [0.97] * len(gen), every=every)


# -- 8.6: "final" is missing when its window holds a NaN ------------------------------------------------
def test_final_is_missing_when_a_nan_lies_in_its_window():
    table = pd.DataFrame({"step": range(0, 400, 50), "gen": [0.1, 0.5, 0.9, 0.95, NAN, 0.95, 0.95, 0.95]})
    assert math.isnan(curves.final(table, "gen"))  # before 8.6: 0.95, the mean of the four others
    assert curves.missing_in_window(table, "gen") == 1
    assert curves.final(table, "gen", 1) == 0.95  # the last evaluation alone is there
    assert curves.final(table.iloc[:4], "gen") == pytest.approx(np.mean([0.1, 0.5, 0.9, 0.95]))  # no NaN: the mean
    assert math.isnan(curves.final(table.iloc[:0], "gen")) and curves.missing_in_window(table.iloc[:0], "gen") == 5


def test_c1_with_a_nan_among_the_last_five_evaluations_is_unresolved_not_the_mean_of_the_others():
    gen = GEN[:7] + [NAN] + GEN[8:]  # one evaluation of the last 5 has no gen
    metrics, checks = verdicts.c1.checks(*_tables(gen=gen), eval_every=50)
    assert math.isnan(metrics.final_gen) and math.isnan(metrics.gen_cost)
    for check_id in ("c1.gen", "c1.benign"):  # before 8.6: both passed on the mean of the other four (0.95)
        check = _by(checks, check_id)
        assert check.passed is None and check.value is None and check.margin is None
        assert "final gen of the noisy run could not be computed: 1 of its last 5 evaluations has no gen value" \
            in check.reason
    assert _by(checks, "c1.gen.registered").value == 0.95  # the last evaluation is there
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"
    clean = _tables(clean_gen=[0.97] * 8 + [NAN, NAN])[1]
    _, checks = verdicts.c1.checks(_tables()[0], clean, eval_every=50)
    assert _by(checks, "c1.benign").passed is None
    assert "noise-free twin could not be computed: 2 of its last 5 evaluations have no gen value" in \
        _by(checks, "c1.benign").reason


# -- section 11: margins and intervals of C1 ----------------------------------------------------------
def test_c1_margins_and_intervals():
    sizes, twin = curves.SampleSizes(n_test=1000, n_noisy=500), curves.SampleSizes(n_test=800, n_noisy=0)
    metrics, checks = verdicts.c1.checks(*_tables(), eval_every=50, sizes=sizes, clean_sizes=twin)
    assert (metrics.n_test, metrics.n_noisy, metrics.clean_n_test) == (1000, 500, 800)
    order = _by(checks, "c1.order")  # a crossing: margin only
    assert order.margin == pytest.approx(order.value - 50) and order.interval is None and order.method == ""
    mem, gen, benign = _by(checks, "c1.mem"), _by(checks, "c1.gen"), _by(checks, "c1.benign")
    expected = intervals.wilson(metrics.final_mem * 500, 500)  # the final share as one evaluation of n examples
    assert mem.method == "wilson" and mem.interval == pytest.approx((expected.low, expected.high))
    assert mem.margin == pytest.approx(metrics.final_mem - 0.9)
    expected = intervals.wilson(metrics.final_gen * 1000, 1000)
    assert gen.method == "wilson" and gen.interval == pytest.approx((expected.low, expected.high))
    diff = intervals.newcombe(metrics.final_gen * 1000, 1000, metrics.clean_final_gen * 800, 800)
    assert benign.method == "newcombe"
    assert benign.interval == pytest.approx((diff.low + metrics.clean_final_gen, diff.high + metrics.clean_final_gen))
    assert benign.threshold == pytest.approx(0.97 - 0.05) and benign.margin == pytest.approx(0.95 - 0.92)
    assert benign.near is False and gen.near is False and mem.near is False
    registered = _by(checks, "c1.benign.registered")  # superseded, with its interval all the same (last evaluation)
    diff = intervals.newcombe(950, 1000, 0.97 * 800, 800)
    assert registered.interval == pytest.approx((diff.low + 0.97, diff.high + 0.97))
    # near: gen 0.905 of 1000 has 0.9 inside its interval; it passes all the same (near never decides)
    _, checks = verdicts.c1.checks(*_tables(gen=GEN[:5] + [0.905] * 5), eval_every=50, sizes=sizes, clean_sizes=twin)
    gen = _by(checks, "c1.gen")
    assert gen.passed is True and gen.near is True and gen.margin == pytest.approx(0.005)
    assert "c1.gen" in verdicts.near_checks(checks)
    # without sample sizes: margins, no intervals
    _, checks = verdicts.c1.checks(*_tables(), eval_every=50)
    assert _by(checks, "c1.gen").interval is None and _by(checks, "c1.gen").margin == pytest.approx(0.05)


def test_sample_sizes_read_off_the_config_are_the_datas():
    for unit in plan.units("smoke", ["fda", "thr"], [0], {}):
        for config in (unit.noisy, unit.clean):
            data = build_task(config)
            assert curves.sample_sizes(config) == curves.SampleSizes(len(data.test), len(data.train_noisy))


def test_the_chapter_hands_each_unit_its_sample_sizes():
    units = plan.units("smoke", ["fda"], [0], {})
    noisy, clean = _tables()
    build = c1.Build("smoke", units, {u: SimpleNamespace(metrics=noisy) for u in units},
                     twins={u: SimpleNamespace(metrics=clean) for u in units})
    result = c1.evaluate(build, c1.learning_curves(build))
    for u in units:
        m, gen = result.metrics[u], _by(result.checks[u], "c1.gen")
        assert (m.n_test, m.n_noisy) == (u.noisy.data.n_test, round(u.noisy.data.noise_ratio * u.noisy.data.n_train))
        assert m.clean_n_test == u.clean.data.n_test and gen.method == "wilson"


# -- 8.6: X1 compares like every other claim; section 11 for X1 ---------------------------------------
def _rows(costs, mems=None, sizes=True, widths=(16, 32, 64)):
    """One seed's width table: the twin ends at gen 0.99, the noisy run at 0.99 - cost; mem has plateaued."""
    mems = mems or [0.97] * len(costs)
    rows = pd.DataFrame({"width": widths, "seed": 0, "gen_twin": 0.99, "gen_noisy": [0.99 - c for c in costs],
                         "cost": costs, "mem": mems, "mem_at_90": 0.96, "mem_at_90_step": 90})
    return rows.assign(n_test=1000, n_test_twin=1000, n_noisy=500) if sizes else rows


def test_x1_a_nan_cost_is_unresolved_never_a_fail():
    _, checks = verdicts.x1.checks(_rows([0.1, 0.04, NAN]))
    largest, rising = _by(checks, "x1.cost_largest"), _by(checks, "x1.not_rising")
    # before 8.6: round(nan) <= 0.05 is False, and so was the step 32 -> 64: both failed
    assert largest.passed is None and "the gen cost at width 64 is missing" in largest.reason
    assert rising.passed is None and "the gen cost at width 64 is missing" in rising.reason
    assert rising.value == pytest.approx(-0.06) and largest.margin is None
    assert verdicts.seed_verdict(checks, "registered") == "unresolved"
    # a rise between two widths that have their cost still fails, whatever the missing one
    _, checks = verdicts.x1.checks(_rows([0.0, 0.1, NAN]))
    assert _by(checks, "x1.not_rising").passed is False and _by(checks, "x1.cost_largest").passed is None
    # a NaN final mem: that width is unresolved with the reason, and so are the checks that need it
    _, checks = verdicts.x1.checks(_rows([0.1, 0.05, 0.04], mems=[0.97, 0.97, NAN]))
    mem = _by(checks, "x1.mem.w64")
    assert mem.passed is None and "final mem at width 64 is missing" in mem.reason
    assert "final mem at the largest width (64) is missing" in _by(checks, "x1.cost_largest").reason
    assert _by(checks, "x1.not_rising").passed is None


def test_x1_a_nan_in_the_noisy_runs_last_evaluations_leaves_the_seed_unresolved():
    g, metrics = _selection(x1.grid("smoke", seeds=[0]))  # 12.4: each width at the profile's rate
    for u in g.width_units + g.ratio_units:
        if u.noisy.key in metrics:  # a ratio unit that is a width unit too
            continue
        gen = np.r_[np.linspace(0, 0.99, 25), [0.95] * 5]
        if u.noisy.model.d_model == g.widths[-1]:
            gen[-2] = NAN  # one of the largest width's last 5 evaluations has no gen
        metrics[u.noisy.key] = pd.DataFrame({"step": np.arange(30) * 10, "gen": gen, "mem": 0.97, "rec": 0.0,
                                             "fit": 1.0})
        metrics[u.clean.key] = pd.DataFrame({"step": np.arange(30) * 10, "gen": 0.97, "mem": NAN, "rec": NAN,
                                             "fit": 1.0})
    study = x1.study(g, metrics, timings)
    (rec,) = study.records()
    checks = rec.per_seed[0]["checks"]
    assert verdicts.find(checks, "x1.cost_largest")["passed"] is None  # before 8.6: a cost of 0.02, a pass
    assert "noisy run has no final gen" in verdicts.find(checks, "x1.cost_largest")["reason"]
    assert rec.verdict_registered == "unresolved (1 seed)"
    assert "missing (a NaN among the last 5 evaluations)" in study.cost_sentence()
    row = rec.per_seed[0]["metrics"]["by_width"][str(g.widths[0])]
    assert (row["n_test"], row["n_test_twin"], row["n_noisy"]) == (
        g.width_units[0].noisy.data.n_test, g.width_units[0].clean.data.n_test,
        curves.sample_sizes(g.width_units[0].noisy).n_noisy)
    mem = verdicts.find(checks, f"x1.mem.w{g.widths[0]}")
    assert mem["method"] == "wilson" and mem["margin"] == pytest.approx(0.97 - 0.9)


def test_x1_margins_and_intervals():
    _, checks = verdicts.x1.checks(_rows([0.1, 0.06, 0.04]))
    mem, largest, rising = _by(checks, "x1.mem.w16"), _by(checks, "x1.cost_largest"), _by(checks, "x1.not_rising")
    expected = intervals.wilson(0.97 * 500, 500)
    assert mem.method == "wilson" and mem.interval == pytest.approx((expected.low, expected.high))
    assert mem.margin == pytest.approx(0.07) and mem.passed is True
    expected = intervals.newcombe(0.99 * 1000, 1000, 0.95 * 1000, 1000)  # twin gen - noisy gen
    assert largest.method == "newcombe" and largest.interval == pytest.approx((expected.low, expected.high))
    assert largest.margin == pytest.approx(0.05 - 0.04) and largest.passed is True and largest.near is True
    assert rising.value == pytest.approx(-0.02) and rising.margin == pytest.approx(0.04)
    low, high = rising.interval  # the rise 32 -> 64 (the largest): four shares, wider than either cost alone
    assert rising.method == "newcombe" and low < -0.02 < high
    assert high - low > largest.interval[1] - largest.interval[0]
    # two shares: the same construction gives Newcombe's interval exactly
    same = verdicts.x1._rise_interval({"gen_twin": 0.5, "gen_noisy": 0.5, "n_test": 10 ** 9, "n_test_twin": 10 ** 9},
                                      {"gen_twin": 0.9, "gen_noisy": 0.8, "n_test": 100, "n_test_twin": 200})
    exact = intervals.newcombe(0.9 * 200, 200, 0.8 * 100, 100)
    assert same.low == pytest.approx(exact.low, abs=1e-4) and same.high == pytest.approx(exact.high, abs=1e-4)
    # a cost of exactly the margin passes with margin 0 (X1 compares <= at 1e-9), as before
    _, checks = verdicts.x1.checks(_rows([0.07, 0.05, 0.05]))
    assert _by(checks, "x1.cost_largest").passed is True and _by(checks, "x1.not_rising").passed is True
    # without sample sizes: margins only
    _, checks = verdicts.x1.checks(_rows([0.1, 0.06, 0.04], sizes=False))
    assert all(c.interval is None and c.margin is not None for c in checks)

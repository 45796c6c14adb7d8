"""Protocol 8.6 and section 11 for C1 and X1 on planted learning curves: a NaN among the last 5
evaluations makes "final" missing (unresolved, never the mean of the others); every deciding check
records its margin, and where its share comes from a sample of examples, its 95% interval (Wilson for
a share, Newcombe for a difference of two, shifted onto the value's scale)."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from rote import plan, verdicts
from rote.analysis import curves, intervals
from rote.chapters import c1
from rote.tasks import build_task

NAN = math.nan
GEN = [0.0, 0.95, 0.99, 0.97, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
MEM = [0.0, 0.0, 0.0, 0.3, 0.9, 0.95, 0.9, 0.95, 0.95, 0.95]


def _tables(gen=GEN, mem=MEM, clean_gen=None, every=50):
    steps = [i * every for i in range(len(gen))]
    noisy = pd.DataFrame({"step": steps, "gen": gen, "mem": mem, "rec": [0.5] * len(gen), "fit": [1.0] * len(gen)})
    clean = pd.DataFrame({"step": steps, "gen": clean_gen or [0.97] * len(gen), "mem": [NAN] * len(gen),
                          "rec": [NAN] * len(gen), "fit": [1.0] * len(gen)})
    return noisy, clean


def _by(checks, check_id):
    found = verdicts.find(checks, check_id)
    assert found is not None, [c.id for c in checks]
    return found


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

"""Section 11: the sampling intervals of a check's statistic (Wilson, Newcombe, percentile bootstrap),
margins signed so that a positive margin passes, and "near" (the interval contains the threshold),
which is shown and never changes a verdict."""

import math

import numpy as np
import pytest

from rote import verdicts
from rote.analysis import intervals
from rote.verdicts import CheckLabel, above, at_least, below

LABEL = CheckLabel("c1.gen", "final gen", "amended", "final gen")


def test_wilson_known_values():
    # Wilson 95% for 8/10: (0.4902, 0.9433) (Newcombe 1998, table I)
    iv = intervals.wilson(8, 10)
    assert (iv.low, iv.high, iv.method) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4), "wilson")
    assert intervals.wilson(0, 0) is None
    assert intervals.wilson(0, 10).low == 0.0 and intervals.wilson(10, 10).high == 1.0


def test_newcombe_known_values():
    # Newcombe 1998, example (a): 56/70 - 48/80 = 0.2000, method 10 interval (0.0524, 0.3339)
    iv = intervals.newcombe(56, 70, 48, 80)
    assert iv.method == "newcombe"
    assert iv.low == pytest.approx(0.0524, abs=1e-4) and iv.high == pytest.approx(0.3339, abs=1e-4)
    assert intervals.newcombe(1, 0, 1, 2) is None


def test_bootstrap_is_seeded_and_covers_the_statistic():
    x = np.random.default_rng(1).normal(1.0, 1.0, 400)
    a = intervals.bootstrap(np.median, x)
    b = intervals.bootstrap(np.median, x)
    assert a == b and a.method == "bootstrap" and a.contains(float(np.median(x)))
    assert a.high - a.low == pytest.approx(2 * 1.96 * 1.2533 / math.sqrt(400), rel=0.35)  # se of a median
    assert intervals.bootstrap(np.median, x, seed=7) != a  # another seed, another interval
    assert intervals.bootstrap(np.median, []) is None


def test_bootstrap_resamples_each_set_on_its_own():
    m = np.full(50, 4.0)
    c = np.random.default_rng(0).uniform(1.0, 3.0, 80)
    iv = intervals.bootstrap(lambda a, b: np.median(a) / np.median(b), [m, c])
    assert iv.low < 4.0 / np.median(c) < iv.high  # only the second set varies, so the interval is not a point
    assert intervals.bootstrap(lambda a, b: np.median(a) / np.median(b), [m, []]) is None


@pytest.mark.parametrize("compare, value, threshold, margin, passed", [
    (at_least, 0.943, 0.95, -0.007, False), (at_least, 0.96, 0.95, 0.01, True),
    (below, 0.05, 0.1, 0.05, True), (below, 0.15, 0.1, -0.05, False), (above, 3.0, 2.0, 1.0, True)])
def test_margin_is_signed_so_that_positive_passes(compare, value, threshold, margin, passed):
    check = compare(LABEL, value, threshold, missing="never")
    assert check.passed is passed and check.margin == pytest.approx(margin)
    assert (check.margin > 0) == passed
    assert check.interval is None and check.near is None and check.method == ""


def test_near_when_the_interval_contains_the_threshold():
    iv = intervals.wilson(943, 1000)  # about [0.927, 0.956]
    near = at_least(LABEL, 0.943, 0.95, missing="never", interval=iv)
    assert near.near is True and near.passed is False and near.method == "wilson"
    assert near.interval == (pytest.approx(iv.low), pytest.approx(iv.high))
    far = at_least(LABEL, 0.943, 0.8, missing="never", interval=iv)
    assert far.near is False and far.passed is True
    missing = at_least(LABEL, math.nan, 0.95, missing="no gen", interval=iv)
    assert missing.passed is None and missing.margin is None and missing.near is None


def test_near_never_changes_a_verdict():
    iv = intervals.wilson(951, 1000)
    checks = [at_least(CheckLabel(f"c1.{p}", p, "amended", p), 0.951, 0.95, missing="never", interval=iv)
              for p in ("order", "mem", "gen", "benign")]
    checks = [c.replace(part=p) for c, p in zip(checks, ("ordering", "final mem", "final gen", "benign gap"))]
    assert all(c.near for c in checks)
    plain = [c.replace(interval=None, method="", near=None) for c in checks]
    assert verdicts.seed_verdict(checks, "amended") == verdicts.seed_verdict(plain, "amended") == "pass"
    assert verdicts.near_checks(checks) == [c.id for c in checks] and verdicts.near_checks(plain) == []


def test_a_check_refuses_an_interval_without_method_or_backwards():
    with pytest.raises(ValueError):
        verdicts.Check("c1.gen", "g", "amended", 0.9, 0.95, False, interval=(0.9, 0.8), method="wilson")
    with pytest.raises(ValueError):
        verdicts.Check("c1.gen", "g", "amended", 0.9, 0.95, False, interval=(0.8, 0.9))


def test_near_lists_validity_checks_and_leaves_out_unresolved_ones():
    iv = intervals.wilson(999, 1000)
    reach = at_least(CheckLabel("c2.probe.x.reachable", "reachable", "validity", "probes"), 0.999, 0.9995,
                     missing="never", interval=iv)
    stand_in = verdicts.unresolved(at_least(CheckLabel("c2.probe.x.chance.amended", "chance", "amended", "probes"),
                                            0.999, 0.9995, missing="never", interval=iv), "out of reach")
    assert reach.near and stand_in.near
    assert verdicts.near_checks([reach, stand_in]) == ["c2.probe.x.reachable"]
    assert verdicts.near_checks([reach, stand_in], "registered") == []


def test_a_bootstrap_undefined_on_some_resamples_has_no_interval():
    """Issue 43 part 5: a ratio whose denominator is 0 on some resamples (planted: one nonzero clean value of
    60, so about 1 - (59/60)^60 of the draws are defined) used to drop the undefined draws silently and give the
    interval of the rest. Chosen: no interval (None), as for a statistic missing on the data itself."""
    num = np.linspace(1.0, 2.0, 40)
    den = np.r_[np.zeros(59), 1.0]
    ratio = lambda a, b: np.mean(a) / np.mean(b) if np.mean(b) else math.nan  # noqa: E731
    rng = np.random.default_rng(intervals.SEED)
    draws = [ratio(num[rng.integers(0, 40, 40)], den[rng.integers(0, 60, 60)]) for _ in range(intervals.RESAMPLES)]
    undefined = sum(not math.isfinite(d) for d in draws)
    assert math.isfinite(ratio(num, den)) and 100 < undefined < 900  # the planted case: some, not all, undefined
    assert intervals.bootstrap(ratio, [num, den]) is None
    assert intervals.bootstrap(ratio, [num, np.r_[np.zeros(10), np.ones(50)]]) is not None  # defined on every draw

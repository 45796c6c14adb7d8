"""Section 11 for C5: every deciding check carries its margin (positive passes), and where its statistic
comes from a sample of examples (or of units), its 95% interval in the value's own units: Wilson for the
heuristic share (over neurons) and every revert share (over the memorized examples patched), Newcombe's
hybrid score interval for the share against twice the null share (shifted onto the share's scale), a
percentile bootstrap over M and the clean examples for the |z| ratio at j*; the pattern correlation has a
margin only. Near never changes a verdict."""

import math

import numpy as np
import pytest
import torch

from rote import verdicts
from rote.analysis import intervals
from rote.analysis import outliers as O
from rote.analysis.units import NeighbourStats

GOOD = {"heuristic_fraction": 0.87, "untrained_heuristic_fraction": 0.75, "n_neurons": 1024,
        "z_ratio": 1.1, "pattern_corr_M": 0.7, "z_null_ratio": 1.0, "n_memorized": 400,
        "patch_revert_last": 0.77, "control_revert_last": 0.39, "dose_n": 300,
        "m50": 10, "top_revert_max": 0.9, "random_revert_m50": 0.2, "mismatched_revert_m50": 0.3,
        "cut_heuristic_fraction": 0.3, "cut_null_fraction": 0.01, "cut_n_neurons": 1024,
        "jstar_n_M": 300, "jstar_z_ratio": 3.0, "jstar_z_ratio_interval": intervals.Interval(2.5, 3.4, "bootstrap"),
        "jstar_pattern_corr_M": 0.8, "jstar_n": 300, "jstar_m50": 5, "jstar_top_revert_max": 0.8,
        "jstar_random_revert_m50": 0.02, "jstar_mismatched_revert_m50": 0.05, "jstar_short_m50": 0}
METHODS = {"c5.share": "wilson", "c5.share.null": "newcombe", "c5.z": "bootstrap", "c5.pattern.jstar": "",
           "c5.specificity": "wilson", "c5.specificity.random": "wilson", "c5.specificity.mismatched": "wilson",
           # superseded, where cheap
           "c5.share.registered": "wilson", "c5.share.untrained": "newcombe", "c5.z.registered": "",
           "c5.z.untrained_labels": "", "c5.pattern": "", "c5.patch.registered": "wilson",
           "c5.patch.random.registered": "wilson", "c5.dose.top": "wilson", "c5.dose.random": "wilson",
           "c5.dose.mismatched": "wilson"}


def _checks(**changes):
    return verdicts.c5.checks(verdicts.c5.from_record(**{**GOOD, **changes}))[1]


def test_every_check_has_its_margin_and_the_interval_its_statistic_allows():
    checks = _checks()
    assert {c.id: c.method for c in checks} == METHODS
    for c in checks:
        assert c.margin is not None and (c.margin > 0) == c.passed, c
        assert (c.interval is None) == (c.method == "")
        if c.interval is not None:
            assert c.interval[0] <= c.value <= c.interval[1], c  # the interval of the value, in its units
    by = {c.id: c for c in checks}
    share = intervals.wilson(0.3 * 1024, 1024)
    assert by["c5.share"].interval == (pytest.approx(share.low), pytest.approx(share.high))
    spec = intervals.wilson(0.8 * 300, 300)
    assert by["c5.specificity"].interval == (pytest.approx(spec.low), pytest.approx(spec.high))
    assert by["c5.specificity.random"].margin == pytest.approx(0.08)  # under 0.1: 0.1 - 0.02
    assert by["c5.z"].interval == (2.5, 3.4) and by["c5.z"].near is False
    assert by["c5.patch.registered"].interval[1] - by["c5.patch.registered"].interval[0] < 0.1  # 400 examples


def test_the_share_against_the_null_is_newcombes_interval_on_the_shares_scale():
    """Value a, threshold 2 x b: the interval of a - 2b (Newcombe's hybrid from the two Wilson intervals),
    shifted by 2b; with factor 1 it is intervals.newcombe shifted by b."""
    a, b, n = 0.3, 0.14, 1024
    c = {x.id: x for x in _checks(cut_heuristic_fraction=a, cut_null_fraction=b)}["c5.share.null"]
    one = verdicts.c5._over_null(a, b, n, 1.0)
    ref = intervals.newcombe(a * n, n, b * n, n).shifted(b)
    assert (one.low, one.high) == (pytest.approx(ref.low), pytest.approx(ref.high))
    assert c.threshold == pytest.approx(0.28) and c.interval[0] < 0.28 < c.interval[1] and c.near is True
    la, ua = intervals.wilson_bounds(a * n, n)
    assert c.interval[0] < la and c.interval[1] > ua  # wider than the share's own interval: the null is sampled too
    assert c.passed is True  # near changes nothing
    assert verdicts.near_checks(_checks(cut_heuristic_fraction=a, cut_null_fraction=b)) == ["c5.share.null"]


def test_missing_numbers_give_no_interval_and_no_margin():
    checks = _checks(jstar_n=None, cut_n_neurons=None, jstar_z_ratio_interval=None, jstar_z_ratio=math.nan)
    by = {c.id: c for c in checks}
    assert by["c5.specificity"].interval is None and by["c5.specificity"].margin == pytest.approx(0.3)
    assert by["c5.share"].interval is None and by["c5.share.null"].interval is None
    assert by["c5.z"].passed is None and by["c5.z"].margin is None and by["c5.z"].interval is None
    with pytest.raises(ValueError):
        verdicts.c5.from_record(jstar_z_ratio_interval=(2.5, 3.4))  # an Interval, with its method


# -- the bootstrap of the ratio at j* -------------------------------------------------------------------------
def _stats(z: torch.Tensor) -> NeighbourStats:
    """NeighbourStats with the given z [N, L, A, D] (the rest unused by the ratio)."""
    zeros = torch.zeros_like(z)
    return NeighbourStats(act=zeros, mean=zeros, sd=zeros + 1, count=zeros.short(), mean_all=zeros, z=z,
                          differs=torch.zeros(z.shape[0], z.shape[2], dtype=torch.bool), layers=[0])


class _Map:
    def __init__(self, heuristic):
        self.heuristic = heuristic


def _planted(n_m=60, n_c=200, seed=0):
    g = torch.Generator().manual_seed(seed)
    zm = torch.randn(n_m, 1, 5, 8, generator=g).abs()
    zc = torch.randn(n_c, 1, 5, 8, generator=g).abs()
    zc[torch.rand(n_c, 1, 5, 8, generator=g) < 0.2] = math.nan  # undefined z: excluded, reweighting the positions
    zm[:, :, :, 3] += 4.0  # a shifted unit on M
    jstar = torch.randint(0, 3, (n_m,), generator=g)
    jstar[:5] = -1
    return _stats(zm), _stats(zc), _Map(torch.ones(1, 5, 8, dtype=torch.bool)), jstar


def test_the_ratio_interval_bootstraps_m_and_clean_each_on_its_own_and_reweights_inside():
    M, C, hmap, jstar = _planted()
    out = O.jstar_comparison(M, C, hmap, jstar)
    iv = out.jstar_z_ratio_interval
    assert iv.method == "bootstrap" and iv.contains(out.jstar_z_ratio) and iv.high > iv.low
    values = O.jstar_values(M, C, hmap, jstar)
    assert values.M.shape == (55,) and values.clean.shape == (200, 5) and values.weights.tolist()[3:] == [0, 0]
    # the statistic on the data is the ratio the check reads (torch's lower median, the weighted median)
    assert O._median(values.M) == pytest.approx(out.jstar_z_M)
    assert O._at_positions(values.clean, values.weights) == pytest.approx(out.jstar_z_clean)
    assert O.jstar_ratio_interval(values) == iv  # seeded: the same interval twice
    # the weighting lives inside the statistic: a resample's defined entries per position set its weights
    rows = np.r_[np.arange(100), np.arange(100)]
    clean = values.clean[rows]
    defined = (~np.isnan(clean)).sum(0)
    spread = np.broadcast_to(np.where(defined > 0, values.weights / np.maximum(defined, 1), 0.0), clean.shape)
    assert O._at_positions(clean, values.weights) == pytest.approx(O.weighted_median(clean, spread))
    # resampling only M (a constant clean set) gives an interval too: each set has its own draws
    fixed = O.JstarValues(values.M, np.ones((200, 5)), values.weights)
    assert O.jstar_ratio_interval(fixed).high > O.jstar_ratio_interval(fixed).low
    none = O.jstar_comparison(M, C, hmap, torch.full((60,), -1))
    assert none.jstar_z_ratio_interval is None


def test_the_ratio_interval_is_cheap():
    import time
    M, C, hmap, jstar = _planted(n_m=300, n_c=500)
    values = O.jstar_values(M, C, hmap, jstar)
    start = time.perf_counter()
    O.jstar_ratio_interval(values)
    assert time.perf_counter() - start < 5.0  # 1,000 resamples of 300 and 500 x 5 values (about 0.3 s alone)

"""Issue 36: C2's chance on the set it is read on (protocol 8.6), the erasure sites as C2's probe results
(8.6), and section 11's margins and intervals of C2's checks. Planted inputs: made-up summaries and
sweeps, and the tiny random model of tests/conftest.py."""

import math
from collections import namedtuple
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from rote import analysis_cache, verdicts
from rote.analysis import erasure as E, intervals, probes, targets
from rote.analysis.probes import SWEEP_COLUMNS, ProbeSettings
from rote.chapters import Build, c2
from rote.config import make_config
from rote.tasks import build_task

Unit = namedtuple("Unit", "task condition seed")  # hashable, like rote.plan.Unit
LENS = pd.DataFrame({"layer": [0, 1, 2, 3], "p_true": [0.1, 0.6, 0.5, 0.1], "p_noisy": [0.1, 0.2, 0.3, 0.8]})
LENS_VERDICT = {"true_ahead_intermediate": True, "noisy_only_last": True, "takeover_layer": 3}
SHARE = pd.DataFrame({"layer": range(4), "n": 100, "ahead": [50, 80, 90, 10], "share": [0.5, 0.8, 0.9, 0.1],
                      "null": 0.5})


@pytest.fixture(scope="module")
def fda_data():
    return build_task(make_config("fda", "smoke"))


def _curves(m_chance, c_chance, m_acc=(0.1, 0.6, 0.5), c_acc=(0.2, 0.5, 0.9), n_m=50, n_c=80):
    rows = []
    for layer, (m, c) in enumerate(zip(m_acc, c_acc)):
        rows += [{"group": "carries", "layer": layer, "set": "M", "n": n_m, "accuracy": m, "chance": m_chance},
                 {"group": "carries", "layer": layer, "set": "C", "n": n_c, "accuracy": c, "chance": c_chance}]
    return pd.DataFrame(rows)


def _fda_checks(summary):
    return verdicts.c2.checks("fda", 50, 80, verdicts.c2.ProbeReads(summary),
                              verdicts.c2.LensReads(LENS_VERDICT, LENS, SHARE))


# -- 8.6: chance is measured on the examples the accuracy is measured on -------------------------------------
def test_the_sweep_measures_chance_on_each_set_it_reads(tiny_model, fda_data):
    """Chance on a set is its own majority-class share (protocol 8.6): a set of one class has chance 1, a
    mixed set the share of its most frequent class, an empty set none. (Before, chance was the share of
    the training labels' majority class: 0 on a set without that class, a threshold no probe can fail.)"""
    test = fda_data.test
    carry0 = targets.intermediate_targets(test, fda_data)["carry_0"].labels
    sets = {"A": test[carry0 == 1], "B": test[carry0 == 0], "E": test[carry0 < 0], "T": test}
    sweep = probes.probe_sweep(tiny_model, fda_data, fda_data.train_clean, sets, probes.ProbeTargets(["carry_0"]),
                               ProbeSettings(max_train=200, max_iter=5))
    chance = sweep[sweep.layer == 0].set_index("set").chance
    assert chance["A"] == chance["B"] == 1.0 and math.isnan(chance["E"])
    share = float((carry0 == 1).float().mean())
    assert chance["T"] == pytest.approx(max(share, 1 - share))
    summary = probes.best_layer_summary(probes.group_curves(sweep, "fda", {"carry 0": ["carry_0"]}), "T", "B").iloc[0]
    assert summary.chance == chance["T"] and summary.chance_C == chance["B"]


def test_the_reachable_threshold_uses_chance_on_C_and_the_chance_check_chance_on_M():
    """Planted: M's labels sit mostly in the training majority class (chance on M 0.3), C's do not (0.1). The
    reachable check reads 5 x C's chance (0.5, which C's 0.9 reaches), the chance check 5 x M's. Before,
    both read M's chance: the reachable threshold was 1.5, out of reach, and the chance check unresolved."""
    summary = probes.best_layer_summary(_curves(m_chance=0.3, c_chance=0.1))
    assert summary.iloc[0].chance == 0.3 and summary.iloc[0].chance_C == 0.1
    metrics, checks = _fda_checks(summary)
    reach, chance = (verdicts.find(checks, f"c2.probe.carries.{k}") for k in ("reachable", "chance"))
    assert reach.threshold == pytest.approx(0.5) and reach.passed is True and reach.value == 0.9
    assert verdicts.kind_as_of(chance, "8") == "registered" and chance.threshold == pytest.approx(1.5)
    assert chance.passed is False
    assert verdicts.find(checks, "c2.probe.carries.chance.amended") is None  # the claim's own check decides
    capped = verdicts.find(checks, "c2.probe.carries.chance.capped")  # 12.1: min(1.5, 0.65) on M's chance
    assert capped.threshold == pytest.approx(0.65) and capped.passed is False and chance.kind == "superseded"
    assert metrics.carries.chance == 0.3 and metrics.carries.chance_C == 0.1 and metrics.carries.chance_reachable
    # the other way round: C's labels sit in the majority class; 5 x 0.25 is out of C's reach, M's chance is low
    _, checks = _fda_checks(probes.best_layer_summary(_curves(m_chance=0.05, c_chance=0.25)))
    assert verdicts.find(checks, "c2.probe.carries.reachable").passed is False
    assert verdicts.find(checks, "c2.probe.carries.chance").kind == "superseded"
    assert verdicts.find(checks, "c2.probe.carries.chance.amended").passed is None


def test_an_empty_set_has_no_chance_and_its_checks_are_unresolved_with_the_reason(smoke_runs):
    curves = _curves(0.1, math.nan, c_acc=(math.nan,) * 3, n_c=0)
    summary = probes.best_layer_summary(curves).iloc[0]
    assert math.isnan(summary.chance_C) and summary.n_C == 0
    _, checks = _fda_checks(pd.DataFrame([summary]))
    reach = verdicts.find(checks, "c2.probe.carries.reachable")
    assert reach.passed is None and reach.reason == verdicts.c2.C2_NO_C
    row = dict(summary, acc_C_best=0.9)  # C read, but its chance not given: unresolved with that reason
    _, checks = _fda_checks(pd.DataFrame([row]))
    assert verdicts.find(checks, "c2.probe.carries.reachable").reason == verdicts.c2.C2_NO_CHANCE_C
    # the masked read's chance, 1 / (k - 1) where there are examples, is missing on an empty set (it was 1 / (k - 1))
    run = smoke_runs["thr"]
    empty = run.data.test[torch.zeros(len(run.data.test), dtype=torch.bool)]
    sweep = probes.masked_probe_sweep(run.model, run.data, run.data.train_clean, {"T": run.data.test, "E": empty},
                                      settings=ProbeSettings(max_train=200, max_iter=5))
    assert sweep[sweep.set == "E"].chance.isna().all() and sweep[sweep.set == "T"].chance.notna().all()


# -- 8.6: the erasure sites are C2's probe results -----------------------------------------------------------
def _carries_sweep(c_accuracy: list[float], chance: float = 0.1) -> pd.DataFrame:
    rows = []
    for target, position in [(f"carry_{i}", 13 - i) for i in range(4)] + [("carries", -1)]:
        for layer, acc in enumerate(c_accuracy):
            rows.append({"target": target, "layer": layer, "position": position, "own": True, "set": "C", "n": 100,
                         "correct": round(100 * acc), "accuracy": acc, "chance": chance})
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def test_a_result_read_at_the_last_layer_only_gives_a_site_there():
    """Planted: the carries reach 5 x chance on C at the last layer (3) only. The sites are C2's layers after
    the embedding, the last included: a site at layer 3 (before: layers 1..L-1 only, so no site, and C3's
    and C4's interventions were unresolved)."""
    sites = E.sites_from_sweep(_carries_sweep([0.9, 0.2, 0.3, 0.7]), "fda", 5.0)
    assert sites == {"group": "carries", "targets": [f"carry_{i}" for i in range(4)], "layers": [3],
                     "positions": [10, 11, 12, 13]}
    assert E.sites_from_sweep(_carries_sweep([0.9, 0.2, 0.3, 0.4]), "fda", 5.0)["layers"] == []  # the embedding: never


def _readable_sets(monkeypatch, tmp_path):
    """The cache's M and C of a random model (which memorizes and answers nothing): noisy training examples
    and test examples, so that both sets have examples to read; the cache in ``tmp_path``."""
    monkeypatch.setattr(analysis_cache, "analysis_root", lambda: tmp_path)
    monkeypatch.setattr(analysis_cache, "memorized", lambda model, data: data.train_noisy)
    monkeypatch.setattr(analysis_cache, "correct", lambda model, examples: examples[:60])


def test_c2_and_the_interventions_read_one_sweep(tiny_model, fda_data, tmp_path, monkeypatch):
    """Chapter 03's probes and the sites of chapters 04 and 05 come from one cached sweep per run: the sites
    are found without fitting a probe again, and are the layers where C2's own sweep reaches 5 x chance on C."""
    _readable_sets(monkeypatch, tmp_path)
    fits = []
    real = analysis_cache.sweep_probes
    monkeypatch.setattr(analysis_cache, "sweep_probes", lambda *a, **k: fits.append(1) or real(*a, **k))
    unit = Unit("fda", "random", 0)
    run = SimpleNamespace(config=SimpleNamespace(task="fda", key="feedbeef"), model=tiny_model, data=fda_data)
    build = Build("smoke", [unit], {unit: run}, {unit: {}})
    result = c2.probes(build, {}, 200, 0)
    sites = analysis_cache.erasure_sites_cached(run, min_over_chance=0.0, settings=ProbeSettings(max_train=200))
    assert len(fits) == 1
    assert sites == E.sites_from_sweep(result.sweeps[unit], "fda", 0.0)
    last = int(result.sweeps[unit].layer.max())
    assert last in sites["layers"] and 0 not in sites["layers"]  # a probe reads something on C at every layer
    # the chapters' defaults are C2's: chapters 04 and 05 read the entry chapter 03 wrote
    params = c2.Params()
    assert (params.max_probe_train, params.probe_seed) == (ProbeSettings().max_train, ProbeSettings().seed)
    assert params.extra_positions == targets.EXTRA_PROBE_POSITIONS
    assert list(targets.probe_positions("thr", params.extra_positions)) == list(targets.probe_positions("thr")) == [1, 2]


# -- section 11: margins and intervals -------------------------------------------------------------------------
def test_the_ratio_interval_is_a_bootstrap_over_examples_each_set_on_its_own():
    m, c = probes.bernoulli_counts(30, 50), probes.bernoulli_counts(72, 80)
    iv = probes.ratio_interval(m, c, 0)
    flat = intervals.bootstrap(lambda a, b: a.mean() / b.mean(), [m[0][0].astype(float), c[0][0].astype(float)])
    assert iv == flat and iv.method == "bootstrap" and iv.contains((30 / 50) / (72 / 80))
    # a pooled read (several targets of one example) resamples an example's reads together: all of an
    # example's five reads right or all wrong is wider than five independent reads
    together = (np.repeat([[5] * 30 + [0] * 20], 1, 0), np.full(50, 5))
    spread = (np.array([[3] * 50]), np.full(50, 5))
    c5 = (np.array([[4] * 80]), np.full(80, 5))
    wide, narrow = probes.ratio_interval(together, c5, 0), probes.ratio_interval(spread, c5, 0)
    assert wide.high - wide.low > 1.5 * (narrow.high - narrow.low)
    assert probes.ratio_interval(m, probes.bernoulli_counts(0, 80), 0) is None  # acc_C = 0: no ratio
    assert probes.ratio_interval(None, c, 0) is None and probes.bernoulli_counts(0, 0) is None


def _row(**change):
    row = {"group": "answer digits", "best_layer": 1, "acc_M": 0.6, "acc_C": 0.7, "chance": 0.1, "best_layer_C": 2,
           "acc_C_best": 0.9, "chance_C": 0.1, "n_M": 200, "n_C": 400, "k_M": 120, "k_C": 280, "k_C_best": 360,
           "ratio_M_C_lo": 0.7, "ratio_M_C_hi": 1.0}
    return pd.DataFrame([{**row, **change}])


def test_each_probe_check_holds_its_margin_and_interval():
    _, checks = _fda_checks(_row())
    ratio, chance, reach = (verdicts.find(checks, f"c2.probe.answer_digits.{k}")
                            for k in ("ratio", "chance", "reachable"))
    assert ratio.margin == pytest.approx(0.6 - 0.8 * 0.7) and ratio.method == "bootstrap"
    assert ratio.interval == (pytest.approx(0.7 * 0.7), pytest.approx(1.0 * 0.7))  # the ratio's, times acc_C
    assert ratio.near is True  # the ratio's interval [0.7, 1.0] holds 0.8: acc_M's holds 0.8 x acc_C
    iv = intervals.wilson(120, 200)
    assert chance.margin == pytest.approx(0.6 - 0.5) and chance.interval == (iv.low, iv.high)
    assert chance.method == "wilson" and chance.near is False
    iv = intervals.wilson(360, 400)
    assert reach.interval == (iv.low, iv.high) and reach.margin == pytest.approx(0.4)
    _, checks = _fda_checks(_row(ratio_M_C_lo=0.81, ratio_M_C_hi=1.2))
    assert verdicts.find(checks, "c2.probe.answer_digits.ratio").near is False
    _, plain = _fda_checks(_row(k_M=math.nan, n_M=0, ratio_M_C_lo=math.nan, ratio_M_C_hi=math.nan))
    assert verdicts.find(plain, "c2.probe.answer_digits.ratio").interval is None  # no sample given: none
    assert [c.passed for c in plain] == [c.passed for c in checks]


@pytest.mark.parametrize("k_best, passed", [(5000, True), (4995, False)])
def test_near_flags_the_fragile_reachable_check_and_changes_nothing(k_best, passed):
    """Section 11's motivating case: C2 FDA `digit`'s reachable check at 1.0 in fp32 and 0.999 in bf16, on
    either side of its threshold. With 5,000 reads on C both are near it; the verdict is what it was."""
    row = _row(acc_C_best=k_best / 5000, k_C_best=k_best, n_C=5000, chance_C=0.19991)
    _, checks = _fda_checks(row)
    reach = verdicts.find(checks, "c2.probe.answer_digits.reachable")
    assert reach.passed is passed and reach.near is True and verdicts.kind_as_of(reach, "8") == "validity"
    capped = verdicts.find(checks, "c2.probe.answer_digits.reachable.capped")  # 12.1: 0.6 is far from 1.0
    assert capped.passed is True and capped.near is False and reach.kind == "superseded"
    assert (reach.margin > 0) is passed
    bare = [c.replace(interval=None, method="", near=None) for c in checks]
    assert verdicts.seed_verdict(checks, "amended") == verdicts.seed_verdict(bare, "amended")


def test_every_deciding_check_of_a_seed_holds_a_margin_signed_so_that_positive_passes():
    summary = pd.concat([_row(group="carries", acc_M=0.85, acc_C=0.9, k_M=170, k_C=360), _row()])
    _, checks = _fda_checks(summary)
    deciding = [c for c in checks if verdicts.counts_in(c, "amended")]
    assert {c.id for c in deciding} >= {"c2.probe.carries.ratio", "c2.lens.ahead", "c2.lens.last", "c2.lens.null"}
    for c in deciding:
        assert c.margin is not None and (c.margin > 0) is c.passed, c
    sampled = [c for c in deciding if c.id.startswith("c2.probe") or c.id == "c2.lens.null"]
    assert all(c.interval is not None and c.method in ("wilson", "bootstrap") for c in sampled)
    assert {c.method for c in deciding if c.id in ("c2.lens.ahead", "c2.lens.last")} == {""}  # a crossing: margin only


def test_lens_margins_are_in_probability_units():
    # d = P(true) - P(noisy) at layers 1..3: 0.4, 0.2, -0.7
    assert verdicts.c2.lens_margins(LENS) == {"true_ahead_intermediate": pytest.approx(0.4),
                                              "noisy_only_last": pytest.approx(0.2)}
    # the noisy label ahead at layer 2 and the true answer again at the end: the pattern fails by 0.1
    late = LENS.assign(p_true=[0.1, 0.6, 0.25, 0.5], p_noisy=[0.1, 0.2, 0.3, 0.4])
    assert verdicts.c2.lens_margins(late)["noisy_only_last"] == pytest.approx(-0.1)
    one_block = LENS.iloc[:2]
    assert verdicts.c2.lens_margins(one_block) == {"true_ahead_intermediate": None, "noisy_only_last": None}
    _, checks = _fda_checks(_row())
    assert verdicts.find(checks, "c2.lens.last").margin == pytest.approx(0.2)


def test_the_lens_null_holds_the_shares_wilson_interval():
    _, checks = _fda_checks(_row())
    null = verdicts.find(checks, "c2.lens.null")
    iv = intervals.wilson(90, 100)
    assert null.interval == (iv.low, iv.high) and null.near is False
    # issue 43: the value is the share its interval is of (it was the lower bound, inside an interval of the share)
    assert null.value == pytest.approx(0.9) and null.interval[0] <= null.value <= null.interval[1]
    assert null.margin == pytest.approx(iv.low - 0.5) and null.passed is True
    near_share = SHARE.assign(ahead=[50, 55, 58, 10], share=[0.5, 0.55, 0.58, 0.1])
    _, checks = verdicts.c2.checks("fda", 50, 80, verdicts.c2.ProbeReads(_row()),
                                   verdicts.c2.LensReads(LENS_VERDICT, LENS, near_share))
    null = verdicts.find(checks, "c2.lens.null")
    assert null.passed is False and null.near is True and null.margin < 0  # 0.5 lies inside the share's interval


def test_the_chapter_hands_the_counts_and_the_bootstrap_to_the_checks(tiny_model, fda_data, tmp_path, monkeypatch):
    _readable_sets(monkeypatch, tmp_path)
    unit = Unit("fda", "random", 0)
    run = SimpleNamespace(config=SimpleNamespace(task="fda", key="feedbeef"), model=tiny_model, data=fda_data)
    sets = {"M": analysis_cache.memorized(tiny_model, fda_data), "C": analysis_cache.correct(tiny_model, fda_data.test)}
    build = Build("smoke", [unit], {unit: run}, {unit: sets})
    result = c2.probes(build, {}, 200, 0)
    summary = result.summary[unit].set_index("group")
    assert {"k_M", "n_M", "k_C_best", "n_C", "chance_C", "ratio_M_C_lo", "ratio_M_C_hi"} <= set(summary.columns)
    claim = c2.evaluate(build, c2.C2Sections(result))
    for group in ("carries", "answer digits"):
        row = summary.loc[group]
        key = group.replace(" ", "_")
        assert row.n_M and row.n_C
        chance, reach, ratio = (verdicts.find(claim.checks[unit], f"c2.probe.{key}.{k}")
                                for k in ("chance", "reachable", "ratio"))
        iv_m, iv_c = intervals.wilson(row.k_M, row.n_M), intervals.wilson(row.k_C_best, row.n_C)
        if group == "answer digits":  # five reads per example: the bootstrap over examples (issue 43)
            iv_m, iv_c = (intervals.Interval(row[f"{k}_lo"], row[f"{k}_hi"], "bootstrap")
                          for k in ("acc_M", "acc_C_best"))
        assert chance.interval == pytest.approx((iv_m.low, iv_m.high)) and chance.method == iv_m.method
        assert reach.interval == pytest.approx((iv_c.low, iv_c.high)) and reach.method == iv_c.method
        assert reach.threshold == pytest.approx(5 * row.chance_C)
        if row.acc_C > 0:
            assert ratio.interval == pytest.approx((row.ratio_M_C_lo * row.acc_C, row.ratio_M_C_hi * row.acc_C))

"""Missing values in every claim's checks (amendment 2, 8.5: "a NaN never decides").

For C1-C5, each input a deciding check reads is set to a missing value (NaN and None) in turn. Every check
must then be unresolved with a reason that names the case, or a fail whose reason cites the protocol's rule
for that case (C1: "never generalized" fails by section 5; C2: a probe accuracy of 0 on M fails by section 5;
C2: a 1-block model has no intermediate layer for 7.4's share). No check fails on a missing value without
such a reason, in either reading, and the reasons are not one blanket text: each names its case. (X1's checks
live in rote.verdicts.x1 and have their own tests.)
"""

import math
import re

import pandas as pd
import pytest

from rote import claims, verdicts
from rote.verdicts.core import CheckLabel
from c4_inputs import c4_checks  # tests/c4_inputs.py

RULE = re.compile(r"section 5|\b7\.\d|\b8\.\d")  # a reason that cites the protocol's rule for its case
MISSING = (math.nan, None)


def _outcome(c):
    return {True: "pass", False: "fail", None: "unresolved"}[c.passed]


def _no_nan_decides(checks):
    """Every unresolved check says why; a fail on a missing value or threshold cites its rule."""
    for c in checks:
        if c.passed is None:
            assert c.reason, f"{c.id} is unresolved without a reason"
        elif c.passed is False and (c.value is None or c.threshold is None):
            assert RULE.search(c.reason or ""), f"{c.id} fails on a missing value without citing a rule: {c.reason!r}"
        if isinstance(c.value, float):
            assert not math.isnan(c.value), f"{c.id} records a NaN value"


def _changed(good, bad):
    """The checks whose outcome moved (or that appeared) when an input went missing."""
    before = {c.id: c.passed for c in good}
    return [c for c in bad if c.id not in before or before[c.id] != c.passed]


def _expect(checks, expected):
    """``expected``: {check id: (outcome, a fragment of its reason)}."""
    for check_id, (outcome, fragment) in expected.items():
        c = verdicts.find(checks, check_id)
        assert c is not None, (check_id, [x.id for x in checks])
        assert _outcome(c) == outcome, (check_id, c)
        assert fragment in c.reason, (check_id, c.reason)


# -- C1 -----------------------------------------------------------------------------------------------
def _c1(gen=None, mem=None, clean_gen=None):
    gen = gen or [0.0, 0.95, 0.99, 0.97, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    mem = mem or [0.0, 0.0, 0.0, 0.3, 0.9, 0.95, 0.9, 0.95, 0.95, 0.95]
    steps = [50 * i for i in range(len(gen))]
    noisy = pd.DataFrame({"step": steps, "gen": gen, "mem": mem, "rec": [0.5] * len(gen), "fit": [1.0] * len(gen)})
    clean = pd.DataFrame({"step": steps, "gen": clean_gen or [1.0] * len(gen), "mem": [math.nan] * len(gen),
                          "rec": [math.nan] * len(gen), "fit": [1.0] * len(gen)})
    return verdicts.c1.checks(noisy, clean, eval_every=50)[1]


NAN10 = [math.nan] * 10
C1_CASES = {
    "gen never evaluated": (dict(gen=NAN10), {
        "c1.order": ("unresolved", "gen was never evaluated on the noisy run"),
        "c1.order.registered": ("unresolved", "gen was never evaluated"),
        "c1.gen": ("unresolved", "final gen of the noisy run could not be computed"),
        "c1.gen.registered": ("unresolved", "its last evaluation has no gen value"),
        "c1.benign": ("unresolved", "final gen of the noisy run")}),
    "mem never evaluated": (dict(mem=NAN10), {
        "c1.order": ("unresolved", "mem was never evaluated on the noisy run"),
        "c1.mem": ("unresolved", "final mem of the noisy run could not be computed"),
        "c1.mem.registered": ("unresolved", "final mem")}),
    "noise-free twin not evaluated": (dict(clean_gen=NAN10), {
        "c1.benign": ("unresolved", "final gen of the noise-free twin could not be computed"),
        "c1.benign.registered": ("unresolved", "noise-free twin")}),
    "last evaluations missing": (dict(gen=[0.0, 0.95, 0.99, 0.97, 0.95] + [math.nan] * 5), {
        "c1.gen": ("unresolved", "its last 5 evaluations have no gen value"),
        "c1.order": ("pass", "")}),
    # not a missing value: a run that never generalizes has no t_gen, and section 5 fails it
    "never generalized": (dict(gen=[0.0, 0.5] + [0.6] * 8), {
        "c1.order": ("fail", "section 5: the noisy run never generalized"),
        "c1.order.registered": ("fail", "section 5: the noisy run never generalized")}),
    # issue 43 part 5: a NaN just before a crossing used to move it onto the next evaluation, unsaid
    "NaN before gen's crossing": (dict(gen=[0.0, math.nan, 0.99, 0.97] + [0.95] * 6), {
        "c1.order": ("unresolved", "gen has no value at step 50, before it first reaches 0.9"),
        "c1.order.registered": ("unresolved", "cannot be placed"),
        "c1.gen": ("pass", "")}),
    "NaN before mem's crossing": (dict(mem=[0.0, 0.0, 0.0, math.nan, 0.9, 0.95, 0.9, 0.95, 0.95, 0.95]), {
        "c1.order": ("unresolved", "mem has no value at step 150, before it first reaches 0.5"),
        "c1.order.registered": ("unresolved", "8.5: a NaN never decides")}),
    "never memorized": (dict(mem=[0.0, 0.1] + [0.3] * 8), {
        "c1.order.registered": ("fail", "section 5: mem never reached 0.5"),
        "c1.order": ("pass", "")}),  # the rule came first; final mem judges the rest
}


@pytest.mark.parametrize("case", C1_CASES)
def test_c1_missing_values(case):
    kwargs, expected = C1_CASES[case]
    checks = _c1(**kwargs)
    _no_nan_decides(checks)
    _expect(checks, expected)
    for c in _changed(_c1(), checks):  # a moved check is unresolved, or decided on numbers, or fails by a rule
        assert c.passed is None or (c.value is not None and c.threshold is not None) or RULE.search(c.reason), c


def test_a_crossing_is_never_placed_across_a_missing_evaluation():
    from rote.analysis import curves

    table = pd.DataFrame({"step": [0, 100, 200, 300], "gen": [0.1, math.nan, 0.95, 0.97]})
    assert math.isnan(curves.crossing(table, "gen", 0.9)) and math.isnan(curves.first_evaluated(table, "gen", 0.9))
    assert "step 100" in curves.unplaced_crossing(table, "gen", 0.9)
    after = table.assign(gen=[0.1, 0.5, 0.95, math.nan])  # a gap after the crossing moves nothing
    assert curves.crossing(after, "gen", 0.9) == pytest.approx(100 + 0.4 / 0.45 * 100)
    assert curves.first_evaluated(after, "gen", 0.9) == 200 and curves.unplaced_crossing(after, "gen", 0.9) == ""
    assert math.isnan(curves.crossing(after, "gen", 0.99))  # the last evaluation, missing, may have reached it
    done = table.assign(gen=[0.1, 0.5, 0.95, 0.96])
    assert curves.crossing(done, "gen", 0.99) is None and curves.first_evaluated(done, "gen", 0.99) is None


# -- C2 -----------------------------------------------------------------------------------------------
GOOD_ROW = {"group": "carries", "best_layer": 1, "acc_M": 0.85, "acc_C": 0.9, "chance": 0.1, "best_layer_C": 2,
            "acc_C_best": 0.95, "chance_C": 0.1}
LENS = pd.DataFrame({"layer": [0, 1, 2, 3], "p_true": [0.1, 0.6, 0.5, 0.1], "p_noisy": [0.1, 0.2, 0.3, 0.8]})
LENS_VERDICT = {"true_ahead_intermediate": True, "noisy_only_last": True, "takeover_layer": 3}
THR_ROW = {"best_layer": 3, "acc_M": 0.7, "acc_C": 0.8, "chance": 0.02, "best_layer_C": 3, "acc_C_best": 0.8,
           "chance_C": 0.02}


def _share(n=100, null=0.5):
    ahead = [50, 80, 90, 10]
    return pd.DataFrame({"layer": range(4), "n": n, "ahead": ahead if n else [0] * 4,
                         "share": [a / n if n else math.nan for a in ahead], "null": null})


def _c2(row=None, lens=LENS, verdict=LENS_VERDICT, share=None, task="fda", bridge=None, drop=()):
    row = {k: v for k, v in {**GOOD_ROW, **(row or {})}.items() if k not in drop}
    thr = dict(bridge_r2={**THR_ROW, **(bridge or {})}, masked_tail=dict(THR_ROW, chance=1 / 49, chance_C=1 / 49)) if task == "thr" else {}
    summary = pd.DataFrame([row]) if task == "fda" else pd.DataFrame([dict(row, group="bridge")])
    return verdicts.c2.checks(task, 20, 100, verdicts.c2.ProbeReads(summary, **thr),
                              verdicts.c2.LensReads(verdict, lens, _share() if share is None else share))[1]


@pytest.mark.parametrize("value", MISSING)
@pytest.mark.parametrize("key", ["acc_M", "acc_C", "chance", "acc_C_best", "chance_C"])
def test_c2_missing_probe_numbers_are_unresolved_with_their_case(key, value):
    good, checks = _c2(), _c2({key: value})
    _no_nan_decides(checks)
    changed = _changed(good, checks)
    assert changed and all(c.passed is None for c in changed), changed
    expected = {"acc_M": verdicts.c2.C2_NO_M, "acc_C": verdicts.c2.C2_NO_C, "chance": verdicts.c2.C2_NO_CHANCE,
                "acc_C_best": verdicts.c2.C2_NO_C if value is not None else verdicts.c2.C2_NO_C_BEST,
                "chance_C": verdicts.c2.C2_NO_CHANCE_C}[key]
    assert any(c.reason.endswith(expected) for c in changed), [c.reason for c in changed]
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_c2_named_cases():
    # C's own best layer not given at all: the reachable check never falls back to the layer M chose (8.5)
    checks = _c2(drop=("acc_C_best", "best_layer_C"))
    _no_nan_decides(checks)
    _expect(checks, {"c2.probe.carries.reachable": ("unresolved", verdicts.c2.C2_NO_C_BEST),
                     "c2.probe.carries.chance.amended": ("unresolved", verdicts.c2.C2_NO_C_BEST)})
    # a probe accuracy of 0 on M fails by section 5 (below 5 x chance whatever chance is), with that reason
    checks = _c2({"acc_M": 0.0})
    _no_nan_decides(checks)
    _expect(checks, {"c2.probe.carries.chance": ("fail", "section 5"), "c2.probe.carries.ratio": ("fail", "")})
    assert verdicts.find(checks, "c2.probe.carries.chance").value == 0.0
    checks = _c2({"acc_M": 0.0, "chance": math.nan})
    _no_nan_decides(checks)
    assert verdicts.find(checks, "c2.probe.carries.chance").passed is False
    # the lens with nothing to read on M, or a verdict not handed over
    for lens in (LENS.assign(p_true=math.nan, p_noisy=math.nan), LENS.iloc[:0]):
        checks = _c2(lens=lens)
        _no_nan_decides(checks)
        _expect(checks, {"c2.lens.ahead": ("unresolved", verdicts.c2.C2_NO_LENS),
                         "c2.lens.last": ("unresolved", verdicts.c2.C2_NO_LENS)})
    checks = _c2(verdict={})
    _no_nan_decides(checks)
    _expect(checks, {"c2.lens.ahead": ("unresolved", "true_ahead_intermediate) was not given"),
                     "c2.lens.last": ("unresolved", "noisy_only_last) was not given")})
    # 7.4's share: no memorized example with a differing token; the prior not measured; no intermediate layer
    _expect(_c2(share=_share(n=0)), {"c2.lens.null": ("unresolved", "no memorized example with a differing token")})
    _expect(_c2(share=_share(null=math.nan)), {"c2.lens.null": ("unresolved", "prior's share (the null) was not")})
    one_block = pd.DataFrame({"layer": [0, 1], "n": 100, "ahead": [100, 100], "share": [1.0, 1.0], "null": 0.5})
    checks = _c2(share=one_block)
    _no_nan_decides(checks)
    _expect(checks, {"c2.lens.null": ("fail", "7.4")})
    # THR's amended pairs read the same way
    for key in ("acc_M", "chance", "acc_C_best"):
        checks = _c2(task="thr", bridge={key: math.nan})
        _no_nan_decides(checks)
        assert any(c.id.startswith("c2.probe.bridge_r2") and c.passed is None for c in checks)


# -- C3 -----------------------------------------------------------------------------------------------
def _sweep(acc, rank=8):
    rows = []
    for (s, method), (before, after) in acc.items():
        rows += [{"rank": 0, "method": method, "set": s, "accuracy": before},
                 {"rank": rank, "method": method, "set": s, "accuracy": after}]
    return pd.DataFrame(rows)


C3_GOOD = {(s, m): (1.0, after) for s in ("mem", "gen", "mem_unconnected")
           for m, after in (("INLP", 0.2), ("random", 0.95), ("matched", 0.9))}
C3_STATS = {m: {"jaccard": 0.3, "random": 0.03, "split_half_C": 0.4, "split_half_M": 0.4, "spearman": 0.8,
                "ci_low": 0.2, "ci_high": 0.4} for m in ("logprob", "logit_diff")}


def _c3(acc=None, overlap=None, stats=None, layers=(1,), task="thr"):
    overlap = {"jaccard": 0.6, "random": 0.03} if overlap is None else overlap
    return verdicts.c3.checks(_sweep(C3_GOOD if acc is None else acc), 8, overlap, task,
                       C3_STATS if stats is None else stats, erasure_layers=None if layers is None else list(layers))[1]


@pytest.mark.parametrize("value", MISSING)
@pytest.mark.parametrize("cell", sorted(C3_GOOD))
def test_c3_every_sweep_number_missing(cell, value):
    good = _c3()
    read = ("before", "after") if cell[1] == "INLP" else ("after",)  # "before" is the INLP row of rank 0
    for i, which in enumerate(("before", "after")):
        if which not in read:
            continue
        acc = dict(C3_GOOD)
        pair = list(acc[cell])
        pair[i] = value
        acc[cell] = tuple(pair)
        checks = _c3(acc)
        _no_nan_decides(checks)
        changed = _changed(good, checks)
        assert changed and all(c.passed is None and c.part == "erasure" for c in changed), (which, changed)


def test_c3_named_cases():
    nan = math.nan
    empty_m = {**C3_GOOD, **{("mem", m): (nan, nan) for m in ("INLP", "random", "matched")}}
    _expect(_c3(empty_m), {"c3.erasure.random": ("unresolved", verdicts.c3.C3_EMPTY["mem"]),
                           "c3.erasure": ("unresolved", verdicts.c3.C3_EMPTY["mem"])})
    empty_u = {**C3_GOOD, **{("mem_unconnected", m): (nan, nan) for m in ("INLP", "random", "matched")}}
    _expect(_c3(empty_u), {"c3.erasure.unconnected": ("unresolved", "unconnected to the bridge")})
    no_random = {**C3_GOOD, ("mem", "random"): (1.0, nan)}
    _expect(_c3(no_random), {"c3.erasure.random": ("unresolved", "random-subspace control was not computed")})
    no_matched = {k: v for k, v in C3_GOOD.items() if k[1] != "matched"}
    _expect(_c3(no_matched), {"c3.erasure": ("unresolved", "information-matched control was not computed"),
                              "c3.erasure.random": ("pass", "")})
    _expect(_c3(layers=()), {c: ("unresolved", "8.5: the intervention cannot run") for c in
                             ("c3.erasure.random", "c3.erasure", "c3.erasure.gen", "c3.erasure.unconnected",
                              "c3.erasure.unconnected.random")})
    for overlap, why in (({}, "was not given to the verdict"), ({"jaccard": nan, "random": nan}, "M or C has no example"),
                         ({"jaccard": None, "random": 0.03}, "M or C has no example")):
        checks = _c3(overlap=overlap)
        _no_nan_decides(checks)
        _expect(checks, {"c3.overlap.random": ("unresolved", why)})
    stats = {m: dict(s, jaccard=nan) for m, s in C3_STATS.items()}
    checks = _c3(stats=stats)
    _no_nan_decides(checks)
    _expect(checks, {"c3.overlap": ("unresolved", "logit-difference overlap could not be computed")})
    stats = {m: dict(s, split_half_C=nan) for m, s in C3_STATS.items()}
    checks = _c3(stats=stats)
    _no_nan_decides(checks)
    _expect(checks, {"c3.overlap.ceiling": ("unresolved", "split-half ceiling was not computed"),
                     "c3.overlap.registered.amended": ("unresolved", "split-half ceiling was not computed")})
    checks = _c3(stats={})
    _no_nan_decides(checks)


# -- C4 -----------------------------------------------------------------------------------------------
C4_GOOD = {"k50_M": 10.0, "k50_C": 12.0, "top_activity_median": 0.2, "positions_over_min": 3,
           "position_drops": [0.3, 0.3, 0.3, 0.1], "intermediate_drop": 0.6, "intermediate_matched_drop": 0.1,
           "intermediate_control_drop": 0.05, "n_memorized": 30, "n_clean": 100, "erasure_layers": [1],
           "matched_available": True}
C4_LOOKUP = {"k50_M": 1.0, "k50_C": 12.0, "top_activity_median": 0.0, "positions_over_min": 1, "n_lookup": 40}


@pytest.mark.parametrize("value", MISSING)
@pytest.mark.parametrize("key", ["k50_M", "k50_C", "top_activity_median", "positions_over_min", "intermediate_drop",
                                 "intermediate_matched_drop"])
def test_c4_every_statistic_missing(key, value):
    good = c4_checks(C4_GOOD, C4_LOOKUP)[1]
    checks = c4_checks({**C4_GOOD, key: value}, C4_LOOKUP)[1]
    _no_nan_decides(checks)
    changed = _changed(good, checks)
    assert changed and all(c.passed is None for c in changed), changed
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


@pytest.mark.parametrize("key", ["k50_M", "k50_C", "top_activity_median", "positions_over_min", "n_lookup"])
def test_c4_a_lookup_number_missing_takes_its_statistic_out_without_unresolving_the_seed(key):
    checks = c4_checks(C4_GOOD, {**C4_LOOKUP, key: math.nan if key != "n_lookup" else 0})[1]
    _no_nan_decides(checks)
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert all(c.passed is None and c.reason for c in checks if c.kind == "validity" and c.passed is not True)


def test_c4_named_cases():
    nan = math.nan
    no_site = {**C4_GOOD, "erasure_layers": [], "intermediate_drop": nan, "intermediate_matched_drop": nan,
               "intermediate_control_drop": nan, "matched_available": False}
    _expect(c4_checks(no_site, C4_LOOKUP)[1], {
        "c4.intermediate": ("unresolved", "8.5: the intervention cannot run"),
        "c4.intermediate.registered": ("unresolved", "8.5: the intervention cannot run")})
    empty = {**C4_GOOD, "n_memorized": 0, "k50_M": nan, "top_activity_median": nan, "positions_over_min": 0,
             "position_drops": [], "intermediate_drop": nan, "intermediate_matched_drop": nan}
    checks = c4_checks(empty, C4_LOOKUP)[1]
    _no_nan_decides(checks)
    _expect(checks, {c: ("unresolved", verdicts.c4.C4_NO_M) for c in
                     ("c4.k50", "c4.activity", "c4.positions", "c4.intermediate", "c4.intermediate.registered")})
    _expect(c4_checks({**C4_GOOD, "k50_C": nan}, C4_LOOKUP)[1],
            {"c4.k50": ("unresolved", "k50 on C is undefined")})
    _expect(c4_checks({**C4_GOOD, "intermediate_matched_drop": nan, "matched_available": False}, C4_LOOKUP)[1],
            {"c4.intermediate": ("unresolved", "information-matched control could not be computed")})


# -- C5 -----------------------------------------------------------------------------------------------
C5_GOOD = {"n_memorized": 40, "heuristic_fraction": 0.87, "untrained_heuristic_fraction": 0.3,
           "median_abs_z_M": 2.0, "median_abs_z_clean": 0.8, "z_ratio": 2.5, "pattern_corr_M": 0.7,
           "median_abs_z_null": 0.8, "z_null_ratio": 2.5, "patch_revert_last": 0.77, "control_revert_last": 0.05,
           "m50": 10, "top_revert_max": 0.9, "random_revert_m50": 0.02, "mismatched_revert_m50": 0.03,
           "cut_heuristic_fraction": 0.3, "cut_null_fraction": 0.01, "jstar_n_M": 40, "jstar_z_M": 3.0,
           "jstar_z_clean": 1.0, "jstar_z_ratio": 3.0, "jstar_pattern_corr_M": 0.8, "jstar_m50": 5,
           "jstar_top_revert_max": 0.8, "jstar_random_revert_m50": 0.02, "jstar_mismatched_revert_m50": 0.05,
           "jstar_m_tried": [1, 2, 5, 10], "jstar_units_min": 24}
C5_JUDGED = ["heuristic_fraction", "untrained_heuristic_fraction", "z_ratio", "pattern_corr_M", "z_null_ratio",
             "patch_revert_last", "control_revert_last", "top_revert_max", "random_revert_m50", "mismatched_revert_m50",
             "cut_heuristic_fraction", "cut_null_fraction", "jstar_z_ratio", "jstar_pattern_corr_M",
             "jstar_top_revert_max", "jstar_random_revert_m50", "jstar_mismatched_revert_m50"]


def _c5(metrics: dict):
    """C5's checks on ``metrics`` (the fields of :class:`rote.verdicts.c5.C5Metrics` given; the rest None)."""
    return verdicts.c5.checks(verdicts.c5.from_record(**metrics))


@pytest.mark.parametrize("value", MISSING)
@pytest.mark.parametrize("key", C5_JUDGED)
def test_c5_every_judged_number_missing(key, value):
    good = _c5(C5_GOOD)[1]
    assert verdicts.seed_verdict(good, "amended") == verdicts.seed_verdict(good, "registered") == "pass"
    checks = _c5({**C5_GOOD, key: value})[1]
    _no_nan_decides(checks)
    changed = _changed(good, checks)
    assert changed and all(c.passed is None for c in changed), changed
    assert verdicts.seed_verdict(checks, "amended") in ("pass", "unresolved")  # never a fail on a missing number
    assert verdicts.seed_verdict(checks, "registered") in ("pass", "unresolved")


def test_c5_named_cases():
    _expect(_c5({**C5_GOOD, "n_memorized": 0, "z_ratio": math.nan, "pattern_corr_M": math.nan})[1],
            {"c5.z.registered": ("unresolved", "no memorized example (M is empty)"),
             "c5.pattern": ("unresolved", "no memorized example (M is empty)")})
    _expect(_c5({**C5_GOOD, "jstar_n_M": 0, "jstar_z_ratio": None, "jstar_top_revert_max": None})[1],
            {"c5.z": ("unresolved", "no memorized example with a differing digit (j*)"),
             "c5.specificity": ("unresolved", "(j*)")})
    _expect(_c5({**C5_GOOD, "jstar_z_M": math.nan, "jstar_z_ratio": math.nan})[1],
            {"c5.z": ("unresolved", "no heuristic unit at the j* positions under the 8.3 cut")})
    _expect(_c5({**C5_GOOD, "jstar_z_clean": 0.0, "jstar_z_ratio": math.nan})[1],
            {"c5.z": ("unresolved", "|z| on clean examples at the j* positions is undefined or 0")})
    no_m50 = {**C5_GOOD, "jstar_m50": None, "jstar_top_revert_max": 0.2, "jstar_random_revert_m50": math.nan,
              "jstar_mismatched_revert_m50": math.nan, "jstar_m_tried": list(claims.THRESHOLDS["C5"]["m_grid"])}
    _expect(_c5(no_m50)[1], {"c5.specificity": ("fail", ""),
                             "c5.specificity.random": ("unresolved", "no m50 at j*"),
                             "c5.specificity.mismatched": ("unresolved", "no m50 at j*")})
    _expect(_c5({**C5_GOOD, "m50": None, "random_revert_m50": math.nan, "mismatched_revert_m50": math.nan})[1],
            {"c5.dose.random": ("unresolved", "no m50"), "c5.dose.mismatched": ("unresolved", "no m50")})
    _expect(_c5({**C5_GOOD, "cut_null_fraction": None})[1],
            {"c5.share.null": ("unresolved", "not classified under the 8.3 cut")})


# -- no blanket reason -----------------------------------------------------------------------------------
def test_the_reasons_name_their_cases():
    """Different missing inputs give different reasons: no one default text stands for every case."""
    reasons = set()
    for key in C5_JUDGED:
        checks = _c5({**C5_GOOD, key: math.nan})[1]
        reasons |= {c.reason for c in _changed(_c5(C5_GOOD)[1], checks)}
    assert len(reasons) >= 10, reasons
    reasons = set()
    for key in ("k50_M", "k50_C", "top_activity_median", "positions_over_min", "intermediate_drop",
                "intermediate_matched_drop"):
        checks = c4_checks({**C4_GOOD, key: math.nan}, C4_LOOKUP)[1]
        reasons |= {c.reason for c in _changed(c4_checks(C4_GOOD, C4_LOOKUP)[1], checks)}
    assert len(reasons) >= 5, reasons


def test_a_caller_that_names_no_case_fails_the_build_not_the_check():
    with pytest.raises(verdicts.MissingValue):
        verdicts.at_least(CheckLabel("c9.x", "x", "registered", "part"), math.nan, 0.5, missing=None)


def test_c2_a_one_block_model_fails_the_lens_by_the_rule_even_without_memorized_examples():
    lens = pd.DataFrame({"layer": [0, 1], "p_true": [math.nan, math.nan], "p_noisy": [math.nan, math.nan]})
    verdict = {"true_ahead_intermediate": False, "noisy_only_last": False, "takeover_layer": None}
    checks = _c2(lens=lens, verdict=verdict)
    _no_nan_decides(checks)
    _expect(checks, {"c2.lens.ahead": ("fail", "one-block model"), "c2.lens.last": ("fail", "one-block model")})
    # with examples to read, the one-block fail is the comparison itself (no reason needed)
    checks = _c2(lens=lens.assign(p_true=[0.1, 0.2], p_noisy=[0.1, 0.8]), verdict=verdict)
    assert verdicts.find(checks, "c2.lens.ahead").passed is False and verdicts.find(checks, "c2.lens.ahead").value is False

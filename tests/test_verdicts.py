"""The verdict module on made-up analysis outputs: pass, fail, unresolved and superseded checks."""

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from rote import claims, verdicts
from rote.verdicts import Check


def _curve(steps, **columns):
    return pd.DataFrame({"step": steps, **columns})


def _c1_tables(gen, mem, clean_gen=None, rec=None, every=50):
    steps = [i * every for i in range(len(gen))]
    noisy = _curve(steps, gen=gen, mem=mem, rec=rec or [0.5] * len(gen), fit=[1.0] * len(gen))
    clean = _curve(steps, gen=clean_gen or [1.0] * len(gen), mem=[math.nan] * len(gen), rec=[math.nan] * len(gen),
                   fit=[1.0] * len(gen))
    return noisy, clean


def _by_name(checks, fragment, kind):
    return next(c for c in checks if fragment in c.name and c.kind == kind)


def test_crossing_interpolates_between_evaluations():
    m = _curve([0, 50, 100], gen=[0.0, 0.8, 1.0])
    assert verdicts.crossing(m, "gen", 0.9) == pytest.approx(75.0)
    assert verdicts.crossing(m, "gen", 0.0) == 0.0
    assert verdicts.crossing(m, "gen", 1.1) is None
    assert verdicts.first_evaluated(m, "gen", 0.9) == 100


def test_c1_passes_on_a_clear_two_phase_curve():
    gen = [0.0, 0.95, 0.99, 0.97, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    mem = [0.0, 0.0, 0.0, 0.3, 0.9, 0.95, 0.9, 0.95, 0.95, 0.95]
    metrics, checks = verdicts.c1(*_c1_tables(gen, mem), eval_every=50)
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert metrics["final_gen"] == pytest.approx(0.95) and metrics["final_mem"] == pytest.approx(0.94)
    assert metrics["t_mem_interpolated"] == pytest.approx(150 + 50 * 0.2 / 0.6)
    assert {c.kind for c in checks} == {"superseded", "amended"}


def test_c1_tie_at_evaluation_resolution_is_unresolved_not_fail():
    # gen reaches 0.9 and mem 0.5 at the same evaluation: registered strict < fails, amended unresolved
    gen = [0.0, 0.5, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    mem = [0.0, 0.2, 0.6, 0.95, 0.95, 0.95, 0.95, 0.95]
    metrics, checks = verdicts.c1(*_c1_tables(gen, mem), eval_every=50)
    assert metrics["t_gen"] == metrics["t_mem"] == 100
    assert _by_name(checks, "t_gen < t_mem", "superseded").passed is False
    assert _by_name(checks, "t_gen < t_mem", "amended").passed is None
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_c1_final_is_the_mean_of_the_last_five_evaluations():
    # the last evaluation alone dips under 0.9; the mean of the last five does not
    gen = [0.0, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.88]
    mem = [0.0, 0.0, 0.0, 0.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95]
    metrics, checks = verdicts.c1(*_c1_tables(gen, mem), eval_every=50)
    assert _by_name(checks, "final gen", "superseded").passed is False
    assert _by_name(checks, "final gen", "amended").passed is True
    assert metrics["last_gen"] == pytest.approx(0.88) and metrics["final_gen"] == pytest.approx(0.936)


def test_c1_fails_when_memorization_comes_first_or_is_not_benign():
    gen = [0.0, 0.2, 0.5, 0.7, 0.91, 0.91, 0.91, 0.91]
    mem = [0.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    _, checks = verdicts.c1(*_c1_tables(gen, mem, clean_gen=[1.0] * 8), eval_every=50)
    assert _by_name(checks, "t_gen < t_mem", "amended").passed is False
    assert _by_name(checks, "noise-free", "amended").passed is False  # 0.91 < 1.0 - 0.05
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_seed_verdict_readings_and_aggregation():
    checks = [Check("a", "superseded", 0.4, 0.5, False), Check("a'", "amended", 0.6, 0.5, True),
              Check("b", "registered", 1.0, 0.5, True), Check("null", "null", None, None, None)]
    assert verdicts.seed_verdict(checks, "registered") == "fail"  # superseded counts only here
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"  # the null is not computed
    assert verdicts.aggregate(["pass"]) == "pass (1 seed)"
    assert verdicts.aggregate(["pass", "pass", "pass"]) == "holds"
    assert verdicts.aggregate(["fail", "fail", "fail"]) == "fails"
    assert verdicts.aggregate(["pass", "fail", "unresolved"]) == "mixed 1/3"
    assert verdicts.aggregate(["unresolved", "unresolved"]) == "unresolved"
    assert verdicts.aggregate([]) == "not run"
    with pytest.raises(ValueError):
        Check("x", "made-up", 1, 1, True)


def test_nan_values_fail_their_checks():
    assert verdicts.at_least("x", "registered", math.nan, 0.5).passed is False
    assert verdicts.at_least("x", "registered", 0.7, math.nan).passed is False
    assert verdicts.below("x", "registered", None, 0.1).passed is False


def test_c2_checks_on_made_up_probe_and_lens_outputs():
    summary = pd.DataFrame([{"group": "carries", "best_layer": 1, "acc_M": 0.85, "acc_C": 0.9, "chance": 0.1},
                            {"group": "answer digits", "best_layer": 1, "acc_M": 0.6, "acc_C": 0.9, "chance": 0.1}])
    lens = pd.DataFrame({"p_true": [0.1, 0.6, 0.1], "p_noisy": [0.1, 0.2, 0.8]})
    verdict = {"true_ahead_intermediate": True, "noisy_only_last": True, "takeover_layer": 2}
    metrics, checks = verdicts.c2(summary, verdict, lens, n_M=10, n_C=20, task="fda")
    assert _by_name(checks, "carries: M vs", "registered").passed is True
    digits = _by_name(checks, "answer digits: M vs 0.8", "registered")
    assert digits.passed is False and digits.threshold == pytest.approx(0.72)
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert metrics["carries_acc_M"] == 0.85


def test_c3_c4_c5_checks_read_their_inputs():
    sweep = pd.DataFrame([{"rank": 0, "method": "INLP", "set": "mem", "accuracy": 1.0},
                          {"rank": 8, "method": "INLP", "set": "mem", "accuracy": 0.2},
                          {"rank": 8, "method": "random", "set": "mem", "accuracy": 0.9}])
    metrics, checks = verdicts.c3(sweep, 8, {"jaccard": 0.6, "random": 0.03}, "fda")
    assert metrics["mem_drop_over_control"] == pytest.approx(0.7)
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"  # 7.5 controls not computed yet
    _, checks = verdicts.c4({"k50_M": 4, "k50_C": 10, "top_activity_median": 0.1, "positions_over_min": 3,
                             "intermediate_drop": 0.5})
    assert _by_name(checks, "k50", "registered").passed is False  # 4 < 0.5 x 10
    _, checks = verdicts.c5({"heuristic_fraction": 0.8, "z_ratio": 2.2, "pattern_corr_M": 0.7,
                             "patch_revert_last": 0.77, "control_revert_last": 0.39})
    assert _by_name(checks, "random control", "superseded").passed is False  # 7.7: replaced by the dose-response
    assert [c.passed for c in checks if c.kind in ("registered", "superseded")] == [True, True, True, True, False]
    assert verdicts.seed_verdict(checks, "registered") == "fail"


def test_records_group_seeds_per_task_and_condition(tmp_path):
    def unit(task, condition, seed):
        return SimpleNamespace(task=task, condition=condition, seed=seed)

    ok = [Check("a", "registered", 1.0, 0.5, True)]
    bad = [Check("a", "registered", 0.1, 0.5, False)]
    results = [verdicts.seed_result(unit("fda", "random", s), {"x": float(s)}, ok if s else bad, []) for s in (2, 0, 1)]
    results.append(verdicts.seed_result(unit("fda", "digit", 0), {}, ok, []))
    recs = {r.condition: r for r in verdicts.records("C3", "smoke", results)}
    assert recs["random"].seeds == [0, 1, 2] and recs["random"].verdict_amended == "mixed 2/3"
    assert recs["digit"].verdict_registered == "pass (1 seed)" and recs["digit"].status == "pass (1 seed)"
    assert recs["random"].page == "04_interventions" and recs["random"].anchor == "verdict"
    claims.save(recs["random"], root=tmp_path)
    loaded = {(r.claim, r.task, r.condition): r for r in claims.load_all("smoke", root=tmp_path)}
    assert loaded[("C3", "fda", "random")].per_seed[0]["checks"][0]["passed"] is False
    assert loaded[("C3", "fda", "digit")].status == "not run"  # not saved: a placeholder
    assert loaded[("C1", "thr", "-")].status == "not run"

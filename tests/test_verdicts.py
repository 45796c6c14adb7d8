"""The verdict module on made-up analysis outputs: pass, fail, unresolved and superseded checks."""

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from rote.analysis.neurons import C4Summary
from rote import claims, verdicts
from rote.analysis import curves
from rote.verdicts import Check
from rote.verdicts.core import CheckLabel


def _curve(steps, **columns):
    return pd.DataFrame({"step": steps, **columns})


def _c1_tables(gen, mem, clean_gen=None, rec=None, every=50):
    steps = [i * every for i in range(len(gen))]
    noisy = _curve(steps, gen=gen, mem=mem, rec=rec or [0.5] * len(gen), fit=[1.0] * len(gen))
    clean = _curve(steps, gen=clean_gen or [1.0] * len(gen), mem=[math.nan] * len(gen), rec=[math.nan] * len(gen),
                   fit=[1.0] * len(gen))
    return noisy, clean


def _by(checks, check_id):
    found = verdicts.find(checks, check_id)
    assert found is not None, [c.id for c in checks]
    return found


def test_crossing_interpolates_between_evaluations():
    m = _curve([0, 50, 100], gen=[0.0, 0.8, 1.0])
    assert curves.crossing(m, "gen", 0.9) == pytest.approx(75.0)
    assert curves.crossing(m, "gen", 0.0) == 0.0
    assert curves.crossing(m, "gen", 1.1) is None
    assert curves.first_evaluated(m, "gen", 0.9) == 100


def test_c1_passes_on_a_clear_two_phase_curve():
    gen = [0.0, 0.95, 0.99, 0.97, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    mem = [0.0, 0.0, 0.0, 0.3, 0.9, 0.95, 0.9, 0.95, 0.95, 0.95]
    metrics, checks = verdicts.c1.checks(*_c1_tables(gen, mem), eval_every=50)
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert metrics.final_gen == pytest.approx(0.95) and metrics.final_mem == pytest.approx(0.94)
    assert metrics.t_mem_interpolated == pytest.approx(150 + 50 * 0.2 / 0.6)
    assert {c.kind for c in checks} == {"superseded", "amended", "validity"}  # validity: amendment 3 (12.2, 12.3)


def test_c1_tie_at_evaluation_resolution_is_unresolved_not_fail():
    # gen reaches 0.9 and mem 0.5 at the same evaluation: registered strict < fails, amended unresolved
    gen = [0.0, 0.5, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    mem = [0.0, 0.2, 0.6, 0.95, 0.95, 0.95, 0.95, 0.95]
    metrics, checks = verdicts.c1.checks(*_c1_tables(gen, mem), eval_every=50)
    assert metrics.t_gen == metrics.t_mem == 100
    assert _by(checks, "c1.order.registered").passed is False
    assert _by(checks, "c1.order").passed is None
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_c1_final_is_the_mean_of_the_last_five_evaluations():
    # the last evaluation alone dips under 0.9; the mean of the last five does not
    gen = [0.0, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.88]
    mem = [0.0, 0.0, 0.0, 0.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95]
    metrics, checks = verdicts.c1.checks(*_c1_tables(gen, mem), eval_every=50)
    assert _by(checks, "c1.gen.registered").passed is False
    assert _by(checks, "c1.gen").passed is True
    assert metrics.last_gen == pytest.approx(0.88) and metrics.final_gen == pytest.approx(0.936)


def test_c1_fails_when_memorization_comes_first_or_is_not_benign():
    gen = [0.0, 0.2, 0.5, 0.7, 0.91, 0.91, 0.91, 0.91]
    mem = [0.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    _, checks = verdicts.c1.checks(*_c1_tables(gen, mem, clean_gen=[1.0] * 8), eval_every=50)
    assert _by(checks, "c1.order").passed is False
    assert _by(checks, "c1.benign").passed is False  # 0.91 < 1.0 - 0.05
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_c1_metrics_are_stored_as_the_dict_records_held():
    gen = [0.0, 0.95, 0.99, 0.97, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    mem = [0.0, 0.0, 0.0, 0.3, 0.9, 0.95, 0.9, 0.95, 0.95, 0.95]
    metrics, checks = verdicts.c1.checks(*_c1_tables(gen, mem), eval_every=50)
    stored = verdicts.seed_result(SimpleNamespace(task="thr", condition="-", seed=0), metrics, checks, [])["metrics"]
    assert list(stored) == ["t_gen", "t_mem", "t_gen_interpolated", "t_mem_interpolated", "eval_every", "last_gen",
                            "last_mem", "last_clean_gen", "final_gen", "final_mem", "final_rec", "final_fit",
                            "clean_final_gen", "gen_cost", "rec_peak_before_t_mem", "gen_at_t_mem", "steps",
                            "n_test", "n_noisy", "clean_n_test",  # section 11: the sample sizes, after the rest
                            "mem_at_90", "mem_at_90_step"]  # 12.3: mem over the 5 evaluations ending at 90%
    assert stored["t_gen"] == 50 and stored["steps"] == 450 and stored["final_gen"] == metrics.final_gen
    with pytest.raises(ValueError, match="eval_every"):
        metrics.__class__(**{**stored, "eval_every": 0})
    with pytest.raises(ValueError, match="t_mem_interpolated"):
        metrics.__class__(**{**stored, "t_mem_interpolated": 500.0})  # after the run's last step


def test_seed_verdict_readings_and_aggregation():
    checks = [Check("c3.a", "a", "superseded", 0.4, 0.5, False, "erasure", section5=True),
              Check("c3.a2", "a'", "amended", 0.6, 0.5, True, "erasure"),
              Check("c3.b", "b", "registered", 1.0, 0.5, True, "overlap"),
              Check("c3.null", "null", "null", None, None, None, "overlap")]
    assert verdicts.seed_verdict(checks, "registered") == "fail"  # a superseded section-5 check counts only here
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"  # the null is not computed
    assert verdicts.aggregate(["pass"]) == "pass (1 seed)"
    assert verdicts.aggregate(["unresolved"]) == "unresolved (1 seed)"
    assert verdicts.aggregate(["pass", "pass", "pass"]) == "holds"
    assert verdicts.aggregate(["fail", "fail", "fail"]) == "fails"
    assert verdicts.aggregate(["unresolved", "unresolved"]) == "unresolved"
    assert verdicts.aggregate(["pass", "fail", "unresolved"]) == "mixed: 1 pass, 1 fail, 1 unresolved"
    assert verdicts.aggregate(["fail", "unresolved", "fail"]) == "mixed: 0 pass, 2 fail, 1 unresolved"
    assert verdicts.aggregate(["pass", "pass", "unresolved"]) == "mixed: 2 pass, 0 fail, 1 unresolved"
    assert verdicts.aggregate([]) == "not run"
    with pytest.raises(ValueError):
        Check("c3.x", "x", "made-up", 1, 1, True)
    with pytest.raises(ValueError, match="stable id"):
        Check("a name with spaces", "x", "registered", 1, 1, True)


def _c3_checks(**changes):
    base = [Check("c3.erasure", "erasure", "amended", 0.5, 0.3, True, "erasure"),
            Check("c3.erasure.random", "erasure vs random", "registered", 0.5, 0.3, True, "erasure"),
            Check("c3.overlap.random", "overlap vs random", "registered", 0.6, 0.1, True, "overlap")]
    return base + [Check(**changes)] if changes else base


def test_a_failing_validity_check_alone_never_fails_the_claim():
    validity = Check("c3.overlap.ceiling", "ceiling", "validity", 0.2, 0.5, False, "overlap")
    checks = _c3_checks() + [validity]
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert verdicts.seed_verdict(checks, "registered") == "pass"  # not a section-5 check either
    # ... but what it validates stops counting, and with it the claim can no longer pass on that check
    statistic = Check("c3.overlap.registered", "overlap", "registered", 0.3, 0.5, False, "overlap")
    judged = verdicts.validate(statistic, validity, "supersede", "7.5")
    assert [c.kind for c in judged] == ["superseded", "validity"] and judged[0].reason
    assert verdicts.seed_verdict(_c3_checks() + judged, "amended") == "pass"
    assert verdicts.seed_verdict(_c3_checks() + judged, "registered") == "fail"  # section 5 still counts it


def test_an_out_of_reach_threshold_is_unresolved_and_never_a_pass():
    out_of_reach = Check("c3.overlap.ceiling", "ceiling", "validity", 0.3, 0.5, False, "overlap")
    for passed in (True, False):  # whatever the treatment does, the amended reading cannot decide on it
        statistic = Check("c3.overlap.registered", "overlap", "registered", 0.6 if passed else 0.1, 0.5, passed,
                          "overlap")
        judged = verdicts.validate(statistic, out_of_reach, "unresolve", "8.2")
        amended = verdicts.find(judged, "c3.overlap.registered.amended")
        assert amended.passed is None and amended.kind == "amended" and "out of reach" not in amended.id
        assert verdicts.seed_verdict(_c3_checks() + judged, "amended") == "unresolved"
        assert verdicts.seed_verdict(_c3_checks() + judged, "registered") == ("pass" if passed else "fail")
    # an amended check keeps its kind in its stand-in; the original keeps its outcome for the record
    own = Check("c3.overlap", "overlap", "amended", 0.9, 0.5, True, "overlap")
    judged = verdicts.validate(own, out_of_reach, "unresolve", "8.2")
    assert [(c.id, c.kind, c.passed) for c in judged] == [("c3.overlap", "superseded", True),
                                                         ("c3.overlap.amended", "amended", None),
                                                         ("c3.overlap.ceiling", "validity", False)]
    assert judged[0].was == "amended" and judged[1].was == "new"
    # a validity check that passes changes nothing
    ok = out_of_reach.replace(value=0.7, passed=True)
    assert verdicts.validate(own, ok, "unresolve", "8.2") == [own, ok]


def test_a_required_part_without_a_deciding_check_is_unresolved():
    only_erasure = [Check("c3.erasure", "erasure", "amended", 0.5, 0.3, True, "erasure"),
                    Check("c3.overlap.registered", "overlap", "superseded", 0.6, 0.5, True, "overlap", section5=True)]
    assert verdicts.missing_parts(only_erasure) == ["overlap"]
    assert verdicts.seed_verdict(only_erasure, "amended") == "unresolved"
    assert verdicts.seed_verdict(only_erasure, "registered") == "unresolved"  # no section-5 erasure check either
    assert verdicts.seed_verdict(only_erasure + [Check("c3.erasure.random", "e", "registered", 0.5, 0.3, True,
                                                       "erasure")], "registered") == "pass"
    # a failing check still fails, even with a part missing
    failing = [only_erasure[0].replace(value=0.1, passed=False), only_erasure[1]]
    assert verdicts.seed_verdict(failing, "amended") == "fail"


def test_the_amendment1_reading_shows_what_amendment_2_moved():
    # amendment 1 counted the look-up control (now validity) and the out-of-reach check as they were
    stat = Check("c4.positions", "positions", "registered", 8, 2, True, "positions")
    validity = Check("c4.positions.lookup", "look-up", "validity", 8, 2, False, "positions", was="control")
    intermediate = Check("c4.intermediate", "over matched", "amended", 0.5, 0.2, True, "intermediate")
    checks = verdicts.validate(stat, validity, "supersede", "7.5") + [intermediate]
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert verdicts.seed_verdict(checks, "7") == "fail"
    # an added check does not count in the amendment-1 reading
    added = Check("c4.extra", "x", "amended", 0.0, 0.2, False, "intermediate", was="new")
    assert verdicts.seed_verdict(checks[:2] + [intermediate, added], "7") == "fail"
    assert verdicts.seed_verdict([intermediate, added], "7") == "pass"


def test_deciding_names_failed_then_unresolved_checks_with_reasons():
    def record(checks_per_seed):
        results = [verdicts.seed_result(SimpleNamespace(task="fda", condition="random", seed=s), {}, checks, [])
                   for s, checks in enumerate(checks_per_seed)]
        return verdicts.records("C3", "smoke", results)[0]

    passing = _c3_checks()
    failing = [passing[0].replace(value=0.1, passed=False), *passing[1:]]
    open_ = [verdicts.unresolved(passing[0], "the control was not computed"), *passing[1:]]
    rec = record([passing, failing, open_])
    assert rec.verdict_amended == "mixed: 1 pass, 1 fail, 1 unresolved"
    text = verdicts.deciding(rec)
    seed0, seed1, seed2 = text.split(" | ")
    assert seed0.startswith("seed 0: c3.erasure 0.5 vs 0.3; c3.erasure.random 0.5 vs 0.3; c3.overlap.random")  # all pass: every check
    assert seed1 == "seed 1: c3.erasure 0.1 vs 0.3"  # only the failed one
    assert seed2 == "seed 2: c3.erasure 0.5 vs 0.3 (unresolved: the control was not computed)"
    rec = record([passing[:1]])
    assert verdicts.deciding(rec) == "c3.erasure 0.5 vs 0.3; no deciding check for the part 'overlap'"


def test_seed_results_refuse_duplicate_ids():
    unit = SimpleNamespace(task="fda", condition="random", seed=0)
    with pytest.raises(ValueError, match="unique"):
        verdicts.seed_result(unit, {}, [_c3_checks()[0]] * 2, [])


def test_a_nan_never_decides_a_check_it_is_unresolved_with_its_reason_or_the_build_fails():
    """Amendment 2, 8.5: a missing value (None or NaN, value or threshold) leaves the check unresolved
    with the reason the caller names; a caller that names none makes the build fail, never the check."""
    for compare in (verdicts.at_least, verdicts.below, verdicts.above):
        with pytest.raises(TypeError):  # the reason is a required argument: every caller states its case
            compare(CheckLabel("c9.x", "x", "registered"), 0.7, 0.5)
        for value, threshold in ((math.nan, 0.5), (0.7, math.nan), (None, 0.1), (0.7, None)):
            with pytest.raises(verdicts.MissingValue, match="8.5"):
                compare(CheckLabel("c9.x", "x", "registered"), value, threshold, missing=None)
            c = compare(CheckLabel("c9.x", "x", "amended"), value, threshold, missing="no memorized example")
            assert c.passed is None and c.reason == "no memorized example"
    assert verdicts.at_least(CheckLabel("c9.x", "x", "amended"), 0.6, 0.5, missing="unused").passed is True
    assert verdicts.below(CheckLabel("c9.x", "x", "amended"), 0.6, 0.5, missing="unused").passed is False
    assert verdicts.missing_reason((1.0, "a"), (math.nan, "b"), (None, "c")) == "b"
    assert verdicts.missing_reason((1.0, "a")) is None


def test_a_check_label_is_validated_like_a_check():
    with pytest.raises(ValueError, match="kind must be one of"):
        CheckLabel("c9.x", "x", "made-up")
    with pytest.raises(ValueError, match="stable id"):
        CheckLabel("a name with spaces", "x", "registered")
    c = verdicts.above(CheckLabel("c9.x", "x", "null", "part"), 0.6, 0.5, missing="unused")
    assert c == Check("c9.x", "x", "null", 0.6, 0.5, True, "part", margin=c.margin)
    assert c.margin == pytest.approx(0.1)


def test_c2_checks_on_made_up_probe_and_lens_outputs():
    summary = pd.DataFrame([{"group": "carries", "best_layer": 1, "acc_M": 0.85, "acc_C": 0.9, "chance": 0.1},
                            {"group": "answer digits", "best_layer": 1, "acc_M": 0.6, "acc_C": 0.9, "chance": 0.1}])
    lens = pd.DataFrame({"p_true": [0.1, 0.6, 0.1], "p_noisy": [0.1, 0.2, 0.8]})
    verdict = {"true_ahead_intermediate": True, "noisy_only_last": True, "takeover_layer": 2}
    metrics, checks = verdicts.c2.checks("fda", 10, 20, verdicts.c2.ProbeReads(summary),
                                         verdicts.c2.LensReads(verdict, lens))
    assert _by(checks, "c2.probe.carries.ratio").passed is True
    digits = _by(checks, "c2.probe.answer_digits.ratio")
    assert digits.passed is False and digits.threshold == pytest.approx(0.72)
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert metrics.carries.acc_M == 0.85


def test_c3_c4_c5_checks_read_their_inputs():
    sweep = pd.DataFrame([{"rank": 0, "method": "INLP", "set": "mem", "accuracy": 1.0},
                          {"rank": 8, "method": "INLP", "set": "mem", "accuracy": 0.2},
                          {"rank": 8, "method": "random", "set": "mem", "accuracy": 0.9}])
    metrics, checks = verdicts.c3.checks(sweep, 8, {"jaccard": 0.6, "random": 0.03}, "fda")
    assert metrics.mem.drop_over_control == pytest.approx(0.7)
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"  # 7.5 controls not computed yet
    assert "information-matched" in _by(checks, "c3.erasure").reason
    _, checks = verdicts.c4.checks(C4Summary(**{"k50_M": 4, "k50_C": 10, "top_activity_median": 0.1, "positions_over_min": 3,
                             "intermediate_drop": 0.5}))
    assert _by(checks, "c4.k50").passed is False  # 4 < 0.5 x 10
    _, checks = verdicts.c5.checks(verdicts.c5.from_record(heuristic_fraction=0.8, z_ratio=2.2, pattern_corr_M=0.7,
                                                           patch_revert_last=0.77, control_revert_last=0.39))
    assert _by(checks, "c5.patch.random.registered").passed is False  # 7.7: replaced by the dose-response
    assert [c.passed for c in checks if c.section5] == [True, True, True, True, False]
    assert verdicts.seed_verdict(checks, "registered") == "fail"


def test_records_group_seeds_per_task_and_condition(tmp_path):
    def unit(task, condition, seed):
        return SimpleNamespace(task=task, condition=condition, seed=seed)

    ok = [Check("c3.a", "a", "registered", 1.0, 0.5, True, "erasure"),
          Check("c3.b", "b", "registered", 1.0, 0.5, True, "overlap")]
    bad = [ok[0].replace(value=0.1, passed=False), ok[1]]
    results = [verdicts.seed_result(unit("fda", "random", s), {"x": float(s)}, ok if s else bad, []) for s in (2, 0, 1)]
    results.append(verdicts.seed_result(unit("fda", "digit", 0), {}, ok, []))
    recs = {r.condition: r for r in verdicts.records("C3", "smoke", results)}
    assert recs["random"].seeds == [0, 1, 2] and recs["random"].verdict_amended == "mixed: 2 pass, 1 fail, 0 unresolved"
    assert recs["digit"].verdict_registered == "pass (1 seed)" and recs["digit"].status == "pass (1 seed)"
    assert recs["random"].page == "04_interventions" and recs["random"].anchor == "verdict"
    claims.save(recs["random"], root=tmp_path)
    loaded = {(r.claim, r.task, r.condition): r for r in claims.load_all("smoke", root=tmp_path)}
    assert loaded[("C3", "fda", "random")].per_seed[0]["checks"][0]["passed"] is False
    assert loaded[("C3", "fda", "digit")].status == "not run"  # not saved: a placeholder
    assert loaded[("C1", "thr", "-")].status == "not run"


def test_c1_records_gen_cost_the_rec_peak_before_t_mem_and_gen_at_t_mem():
    gen = [0.0, 0.95, 0.99, 0.97, 0.93, 0.91, 0.91, 0.91, 0.91, 0.91]
    mem = [0.0, 0.0, 0.0, 0.3, 0.7, 0.95, 0.95, 0.95, 0.95, 0.95]
    rec = [0.0, 0.9, 0.8, 0.6, 0.3, 0.05, 0.0, 0.0, 0.0, 0.0]
    metrics, _ = verdicts.c1.checks(*_c1_tables(gen, mem, clean_gen=[1.0] * 10, rec=rec), eval_every=50)
    assert metrics.gen_cost == pytest.approx(1.0 - 0.91)
    x_mem = 150 + 50 * (0.5 - 0.3) / (0.7 - 0.3)  # 175
    assert metrics.t_mem_interpolated == pytest.approx(x_mem)
    assert metrics.rec_peak_before_t_mem == pytest.approx(0.9)  # steps <= 175 only: the later dips do not count
    assert metrics.gen_at_t_mem == pytest.approx(0.97 + (0.93 - 0.97) * 0.5)


def test_c1_when_mem_never_crosses_the_order_passes_and_final_mem_decides():
    gen = [0.0, 0.95, 0.97, 0.97, 0.97, 0.97, 0.97, 0.97]
    mem = [0.0, 0.0, 0.1, 0.2, 0.3, 0.3, 0.3, 0.3]
    metrics, checks = verdicts.c1.checks(*_c1_tables(gen, mem), eval_every=50)
    assert metrics.t_mem_interpolated is None and math.isnan(metrics.gen_at_t_mem)
    assert _by(checks, "c1.order").passed is True and _by(checks, "c1.order").value is None
    assert _by(checks, "c1.order.registered").passed is False  # section 5 needs both steps
    assert _by(checks, "c1.mem").passed is False
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_c1_when_gen_never_crosses_the_order_fails():
    gen = [0.0, 0.5, 0.6, 0.7, 0.8, 0.8, 0.8, 0.8]
    mem = [0.0, 0.0, 0.6, 0.95, 0.95, 0.95, 0.95, 0.95]
    metrics, checks = verdicts.c1.checks(*_c1_tables(gen, mem), eval_every=50)
    assert metrics.t_gen_interpolated is None and metrics.t_gen is None
    assert _by(checks, "c1.order").passed is False


def test_c1_a_nan_before_the_crossing_leaves_it_missing():
    m = _curve([0, 50, 100, 150], gen=[0.0, math.nan, 0.95, 0.99])
    assert math.isnan(curves.crossing(m, "gen", 0.9))  # issue 43: not moved onto the next evaluation, unsaid
    assert math.isnan(curves.first_evaluated(m, "gen", 0.9))
    assert "step 50" in curves.unplaced_crossing(m, "gen", 0.9)


def test_amendment2_change_names_what_moved_a_verdict():
    stat = Check("c4.positions", "positions", "registered", 8, 2, True, "positions")
    validity = Check("c4.positions.lookup", "look-up", "validity", 8, 2, False, "positions",
                     reason="8.1: a known look-up passes it too", was="control")
    intermediate = Check("c4.intermediate", "over matched", "amended", 0.5, 0.2, True, "intermediate")
    checks = verdicts.validate(stat, validity, "supersede", "7.5") + [intermediate]
    results = [verdicts.seed_result(SimpleNamespace(task="fda", condition="random", seed=s), {}, checks, [])
               for s in range(3)]
    rec = verdicts.records("C4", "smoke", results)[0]
    change = verdicts.amendment_change(rec, "8")
    assert change["amendment1"] == "fails" and change["amendment2"] == "holds"
    assert change["why"] == "no longer deciding: c4.positions.lookup (8.1: a known look-up passes it too)"
    # nothing moved: no reason
    plain = verdicts.records("C4", "smoke", [verdicts.seed_result(
        SimpleNamespace(task="fda", condition="random", seed=0), {}, [intermediate], [])])[0]
    assert verdicts.amendment_change(plain, "8") == {"amendment1": "pass (1 seed)", "amendment2": "pass (1 seed)",
                                                 "why": ""}


def test_amendment2_change_gives_the_reason_of_an_out_of_reach_threshold():
    out_of_reach = Check("c3.overlap.ceiling", "ceiling", "validity", 0.3, 0.5, False, "overlap",
                         reason="8.2: out of reach", was="new")
    statistic = Check("c3.overlap.registered", "overlap", "registered", 0.1, 0.5, False, "overlap")
    erasure = Check("c3.erasure", "erasure", "amended", 0.5, 0.3, True, "erasure")
    checks = verdicts.validate(statistic, out_of_reach, "unresolve", "8.2") + [erasure]
    rec = verdicts.records("C3", "smoke", [verdicts.seed_result(
        SimpleNamespace(task="fda", condition="random", seed=s), {}, checks, []) for s in (0, 1)])[0]
    change = verdicts.amendment_change(rec, "8")
    assert (change["amendment1"], change["amendment2"]) == ("fails", "unresolved")
    assert change["why"] == "no longer deciding: c3.overlap.registered (8.2: out of reach)"


def test_flat_inlines_groups_in_field_order():
    from dataclasses import dataclass
    from rote.verdicts import flat, group

    @dataclass(frozen=True)
    class Part:
        b: float | None = None
        c: list | None = None

    @dataclass(frozen=True)
    class Whole:
        a: int = 1
        part: Part = group(Part)
        d: str = "x"

    assert list(flat(Whole(part=Part(b=0.5, c=[1])))) == ["a", "b", "c", "d"]
    assert flat(Whole()) == {"a": 1, "b": None, "c": None, "d": "x"}
    assert flat({"k": 1}) == {"k": 1}

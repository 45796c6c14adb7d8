"""The chapters' generated paragraphs (rote.chapters.c1 .. c5) on planted numbers and checks: every
seed passes, none, some, unresolved, a missing value. The sentences themselves come from
rote.report (tests/test_report.py); these tests check that each chapter picks them by the right
check id and numbers."""

import dataclasses
import math
from collections import namedtuple
from types import SimpleNamespace

from rote.analysis.neuron_patching import DoseSummary
from rote.analysis.outliers import NullComparison, OutlierComparison
from rote.chapters import ClaimResult, c1, c2, c3, c4, c5
from rote.verdicts import Check
from rote.verdicts.c2 import C2Metrics, LensShare


Unit = namedtuple("Unit", "task condition seed")  # hashable, like rote.plan.Unit


def _units(task="fda", condition="random", seeds=(0, 1)):
    return [Unit(task, condition, s) for s in seeds]


def _groups(units):
    return {(units[0].task, units[0].condition): units}


def _check(check_id, passed, value=0.5, threshold=0.2, kind="amended", section5=None, name=None):
    return Check(check_id, name or f"check {check_id}", kind, value, threshold, passed, "part", section5=section5)


# -- C1 ------------------------------------------------------------------------------------------------
def _c1_metrics(t_gen, t_mem, rec_peak=0.6, final_rec=0.1):
    return {"t_gen_interpolated": t_gen, "t_mem_interpolated": t_mem, "rec_peak_before_t_mem": rec_peak,
            "final_rec": final_rec, "final_gen": 0.95, "final_mem": 0.97, "clean_final_gen": 0.98, "gen_cost": 0.03}


def test_c1_says_the_rule_comes_first_only_when_it_does_on_every_seed():
    units = _units()
    first = {units[0]: (_c1_metrics(100.0, 400.0), []), units[1]: (_c1_metrics(120.0, None), [])}
    text = c1.curves_text(_groups(units), first)
    assert "(seed 0, 1): gen reaches 0.9 at step 100 / 120 and mem reaches 0.5 at step 400 / never" in text
    assert "the rule is learned before the noise on every seed" in text
    assert "(the noisy examples are first answered by the rule)" in text
    late = {units[0]: (_c1_metrics(100.0, 400.0), []), units[1]: (_c1_metrics(None, 300.0, 0.1, 0.2), [])}
    text = c1.curves_text(_groups(units), late)
    assert "gen reaches 0.9 at step 100 / never" in text
    assert "the rule does not come first on every seed" in text and "first answered by the rule" not in text


# -- C2 ------------------------------------------------------------------------------------------------
def _lens_metrics(best=2, share=0.7, lo=0.6, null=0.3):
    return C2Metrics(20, 100, lens_share=LensShare(share_best_layer=best, share=share, share_lo=lo, share_hi=0.8,
                                                   share_null=null, share_n=40, share_by_layer=[0.5, share, 0.4],
                                                   intermediate_layers=2))


def _claim(per_unit):
    """unit -> (C2Metrics, checks) as a ClaimResult."""
    return ClaimResult("C2", {u: m for u, (m, _) in per_unit.items()}, {u: c for u, (_, c) in per_unit.items()})


def test_c2_lens_prior_counts_the_seeds_by_the_null_check():
    units = _units()
    ev = {units[0]: (_lens_metrics(), [_check("c2.lens.null", True)]),
          units[1]: (_lens_metrics(lo=0.2), [_check("c2.lens.null", False)])}
    text = c2.lens_prior_text(_groups(units), _claim(ev))
    assert "at the best intermediate layer (2 / 2) the true token is ahead on 0.70 / 0.70 of M" in text
    assert "the lower bound is above the prior in 1 of 2 seeds." in text
    ev[units[1]] = (_lens_metrics(), [_check("c2.lens.null", True)])
    assert "the lower bound is above the prior in every seed." in c2.lens_prior_text(_groups(units), _claim(ev))


def test_c2_lens_prior_explains_a_missing_share():
    units = _units(seeds=(0,))
    none = C2Metrics(20, 100, lens_share=LensShare(share_best_layer=None, share=math.nan, share_null=0.5, share_n=0,
                                                   intermediate_layers=0))
    text = c2.lens_prior_text(_groups(units), _claim({units[0]: (none, [_check("c2.lens.null", False)])}))
    assert "the model has no intermediate layer (one block), so the check fails" in text
    none = dataclasses.replace(none, lens_share=dataclasses.replace(none.lens_share, intermediate_layers=3))
    text = c2.lens_prior_text(_groups(units), _claim({units[0]: (none, [_check("c2.lens.null", False)])}))
    assert "no memorized example has a token that differs from the true answer" in text


def test_c2_out_of_reach_names_the_seeds_where_c_is_below_the_chance_threshold():
    assert c2.out_of_reach([True, True], [0, 1]) == ""
    text = c2.out_of_reach([True, False, False], [0, 1, 2])
    assert text.startswith(" On seeds 1, 2 the accuracy on C, even at C's own best layer, is itself below its "
                           "chance threshold on C (12.1")
    assert c2.out_of_reach([False, None], [0, 1]).startswith(" On seed 0 the")


# -- C3 ------------------------------------------------------------------------------------------------
def _overlap_stats(ceiling, jaccard=0.3):
    stats = {"jaccard": jaccard, "split_half_C": ceiling, "split_half_M": 0.4, "spearman": 0.5,
             "ci_low": 0.2, "ci_high": 0.4, "random": 0.05}
    return {"logprob": stats, "logit_diff": dict(stats)}


def _ceiling_text(ceilings):
    units = _units(seeds=range(len(ceilings)))
    circuits = c3.Circuits({}, {}, {}, {u: _overlap_stats(c) for u, c in zip(units, ceilings)})
    return c3.ceiling_text(_groups(units), circuits)


def test_c3_ceiling_supersedes_the_registered_check_where_the_ceiling_is_out_of_reach():
    assert "below the registered 0.5 on every seed: even identical circuits could not pass" in _ceiling_text([0.3, 0.4])
    assert "below the registered 0.5 on 1 of 2 seeds; there the registered overlap check is superseded" in \
        _ceiling_text([0.3, 0.7])
    assert "reaches the registered 0.5 on every seed with a value, so the registered check stands" in \
        _ceiling_text([0.6, 0.7])
    assert "The ceiling cannot be computed (no examples of C), so nothing is superseded" in \
        _ceiling_text([math.nan, math.nan])


def test_c3_ceiling_reports_the_amended_check_with_its_interval():
    text = _ceiling_text([0.4, 0.8])
    assert "J(M, C) = 0.300 / 0.300 (95% bootstrap interval 0.20-0.40 / 0.20-0.40)" in text
    assert "against a ceiling J(C, C') = 0.400 / 0.800: 0.75 / 0.37 of the ceiling" in text
    assert "(1 of 2 seeds reach it)" in text


# -- C4 ------------------------------------------------------------------------------------------------
def _c4_checks(k50, activity, positions):
    return [_check(f"c4.{s}.lookup", p, value=1.0, threshold=2.0, kind="validity")
            for s, p in (("k50", k50), ("activity", activity), ("positions", positions))]


def test_c4_lookup_control_decides_per_statistic():
    assert c4.lookup_verdict([_check("x", True)] * 2, 2).startswith("the look-up fails it, so the statistic separates")
    assert c4.lookup_verdict([_check("x", False)] * 2, 2).startswith("the look-up passes it, so the statistic cannot")
    unmeasured = c4.lookup_verdict([_check("x", None), None], 2)
    assert unmeasured.startswith("the look-up could not be measured, so the statistic is not validated")
    assert "nor does it leave the seed unresolved (amendment 2, 8.5)" in unmeasured
    assert c4.lookup_verdict([_check("x", True), _check("x", False)], 2) == (
        "the look-up fails it on 1 of 2 seeds and passes it on 1, so the check is superseded on the seeds where it passes")
    assert c4.lookup_verdict([_check("x", True), _check("x", False), None], 3) == (
        "the look-up fails it on 1 of 3 seeds and passes it on 1 (not measured on 1), so the check is superseded on the "
        "seeds where it passes or was not measured")


def test_c4_controls_text_reads_the_checks_by_id_and_the_matched_margin():
    units = _units(task="thr", condition="-")
    ev = {units[0]: ({"intermediate_over_matched": 0.5, "rests_on_intermediate_alone": True}, _c4_checks(False, False, True)),
          units[1]: ({"intermediate_over_matched": 0.1, "rests_on_intermediate_alone": True}, _c4_checks(False, False, True))}
    text = c4.controls_text(_groups(units), ev)
    assert "The median k50 (threshold: the k50 ratio times the median k50 on C) gives 1 / 1 on the atomic facts " \
           "(threshold 2 / 2): the look-up passes it" in text
    assert "The count of input positions gives 1 / 1 on the atomic facts (threshold 2 / 2): the look-up fails it" in text
    assert "removes 0.5 / 0.1 more of P(noisy label) than the information-matched control (margin 0.2), enough on 1 of " \
           "2 seeds" in text
    assert text.endswith("the amended verdict rests on the intermediate dependency alone.")
    for u in units:
        ev[u][0]["intermediate_over_matched"] = math.nan
    assert "the intermediate result was not erased (no site found or no memorized example)" in \
        c4.controls_text(_groups(units), ev)


# -- C5 ------------------------------------------------------------------------------------------------
def test_c5_share_null_counts_the_seeds_above_both_lines():
    units = _units()
    trained = {units[0]: SimpleNamespace(neuron_fraction=0.5), units[1]: SimpleNamespace(neuron_fraction=0.3)}
    untrained = {u: SimpleNamespace(neuron_fraction=0.2) for u in units}
    text = c5.null_text(_groups(units), trained, untrained)
    assert "heuristic neurons 0.50 / 0.30 of the trained model against 0.20 / 0.20 of the untrained one (ratio 2.5 / 1.5" in text
    assert "above both lines on 1 of 2 seeds" in text
    assert "The untrained model alone reaches the registered share on 2 of 2 seeds" in text
    low = {u: SimpleNamespace(neuron_fraction=0.1) for u in units}
    assert "below at least one line on every seed." in c5.null_text(_groups(units), low, low)


def test_c5_z_null_text_by_the_ratio_over_the_null():
    units = _units()
    comparison = {u: OutlierComparison(median_abs_z_M=2.0, median_abs_z_clean=0.5, z_ratio=4.0) for u in units}

    def null(ratios):
        return {u: NullComparison(median_abs_z_null=1.0, z_null_ratio=r, z_null_ratio_position9=1.0,
                                  z_null_ratio_after_position9=r) for u, r in zip(units, ratios)}

    sizes = {u: {"M": 10} for u in units}
    assert "by the required factor, on every seed" in c5.z_null_text(_groups(units), comparison, null([2.5, 3.0]), sizes)
    assert "at least as far out as memorization does, on every seed" in \
        c5.z_null_text(_groups(units), comparison, null([0.9, 0.8]), sizes)
    assert "M is out by the required factor on 1 of 2 seeds only; the ratio over clean examples is the larger one on " \
           "2 of 2 seeds" in c5.z_null_text(_groups(units), comparison, null([2.5, 1.5]), sizes)
    assert "not by the required factor on any seed" in c5.z_null_text(_groups(units), comparison, null([1.5, math.nan]), sizes)
    assert "no memorized examples; the null does not apply" in \
        c5.z_null_text(_groups(units), comparison, null([1, 1]), {u: {"M": 0} for u in units})


def test_c5_dose_text_per_seed():
    units = _units(seeds=(0, 1, 2))
    last = {units[0]: DoseSummary(m50=5, top_revert_m50=0.6, random_revert_m50=0.05, mismatched_revert_m50=0.02,
                                  top_revert_max=0.9),
            units[1]: DoseSummary(m50=None, top_revert_max=0.3),
            units[2]: DoseSummary(m50=10, top_revert_m50=0.7, random_revert_m50=0.05, mismatched_revert_m50=math.nan,
                                  top_revert_max=0.9)}
    text = c5.dose_text(_groups(units), last, {u: 0.4 for u in units}, {u: {"M": 5} for u in units})
    assert "seed 0: m50 = 5 (top m reverts 0.6; random m 0.05, mismatched m 0.02): both controls stay under the line" in text
    assert "seed 1: no m up to 200 reverts 0.5 of M (at most 0.3), so the specificity check fails" in text
    assert "seed 2: m50 = 10 (top m reverts 0.7; random m 0.05, mismatched m n/a): the mismatched control needs a " \
           "second memorized example" in text
    assert text.endswith("(The registered outlier set reverts 0.4, 0.4 and 0.4 on seeds 0-2.)")


def test_c5_amended_table_shows_each_check_by_id_with_its_outcome():
    units = _units(seeds=(0,))
    checks = [_check("c5.share", True, 0.31, 0.2), _check("c5.z", None, None, 2.0)]
    table = c5.amended_table(units, {units[0]: ({}, checks)})
    cells = dict(zip(table.index.get_level_values("check"), table["seed 0"]))
    assert cells["c5.share"] == "0.31 vs 0.2: pass"
    assert cells["c5.z"] == "n/a vs 2: unresolved"
    assert cells["c5.specificity"] == "not computed"

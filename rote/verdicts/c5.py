"""Claim C5's checks (protocol section 5, amendments 7.7, 8.3-8.4): the heuristic share against
the untrained model's, the outlier |z| against its null, and the specificity of patching. Its only
caller is :func:`rote.chapters.c5.evaluate`."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from ..analysis.intervals import Interval, wilson, wilson_bounds
from ..claims import THRESHOLDS
from .core import Check, CheckLabel, numeric, at_least, below, missing_reason, supersede, unresolved


C5_REASONS = {
    "7.7": "7.7: the outlier set holds ~230 of 2,560 units per example, and patching that many units anywhere "
           "disrupts memorization; judged by the dose-response",
    "8.3": "8.3: the section-5 rule calls most units of an untrained model heuristics; judged with the cut "
           "calibrated on an untrained model",
    "8.4": "8.4: after the first noisy digit every position reads a noisy prefix no clean neighbour has (the "
           "never-trained null reaches the same |z|); judged at the first differing digit j*",
    "8.5": "8.5: the pattern check is read at j* over the 8.3 units; judged as c5.pattern.jstar",
}


COUNT_FIELDS = ("n_memorized", "n_null", "n_shifts", "jstar_n_M", "jstar_n_without", "after_jstar_n_M",
                "after_jstar_n_null", "jstar_n", "jstar_units_min", "jstar_units_max", "jstar_short_m50", "n_neurons",
                "cut_n_neurons", "dose_n")  # of C5Metrics: an int >= 0 where given
SHARE_FIELDS = ("heuristic_fraction", "heuristic_fraction_units", "heuristic_fraction_any_position",
                "untrained_heuristic_fraction", "untrained_heuristic_fraction_units", "cut_heuristic_fraction",
                "cut_null_fraction", "cut_heuristic_fraction_units", "cut_null_fraction_units")  # in [0, 1] or NaN


@dataclass(frozen=True)
class C5Metrics:
    """Every number of one seed of C5: what :func:`checks` judges and what the record stores
    (``per_seed[i]["metrics"]``, as :func:`dataclasses.asdict`, in this field order). Built by
    :func:`rote.chapters.c5.evaluate` from the chapter's sections. A field left None was not given:
    the checks that read it are unresolved with their case (8.5); NaN: computed, but undefined."""

    # section 5: the classifier's shares, trained and untrained (rote.analysis.units.HeuristicMap)
    n_memorized: int | None = None
    heuristic_fraction: float | None = None  # judged: the share of neurons
    heuristic_fraction_per_layer: list[float] | None = None
    heuristic_fraction_units: float | None = None  # (neuron, answer position) units, shown
    heuristic_fraction_units_per_layer: list[float] | None = None
    heuristic_fraction_any_position: float | None = None
    n_neurons: int | None = None  # the neurons the shares count (the analysed layers'; the untrained model's alike)
    untrained_heuristic_fraction: float | None = None
    untrained_heuristic_fraction_units: float | None = None
    # 7.7: |z| at memorized digits on M against never-trained noisy labels (outliers.null_comparison)
    median_abs_z_null: float | None = None
    z_null_ratio: float | None = None
    median_abs_z_position9_M: float | None = None
    median_abs_z_position9_null: float | None = None
    z_null_ratio_position9: float | None = None
    z_null_ratio_after_position9: float | None = None
    n_null: int | None = None
    median_abs_z_by_position_M: list[float] | None = None
    median_abs_z_by_position_null: list[float] | None = None
    # 7.7: each example's top-m neurons of the last layer patched (neuron_patching.dose_summary)
    curve_top: list[float] | None = None
    curve_random: list[float] | None = None
    curve_mismatched: list[float] | None = None
    curve_m: list[int] | None = None
    m50: int | None = None
    top_revert_max: float | None = None
    top_revert_m50: float | None = None
    random_revert_m50: float | None = None
    mismatched_revert_m50: float | None = None
    dose_n: int | None = None  # the memorized examples patched (the first n_dose of M): the shares' denominator
    # section 5: |z| on M against clean examples and the pattern (outliers.outlier_comparison), the shifts
    median_abs_z_M: float | None = None
    median_abs_z_clean: float | None = None
    z_ratio: float | None = None
    z_ratio_all_positions: float | None = None
    pattern_corr_M: float | None = None
    pattern_corr_clean: float | None = None
    shift_toward_noisy: float | None = None
    n_shifts: int | None = None
    # section 5: the last layer patched to clean-neighbour means (neuron_patching.patching_summary)
    patch_revert_last: float | None = None
    patch_recover_last: float | None = None
    control_revert_last: float | None = None
    heuristics_revert_last: float | None = None
    heuristics_control_revert_last: float | None = None
    layer_revert_last: float | None = None
    layer_recover_last: float | None = None
    last_layer: int | None = None
    # 8.3: the cut calibrated on an untrained model (heuristics.cut_summary)
    cut_heuristic_fraction: float | None = None
    cut_null_fraction: float | None = None
    cut_heuristic_fraction_per_layer: list[float] | None = None
    cut_null_fraction_per_layer: list[float] | None = None
    cut_heuristic_fraction_units: float | None = None
    cut_null_fraction_units: float | None = None
    cut_heuristic_fraction_units_per_layer: list[float] | None = None
    cut_empty_layers: list[int] | None = None
    cut_untrained_seed: int | None = None
    cut_n_neurons: int | None = None  # the neurons the shares under the cut count (the null model's alike)
    # 8.4: |z| and the pattern at the first differing digit j* (outliers.jstar_comparison)
    jstar_n_M: int | None = None
    jstar_n_without: int | None = None
    jstar_counts: dict[int, int] | None = None  # answer position -> memorized examples with their j* there
    jstar_z_M: float | None = None
    jstar_z_clean: float | None = None
    jstar_z_ratio: float | None = None
    jstar_z_ratio_interval: Interval | None = None  # section 11: bootstrap over M and clean examples (outliers)
    jstar_median_z_M: float | None = None
    jstar_median_z_clean: float | None = None
    jstar_median_z_ratio: float | None = None
    jstar_pattern_corr_M: float | None = None
    jstar_heuristic_units_per_position: list[int] | None = None
    # after j*, shown, not judged (outliers.after_jstar_comparison)
    after_jstar_z_M: float | None = None
    after_jstar_z_null: float | None = None
    after_jstar_z_ratio_null: float | None = None
    after_jstar_max_z_M: float | None = None
    after_jstar_max_z_null: float | None = None
    after_jstar_max_z_ratio_null: float | None = None
    after_jstar_n_M: int | None = None
    after_jstar_n_null: int | None = None
    # 8.4, 8.5: the 8.3 units of the last layer patched at j* (neuron_patching.jstar_summary, jstar_units)
    jstar_curve_top: list[float] | None = None
    jstar_curve_random: list[float] | None = None
    jstar_curve_mismatched: list[float] | None = None
    jstar_curve_m: list[int] | None = None
    jstar_m50: int | None = None
    jstar_top_revert_max: float | None = None
    jstar_top_revert_m50: float | None = None
    jstar_random_revert_m50: float | None = None
    jstar_mismatched_revert_m50: float | None = None
    jstar_recovered_m50: float | None = None
    jstar_curve_recovered: list[float] | None = None
    jstar_n: int | None = None
    jstar_m_tried: list[int] | None = None  # 8.6: the doses tried (the grid up to jstar_units_max, and all units)
    jstar_units_min: int | None = None  # the fewest 8.3 units of the last layer at an example's j*
    jstar_units_max: int | None = None  # the most: the dose at which every example patches all of its units
    jstar_short_m50: int | None = None  # 8.6: examples with fewer than m50 units outside their top m50
    # after j*, every neuron of the last layer patched, M against the null, shown (neuron_patching.jstar_analysis)
    after_jstar_m: list[int] | None = None
    after_jstar_patch_revert: list[float] | None = None
    after_jstar_random_patch_revert: list[float] | None = None
    after_jstar_null_patch_revert: list[float] | None = None
    after_jstar_null_random_patch_revert: list[float] | None = None
    jstar_layer: int | None = None

    def __post_init__(self):
        for name in COUNT_FIELDS:
            n = getattr(self, name)
            if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0):
                raise ValueError(f"C5Metrics.{name} must be a count (an int >= 0) or None, got {n!r}")
        for name in SHARE_FIELDS:
            x = getattr(self, name)
            if x is not None and not (math.isnan(x) or 0.0 <= x <= 1.0):
                raise ValueError(f"C5Metrics.{name} must be a share in [0, 1] (or NaN, None), got {x!r}")
        grid = THRESHOLDS["C5"]["m_grid"]
        if self.m50 is not None and self.m50 not in grid:
            raise ValueError(f"C5Metrics.m50 must be an m of the grid {grid} or None, got {self.m50!r}")
        if self.jstar_m50 is not None and self.jstar_m50 not in grid and self.jstar_m50 != self.jstar_units_max:
            raise ValueError(f"C5Metrics.jstar_m50 must be an m of the grid {grid}, the all-units dose "
                             f"(jstar_units_max {self.jstar_units_max!r}) or None, got {self.jstar_m50!r}")
        if self.jstar_z_ratio_interval is not None and not isinstance(self.jstar_z_ratio_interval, Interval):
            raise ValueError(f"C5Metrics.jstar_z_ratio_interval must be an Interval or None, "
                             f"got {self.jstar_z_ratio_interval!r}")


def _c5_missing(m: C5Metrics) -> dict:
    """Why each input of C5's checks would be missing, by case (8.5: each reason names its case)."""
    th = THRESHOLDS["C5"]
    no_m = "no memorized example (M is empty)" if m.n_memorized == 0 else None
    no_jstar = "no memorized example with a differing digit (j*)" if not m.jstar_n_M else None
    no_units = "no heuristic unit at the j* positions under the 8.3 cut"
    no_m50 = (f"no m50 at j* (no dose tried reverts {th['patch_revert_min']:g} of M), so there is no m to read the "
              "control at")
    short = (f"8.6: {m.jstar_short_m50} of {m.jstar_n} memorized examples hold fewer than m50 = {m.jstar_m50} 8.3 units "
             "of the last layer at j* outside their own top m50, so the control cannot draw m50 units from them"
             if m.jstar_short_m50 else None)
    return {
        "share.registered": "the section-5 classifier was not run",
        "share.untrained": missing_reason((m.heuristic_fraction, "the section-5 classifier was not run"),
                                          (m.untrained_heuristic_fraction, "the untrained model was not classified")),
        "share": "the 8.3 classifier was not run",
        "share.null": missing_reason((m.cut_heuristic_fraction, "the 8.3 classifier was not run"),
                                     (m.cut_null_fraction, "the untrained model of the seed was not classified "
                                                           "under the 8.3 cut")),
        "z.registered": no_m or missing_reason(
            (m.median_abs_z_M, "|z| at memorized digits is undefined (no heuristic unit with enough clean "
                               "neighbours)"),
            (m.median_abs_z_clean or None, "|z| on clean examples is undefined or 0")) or \
            "the |z| ratio was not given to the verdict",
        "z.untrained_labels": no_m or missing_reason(
            (m.median_abs_z_null or None, "|z| on the never-trained null is undefined or 0")) or \
            "the |z| ratio over the null was not given to the verdict",
        "z": no_jstar or missing_reason((m.jstar_z_M, no_units), (m.jstar_z_clean or None,
                                        "|z| on clean examples at the j* positions is undefined or 0")) or no_units,
        "pattern": no_m or "the pattern correlation is undefined (fewer than 3 memorized examples with a clean-neighbour "
                           "mean at any heuristic unit)",
        "pattern.jstar": no_jstar or "the pattern correlation at j* is undefined (no heuristic unit under the 8.3 cut "
                                     "with 3 memorized examples at j*)",
        "patch": no_m or "the last layer's patching gave no value",
        "dose.top": no_m or "the dose-response of the last layer gave no value",
        "dose.control": no_m or ("no m50 (no m reverts 0.5 of M), so there is no m to read the control at"
                                 if m.m50 is None else "the control was not computed at m50"),
        "dose.mismatched": no_m or ("no m50 (no m reverts 0.5 of M), so there is no m to read the control at"
                                    if m.m50 is None else "needs a second memorized example"),
        "specificity": no_jstar or ("8.6: no memorized example holds an 8.3 unit of the last layer at its j*, so "
                                    "there is nothing to patch" if m.jstar_m_tried == [] else
                                    "the top-m patch at j* gave no value"),
        "specificity.random": no_jstar or (no_m50 if m.jstar_m50 is None else
                                           "the random control at j* was not drawn"),
        "specificity.mismatched": no_jstar or (no_m50 if m.jstar_m50 is None else
                                               "needs a second memorized example"),
        "specificity.short": short,
    }


# -- section 11: the sampling interval of each check's value -------------------------------------------
def _share(share, n) -> Interval | None:
    """Wilson's interval of a share of ``n`` (examples, or units: a share of neurons is a binomial count
    over the neurons classified, so its interval is Wilson's over units). A share averaged over random
    draws (a control) counts as its mean number of examples. None where either is missing."""
    x = numeric(share)
    return None if n is None or math.isnan(x) else wilson(x * n, n)


def _over_null(share, null, n, factor: float) -> Interval | None:
    """The interval of ``share`` on the scale of its threshold ``factor`` x ``null`` (two shares of ``n``
    neurons each, of two models): Newcombe's hybrid score interval (his method 10, built from the two
    Wilson intervals) of the difference share - factor x null, shifted by factor x null, so that it
    contains the threshold exactly where the difference's interval contains 0 (section 11: "shift it onto
    the value's scale"; with factor 1 it is :func:`rote.analysis.intervals.newcombe` shifted)."""
    p1, p2 = numeric(share), numeric(null)
    if n is None or not n or math.isnan(p1) or math.isnan(p2):
        return None
    (l1, u1), (l2, u2) = wilson_bounds(p1 * n, n), wilson_bounds(p2 * n, n)
    low = p1 - math.sqrt((p1 - l1) ** 2 + (factor * (u2 - p2)) ** 2)
    high = p1 + math.sqrt((u1 - p1) ** 2 + (factor * (p2 - l2)) ** 2)
    return Interval(low, high, "newcombe")


def _share_checks(m: C5Metrics, why: dict) -> list[Check]:
    """The heuristic share: section 5's rule and 7.7's null (superseded by 8.3), 8.3's cut and its null."""
    th = THRESHOLDS["C5"]
    factor, share_min = th["untrained_share_factor_min"], th["heuristic_fraction_min"]
    return [
        supersede(at_least(CheckLabel("c5.share.registered", "heuristic share of neurons (section-5 rule)",
                                      "registered", "heuristic share"),
                           m.heuristic_fraction, share_min, missing=why["share.registered"],
                           interval=_share(m.heuristic_fraction, m.n_neurons)),
                  C5_REASONS["8.3"], "8.3"),
        supersede(at_least(CheckLabel("c5.share.untrained",
                                      f"7.7: heuristic share of neurons vs {factor:g} x the untrained model",
                                      "null", "heuristic share"),
                           m.heuristic_fraction, factor * numeric(m.untrained_heuristic_fraction),
                           missing=why["share.untrained"],
                           interval=_over_null(m.heuristic_fraction, m.untrained_heuristic_fraction, m.n_neurons,
                                               factor)), C5_REASONS["8.3"], "8.3"),
        at_least(CheckLabel("c5.share", "8.3: heuristic share of neurons (cut: 99th percentile of an untrained model)",
                            "amended", "heuristic share"),
                 m.cut_heuristic_fraction, share_min, missing=why["share"],
                 interval=_share(m.cut_heuristic_fraction, m.cut_n_neurons)),
        at_least(CheckLabel("c5.share.null",
                            f"8.3: heuristic share vs {factor:g} x the untrained model's share under the cut",
                            "null", "heuristic share"),
                 m.cut_heuristic_fraction, factor * numeric(m.cut_null_fraction), missing=why["share.null"],
                 interval=_over_null(m.cut_heuristic_fraction, m.cut_null_fraction, m.cut_n_neurons, factor)),
    ]


def _outlier_checks(m: C5Metrics, why: dict) -> list[Check]:
    """|z| and the pattern: section 5's and 7.7's over every answer position (superseded by 8.4 and 8.5),
    8.4's at j*. Section 11: the ratio at j* carries its bootstrap interval (over M and clean examples,
    each resampled on its own: :func:`rote.analysis.outliers.jstar_ratio_interval`); the section-5 and
    7.7 ratios (medians over (example, unit) pairs) and the pattern correlations (medians over units of a
    correlation across examples, not of per-example values) show a margin only."""
    th = THRESHOLDS["C5"]
    z_min, corr_min = th["z_ratio_min"], th["pattern_corr_min"]
    return [
        supersede(at_least(CheckLabel("c5.z.registered", "median |z| on M over clean", "registered", "outlier |z|"),
                           m.z_ratio, z_min, missing=why["z.registered"]), C5_REASONS["8.4"], "8.4"),
        supersede(at_least(CheckLabel("c5.z.untrained_labels", "7.7: median |z| on M over never-trained noisy labels",
                                      "null", "outlier |z|"),
                           m.z_null_ratio, z_min, missing=why["z.untrained_labels"]),
                  C5_REASONS["8.4"], "8.4"),
        at_least(CheckLabel("c5.z", "8.4: largest |z| over heuristic units at j*, median on M over clean", "amended",
                            "outlier |z|"),
                 m.jstar_z_ratio, z_min, missing=why["z"], interval=m.jstar_z_ratio_interval),
        supersede(at_least(CheckLabel("c5.pattern", "pattern correlation on M", "registered", "outlier |z|"),
                           m.pattern_corr_M, corr_min, missing=why["pattern"]),
                  C5_REASONS["8.5"], "8.5"),
        at_least(CheckLabel("c5.pattern.jstar", "8.4: pattern correlation on M at j*", "amended", "outlier |z|"),
                 m.jstar_pattern_corr_M, corr_min, missing=why["pattern.jstar"]),
    ]


def _patching_checks(m: C5Metrics, why: dict) -> list[Check]:
    """Section 5's patching of the last layer (superseded by 7.7) and 7.7's dose-response over every
    answer position (superseded by 8.4); each a share of the memorized examples patched (Wilson)."""
    th = THRESHOLDS["C5"]
    revert_min, control_max = th["patch_revert_min"], th["control_revert_max"]
    return [
        supersede(at_least(CheckLabel("c5.patch.registered", "patching the last layer reverts M", "registered",
                                      "specificity"),
                           m.patch_revert_last, revert_min, missing=why["patch"],
                           interval=_share(m.patch_revert_last, m.n_memorized)), C5_REASONS["7.7"], "7.7"),
        supersede(below(CheckLabel("c5.patch.random.registered", "random control reverts M", "registered",
                                   "specificity"),
                        m.control_revert_last, control_max, missing=why["patch"],
                        interval=_share(m.control_revert_last, m.n_memorized)), C5_REASONS["7.7"], "7.7"),
        supersede(at_least(CheckLabel("c5.dose.top", "7.7: top-m patch of the last layer reverts M at some m "
                                      "(m50 exists)", "amended", "specificity"),
                           m.top_revert_max, revert_min, missing=why["dose.top"],
                           interval=_share(m.top_revert_max, m.dose_n)), C5_REASONS["8.4"], "8.4"),
        supersede(below(CheckLabel("c5.dose.random", "7.7: m random neurons at m50 revert M", "control", "specificity"),
                        m.random_revert_m50, control_max, missing=why["dose.control"],
                        interval=_share(m.random_revert_m50, m.dose_n)), C5_REASONS["8.4"], "8.4"),
        supersede(below(CheckLabel("c5.dose.mismatched", "7.7: another example's top m at m50 revert M", "control",
                                   "specificity"),
                        m.mismatched_revert_m50, control_max, missing=why["dose.mismatched"],
                        interval=_share(m.mismatched_revert_m50, m.dose_n)), C5_REASONS["8.4"], "8.4"),
    ]


def _specificity_checks(m: C5Metrics, why: dict) -> list[Check]:
    """8.4-8.6: the top-m patch of the 8.3 units at j* reverts half of M at some dose (its largest revert,
    over every dose tried, including all the units; it fails where none does), and at m50 the random and
    mismatched controls, drawn from the example's units outside its top m50, stay under 0.1 (unresolved
    where an example holds fewer than m50 such units). Each a share of the examples patched (Wilson)."""
    th = THRESHOLDS["C5"]
    revert_min, control_max = th["patch_revert_min"], th["control_revert_max"]
    controls = [
        below(CheckLabel("c5.specificity.random",
                         "8.4: m random 8.3 units at j* (at m50, outside the example's top m) revert M",
                         "control", "specificity"),
              m.jstar_random_revert_m50, control_max, missing=why["specificity.random"],
              interval=_share(m.jstar_random_revert_m50, m.jstar_n)),
        below(CheckLabel("c5.specificity.mismatched", "8.4: another example's top m at j* (at m50, outside the "
                         "example's top m) revert M", "control", "specificity"),
              m.jstar_mismatched_revert_m50, control_max, missing=why["specificity.mismatched"],
              interval=_share(m.jstar_mismatched_revert_m50, m.jstar_n)),
    ]
    if why["specificity.short"]:
        controls = [unresolved(c, why["specificity.short"]) if c.passed is not None else c for c in controls]
    return [at_least(CheckLabel("c5.specificity", "8.4: top-m patch of the 8.3 units at j* reverts M at some dose "
                                "(m50 exists)", "amended", "specificity"),
                     m.jstar_top_revert_max, revert_min, missing=why["specificity"],
                     interval=_share(m.jstar_top_revert_max, m.jstar_n))] + controls


def checks(metrics: C5Metrics) -> tuple[C5Metrics, list[Check]]:
    """C5 from the chapter's measured numbers (protocol section 5, amendments 7.7, 8.3-8.6, section 11):
    ``metrics`` itself and its checks.

    Section 5 (the registered reading): ``heuristic_fraction`` (share of neurons that are heuristics
    under the coverage rule), ``z_ratio`` (median |z| on M over clean), ``pattern_corr_M``, and the
    patching of the last layer (``patch_revert_last``, ``control_revert_last``).

    Amended reading (amendment 2): the heuristic share under 8.3's cut, ``cut_heuristic_fraction``
    >= 0.2 (``c5.share``) and >= 2 x ``cut_null_fraction`` (``c5.share.null``); at the first
    differing digit j* (8.4, over the 8.3 units): ``jstar_z_ratio`` >= 2 (``c5.z``),
    ``jstar_pattern_corr_M`` >= 0.5 (``c5.pattern.jstar``), ``jstar_top_revert_max`` >= 0.5 (m50
    exists, ``c5.specificity``), and at m50 ``jstar_random_revert_m50`` and
    ``jstar_mismatched_revert_m50`` < 0.1 (``control``). The specificity at j* ranks and patches the
    8.3 units of the last layer (8.5); 8.6: it is tried at each m of the grid up to the most units an
    example holds at its j* (``jstar_units_max``; each example capped at its own) and once with all of
    them (``jstar_m_tried``), and fails where no dose reverts half of M: patching every unit the claim
    names did not revert half of the memorized digits. The controls draw from the units outside the
    example's top m50; where ``jstar_short_m50`` examples hold fewer than m50 of them, each control is
    unresolved with that reason. Superseded and shown: the section-5 share and 7.7's share null (by
    8.3), the registered |z| ratio, 7.7's |z| null and 7.7's dose-response (by 8.4), the section-5
    pattern correlation over every answer position (by 8.5), the registered patching checks (by 7.7).

    Section 11: every check has its margin (positive passes); intervals as each group says
    (:func:`_share_checks`, :func:`_outlier_checks`, :func:`_patching_checks`,
    :func:`_specificity_checks`). Missing values (8.5): a check whose number is missing is unresolved
    with its case (no memorized example, no j*, no 8.3 unit at j*, no m50 to read a control at, an
    analysis not run)."""
    why = _c5_missing(metrics)
    checks = (_share_checks(metrics, why) + _outlier_checks(metrics, why) + _patching_checks(metrics, why)
              + _specificity_checks(metrics, why))
    added = {"c5.share": "8.3", "c5.share.null": "8.3", "c5.z": "8.4", "c5.pattern.jstar": "8.4", "c5.specificity": "8.4",
             "c5.specificity.random": "8.4", "c5.specificity.mismatched": "8.4"}  # the section that added each
    return metrics, [c.since(added[c.id]) if c.id in added else c for c in checks]

"""Claim C5's checks (protocol section 5, amendments 7.7, 8.3-8.6): the heuristic share against the
untrained model's, the outlier |z| against its null, and the specificity of patching."""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

from ..analysis.heuristics import CutShares, Shares
from ..analysis.intervals import Interval, wilson, wilson_bounds
from ..analysis.neuron_patching import AfterJstarCurves, DoseSummary, JstarDose, LayerPatch
from ..analysis.outliers import AfterJstar, JstarComparison, NullComparison, OutlierComparison, ShiftDirection
from ..claims import THRESHOLDS
from .core import Check, CheckLabel, numeric, at_least, below, flat, group, missing_reason, supersede, unresolved

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
                "cut_n_neurons", "dose_n")  # in the record: an int >= 0 where given
SHARE_FIELDS = ("heuristic_fraction", "heuristic_fraction_units", "heuristic_fraction_any_position",
                "untrained_heuristic_fraction", "untrained_heuristic_fraction_units", "cut_heuristic_fraction",
                "cut_null_fraction", "cut_heuristic_fraction_units", "cut_null_fraction_units")  # in [0, 1] or NaN


@dataclass(frozen=True)
class C5Metrics:
    """One seed of C5: each analysis's own result, in the record's order (:func:`rote.verdicts.core.flat`).
    A number left None was not given (its checks are unresolved with their case, 8.5); NaN: undefined."""

    n_memorized: int | None = None
    shares: Shares = group(Shares)  # section 5, 7.7: the classifier's shares, trained and untrained
    null: NullComparison = group(NullComparison)  # 7.7: |z| on M against never-trained noisy labels
    dose: DoseSummary = group(DoseSummary)  # 7.7: each example's top-m neurons of the last layer
    z: OutlierComparison = group(OutlierComparison)  # section 5: |z| on M against clean, the pattern
    shift: ShiftDirection = group(ShiftDirection)
    patch: LayerPatch = group(LayerPatch)  # section 5: the last layer patched to clean-neighbour means
    cut: CutShares = group(CutShares)  # 8.3: the cut calibrated on an untrained model
    jstar: JstarComparison = group(JstarComparison)  # 8.4: |z| and the pattern at j*
    after: AfterJstar = group(AfterJstar)  # after j*, shown
    jdose: JstarDose = group(JstarDose)  # 8.4-8.6: the 8.3 units of the last layer patched at j*
    curves: AfterJstarCurves = group(AfterJstarCurves)  # after j*, shown

    def __post_init__(self):
        v = flat(self)
        for name in COUNT_FIELDS:
            n = v[name]
            if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0):
                raise ValueError(f"C5Metrics.{name} must be a count (an int >= 0) or None, got {n!r}")
        for name in SHARE_FIELDS:
            if v[name] is not None and not (math.isnan(v[name]) or 0.0 <= v[name] <= 1.0):
                raise ValueError(f"C5Metrics.{name} must be a share in [0, 1] (or NaN, None), got {v[name]!r}")
        grid, m50, d = THRESHOLDS["C5"]["m_grid"], self.dose.m50, self.jdose
        if m50 is not None and m50 not in grid:
            raise ValueError(f"C5Metrics.m50 must be an m of the grid {grid} or None, got {m50!r}")
        if d.jstar_m50 is not None and d.jstar_m50 not in grid and d.jstar_m50 != d.jstar_units_max:
            raise ValueError(f"C5Metrics.jstar_m50 must be an m of the grid {grid}, the all-units dose "
                             f"(jstar_units_max {d.jstar_units_max!r}) or None, got {d.jstar_m50!r}")
        interval = self.jstar.jstar_z_ratio_interval
        if interval is not None and not isinstance(interval, Interval):
            raise ValueError(f"C5Metrics.jstar_z_ratio_interval must be an Interval or None, got {interval!r}")


def from_record(**values) -> C5Metrics:
    """C5Metrics from the record's flat names (each placed in its group); an unknown name is a TypeError."""
    def build(cls):
        return cls(**{f.name: build(f.default_factory) if f.metadata.get("flat") else values.pop(f.name)
                      for f in dataclasses.fields(cls) if f.metadata.get("flat") or f.name in values})

    metrics = build(C5Metrics)
    if values:
        raise TypeError(f"C5Metrics has no fields {sorted(values)}")
    return metrics


def _c5_missing(m: C5Metrics) -> dict:
    """Why each input of C5's checks would be missing, by case (8.5)."""
    th = THRESHOLDS["C5"]
    no_m = "no memorized example (M is empty)" if m.n_memorized == 0 else None
    no_jstar = "no memorized example with a differing digit (j*)" if not m.jstar.jstar_n_M else None
    no_units = "no heuristic unit at the j* positions under the 8.3 cut"
    no_m50 = (f"no m50 at j* (no dose tried reverts {th['patch_revert_min']:g} of M), so there is no m to read the "
              "control at")
    short = (f"8.6: {m.jdose.jstar_short_m50} of {m.jdose.jstar_n} memorized examples hold fewer than m50 = {m.jdose.jstar_m50} 8.3 units "
             "of the last layer at j* outside their own top m50, so the control cannot draw m50 units from them"
             if m.jdose.jstar_short_m50 else None)
    return {
        "share.registered": "the section-5 classifier was not run",
        "share.untrained": missing_reason((m.shares.heuristic_fraction, "the section-5 classifier was not run"),
                                          (m.shares.untrained_heuristic_fraction, "the untrained model was not classified")),
        "share": "the 8.3 classifier was not run",
        "share.null": missing_reason((m.cut.cut_heuristic_fraction, "the 8.3 classifier was not run"),
                                     (m.cut.cut_null_fraction, "the untrained model of the seed was not classified "
                                                           "under the 8.3 cut")),
        "z.registered": no_m or missing_reason(
            (m.z.median_abs_z_M, "|z| at memorized digits is undefined (no heuristic unit with enough clean "
                               "neighbours)"),
            (m.z.median_abs_z_clean or None, "|z| on clean examples is undefined or 0")) or \
            "the |z| ratio was not given to the verdict",
        "z.untrained_labels": no_m or missing_reason(
            (m.null.median_abs_z_null or None, "|z| on the never-trained null is undefined or 0")) or \
            "the |z| ratio over the null was not given to the verdict",
        "z": no_jstar or missing_reason((m.jstar.jstar_z_M, no_units), (m.jstar.jstar_z_clean or None,
                                        "|z| on clean examples at the j* positions is undefined or 0")) or no_units,
        "pattern": no_m or "the pattern correlation is undefined (fewer than 3 memorized examples with a clean-neighbour "
                           "mean at any heuristic unit)",
        "pattern.jstar": no_jstar or "the pattern correlation at j* is undefined (no heuristic unit under the 8.3 cut "
                                     "with 3 memorized examples at j*)",
        "patch": no_m or "the last layer's patching gave no value",
        "dose.top": no_m or "the dose-response of the last layer gave no value",
        "dose.control": no_m or ("no m50 (no m reverts 0.5 of M), so there is no m to read the control at"
                                 if m.dose.m50 is None else "the control was not computed at m50"),
        "dose.mismatched": no_m or ("no m50 (no m reverts 0.5 of M), so there is no m to read the control at"
                                    if m.dose.m50 is None else "needs a second memorized example"),
        "specificity": no_jstar or ("8.6: no memorized example holds an 8.3 unit of the last layer at its j*, so "
                                    "there is nothing to patch" if m.jdose.jstar_m_tried == [] else
                                    "the top-m patch at j* gave no value"),
        "specificity.random": no_jstar or (no_m50 if m.jdose.jstar_m50 is None else
                                           "the random control at j* was not drawn"),
        "specificity.mismatched": no_jstar or (no_m50 if m.jdose.jstar_m50 is None else
                                               "needs a second memorized example"),
        "specificity.short": short,
    }


# -- section 11: the sampling interval of each check's value -------------------------------------------
def _share(share, n) -> Interval | None:
    """Wilson's interval of a share of ``n`` examples or neurons (a control's mean share counts as its mean
    number of examples); None where either is missing."""
    x = numeric(share)
    return None if n is None or math.isnan(x) else wilson(x * n, n)


def _over_null(share, null, n, factor: float) -> Interval | None:
    """Newcombe's hybrid score interval of share - ``factor`` x null (two shares of ``n`` neurons), shifted by
    factor x null onto the share's scale (section 11; with factor 1, :func:`~rote.analysis.intervals.newcombe`)."""
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
                           m.shares.heuristic_fraction, share_min, missing=why["share.registered"],
                           interval=_share(m.shares.heuristic_fraction, m.shares.n_neurons)),
                  C5_REASONS["8.3"], "8.3"),
        supersede(at_least(CheckLabel("c5.share.untrained",
                                      f"7.7: heuristic share of neurons vs {factor:g} x the untrained model",
                                      "null", "heuristic share"),
                           m.shares.heuristic_fraction, factor * numeric(m.shares.untrained_heuristic_fraction),
                           missing=why["share.untrained"],
                           interval=_over_null(m.shares.heuristic_fraction, m.shares.untrained_heuristic_fraction, m.shares.n_neurons,
                                               factor)), C5_REASONS["8.3"], "8.3"),
        at_least(CheckLabel("c5.share", "8.3: heuristic share of neurons (cut: 99th percentile of an untrained model)",
                            "amended", "heuristic share"),
                 m.cut.cut_heuristic_fraction, share_min, missing=why["share"],
                 interval=_share(m.cut.cut_heuristic_fraction, m.cut.cut_n_neurons)),
        at_least(CheckLabel("c5.share.null",
                            f"8.3: heuristic share vs {factor:g} x the untrained model's share under the cut",
                            "null", "heuristic share"),
                 m.cut.cut_heuristic_fraction, factor * numeric(m.cut.cut_null_fraction), missing=why["share.null"],
                 interval=_over_null(m.cut.cut_heuristic_fraction, m.cut.cut_null_fraction, m.cut.cut_n_neurons, factor)),
    ]


def _outlier_checks(m: C5Metrics, why: dict) -> list[Check]:
    """|z| and the pattern over every answer position (section 5, 7.7; superseded by 8.4, 8.5) and at j*
    (8.4; the ratio with its bootstrap interval; the medians over pairs and the correlations: a margin only)."""
    th = THRESHOLDS["C5"]
    z_min, corr_min = th["z_ratio_min"], th["pattern_corr_min"]
    return [
        supersede(at_least(CheckLabel("c5.z.registered", "median |z| on M over clean", "registered", "outlier |z|"),
                           m.z.z_ratio, z_min, missing=why["z.registered"]), C5_REASONS["8.4"], "8.4"),
        supersede(at_least(CheckLabel("c5.z.untrained_labels", "7.7: median |z| on M over never-trained noisy labels",
                                      "null", "outlier |z|"),
                           m.null.z_null_ratio, z_min, missing=why["z.untrained_labels"]),
                  C5_REASONS["8.4"], "8.4"),
        at_least(CheckLabel("c5.z", "8.4: largest |z| over heuristic units at j*, median on M over clean", "amended",
                            "outlier |z|"),
                 m.jstar.jstar_z_ratio, z_min, missing=why["z"], interval=m.jstar.jstar_z_ratio_interval),
        supersede(at_least(CheckLabel("c5.pattern", "pattern correlation on M", "registered", "outlier |z|"),
                           m.z.pattern_corr_M, corr_min, missing=why["pattern"]),
                  C5_REASONS["8.5"], "8.5"),
        at_least(CheckLabel("c5.pattern.jstar", "8.4: pattern correlation on M at j*", "amended", "outlier |z|"),
                 m.jstar.jstar_pattern_corr_M, corr_min, missing=why["pattern.jstar"]),
    ]


def _patching_checks(m: C5Metrics, why: dict) -> list[Check]:
    """Section 5's patching of the last layer (superseded by 7.7) and 7.7's dose-response (by 8.4)."""
    th = THRESHOLDS["C5"]
    revert_min, control_max = th["patch_revert_min"], th["control_revert_max"]
    return [
        supersede(at_least(CheckLabel("c5.patch.registered", "patching the last layer reverts M", "registered",
                                      "specificity"),
                           m.patch.patch_revert_last, revert_min, missing=why["patch"],
                           interval=_share(m.patch.patch_revert_last, m.n_memorized)), C5_REASONS["7.7"], "7.7"),
        supersede(below(CheckLabel("c5.patch.random.registered", "random control reverts M", "registered",
                                   "specificity"),
                        m.patch.control_revert_last, control_max, missing=why["patch"],
                        interval=_share(m.patch.control_revert_last, m.n_memorized)), C5_REASONS["7.7"], "7.7"),
        supersede(at_least(CheckLabel("c5.dose.top", "7.7: top-m patch of the last layer reverts M at some m "
                                      "(m50 exists)", "amended", "specificity"),
                           m.dose.top_revert_max, revert_min, missing=why["dose.top"],
                           interval=_share(m.dose.top_revert_max, m.dose.dose_n)), C5_REASONS["8.4"], "8.4"),
        supersede(below(CheckLabel("c5.dose.random", "7.7: m random neurons at m50 revert M", "control", "specificity"),
                        m.dose.random_revert_m50, control_max, missing=why["dose.control"],
                        interval=_share(m.dose.random_revert_m50, m.dose.dose_n)), C5_REASONS["8.4"], "8.4"),
        supersede(below(CheckLabel("c5.dose.mismatched", "7.7: another example's top m at m50 revert M", "control",
                                   "specificity"),
                        m.dose.mismatched_revert_m50, control_max, missing=why["dose.mismatched"],
                        interval=_share(m.dose.mismatched_revert_m50, m.dose.dose_n)), C5_REASONS["8.4"], "8.4"),
    ]


def _specificity_checks(m: C5Metrics, why: dict) -> list[Check]:
    """8.4-8.6: some dose of the 8.3 units at j* (up to all of them) reverts half of M, and at m50 both
    controls stay under 0.1 (unresolved where an example holds too few units outside its top m50)."""
    th = THRESHOLDS["C5"]
    revert_min, control_max = th["patch_revert_min"], th["control_revert_max"]
    controls = [
        below(CheckLabel("c5.specificity.random",
                         "8.4: m random 8.3 units at j* (at m50, outside the example's top m) revert M",
                         "control", "specificity"),
              m.jdose.jstar_random_revert_m50, control_max, missing=why["specificity.random"],
              interval=_share(m.jdose.jstar_random_revert_m50, m.jdose.jstar_n)),
        below(CheckLabel("c5.specificity.mismatched", "8.4: another example's top m at j* (at m50, outside the "
                         "example's top m) revert M", "control", "specificity"),
              m.jdose.jstar_mismatched_revert_m50, control_max, missing=why["specificity.mismatched"],
              interval=_share(m.jdose.jstar_mismatched_revert_m50, m.jdose.jstar_n)),
    ]
    if why["specificity.short"]:
        controls = [unresolved(c, why["specificity.short"]) if c.passed is not None else c for c in controls]
    return [at_least(CheckLabel("c5.specificity", "8.4: top-m patch of the 8.3 units at j* reverts M at some dose "
                                "(m50 exists)", "amended", "specificity"),
                     m.jdose.jstar_top_revert_max, revert_min, missing=why["specificity"],
                     interval=_share(m.jdose.jstar_top_revert_max, m.jdose.jstar_n))] + controls


def checks(metrics: C5Metrics) -> tuple[C5Metrics, list[Check]]:
    """``metrics`` and C5's checks (section 5, amendments 7.7, 8.3-8.6, section 11). Amended: the share
    under 8.3's cut (>= 0.2 and >= 2 x the null's); at j* (8.4, over the 8.3 units) the |z| ratio, the
    pattern correlation, m50 exists, and its controls stay under 0.1. Superseded and shown: section 5's
    share and 7.7's null (by 8.3), the all-position |z| checks and 7.7's dose-response (by 8.4), the
    all-position pattern (by 8.5), the registered patching (by 7.7). A missing number: unresolved (8.5)."""
    why = _c5_missing(metrics)
    checks = (_share_checks(metrics, why) + _outlier_checks(metrics, why) + _patching_checks(metrics, why)
              + _specificity_checks(metrics, why))
    added = {"c5.share": "8.3", "c5.share.null": "8.3", "c5.z": "8.4", "c5.pattern.jstar": "8.4", "c5.specificity": "8.4",
             "c5.specificity.random": "8.4", "c5.specificity.mismatched": "8.4"}  # the section that added each
    return metrics, [c.since(added[c.id]) if c.id in added else c for c in checks]

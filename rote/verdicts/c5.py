"""Claim C5's checks (protocol section 5, amendments 7.7, 8.3-8.6): the heuristic share against the
untrained model's, the outlier |z| against its null, and the specificity of patching."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from ..analysis.heuristics import CutShares, Shares
from ..analysis.intervals import Interval, newcombe_terms, wilson, wilson_bounds
from ..analysis.neuron_patching import AfterJstarCurves, DoseSummary, JstarDose, LayerPatch
from ..analysis.outliers import AfterJstar, JstarComparison, NullComparison, OutlierComparison, ShiftDirection
from ..claims import THRESHOLDS
from .core import Check, CheckLabel, numeric, at_least, below, flat, from_inline, group, missing_reason, supersede, unresolved

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
    return from_inline(C5Metrics, values)


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
        "patch.registered": no_m or "the last layer's patching gave no value",
        "patch.random.registered": no_m or "the last layer's patching gave no value",
        "dose.top": no_m or "the dose-response of the last layer gave no value",
        "dose.random": no_m or ("no m50 (no m reverts 0.5 of M), so there is no m to read the control at"
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
    """Newcombe's interval of share - ``factor`` x null (two shares of ``n`` neurons), on the share's scale."""
    p1, p2 = numeric(share), numeric(null)
    if n is None or not n or math.isnan(p1) or math.isnan(p2):
        return None
    _, down, up = newcombe_terms([(p1, wilson_bounds(p1 * n, n), 1), (p2, wilson_bounds(p2 * n, n), -factor)])
    return Interval(p1 - down, p1 + up, "newcombe")


SHARE, Z, SPEC = "heuristic share", "outlier |z|", "specificity"  # the claim's parts
SUPERSEDED = {"c5.share.registered": "8.3", "c5.share.untrained": "8.3", "c5.z.registered": "8.4",
              "c5.z.untrained_labels": "8.4", "c5.pattern": "8.5", "c5.patch.registered": "7.7",
              "c5.patch.random.registered": "7.7", "c5.dose.top": "8.4", "c5.dose.random": "8.4",
              "c5.dose.mismatched": "8.4"}  # the section that superseded each
ADDED = {"c5.share": "8.3", "c5.share.null": "8.3", "c5.z": "8.4", "c5.pattern.jstar": "8.4", "c5.specificity": "8.4",
         "c5.specificity.random": "8.4", "c5.specificity.mismatched": "8.4"}  # the section that added each


def _rows(m: C5Metrics) -> list[tuple]:
    """Each check: id, name, kind, part, at least (or below), value, threshold, interval (section 11: Wilson for
    shares of neurons or of examples patched, Newcombe against twice a null, the bootstrap at j*; the |z|
    medians over pairs and the pattern correlations show a margin only)."""
    th, s, c, z, p, d, jd = THRESHOLDS["C5"], m.shares, m.cut, m.z, m.patch, m.dose, m.jdose
    f, share, z_min, corr = th["untrained_share_factor_min"], th["heuristic_fraction_min"], th["z_ratio_min"], th["pattern_corr_min"]
    revert, control = th["patch_revert_min"], th["control_revert_max"]
    return [
        ("c5.share.registered", "heuristic share of neurons (section-5 rule)", "registered", SHARE, True,
         s.heuristic_fraction, share, _share(s.heuristic_fraction, s.n_neurons)),
        ("c5.share.untrained", f"7.7: heuristic share of neurons vs {f:g} x the untrained model", "null", SHARE, True,
         s.heuristic_fraction, f * numeric(s.untrained_heuristic_fraction),
         _over_null(s.heuristic_fraction, s.untrained_heuristic_fraction, s.n_neurons, f)),
        ("c5.share", "8.3: heuristic share of neurons (cut: 99th percentile of an untrained model)", "amended", SHARE, True,
         c.cut_heuristic_fraction, share, _share(c.cut_heuristic_fraction, c.cut_n_neurons)),
        ("c5.share.null", f"8.3: heuristic share vs {f:g} x the untrained model's share under the cut", "null", SHARE,
         True, c.cut_heuristic_fraction, f * numeric(c.cut_null_fraction),
         _over_null(c.cut_heuristic_fraction, c.cut_null_fraction, c.cut_n_neurons, f)),
        ("c5.z.registered", "median |z| on M over clean", "registered", Z, True, z.z_ratio, z_min, None),
        ("c5.z.untrained_labels", "7.7: median |z| on M over never-trained noisy labels", "null", Z, True,
         m.null.z_null_ratio, z_min, None),
        ("c5.z", "8.4: largest |z| over heuristic units at j*, median on M over clean", "amended", Z, True,
         m.jstar.jstar_z_ratio, z_min, m.jstar.jstar_z_ratio_interval),
        ("c5.pattern", "pattern correlation on M", "registered", Z, True, z.pattern_corr_M, corr, None),
        ("c5.pattern.jstar", "8.4: pattern correlation on M at j*", "amended", Z, True, m.jstar.jstar_pattern_corr_M,
         corr, None),
        ("c5.patch.registered", "patching the last layer reverts M", "registered", SPEC, True, p.patch_revert_last,
         revert, _share(p.patch_revert_last, m.n_memorized)),
        ("c5.patch.random.registered", "random control reverts M", "registered", SPEC, False, p.control_revert_last,
         control, _share(p.control_revert_last, m.n_memorized)),
        ("c5.dose.top", "7.7: top-m patch of the last layer reverts M at some m (m50 exists)", "amended", SPEC, True,
         d.top_revert_max, revert, _share(d.top_revert_max, d.dose_n)),
        ("c5.dose.random", "7.7: m random neurons at m50 revert M", "control", SPEC, False, d.random_revert_m50, control,
         _share(d.random_revert_m50, d.dose_n)),
        ("c5.dose.mismatched", "7.7: another example's top m at m50 revert M", "control", SPEC, False,
         d.mismatched_revert_m50, control, _share(d.mismatched_revert_m50, d.dose_n)),
        ("c5.specificity", "8.4: top-m patch of the 8.3 units at j* reverts M at some dose (m50 exists)", "amended",
         SPEC, True, jd.jstar_top_revert_max, revert, _share(jd.jstar_top_revert_max, jd.jstar_n)),
        ("c5.specificity.random", "8.4: m random 8.3 units at j* (at m50, outside the example's top m) revert M",
         "control", SPEC, False, jd.jstar_random_revert_m50, control, _share(jd.jstar_random_revert_m50, jd.jstar_n)),
        ("c5.specificity.mismatched", "8.4: another example's top m at j* (at m50, outside the example's top m) "
         "revert M", "control", SPEC, False, jd.jstar_mismatched_revert_m50, control,
         _share(jd.jstar_mismatched_revert_m50, jd.jstar_n)),
    ]


def checks(metrics: C5Metrics) -> tuple[C5Metrics, list[Check]]:
    """``metrics`` and C5's checks (section 5, amendments 7.7, 8.3-8.6, section 11). Amended: the share
    under 8.3's cut (>= 0.2 and >= 2 x the null's); at j* (8.4, over the 8.3 units) the |z| ratio, the
    pattern correlation, m50 exists, and its controls stay under 0.1. Superseded and shown: section 5's
    share and 7.7's null (by 8.3), the all-position |z| checks and 7.7's dose-response (by 8.4), the
    all-position pattern (by 8.5), the registered patching (by 7.7). A missing number: unresolved (8.5)."""
    why, out = _c5_missing(metrics), []
    for cid, name, kind, part, up, value, threshold, interval in _rows(metrics):
        c = (at_least if up else below)(CheckLabel(cid, name, kind, part), value, threshold, missing=why[cid[3:]],
                                        interval=interval)
        if cid in SUPERSEDED:
            c = supersede(c, C5_REASONS[SUPERSEDED[cid]], SUPERSEDED[cid])
        elif why["specificity.short"] and cid in ("c5.specificity.random", "c5.specificity.mismatched") \
                and c.passed is not None:
            c = unresolved(c, why["specificity.short"])
        out.append(c.since(ADDED[cid]) if cid in ADDED else c)
    return metrics, out

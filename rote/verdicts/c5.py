"""Claim C5's checks (protocol section 5, amendments 7.7, 8.3-8.6): the heuristic share against the
untrained model's, the outlier |z| against its null, and the specificity of patching."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.heuristics import CutShares, Shares
from ..analysis.intervals import Interval, newcombe_terms, wilson, wilson_bounds
from ..analysis.ranges import is_whole
from ..analysis.neuron_patching import AfterJstarCurves, DoseSummary, JstarDose, LayerPatch
from ..analysis.outliers import AfterJstar, JstarComparison, NullComparison, OutlierComparison, ShiftDirection
from ..claims import THRESHOLDS
from .core import Check, CheckLabel, numeric, at_least, below, flat, from_inline, group, missing_reason, supersede, unresolved
from .core import as_read  # thresholds as of each reading

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
    jdose: JstarDose = group(JstarDose, "jstar_")  # 8.4-8.6: the 8.3 units of the last layer patched at j*
    curves: AfterJstarCurves = group(AfterJstarCurves)  # after j*, shown

    def __post_init__(self):
        v, grid = flat(self), THRESHOLDS["C5"]["m_grid"]
        bad = [k for k in COUNT_FIELDS if v[k] is not None and not (is_whole(v[k]) and v[k] >= 0)]
        bad += [k for k in SHARE_FIELDS if v[k] is not None and not (math.isnan(v[k]) or 0.0 <= v[k] <= 1.0)]
        bad += ["m50"] if v["m50"] not in grid + (None,) else []
        bad += ["jstar_m50"] if v["jstar_m50"] not in grid + (None, v["jstar_units_max"]) else []
        interval = self.jstar.jstar_z_ratio_interval
        bad += [] if interval is None or isinstance(interval, Interval) else ["jstar_z_ratio_interval"]
        if bad:
            raise ValueError(f"C5Metrics: {bad} must be counts (ints >= 0), shares in [0, 1] or NaN, m50 an m of the "
                             f"grid {grid} (jstar_m50 also the all-units dose), an Interval, or None; got "
                             f"{[v[k] for k in bad]}")


def from_record(**values) -> C5Metrics:
    """C5Metrics from the record's flat names (each placed in its group); an unknown name is a TypeError."""
    return from_inline(C5Metrics, values)


def _c5_missing(m: C5Metrics) -> dict:
    """Why each input of C5's checks would be missing, by case (8.5)."""
    d, revert = m.jdose, THRESHOLDS["C5"]["patch_revert_min"]
    no_m = "no memorized example (M is empty)" if m.n_memorized == 0 else None
    no_jstar = "no memorized example with a differing digit (j*)" if not m.jstar.jstar_n_M else None
    no_units, not_run = "no heuristic unit at the j* positions under the 8.3 cut", "the {} classifier was not run"
    no_m50 = no_m or ("no m50 (no m reverts 0.5 of M), so there is no m to read the control at" if m.dose.m50 is None
                      else None)
    no_jstar_m50 = no_jstar or (f"no m50 at j* (no dose tried reverts {revert:g} of M), so there is no m to read the "
                                "control at" if d.m50 is None else None)
    return {
        "share.registered": not_run.format("section-5"),
        "share.untrained": missing_reason((m.shares.heuristic_fraction, not_run.format("section-5")),
                                          (m.shares.untrained_heuristic_fraction, "the untrained model was not classified")),
        "share": not_run.format("8.3"),
        "share.null": missing_reason((m.cut.cut_heuristic_fraction, not_run.format("8.3")),
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
        "dose.random": no_m50 or "the control was not computed at m50",
        "dose.mismatched": no_m50 or "needs a second memorized example",
        "specificity": no_jstar or ("8.6: no memorized example holds an 8.3 unit of the last layer at its j*, so "
                                    "there is nothing to patch" if d.m_tried == [] else
                                    "the top-m patch at j* gave no value"),
        "specificity.random": no_jstar_m50 or "the random control at j* was not drawn",
        "specificity.mismatched": no_jstar_m50 or "needs a second memorized example",
        "specificity.short": (f"8.6: {d.short_m50} of {d.n} memorized examples hold fewer than m50 = {d.m50} 8.3 units "
                              "of the last layer at j* outside their own top m50, so the control cannot draw m50 units "
                              "from them" if d.short_m50 else None),
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
         SPEC, True, jd.top_revert_max, revert, _share(jd.top_revert_max, jd.n)),
        ("c5.specificity.random", "8.4: m random 8.3 units at j* (at m50, outside the example's top m) revert M",
         "control", SPEC, False, jd.random_revert_m50, control, _share(jd.random_revert_m50, jd.n)),
        ("c5.specificity.mismatched", "8.4: another example's top m at j* (at m50, outside the example's top m) "
         "revert M", "control", SPEC, False, jd.mismatched_revert_m50, control,
         _share(jd.mismatched_revert_m50, jd.n)),
    ]


@as_read
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

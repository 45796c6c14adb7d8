"""Claim C4's checks (protocol section 5, amendment 7.6): the distributed-encoding statistics on M
against C and against a pure look-up. Its only caller is :func:`rote.chapters.c4.evaluate`."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields

from .. import fmt
from ..analysis.lookup import LookupStatistics
from ..analysis.neurons import C4Summary
from ..analysis.ranges import check_fields
from ..analysis.ranges import is_whole
from ..claims import THRESHOLDS
from .core import Check, CheckLabel, at_least, group, missing_reason, numeric, supersede, unresolved, validate
from .core import as_read  # thresholds as of each reading


LOOKUP_STATISTICS = ("k50", "activity", "positions")  # the C4 statistics the look-up control of 7.6 judges


@dataclass(frozen=True)
class Setting:
    """What the chapter measured on (None: not given)."""

    n_memorized: int | None = None  # |M|
    n_clean: int | None = None  # |C|
    n_positions: int | None = None  # the prompt positions resampled
    erasure_layers: list[int] | None = None  # the erasure sites' layers ([]: no site, 8.5)
    erasure_rank: int | None = None  # the INLP rank erased
    matched_available: bool | None = None  # whether the information-matched control was computed

    def __post_init__(self):
        count = (lambda x: x is None or (is_whole(x) and x >= 0), "a count (an int >= 0) or None")
        check_fields(self, n_memorized=count, n_clean=count, n_positions=count, erasure_rank=count,
                     erasure_layers=(lambda x: x is None or isinstance(x, list), "a list or None"))


@dataclass(frozen=True)
class OnLookup:
    """The statistics on the known look-up (:class:`rote.analysis.lookup.LookupStatistics`), as the record
    names them; None: not measured."""

    lookup_k50_M: float | None = None
    lookup_k50_C: float | None = None
    lookup_k50_ratio: float | None = None
    lookup_top_activity_median: float | None = None
    lookup_position_drops: list[float] | None = None
    lookup_positions_over_min: int | float | None = None
    lookup_max_position_drop: float | None = None
    lookup_n_lookup: int | None = None

    @classmethod
    def of(cls, found: LookupStatistics | None) -> "OnLookup":
        if found is None:
            return cls()
        s = found.summary
        return cls(s.k50_M, s.k50_C, s.k50_ratio, s.top_activity_median, s.position_drops, s.positions_over_min,
                   s.max_position_drop, found.n_lookup)

    @property
    def measured(self) -> bool:
        """Given, on at least one example (none: unresolved)."""
        n = 1 if self.lookup_n_lookup is None else self.lookup_n_lookup
        return any(getattr(self, f.name) is not None for f in fields(self)) and numeric(n) > 0


@dataclass(frozen=True)
class C4Metrics:
    """One unit's C4 numbers as its record stores them (:func:`rote.verdicts.core.flat`): on M, the
    setting, on the known look-up, then what :func:`checks` reads off them (8.1)."""

    on_m: C4Summary = group(C4Summary)
    setting: Setting = group(Setting)
    lookup: OnLookup = group(OnLookup)
    intermediate_over_matched: float = math.nan  # the INLP drop minus the information-matched control's
    lookup_superseded: list[str] = field(default_factory=list)  # the statistics their look-up control supersedes
    verdict_rests_on: list[str] = field(default_factory=list)  # the parts the amended verdict rests on
    rests_on_intermediate_alone: bool | None = None


@as_read
def checks(summary: C4Summary, lookup: LookupStatistics | None = None,
           setting: Setting = Setting()) -> tuple[C4Metrics, list[Check]]:
    """C4 on M (``summary``) and a known look-up (``lookup``; None: not measured). Section 5's checks
    are registered (activity: the layer's percentile, 8.6); per statistic a ``validity`` check passes where
    the look-up fails it, else the statistic is ``superseded`` (7.6, 8.1, 8.5); the intermediate drop over
    the matched control's is ``amended``. Missing values (8.5) leave their checks unresolved."""
    m = C4Metrics(summary, setting, OnLookup.of(lookup),
                  numeric(summary.intermediate_drop) - numeric(summary.intermediate_matched_drop))
    on_lookup = {} if lookup is None else lookup.summary.intervals
    out: list[Check] = []
    superseded, validated = [], []
    for stat in LOOKUP_STATISTICS:
        judged = _statistic_checks(m, stat, summary.intervals.get(stat), on_lookup.get(stat))
        (validated if judged[0].kind == "registered" else superseded).append(stat)
        out += judged
    out += _intermediate_checks(m, summary.intervals)
    return dataclasses.replace(m, lookup_superseded=superseded, verdict_rests_on=validated + ["intermediate"],
                               rests_on_intermediate_alone=not validated), out


C4_POSITION_GAP = "a position's mean drop is missing (a drop of one of its examples is NaN, 8.6): no count of positions"
C4_ACTIVITY = (f"median activity fraction of top neurons (active: above the layer's "
               f"{100 * THRESHOLDS['C4']['activity_quantile']:g}th percentile on clean inputs, 8.6)")


def _statistic_checks(m: C4Metrics, stat: str, interval, lookup_interval) -> list[Check]:
    """A look-up statistic on M (registered) and its validity check on the known look-up (7.6, 8.1):
    [the statistic (registered, or superseded), the validity check]."""
    th = THRESHOLDS["C4"]
    # nothing was resampled: no count of positions, not a count of 0 (the metrics keep the count)
    positions_on_m = None if m.on_m.position_drops == [] and m.on_m.positions_over_min in (0, None) else m.on_m.positions_over_min
    name, on_m, on_l, thr_m, thr_l, short = {  # value on M, on the look-up, threshold on M, on the look-up
        "k50": (f"median k50 on M vs {th['k50_ratio_min']} x median k50 on C", m.on_m.k50_M, m.lookup.lookup_k50_M,
                th["k50_ratio_min"] * numeric(m.on_m.k50_C), th["k50_ratio_min"] * numeric(m.lookup.lookup_k50_C), "k50 ratio"),
        "activity": (C4_ACTIVITY, m.on_m.top_activity_median, m.lookup.lookup_top_activity_median,
                     th["activity_fraction_min"], th["activity_fraction_min"], "top-neuron activity"),
        "positions": (f"input positions removing >= {th['drop_min']} of P(noisy)", positions_on_m,
                      m.lookup.lookup_positions_over_min, th["positions_min"], th["positions_min"], "input positions"),
    }[stat]
    no_m = C4_NO_M if m.setting.n_memorized == 0 else None
    missing = no_m or {  # why the statistic on M would be missing, by case
        "k50": missing_reason((m.on_m.k50_M, "k50 on M is undefined (no memorized digit with positive attribution to its "
                                        "label)"),
                              (m.on_m.k50_C, (C4_NO_C if m.setting.n_clean == 0 else None) or "k50 on C is undefined (no correct "
                                        "answer digit with positive attribution)")),
        "activity": "the top neurons' activity could not be computed (no top neuron of a memorized digit)",
        "positions": C4_POSITION_GAP if any(math.isnan(numeric(d)) for d in m.on_m.position_drops or [])
        else "the input positions were not resampled"}[stat]
    treatment = at_least(CheckLabel(f"c4.{stat}", name, "registered", stat), on_m, thr_m, missing=missing,
                         interval=interval)
    not_measured = "the known look-up was not measured" if not m.lookup.measured else \
        f"the {short} of the known look-up could not be computed"
    on_lookup = at_least(CheckLabel(f"c4.{stat}.lookup", name, "validity", stat), on_l, thr_l,
                         missing=not_measured, interval=lookup_interval)  # True: the look-up passes
    validity = Check(f"c4.{stat}.lookup", f"7.6 look-up control: {short} on a known look-up fails the statistic",
                     "validity", on_lookup.value, on_lookup.threshold, None, stat, history=(("7.6", "control"), ("8.1", "validity")),
                     margin=None if on_lookup.margin is None else 0.0 - on_lookup.margin,  # > 0: the look-up fails it
                     interval=on_lookup.interval, method=on_lookup.method)
    if not m.lookup.measured or on_lookup.passed is None:
        # 8.5: a statistic whose control was not measured does not decide, and does not make the seed
        # unresolved: it is superseded (shown, counted in the registered reading only)
        return [supersede(treatment, f"8.5: its look-up control was not measured ({not_measured}); a statistic "
                                     "the control does not validate does not count", "8.5"),
                unresolved(validity, not_measured)]
    if on_lookup.passed:
        passes = f"{fmt.plain(on_lookup.value)} vs {fmt.plain(on_lookup.threshold)}"
        validity = validity.replace(passed=False, reason=f"8.1: a known look-up passes it too ({passes})")
    else:
        validity = validity.replace(passed=True)
    return validate(treatment, validity, "supersede", "7.6")


def _intermediate_checks(m: C4Metrics, intervals: dict) -> list[Check]:
    """The intermediate dependency: the registered share of P(noisy) removed, and the amended drop over
    the information-matched control's (7.6); unresolved without a site (8.5) or a matched control."""
    th = THRESHOLDS["C4"]
    no_m = C4_NO_M if m.setting.n_memorized == 0 else None
    # 8.5: the intermediate result is removed where C2's probes find it; with no such layer the
    # removal cannot run, and both intermediate checks are unresolved (never failed by the NaN)
    no_site = C4_NO_SITE if m.setting.erasure_layers is not None and not list(m.setting.erasure_layers) else None
    no_removal = no_site or no_m or ("the intermediate result was not erased (no drop of P(noisy) was measured, or one "
                                     "example's drop is missing, 8.6)")
    registered = at_least(CheckLabel("c4.intermediate.registered", "intermediate result removes share of P(noisy)",
                                     "registered", "intermediate"), m.on_m.intermediate_drop, th["drop_min"],
                          missing=no_removal, interval=intervals.get("intermediate"))
    no_matched = "the information-matched control could not be computed"
    matched = at_least(CheckLabel("c4.intermediate", "7.6: intermediate drop over information-matched control",
                                  "amended", "intermediate"),
                       m.intermediate_over_matched, th["intermediate_over_matched_min"],
                       missing=missing_reason((m.on_m.intermediate_drop, no_removal),
                                              (m.on_m.intermediate_matched_drop, no_matched)),
                       interval=intervals.get("intermediate_over_matched"))
    if no_site:
        return [unresolved(c.replace(value=None, margin=None, interval=None, method="", near=None), no_site)
                for c in (registered, matched)]
    if m.setting.matched_available is False and matched.passed is not None:
        matched = unresolved(matched, no_matched)
    return [registered, matched]


C4_NO_M = "no memorized example (M is empty)"
C4_NO_C = "no correctly answered example (C is empty)"
C4_NO_SITE = ("8.5: the intervention cannot run: no layer carries the intermediate result at 5 x chance on C "
              "(no erasure site)")

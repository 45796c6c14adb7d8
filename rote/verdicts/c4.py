"""Claim C4's checks (protocol section 5, amendment 7.6): the distributed-encoding statistics on M
against C and against a pure look-up. Its only caller is :func:`rote.chapters.c4.evaluate`."""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field, fields

from .. import fmt
from ..claims import THRESHOLDS
from .core import Check, CheckLabel, numeric, at_least, missing_reason, supersede, unresolved, validate


LOOKUP_STATISTICS = ("k50", "activity", "positions")  # the C4 statistics the look-up control of 7.6 judges
JUDGED = ("lookup_superseded", "verdict_rests_on", "rests_on_intermediate_alone")  # what the checks decide
NOT_METRICS = ("tables", "intervals")  # what a summary holds beside its numbers: tables, section 11's intervals


def _is_count(x) -> bool:
    return x is None or (isinstance(x, numbers.Integral) and not isinstance(x, bool) and x >= 0)


@dataclass(frozen=True)
class C4Metrics:
    """One unit's C4 numbers, as its record stores them (``per_seed[i]["metrics"]`` is ``asdict``).

    On M, from :func:`rote.analysis.neurons.c4_summary`: the median k50 on M and on C and their ratio,
    the median activity share of the top neurons, the mean drop of P(noisy label) per prompt position
    (``position_drops``), how many reach ``drop_min`` and the largest, and the mean drop when the
    intermediate result is erased (INLP), under random subspaces and under the information-matched
    erasure. Then the sizes of M and C, the number of resampled positions, the erasure sites' layers
    (``[]``: no site), the INLP rank and whether the matched control was computed
    (:func:`rote.chapters.c4.evaluate`). ``lookup_*``: the same statistics on the known look-up
    (:func:`rote.analysis.lookup.lookup_statistics`; ``lookup_n_lookup`` its examples). None: not
    given. Last, what :func:`checks` reads off them: the intermediate drop over the matched control's,
    the statistics superseded by their look-up control, the parts the amended verdict rests on, and
    whether that is the intermediate dependency alone."""

    k50_M: float | None
    k50_C: float | None
    k50_ratio: float | None
    top_activity_median: float | None
    position_drops: list[float] | None
    positions_over_min: int | float | None
    max_position_drop: float | None
    intermediate_drop: float | None
    intermediate_control_drop: float | None
    intermediate_matched_drop: float | None
    n_memorized: int | None
    n_clean: int | None
    n_positions: int | None
    erasure_layers: list[int] | None
    erasure_rank: int | None
    matched_available: bool | None
    lookup_k50_M: float | None
    lookup_k50_C: float | None
    lookup_k50_ratio: float | None
    lookup_top_activity_median: float | None
    lookup_position_drops: list[float] | None
    lookup_positions_over_min: int | float | None
    lookup_max_position_drop: float | None
    lookup_n_lookup: int | None
    intermediate_over_matched: float
    lookup_superseded: list[str] = field(default_factory=list)  # filled in by checks
    verdict_rests_on: list[str] = field(default_factory=list)  # filled in by checks
    rests_on_intermediate_alone: bool | None = None  # filled in by checks

    def __post_init__(self):
        for name in ("n_memorized", "n_clean", "n_positions", "lookup_n_lookup", "erasure_rank"):
            if not _is_count(getattr(self, name)):
                raise ValueError(f"C4Metrics.{name} must be a count (an int >= 0) or None, got {getattr(self, name)!r}")
        for name in ("position_drops", "lookup_position_drops", "erasure_layers"):
            if not (getattr(self, name) is None or isinstance(getattr(self, name), list)):
                raise ValueError(f"C4Metrics.{name} must be a list or None, got {getattr(self, name)!r}")
        if not set(self.lookup_superseded) | set(self.verdict_rests_on) <= {*LOOKUP_STATISTICS, "intermediate"}:
            raise ValueError(f"unknown C4 part in {self.lookup_superseded} / {self.verdict_rests_on}")

    @classmethod
    def measured(cls, summary: dict, lookup: dict | None = None) -> "C4Metrics":
        """The numbers on M (``summary``: :func:`rote.analysis.neurons.c4_summary` with the sizes and the
        erasure of :func:`rote.chapters.c4.evaluate`) and on the known look-up (``lookup``:
        :func:`rote.analysis.lookup.lookup_statistics`, its ``tables`` are no metric; None or empty: not
        measured), and the intermediate drop over the matched control's; a number not given is None."""
        given = {**{k: v for k, v in summary.items() if k not in NOT_METRICS},
                 **{f"lookup_{k}": v for k, v in (lookup or {}).items() if k not in NOT_METRICS}}
        names = [f.name for f in fields(cls) if f.name != "intermediate_over_matched" and f.name not in JUDGED]
        unknown = set(given) - set(names)
        if unknown:
            raise TypeError(f"not a C4 measurement: {sorted(unknown)}")
        over = numeric(given.get("intermediate_drop")) - numeric(given.get("intermediate_matched_drop"))
        return cls(**{name: given.get(name) for name in names}, intermediate_over_matched=over)

    @property
    def lookup_measured(self) -> bool:
        """Whether the known look-up was measured: given, on at least one example (none: unresolved)."""
        given = (self.lookup_k50_M, self.lookup_k50_C, self.lookup_k50_ratio, self.lookup_top_activity_median,
                 self.lookup_position_drops, self.lookup_positions_over_min, self.lookup_max_position_drop,
                 self.lookup_n_lookup)
        n = 1 if self.lookup_n_lookup is None else self.lookup_n_lookup
        return any(x is not None for x in given) and numeric(n) > 0


def checks(summary: dict, lookup: dict | None = None) -> tuple[C4Metrics, list[Check]]:
    """C4 from :func:`rote.analysis.neurons.c4_summary` on M (``summary``) and the same statistics
    on a known look-up (``lookup``: :func:`rote.analysis.lookup.lookup_statistics`; THR atomic facts,
    FDA a look-up grafted into the model; None or empty: not computed), read as :class:`C4Metrics`.

    Section 5's four checks are registered. The activity check reads "active above its 90th
    percentile" as the layer's percentile (amendment 2, 8.6: each neuron's own would make every neuron
    active on 10% of the inputs, and the check could not fail); its name says so. Amendment 1, 7.6 as
    amendment 2, 8.1 reads it, per
    statistic (k50 ratio, activity of the top neurons, input positions): a ``validity`` check
    (``c4.<statistic>.lookup``) applies the statistic's own threshold to the look-up and passes when
    the look-up fails it. It never decides: where the look-up passes the statistic (it calls a known
    look-up "distributed", so it cannot tell the two apart) the statistic is ``superseded`` in the
    amended reading; where the look-up was not measured it is ``superseded`` too (8.5: a statistic
    its control does not validate does not count, and does not make the seed unresolved). The
    intermediate result is also judged (``amended``) as the INLP drop minus the information-matched
    control's drop (``intermediate_matched_drop``) >= ``intermediate_over_matched_min``; unresolved
    when ``matched_available`` is False. ``verdict_rests_on`` names what still decides (the
    validated statistics and the intermediate dependency).

    Section 11: every check has its margin (a validity check's: positive where the look-up fails the
    statistic); a check on M or on the look-up has the sampling interval its summary's ``intervals``
    give (:func:`rote.analysis.neurons.c4_intervals`: a bootstrap over examples), where given.

    Missing values (8.5): ``erasure_layers == []`` (no layer carries the intermediate result at
    5 x chance on C) leaves both intermediate checks unresolved, the intervention cannot run;
    ``n_memorized`` = 0, an undefined k50, no resampled position leave their checks unresolved
    with that case."""
    m = C4Metrics.measured(summary, lookup)
    on_m, on_lookup = summary.get("intervals") or {}, (lookup or {}).get("intervals") or {}
    checks: list[Check] = []
    superseded, validated = [], []
    for stat in LOOKUP_STATISTICS:
        judged = _statistic_checks(m, stat, on_m.get(stat), on_lookup.get(stat))
        (validated if judged[0].kind == "registered" else superseded).append(stat)
        checks += judged
    checks += _intermediate_checks(m, on_m)
    # 8.1: the statistics that still decide
    m = dataclasses.replace(m, lookup_superseded=superseded, verdict_rests_on=validated + ["intermediate"],
                            rests_on_intermediate_alone=not validated)
    return m, checks


C4_ACTIVITY = (f"median activity fraction of top neurons (active: above the layer's "
               f"{100 * THRESHOLDS['C4']['activity_quantile']:g}th percentile on clean inputs, 8.6)")


def _statistic_checks(m: C4Metrics, stat: str, interval, lookup_interval) -> list[Check]:
    """A look-up statistic on M (registered) and its validity check on the known look-up (7.6, 8.1):
    [the statistic (registered, or superseded), the validity check]."""
    th = THRESHOLDS["C4"]
    # nothing was resampled: no count of positions, not a count of 0 (the metrics keep the count)
    positions_on_m = None if m.position_drops == [] and m.positions_over_min in (0, None) else m.positions_over_min
    name, on_m, on_l, thr_m, thr_l, short = {  # value on M, on the look-up, threshold on M, on the look-up
        "k50": (f"median k50 on M vs {th['k50_ratio_min']} x median k50 on C", m.k50_M, m.lookup_k50_M,
                th["k50_ratio_min"] * numeric(m.k50_C), th["k50_ratio_min"] * numeric(m.lookup_k50_C), "k50 ratio"),
        "activity": (C4_ACTIVITY, m.top_activity_median, m.lookup_top_activity_median,
                     th["activity_fraction_min"], th["activity_fraction_min"], "top-neuron activity"),
        "positions": (f"input positions removing >= {th['drop_min']} of P(noisy)", positions_on_m,
                      m.lookup_positions_over_min, th["positions_min"], th["positions_min"], "input positions"),
    }[stat]
    no_m = C4_NO_M if m.n_memorized == 0 else None
    missing = no_m or {  # why the statistic on M would be missing, by case
        "k50": missing_reason((m.k50_M, "k50 on M is undefined (no memorized digit with positive attribution to its "
                                        "label)"),
                              (m.k50_C, (C4_NO_C if m.n_clean == 0 else None) or "k50 on C is undefined (no correct "
                                        "answer digit with positive attribution)")),
        "activity": "the top neurons' activity could not be computed (no top neuron of a memorized digit)",
        "positions": "the input positions were not resampled"}[stat]
    treatment = at_least(CheckLabel(f"c4.{stat}", name, "registered", stat), on_m, thr_m, missing=missing,
                         interval=interval)
    not_measured = "the known look-up was not measured" if not m.lookup_measured else \
        f"the {short} of the known look-up could not be computed"
    on_lookup = at_least(CheckLabel(f"c4.{stat}.lookup", name, "validity", stat), on_l, thr_l,
                         missing=not_measured, interval=lookup_interval)  # True: the look-up passes
    validity = Check(f"c4.{stat}.lookup", f"7.6 look-up control: {short} on a known look-up fails the statistic",
                     "validity", on_lookup.value, on_lookup.threshold, None, stat, history=(("7.6", "control"), ("8.1", "validity")),
                     margin=None if on_lookup.margin is None else 0.0 - on_lookup.margin,  # > 0: the look-up fails it
                     interval=on_lookup.interval, method=on_lookup.method)
    if not m.lookup_measured or on_lookup.passed is None:
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
    no_m = C4_NO_M if m.n_memorized == 0 else None
    # 8.5: the intermediate result is removed where C2's probes find it; with no such layer the
    # removal cannot run, and both intermediate checks are unresolved (never failed by the NaN)
    no_site = C4_NO_SITE if m.erasure_layers is not None and not list(m.erasure_layers) else None
    no_removal = no_site or no_m or "the intermediate result was not erased (no drop of P(noisy) was measured)"
    registered = at_least(CheckLabel("c4.intermediate.registered", "intermediate result removes share of P(noisy)",
                                     "registered", "intermediate"), m.intermediate_drop, th["drop_min"],
                          missing=no_removal, interval=intervals.get("intermediate"))
    no_matched = "the information-matched control could not be computed"
    matched = at_least(CheckLabel("c4.intermediate", "7.6: intermediate drop over information-matched control",
                                  "amended", "intermediate"),
                       m.intermediate_over_matched, th["intermediate_over_matched_min"],
                       missing=missing_reason((m.intermediate_drop, no_removal),
                                              (m.intermediate_matched_drop, no_matched)),
                       interval=intervals.get("intermediate_over_matched"))
    if no_site:
        return [unresolved(c.replace(value=None, margin=None, interval=None, method="", near=None), no_site)
                for c in (registered, matched)]
    if m.matched_available is False and matched.passed is not None:
        matched = unresolved(matched, no_matched)
    return [registered, matched]


C4_NO_M = "no memorized example (M is empty)"


C4_NO_C = "no correctly answered example (C is empty)"


C4_NO_SITE = ("8.5: the intervention cannot run: no layer carries the intermediate result at 5 x chance on C "
              "(no erasure site)")

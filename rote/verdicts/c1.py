"""Claim C1's checks (section 5, amendments 7.1-7.2, 8.6, section 11) from a noisy run's metric
table and its noise-free twin's. Caller: :func:`rote.chapters.c1.evaluate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..claims import THRESHOLDS
from ..analysis.curves import (FINAL_WINDOW, SampleSizes, crossing, final, first_evaluated, interpolate,
                               missing_in_window, never_evaluated, unplaced_crossing, Plateau, plateau)
from ..analysis.intervals import Interval, newcombe, wilson
from .core import Check, CheckLabel, at_least, supersede
from .trained import plateaued, twin_trained, validated
from .core import as_read  # thresholds as of each reading


@dataclass(frozen=True)
class C1Metrics:
    """One unit's C1 numbers, in the record's order: steps are training steps (None: never crossed),
    "final" the mean of the last 5 evaluations (7.1, 8.6), "last" the last evaluation (section 5)."""

    t_gen: int | None  # first evaluated step with gen >= t_gen_level (section 5)
    t_mem: int | None  # first evaluated step with mem >= t_mem_level (section 5)
    t_gen_interpolated: float | None  # where gen crosses t_gen_level, linear between evaluations (7.2)
    t_mem_interpolated: float | None  # where mem crosses t_mem_level, linear between evaluations (7.2)
    eval_every: int  # steps between two evaluations: crossings closer than this are unresolved
    last_gen: float
    last_mem: float
    last_clean_gen: float  # the noise-free twin's last gen
    final_gen: float
    final_mem: float
    final_rec: float
    final_fit: float
    clean_final_gen: float  # the noise-free twin's final gen
    gen_cost: float  # clean_final_gen - final_gen: what the noise costs generalization
    rec_peak_before_t_mem: float  # the highest rec up to the interpolated t_mem (the whole run if none)
    gen_at_t_mem: float  # gen interpolated at t_mem_interpolated (NaN if none)
    steps: int  # the noisy run's last evaluated step
    # section 11: the examples the shares are measured on (None: not given, no interval): the noisy run's
    # test set (gen) and noisy training examples (mem, rec), and the noise-free twin's test set
    n_test: int | None = None
    n_noisy: int | None = None
    clean_n_test: int | None = None
    # amendment 3, 12.3: mean mem over the 5 evaluations ending at 90% of the steps (at that step)
    mem_at_90: float = math.nan
    mem_at_90_step: int | None = None

    def __post_init__(self):
        if self.eval_every <= 0:
            raise ValueError(f"eval_every must be a positive number of steps, got {self.eval_every!r}")
        for name in ("t_gen", "t_mem", "t_gen_interpolated", "t_mem_interpolated"):
            step = getattr(self, name)
            if step is not None and not math.isnan(step) and not 0 <= step <= self.steps:  # NaN: unplaced (8.5)
                raise ValueError(f"{name} must be None, NaN or a step of the run (0 .. {self.steps}), got {step!r}")


@as_read
def checks(noisy: pd.DataFrame, clean: pd.DataFrame, eval_every: int, sizes: SampleSizes | None = None,
           clean_sizes: SampleSizes | None = None) -> tuple[C1Metrics, list[Check]]:
    """C1 from a noisy run's metric table and its twin's: section 5's checks (``superseded``), 7.1-7.2's
    (interpolated crossings, mean of the last 5) and amendment 3's validity checks (12.2 the twin trained, 12.3
    mem plateaued), which leave the final checks they validate unresolved where they fail
    (:func:`rote.verdicts.trained.validated`); ``sizes``, ``clean_sizes``: section 11's sample sizes."""
    metrics = _metrics(noisy, clean, eval_every, sizes, clean_sizes)
    (order_registered, order), (registered, amended) = _order_checks(noisy, metrics), _final_checks(noisy, clean, metrics)
    twin, flat = _validity_checks(metrics)
    mem, gen, benign = amended
    amended = [*validated(mem, [flat]), *validated(gen, [flat]), *validated(benign, [twin, flat])]
    return metrics, [order_registered, *registered, order, *amended, twin, flat]


def _validity_checks(m: C1Metrics) -> tuple[Check, Check]:
    """Amendment 3: the noise-free twin trained (12.2) and the noisy run's mem plateaued (12.3)."""
    th = THRESHOLDS["C1"]
    return (twin_trained(CheckLabel("c1.twin_trained", "noise-free twin's final gen (it trained)", "validity",
                                    "benign gap"), m.clean_final_gen, th["twin_gen_min"], "the noise-free twin"),
            plateaued(CheckLabel("c1.plateau", "rise of mem over the last 10% of the steps (it plateaued)", "validity",
                                 "final mem"), Plateau(m.final_mem, m.mem_at_90, m.mem_at_90_step),
                      th["plateau_rise_max"], "the noisy run"))


def _metrics(noisy, clean, eval_every, sizes, clean_sizes) -> C1Metrics:
    th = THRESHOLDS["C1"]
    x_mem = crossing(noisy, "mem", th["t_mem_level"])
    before_mem = noisy if x_mem is None else noisy[noisy["step"] <= x_mem]
    at_90 = plateau(noisy, "mem")
    return C1Metrics(
        t_gen=first_evaluated(noisy, "gen", th["t_gen_level"]), t_mem=first_evaluated(noisy, "mem", th["t_mem_level"]),
        t_gen_interpolated=crossing(noisy, "gen", th["t_gen_level"]), t_mem_interpolated=x_mem,
        eval_every=eval_every,
        last_gen=final(noisy, "gen", 1), last_mem=final(noisy, "mem", 1),
        last_clean_gen=final(clean, "gen", 1),
        final_gen=final(noisy, "gen"), final_mem=final(noisy, "mem"), final_rec=final(noisy, "rec"),
        final_fit=final(noisy, "fit"), clean_final_gen=final(clean, "gen"),
        gen_cost=final(clean, "gen") - final(noisy, "gen"),
        rec_peak_before_t_mem=float(before_mem["rec"].max()) if len(before_mem) else math.nan,
        gen_at_t_mem=interpolate(noisy, "gen", x_mem),
        steps=int(noisy["step"].iloc[-1]),
        n_test=None if sizes is None else sizes.n_test, n_noisy=None if sizes is None else sizes.n_noisy,
        clean_n_test=None if clean_sizes is None else clean_sizes.n_test,
        mem_at_90=at_90.earlier, mem_at_90_step=at_90.at_step,
    )


def _order_checks(noisy: pd.DataFrame, m: C1Metrics) -> tuple[Check, Check]:
    """The ordering part: section 5's first evaluated steps (superseded) and 7.2's interpolated crossings.
    Section 11: a crossing has no sample of examples, so its checks carry a margin only (the amended one
    passes when the gap reaches one evaluation interval: margin = gap - eval_every)."""
    th = THRESHOLDS["C1"]
    t_gen, t_mem, x_gen, x_mem, eval_every = m.t_gen, m.t_mem, m.t_gen_interpolated, m.t_mem_interpolated, m.eval_every
    never = {c: never_evaluated(noisy, c) for c in ("gen", "mem")}
    # a NaN before gen's crossing, or (gen crossing) before mem's, leaves the order unknown (curves.crossing)
    unplaced = unplaced_crossing(noisy, "gen", th["t_gen_level"]) or (
        unplaced_crossing(noisy, "mem", th["t_mem_level"]) if x_gen is not None else "")
    # section 5: t_gen and t_mem are crossings; a run that never crosses has none (a fail by the rule:
    # "never generalized" fails C1), a run never evaluated has no value (unresolved, 8.5)
    never_gen = (f"section 5: the noisy run never generalized (gen never reached {th['t_gen_level']}), so the rule "
                 "cannot come first: a fail")
    never_mem = (f"section 5: mem never reached {th['t_mem_level']}, so there is no t_mem and t_gen < t_mem does not "
                 "hold: a fail")
    if x_gen is None:
        order, gap = False, None
    elif x_mem is None:
        order, gap = True, None  # the rule came first; mem never got there (judged by final mem)
    else:
        gap = x_mem - x_gen
        order = None if abs(gap) < eval_every else gap > 0
    order_reason = "" if order is not None else "t_mem - t_gen is within one evaluation interval"
    if never["gen"] or (never["mem"] and x_gen is not None) or unplaced:
        order, gap, order_reason = None, None, never["gen"] or never["mem"] or unplaced
    elif x_gen is None:
        order_reason = never_gen
    registered_reason = never["gen"] or never["mem"] or unplaced or (never_gen if t_gen is None else never_mem
                                                                     if t_mem is None else "")
    registered_gap = None if t_gen is None or t_mem is None or math.isnan(t_mem - t_gen) else t_mem - t_gen
    # registered_gap > 0: the rule first
    return (
        Check("c1.order.registered", "t_gen < t_mem (first evaluated steps)", "superseded", registered_gap, 0,
              None if never["gen"] or never["mem"] or unplaced else registered_gap is not None and registered_gap > 0,
              "ordering",
              reason="7.2: crossings interpolated; a gap under one evaluation is unresolved"
                     + (f"; {registered_reason}" if registered_reason else ""),
              margin=None if registered_gap is None else float(registered_gap),
              history=(("5", "registered"), ("7.2", "superseded"))),
        Check("c1.order", "t_gen < t_mem (interpolated; unresolved within one evaluation)", "amended", gap, eval_every,
              order, "ordering", reason=order_reason, margin=None if gap is None else float(gap - eval_every)),
    )


def _missing(table: pd.DataFrame, column: str, who: str, window: int = FINAL_WINDOW) -> str | None:
    """Why a final value is missing (None: it is not). 8.6: a NaN anywhere in the window makes it missing."""
    gaps = missing_in_window(table, column, window)
    if not gaps:
        return None
    if window == 1:
        what = "its last evaluation has"
    elif gaps >= min(window, len(table)):
        what = f"its last {window} evaluations have"
    else:
        what = f"{gaps} of its last {window} evaluations {'has' if gaps == 1 else 'have'}"
    return f"final {column} of the {who} could not be computed: {what} no {column} value"


def _share(value: float, n: int | None) -> Interval | None:
    """Section 11: Wilson's interval of a final share of ``n`` examples. The final value is the mean of the
    last 5 evaluations of the same examples, not one sample of 5n: the interval treats it as one
    evaluation's share of n examples (k = value x n)."""
    if n is None or math.isnan(value):
        return None
    return wilson(value * n, n)


def _gap(value: float, n: int | None, twin: float, twin_n: int | None) -> Interval | None:
    """Section 11: the benign gap compares the noisy run's gen with the twin's gen - 0.05: Newcombe's interval
    of gen - twin gen (two test sets of their own), shifted onto gen's scale (+ twin gen), so that it
    contains the threshold exactly when the difference's interval contains -0.05. Shares as in :func:`_share`."""
    if n is None or twin_n is None or math.isnan(value) or math.isnan(twin):
        return None
    diff = newcombe(value * n, n, twin * twin_n, twin_n)
    return None if diff is None else diff.shifted(twin)


def _final_checks(noisy: pd.DataFrame, clean: pd.DataFrame, m: C1Metrics) -> tuple[list[Check], list[Check]]:
    """Final mem, final gen and the benign gap: section 5's last evaluation (superseded) and 7.1's mean of the
    last 5, each with its section-11 interval (Wilson; Newcombe for the gap)."""
    th, out = THRESHOLDS["C1"], []
    for kind, window, what, (mem, gen, twin) in (
            ("registered", 1, "last evaluation", (m.last_mem, m.last_gen, m.last_clean_gen)),
            ("amended", FINAL_WINDOW, "mean of last 5", (m.final_mem, m.final_gen, m.clean_final_gen))):
        suffix, no_gen = ".registered" if kind == "registered" else "", _missing(noisy, "gen", "noisy run", window)
        out.append([
            at_least(CheckLabel(f"c1.mem{suffix}", f"final mem ({what})", kind, "final mem"), mem, th["final_mem_min"],
                     missing=_missing(noisy, "mem", "noisy run", window), interval=_share(mem, m.n_noisy)),
            at_least(CheckLabel(f"c1.gen{suffix}", f"final gen ({what})", kind, "final gen"), gen, th["final_gen_min"],
                     missing=no_gen, interval=_share(gen, m.n_test)),
            at_least(CheckLabel(f"c1.benign{suffix}", f"gen vs noise-free gen ({what})", kind, "benign gap"), gen,
                     twin - th["benign_gen_drop_max"], missing=no_gen or _missing(clean, "gen", "noise-free twin", window),
                     interval=_gap(gen, m.n_test, twin, m.clean_n_test))])
    return [supersede(c, "7.1: final = mean of the last 5 evaluations", "7.1") for c in out[0]], out[1]

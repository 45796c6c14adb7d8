"""Claim C1's checks (protocol section 5, amendments 7.1-7.2): from a noisy run's metric table and
its noise-free twin's, :func:`checks` returns the metrics (:class:`C1Metrics`) and
the checks. Its only caller is :func:`rote.chapters.c1.evaluate`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..claims import THRESHOLDS
from ..analysis.curves import FINAL_WINDOW, never_evaluated, crossing, final, first_evaluated, interpolate
from .core import Check, CheckLabel, at_least, supersede


@dataclass(frozen=True)
class C1Metrics:
    """One unit's C1 numbers, read off the metric tables of its noisy run and its noise-free twin (the
    record stores them as a dict, per_seed[i]["metrics"], in this order). Steps are training steps; a
    crossing that never happens is None; "final" is the mean of the last 5 evaluations (7.1), "last"
    the last evaluation (section 5)."""

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

    def __post_init__(self):
        if self.eval_every <= 0:
            raise ValueError(f"eval_every must be a positive number of steps, got {self.eval_every!r}")
        for name in ("t_gen", "t_mem", "t_gen_interpolated", "t_mem_interpolated"):
            step = getattr(self, name)
            if step is not None and not 0 <= step <= self.steps:
                raise ValueError(f"{name} must be None or a step of the run (0 .. {self.steps}), got {step!r}")


def checks(noisy: pd.DataFrame, clean: pd.DataFrame, eval_every: int) -> tuple[C1Metrics, list[Check]]:
    """C1 from the metric tables of a noisy run and its noise-free twin.

    Registered (section 5, now ``superseded``): first evaluated steps, strict ``t_gen < t_mem``,
    final = the last evaluation. Amended (7.1, 7.2): interpolated crossings, ``unresolved`` when
    they are closer than one evaluation interval, final = mean of the last 5 evaluations."""
    th = THRESHOLDS["C1"]
    t_gen, t_mem = first_evaluated(noisy, "gen", th["t_gen_level"]), first_evaluated(noisy, "mem", th["t_mem_level"])
    x_gen, x_mem = crossing(noisy, "gen", th["t_gen_level"]), crossing(noisy, "mem", th["t_mem_level"])
    before_mem = noisy if x_mem is None else noisy[noisy["step"] <= x_mem]
    metrics = C1Metrics(
        t_gen=t_gen, t_mem=t_mem, t_gen_interpolated=x_gen, t_mem_interpolated=x_mem,
        eval_every=eval_every,
        last_gen=final(noisy, "gen", 1), last_mem=final(noisy, "mem", 1),
        last_clean_gen=final(clean, "gen", 1),
        final_gen=final(noisy, "gen"), final_mem=final(noisy, "mem"), final_rec=final(noisy, "rec"),
        final_fit=final(noisy, "fit"), clean_final_gen=final(clean, "gen"),
        gen_cost=final(clean, "gen") - final(noisy, "gen"),
        rec_peak_before_t_mem=float(before_mem["rec"].max()) if len(before_mem) else math.nan,
        gen_at_t_mem=interpolate(noisy, "gen", x_mem),
        steps=int(noisy["step"].iloc[-1]),
    )
    registered_order = t_gen is not None and t_mem is not None and t_gen < t_mem
    never = {c: never_evaluated(noisy, c) for c in ("gen", "mem")}
    lvl = {"gen": th["t_gen_level"], "mem": th["t_mem_level"]}
    # section 5: t_gen and t_mem are crossings; a run that never crosses has none (a fail by the rule:
    # "never generalized" fails C1), a run never evaluated has no value (unresolved, 8.5)
    never_gen = (f"section 5: the noisy run never generalized (gen never reached {lvl['gen']}), so the rule cannot "
                 "come first: a fail")
    never_mem = (f"section 5: mem never reached {lvl['mem']}, so there is no t_mem and t_gen < t_mem does not hold: "
                 "a fail")
    if x_gen is None:
        order, gap = False, None
    elif x_mem is None:
        order, gap = True, None  # the rule came first; mem never got there (judged by final mem)
    else:
        gap = x_mem - x_gen
        order = None if abs(gap) < eval_every else gap > 0
    order_reason = "" if order is not None else "t_mem - t_gen is within one evaluation interval"
    if never["gen"] or (never["mem"] and x_gen is not None):
        order, gap, order_reason = None, None, never["gen"] or never["mem"]
    elif x_gen is None:
        order_reason = never_gen
    registered_reason = never["gen"] or never["mem"] or (never_gen if t_gen is None else never_mem if t_mem is None
                                                         else "")
    drop = th["benign_gen_drop_max"]

    def last(table, column, who, window=FINAL_WINDOW):  # why a final value is missing (None: it is not)
        if len(table) and not math.isnan(final(table, column, window)):
            return None
        span = "last evaluation has" if window == 1 else f"last {window} evaluations have"
        return f"final {column} of the {who} could not be computed: its {span} no {column} value"

    checks = [
        Check("c1.order.registered", "t_gen < t_mem (first evaluated steps)", "superseded",
              None if t_gen is None or t_mem is None else t_mem - t_gen, 0,
              None if never["gen"] or never["mem"] else bool(registered_order), "ordering", section5=True,
              reason="7.2: crossings interpolated; a gap under one evaluation is unresolved"
                     + (f"; {registered_reason}" if registered_reason else "")),
        supersede(at_least(CheckLabel("c1.mem.registered", "final mem (last evaluation)", "registered", "final mem"),
                           metrics.last_mem, th["final_mem_min"], missing=last(noisy, "mem", "noisy run", 1)),
                  "7.1: final = mean of the last 5 evaluations"),
        supersede(at_least(CheckLabel("c1.gen.registered", "final gen (last evaluation)", "registered", "final gen"),
                           metrics.last_gen, th["final_gen_min"], missing=last(noisy, "gen", "noisy run", 1)),
                  "7.1: final = mean of the last 5 evaluations"),
        supersede(at_least(CheckLabel("c1.benign.registered", "gen vs noise-free gen (last evaluation)", "registered",
                                      "benign gap"), metrics.last_gen, metrics.last_clean_gen - drop,
                           missing=last(noisy, "gen", "noisy run", 1) or last(clean, "gen", "noise-free twin", 1)),
                  "7.1: final = mean of the last 5 evaluations"),
        Check("c1.order", "t_gen < t_mem (interpolated; unresolved within one evaluation)", "amended", gap, eval_every,
              order, "ordering", reason=order_reason),
        at_least(CheckLabel("c1.mem", "final mem (mean of last 5)", "amended", "final mem"), metrics.final_mem,
                 th["final_mem_min"], missing=last(noisy, "mem", "noisy run")),
        at_least(CheckLabel("c1.gen", "final gen (mean of last 5)", "amended", "final gen"), metrics.final_gen,
                 th["final_gen_min"], missing=last(noisy, "gen", "noisy run")),
        at_least(CheckLabel("c1.benign", "gen vs noise-free gen (mean of last 5)", "amended", "benign gap"),
                 metrics.final_gen, metrics.clean_final_gen - drop,
                 missing=last(noisy, "gen", "noisy run") or last(clean, "gen", "noise-free twin")),
    ]
    return metrics, checks

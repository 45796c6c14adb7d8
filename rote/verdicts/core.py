"""Every check of claims C1-C5, and the verdicts computed from them (also X1's, whose checks
:mod:`rote.x1` computes), in one place.

A chapter hands the outputs of its analyses (tables and numbers, no verdicts) to the claim's
function here (:func:`c1`, :func:`c2`, ...), which returns the claim's metrics and its checks
(:class:`Check`: a stable ``id``, display ``name``, ``kind``, ``value``, ``threshold``, ``passed``,
the required ``part`` it decides, ``section5`` and a one-line ``reason``). Amendment 2, section 8.1:

- ``registered``: a check of section 5, exactly as written;
- ``amended``, ``control`` (a specificity control the claim must beat), ``null``: checks the
  amendments add or substitute;
- ``validity``: a check of the instrument (can the statistic tell a known look-up apart; can a
  true claim reach the threshold). It never decides: where it fails, the check it validates is
  ``superseded`` or unresolved in the amended reading (:func:`validate`);
- ``superseded``: shown, not counted in the amended reading, with its reason.

The **registered reading** counts the checks of section 5 as written (``section5``, also once
superseded); the **amended reading** counts ``registered``, ``amended``, ``control`` and ``null``.
One seed's verdict in a reading is ``fail`` if a counted check fails, else ``unresolved`` if one is
unresolved or a required part of the claim (:data:`REQUIRED_PARTS`) has no counted check, else
``pass``. Across seeds: ``holds``, ``fails``, ``unresolved`` (every seed alike), else ``mixed`` with
its three counts; a single seed is labelled ``(1 seed)``.

The analysis modules never import this layer; notebooks only show what it decides.
"""

from __future__ import annotations

import math
import time
import dataclasses
from dataclasses import asdict, dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd

from . import claims
from .claims import THRESHOLDS

KINDS = ("registered", "amended", "control", "null", "validity", "superseded")
DECIDING = ("registered", "amended", "control", "null")  # amendment 2, 8.1: the kinds that decide
READINGS = ("registered", "amended")
FINAL_WINDOW = 5  # amendment 7.1: "final" metrics are the mean of the last 5 evaluations

# Amendment 2, 8.1: a seed is unresolved when one of its claim's required parts has no deciding check
# left. Each check names its part; C4's look-up statistics decide only where their control validates
# them, so they are not a required part.
REQUIRED_PARTS = {
    "C1": ("ordering", "final mem", "final gen", "benign gap"),
    "C2": ("probes", "lens"),
    "C3": ("erasure", "overlap"),
    "C4": ("intermediate",),
    "C5": ("heuristic share", "outlier |z|", "specificity"),
    "X1": ("memorization", "cost at the largest width", "not rising"),
}
# Where the protocol registers what "fails" means across seeds more narrowly than "every seed fails":
# X1 fails only when the cost at the largest width is too high on every seed (protocol 9); seeds that
# fail only because the cost rises with width make it mixed (:func:`aggregate`'s ``failing``).
FAILS_ONLY_ON = {"X1": "x1.cost_largest"}


@dataclass(frozen=True)
class Check:
    """One check of a claim on one seed.

    ``id`` is stable (``c4.k50``, ``c4.k50.lookup``, ``c5.share``): records, chapters, the scorecard
    and tests find a check by it, never by its display ``name``. ``kind`` is its role (8.1);
    ``section5`` marks a check of protocol section 5 as written, the checks the registered reading
    counts (also once superseded). ``part`` is the required part of the claim it decides; ``reason``
    says in one line why it is superseded or unresolved. ``passed`` is True, False or None
    (unresolved)."""

    id: str
    name: str
    kind: str
    value: Any
    threshold: Any
    passed: bool | None
    part: str = ""
    section5: bool | None = None
    reason: str = ""
    # What amendment 2 changed: "" nothing; "new" it added the check; else the kind the check had
    # under amendment 1 (the "amendment 1" reading counts it as that, to show what moved).
    was: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.id or self.id != self.id.strip() or " " in self.id:
            raise ValueError(f"a check needs a stable id without spaces, got {self.id!r}")
        if self.section5 is None:
            object.__setattr__(self, "section5", self.kind == "registered")

    def to_dict(self) -> dict:
        return asdict(self)

    def replace(self, **changes) -> "Check":
        return dataclasses.replace(self, **changes)


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


class MissingValue(ValueError):
    """A check was handed a missing value (None or NaN) without the reason it is missing. Amendment 2,
    8.5: a NaN never decides; the check is unresolved with its reason, or the build fails (this)."""


def _compare(check_id: str, name: str, kind: str, value, threshold, ok, part: str, missing: str | None) -> Check:
    v, t = _num(value), _num(threshold)
    if math.isnan(v) or math.isnan(t):  # 8.5: neither pass nor fail, with the reason the caller states
        if not missing:
            raise MissingValue(f"{check_id}: the {'value' if math.isnan(v) else 'threshold'} is missing and the caller "
                               "gave no reason (amendment 2, 8.5: a NaN never decides)")
        return Check(check_id, name, kind, None if math.isnan(v) else v, None if math.isnan(t) else t, None, part,
                     reason=missing)
    return Check(check_id, name, kind, v, t, bool(ok(v, t)), part)


def at_least(check_id: str, name: str, kind: str, value, threshold, part: str = "", *, missing: str | None) -> Check:
    """``value >= threshold``. ``missing`` (required) is why the value or the threshold would be
    missing, naming the case: where either is None or NaN the check is unresolved with that reason
    (amendment 2, 8.5: a NaN never decides); with no reason it raises :class:`MissingValue`."""
    return _compare(check_id, name, kind, value, threshold, lambda v, t: v >= t, part, missing)


def below(check_id: str, name: str, kind: str, value, threshold, part: str = "", *, missing: str | None) -> Check:
    """``value < threshold``; missing values as in :func:`at_least`."""
    return _compare(check_id, name, kind, value, threshold, lambda v, t: v < t, part, missing)


def above(check_id: str, name: str, kind: str, value, threshold, part: str = "", *, missing: str | None) -> Check:
    """``value > threshold`` (strictly); missing values as in :func:`at_least`."""
    return _compare(check_id, name, kind, value, threshold, lambda v, t: v > t, part, missing)


def missing_reason(*cases: tuple[Any, str]) -> str | None:
    """The reason of the first ``(value, reason)`` whose value is missing (None or NaN), else None:
    a check's ``missing`` argument, one named case per input it reads."""
    return next((why for value, why in cases if math.isnan(_num(value))), None)


def unresolved(check: Check, reason: str) -> Check:
    """``check`` with no outcome (its analysis could not run, or could not decide), and why."""
    return check.replace(passed=None, reason=reason)


def supersede(check: Check, reason: str, amendment2: bool = False) -> Check:
    """``check`` kept in the record and shown, but no longer counted in the amended reading
    (``amendment2``: superseded by amendment 2, which records the kind it had before). An unresolved
    or failed check keeps the reason it had (why its value is missing, the rule it fails by) after
    the new one."""
    keep = check.reason if check.reason and check.passed is not True else ""
    return check.replace(kind="superseded", reason=f"{reason}; {keep}" if keep else reason,
                         was=check.kind if amendment2 else check.was)


def validate(check: Check, validity: Check, on_fail: str) -> list[Check]:
    """Amendment 2, 8.1: ``check`` and the ``validity`` check of its instrument, as the amended reading
    takes them. A validity check never decides. Where it passes, ``check`` counts as it is. Where it
    fails (or could not be measured), ``check`` stops counting in the amended reading:

    - ``on_fail="supersede"``: the statistic cannot discriminate (a known look-up passes it too): it
      is ``superseded``, shown and not counted;
    - ``on_fail="unresolve"``: its threshold is out of reach of a true claim: in the amended reading
      the seed can neither pass nor fail on it (a section-5 check stays as it is in the registered
      reading, and an unresolved copy, id ``<id>.amended``, stands for it in the amended one).

    The rule reads the validity check only, never the value on the treatment: it can take a pass or a
    fail away, and never makes one."""
    if validity.kind != "validity" or on_fail not in ("supersede", "unresolve"):
        raise ValueError("validate needs a validity check and on_fail 'supersede' or 'unresolve'")
    if validity.passed is True:
        return [check, validity]
    why = validity.reason or (f"{validity.id} failed: {_short(validity.value)} vs {_short(validity.threshold)}"
                              if validity.passed is False else f"{validity.id} could not be measured")
    if on_fail == "supersede" and validity.passed is False:
        return [supersede(check, why), validity]
    stand_in = check.replace(id=f"{check.id}.amended", kind="amended" if check.section5 else check.kind,
                             section5=False, was="new")
    return [supersede(check, f"judged as {check.id}.amended", amendment2=True), unresolved(stand_in, why), validity]


def find(checks: Iterable[Check | dict], check_id: str) -> Check | dict | None:
    """The check with id ``check_id`` (None when the list has none)."""
    return next((c for c in checks if _get(c, "id") == check_id), None)


def _get(check, key):
    return check.get(key) if isinstance(check, dict) else getattr(check, key)


def counts_in(check: Check | dict, reading: str) -> bool:
    """Whether ``check`` counts in ``reading``: the registered reading counts the checks of section 5
    as written; the amended reading counts the deciding kinds (8.1), never validity or superseded."""
    if reading == "registered":
        return bool(_get(check, "section5"))
    if reading == "amended":
        return _get(check, "kind") in DECIDING
    if reading == AMENDMENT1:  # what amendment 1 counted, to show what amendment 2 moved
        was = _get(check, "was") or ""
        return (was == "" and _get(check, "kind") in DECIDING) or was in DECIDING or was == "ceiling"
    raise ValueError(f"reading must be one of {READINGS + (AMENDMENT1,)}, got {reading!r}")


AMENDMENT1 = "amendment 1"  # a reading for the record of what moved: section 7 without section 8


def _outcome(check: Check | dict, reading: str) -> bool | None:
    if reading == AMENDMENT1 and _get(check, "was") == "ceiling":  # 7.5's ceiling passed whenever computed
        return None if _get(check, "value") is None else True
    return _get(check, "passed")


def claim_of(checks: Iterable[Check | dict]) -> str | None:
    """The claim the checks belong to, from their ids (``c4.k50`` -> ``C4``)."""
    for c in checks:
        head = str(_get(c, "id")).split(".")[0].upper()
        if head in REQUIRED_PARTS:
            return head
    return None


# -- readings and aggregation -----------------------------------------------------------------
def seed_verdict(checks: Iterable[Check | dict], reading: str) -> str:
    """One seed's verdict in the ``registered`` or ``amended`` reading (amendment 2, 8.1): ``fail`` if
    a check that counts fails; else ``unresolved`` if one is unresolved or a required part of the
    claim has no counted check; else ``pass``."""
    checks = list(checks)
    counted = [c for c in checks if counts_in(c, reading)]
    if not counted:
        return "unresolved"
    results = [_outcome(c, reading) for c in counted]
    if any(r is False for r in results):
        return "fail"
    parts = {_get(c, "part") for c in counted}
    required = set(REQUIRED_PARTS.get(claim_of(checks), ())) if reading != AMENDMENT1 else set()
    if any(r is None for r in results) or required - parts:
        return "unresolved"
    return "pass"


def missing_parts(checks: Iterable[Check | dict], reading: str = "amended") -> list[str]:
    """The required parts with no check that counts in ``reading`` (each makes the seed unresolved)."""
    checks = list(checks)
    parts = {_get(c, "part") for c in checks if counts_in(c, reading)}
    return [p for p in REQUIRED_PARTS.get(claim_of(checks), ()) if p not in parts]


def aggregate(verdicts: list[str], failing: list[bool] | None = None) -> str:
    """The verdict across seeds (amendment 2, 8.1): ``holds`` (every seed passes), ``fails`` (every
    seed fails), ``unresolved`` (every seed unresolved), else ``mixed`` with its three counts
    (``mixed: 2 pass, 0 fail, 1 unresolved``); a single seed is labelled ``(1 seed)``. ``failing``
    (one flag per seed, :data:`FAILS_ONLY_ON`) narrows ``fails``: every seed must fail and be flagged."""
    n = len(verdicts)
    if n == 0:
        return "not run"
    counts = {v: sum(x == v for x in verdicts) for v in ("pass", "fail", "unresolved")}
    narrowed = failing is not None and not all(f for v, f in zip(verdicts, failing) if v == "fail")
    if n == 1:
        return f"{'mixed' if narrowed else verdicts[0]} (1 seed)"
    if counts["pass"] == n:
        return "holds"
    if counts["fail"] == n and not narrowed:
        return "fails"
    if counts["unresolved"] == n:
        return "unresolved"
    return f"mixed: {counts['pass']} pass, {counts['fail']} fail, {counts['unresolved']} unresolved"


# -- C1 ---------------------------------------------------------------------------------------
def crossing(metrics: pd.DataFrame, column: str, level: float) -> float | None:
    """The interpolated step at which ``column`` first reaches ``level`` (linear between the two
    evaluations around the crossing); None if it never does (section 7.2)."""
    steps, values = metrics["step"].to_numpy(float), metrics[column].to_numpy(float)
    for i, v in enumerate(values):
        if v >= level:
            if i == 0 or math.isnan(values[i - 1]):
                return float(steps[i])
            v0, s0 = values[i - 1], steps[i - 1]
            return float(s0 + (level - v0) / (v - v0) * (steps[i] - s0))
    return None


def first_evaluated(metrics: pd.DataFrame, column: str, level: float) -> int | None:
    """The first evaluated step with ``column >= level`` (section 5's t_gen and t_mem)."""
    hit = metrics.loc[metrics[column] >= level, "step"]
    return int(hit.iloc[0]) if len(hit) else None


def interpolate(metrics: pd.DataFrame, column: str, step: float | None) -> float:
    if step is None:
        return math.nan
    return float(np.interp(step, metrics["step"].to_numpy(float), metrics[column].to_numpy(float)))


def _never_evaluated(metrics: pd.DataFrame, column: str) -> str:
    """Why ``column`` has no value at all in ``metrics`` (empty: it has one)."""
    if column not in metrics or not len(metrics) or metrics[column].isna().all():
        return f"{column} was never evaluated on the noisy run"
    return ""


def final(metrics: pd.DataFrame, column: str, window: int = FINAL_WINDOW) -> float:
    """Mean of ``column`` over the last ``window`` evaluations (1: the last evaluation)."""
    return float(metrics[column].iloc[-window:].mean())


def c1(noisy: pd.DataFrame, clean: pd.DataFrame, eval_every: int) -> tuple[dict, list[Check]]:
    """C1 from the metric tables of a noisy run and its noise-free twin.

    Registered (section 5, now ``superseded``): first evaluated steps, strict ``t_gen < t_mem``,
    final = the last evaluation. Amended (7.1, 7.2): interpolated crossings, ``unresolved`` when
    they are closer than one evaluation interval, final = mean of the last 5 evaluations."""
    th = THRESHOLDS["C1"]
    t_gen, t_mem = first_evaluated(noisy, "gen", th["t_gen_level"]), first_evaluated(noisy, "mem", th["t_mem_level"])
    x_gen, x_mem = crossing(noisy, "gen", th["t_gen_level"]), crossing(noisy, "mem", th["t_mem_level"])
    before_mem = noisy if x_mem is None else noisy[noisy["step"] <= x_mem]
    metrics = {
        "t_gen": t_gen, "t_mem": t_mem, "t_gen_interpolated": x_gen, "t_mem_interpolated": x_mem,
        "eval_every": eval_every,
        "last_gen": final(noisy, "gen", 1), "last_mem": final(noisy, "mem", 1),
        "last_clean_gen": final(clean, "gen", 1),
        "final_gen": final(noisy, "gen"), "final_mem": final(noisy, "mem"), "final_rec": final(noisy, "rec"),
        "final_fit": final(noisy, "fit"), "clean_final_gen": final(clean, "gen"),
        "gen_cost": final(clean, "gen") - final(noisy, "gen"),
        "rec_peak_before_t_mem": float(before_mem["rec"].max()) if len(before_mem) else math.nan,
        "gen_at_t_mem": interpolate(noisy, "gen", x_mem),
        "steps": int(noisy["step"].iloc[-1]),
    }
    registered_order = t_gen is not None and t_mem is not None and t_gen < t_mem
    never = {c: _never_evaluated(noisy, c) for c in ("gen", "mem")}
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
        supersede(at_least("c1.mem.registered", "final mem (last evaluation)", "registered", metrics["last_mem"],
                           th["final_mem_min"], "final mem", missing=last(noisy, "mem", "noisy run", 1)),
                  "7.1: final = mean of the last 5 evaluations"),
        supersede(at_least("c1.gen.registered", "final gen (last evaluation)", "registered", metrics["last_gen"],
                           th["final_gen_min"], "final gen", missing=last(noisy, "gen", "noisy run", 1)),
                  "7.1: final = mean of the last 5 evaluations"),
        supersede(at_least("c1.benign.registered", "gen vs noise-free gen (last evaluation)", "registered",
                           metrics["last_gen"], metrics["last_clean_gen"] - drop, "benign gap",
                           missing=last(noisy, "gen", "noisy run", 1) or last(clean, "gen", "noise-free twin", 1)),
                  "7.1: final = mean of the last 5 evaluations"),
        Check("c1.order", "t_gen < t_mem (interpolated; unresolved within one evaluation)", "amended", gap, eval_every,
              order, "ordering", reason=order_reason),
        at_least("c1.mem", "final mem (mean of last 5)", "amended", metrics["final_mem"], th["final_mem_min"],
                 "final mem", missing=last(noisy, "mem", "noisy run")),
        at_least("c1.gen", "final gen (mean of last 5)", "amended", metrics["final_gen"], th["final_gen_min"],
                 "final gen", missing=last(noisy, "gen", "noisy run")),
        at_least("c1.benign", "gen vs noise-free gen (mean of last 5)", "amended", metrics["final_gen"],
                 metrics["clean_final_gen"] - drop, "benign gap",
                 missing=last(noisy, "gen", "noisy run") or last(clean, "gen", "noise-free twin")),
    ]
    return metrics, checks


# -- C2 ---------------------------------------------------------------------------------------
def c2(summary: pd.DataFrame, lens_verdict: dict, lens_table: pd.DataFrame, n_M: int, n_C: int, task: str,
       bridge_r2: pd.DataFrame | dict | None = None, masked_tail: pd.DataFrame | dict | None = None,
       lens_share: pd.DataFrame | None = None) -> tuple[dict, list[Check]]:
    """C2 from the probe summary (best layer per headline group: ``acc_M``, ``acc_C``, ``chance``)
    and the logit-lens verdict on M (``true_ahead_intermediate``, ``noisy_only_last``), plus the
    inputs of amendment 7.4:

    - ``bridge_r2`` (THR): the bridge read at r2, one summary row
      (:func:`rote.analysis.probes.position_summary`). The registered bridge check at r1 is
      ``superseded`` (at r1 the bridge is an atomic fact of the input, so M = C there by
      construction); the amended check is the same pair of thresholds at r2.
    - ``masked_tail`` (THR): the true tail with the noisy label's class masked on M and a random
      wrong class on C, chance 1 / (n_classes - 1), one summary row
      (:func:`rote.analysis.probes.masked_summary`). The unmasked registered check is
      ``superseded``: trained where the true tail is the output, the probe reads the output, which on
      M is the noisy label (``reads_masked_M`` records how often).
    - ``lens_share``: per layer ``n``, ``ahead``, ``null`` (:func:`rote.analysis.lens.ahead_share`).
      ``null`` check: at the intermediate layer (1..L-1) with the largest share, the lower bound of
      the Wilson interval (level ``lens_interval_level``) must be above the training-label prior's share.

    The reachable check (8.2, a ``validity`` check) reads C alone (8.5): the probe's accuracy on C at
    C's own best layer (``acc_C_best`` of the summary row), against the chance of the row; the other
    checks read the best layer on M, as section 5 does.

    Missing values (8.5): a missing input leaves its check unresolved with the reason that names the
    case (no memorized example to probe, no correct example, chance not measured, no memorized
    example with a differing token for the lens, an input not given); a probe accuracy of 0 on M is a
    fail by section 5 ("at least 5 times chance"), with that reason."""
    th = THRESHOLDS["C2"]
    metrics: dict = {"n_M": n_M, "n_C": n_C}
    checks: list[Check] = []
    replaced = C2_SUPERSEDED if task == "thr" else {}
    for row in summary.itertuples():
        key = row.group.replace(" ", "_")
        acc_c_best = getattr(row, "acc_C_best", None)  # C at C's own best layer (8.5), for the reachable check
        metrics.update({f"{key}_best_layer": row.best_layer, f"{key}_acc_M": row.acc_M,
                        f"{key}_acc_C": row.acc_C, f"{key}_chance": row.chance,
                        f"{key}_best_layer_C": _layer(getattr(row, "best_layer_C", None)), f"{key}_acc_C_best": acc_c_best,
                        f"{key}_chance_reachable": chance_reachable(acc_c_best, row.chance)})
        if row.group in replaced:
            name, why = replaced[row.group]
            checks += [supersede(c, why) for c in _c2_probe_pair(key, f"probe {name}", "registered", row.acc_M,
                                                                 row.acc_C, row.chance, validated=False)]
        else:
            checks += _c2_probe_pair(key, f"probe {row.group}", "registered", row.acc_M, row.acc_C, row.chance,
                                     acc_c_best=acc_c_best)
    ahead, last = lens_verdict.get("true_ahead_intermediate"), lens_verdict.get("noisy_only_last")
    no_lens = _c2_lens_missing(lens_table)
    # a model with one block has no intermediate layer: section 5's lens pattern cannot hold (a fail by
    # the rule, whatever M holds); otherwise a lens with nothing to read is unresolved (8.5)
    one_block = lens_table is not None and 0 < len(lens_table) <= 2
    for check_id, name, outcome, key in (
            ("c2.lens.ahead", "logit lens: true ahead at an intermediate layer", ahead, "true_ahead_intermediate"),
            ("c2.lens.last", "logit lens: noisy wins only in the last layer(s)", last, "noisy_only_last")):
        if one_block:
            checks.append(Check(check_id, name, "registered", outcome, True, False, "lens",
                                reason=C2_ONE_BLOCK if no_lens or outcome is None else ""))
            continue
        why = no_lens or ("" if outcome is not None else f"the lens verdict ({key}) was not given to the verdict")
        checks.append(Check(check_id, name, "registered", None if why else outcome, True, None if why else bool(outcome),
                            "lens", reason=why))
    metrics.update({"lens_takeover_layer": lens_verdict.get("takeover_layer"),
                    "lens_p_true_by_layer": [float(x) for x in lens_table.p_true],
                    "lens_p_noisy_by_layer": [float(x) for x in lens_table.p_noisy]})
    if task == "thr":
        for key, name, given in (("bridge_r2", C2_AMENDED["bridge"], bridge_r2),
                                 ("tail_masked", C2_AMENDED["true tail"], masked_tail)):
            row = _c2_row(given)
            if row is None:
                checks.append(Check(f"c2.probe.{key}", f"probe {name}", "amended", None, None, None, "probes",
                                    reason="not given to the verdict"))
                continue
            metrics.update({f"{key}_{k}": row.get(k) for k in ("best_layer", "acc_M", "acc_C", "chance")})
            if "reads_masked_M" in row:
                metrics[f"{key}_reads_noisy_M"] = row.get("reads_masked_M")
                metrics[f"{key}_acc_M_unmasked"] = row.get("acc_M_unmasked")
            metrics.update({f"{key}_best_layer_C": _layer(row.get("best_layer_C")), f"{key}_acc_C_best": row.get("acc_C_best")})
            metrics[f"{key}_chance_reachable"] = chance_reachable(row.get("acc_C_best"), row.get("chance"))
            checks += _c2_probe_pair(key, f"probe {name}", "amended", row.get("acc_M"), row.get("acc_C"),
                                     row.get("chance"), acc_c_best=row.get("acc_C_best"))
    share, check = c2_lens_share(lens_share, th["lens_interval_level"])
    metrics.update(share)
    checks.append(check)
    return metrics, checks


# The THR checks that amendment 7.4 replaces (display name, reason), and their replacements.
C2_SUPERSEDED = {"bridge": ("bridge at r1", "7.4: at r1 the bridge is an atomic fact of the input; judged at r2"),
                 "true tail": ("true tail unmasked", "7.4: the probe reads the output; judged with the noisy class masked")}
C2_AMENDED = {"bridge": "7.4 bridge at r2",
              "true tail": "7.4 true tail, noisy class masked (C: a random wrong one)"}
C2_LENS_NULL = "7.4 lens: true-ahead share, Wilson lower bound vs training-label prior"
C2_NO_C = "no correctly answered example (C) for this probe target"


C2_NO_M = "no memorized example (M) for this probe target"
C2_NO_CHANCE = "chance not measured for this probe target"
C2_M_ZERO = "section 5: the probe reads nothing on M (accuracy 0), which is below 5 x chance: a fail"
C2_NO_C_BEST = "C's accuracy at its own best layer was not given to the verdict (8.5: never a layer chosen by M)"


def _c2_probe_pair(key: str, name: str, kind: str, acc_m, acc_c, chance, validated: bool = True,
                   acc_c_best=None) -> list[Check]:
    """Section 5's probe thresholds for one probe target ``key``: acc_M >= 0.8 x acc_C
    (``c2.probe.<key>.ratio``, both at the best layer on M) and acc_M >= 5 x chance
    (``c2.probe.<key>.chance``; acc_M = 0 fails by section 5), and, where ``validated``, amendment 2's
    chance ceiling (8.2, ``c2.probe.<key>.reachable``, a validity check: ``acc_c_best``, the accuracy
    on C at C's own best layer (8.5), >= 5 x chance); where it fails, the chance check is unresolved
    in the amended reading. A missing accuracy or chance leaves the checks that read it unresolved,
    with the reason (no M, no C, chance not measured)."""
    th = THRESHOLDS["C2"]
    no_m = C2_NO_M if math.isnan(_num(acc_m)) else None
    no_c = C2_NO_C if math.isnan(_num(acc_c)) else None
    no_chance = C2_NO_CHANCE if math.isnan(_num(chance)) else None
    ratio = at_least(f"c2.probe.{key}.ratio", f"{name}: M vs {th['probe_ratio_min']} x C", kind, acc_m,
                     th["probe_ratio_min"] * _num(acc_c), "probes", missing=no_c or no_m)
    chance_name = f"{name}: M vs {th['probe_over_chance_min']} x chance"
    if _num(acc_m) == 0:  # section 5: a probe that reads nothing on M fails, whatever chance is
        threshold = th["probe_over_chance_min"] * _num(chance)
        over_chance = Check(f"c2.probe.{key}.chance", chance_name, kind, 0.0, None if math.isnan(threshold) else threshold,
                            False, "probes", reason=C2_M_ZERO)
    else:
        over_chance = at_least(f"c2.probe.{key}.chance", chance_name, kind, acc_m,
                               th["probe_over_chance_min"] * _num(chance), "probes", missing=no_m or no_chance)
    if not validated:
        return [ratio, over_chance]
    no_c_best = (C2_NO_C_BEST if acc_c_best is None else C2_NO_C) if math.isnan(_num(acc_c_best)) else None
    reachable = at_least(f"c2.probe.{key}.reachable", f"{name}: C at its own best layer vs "
                         f"{th['probe_over_chance_min']} x chance (can a true claim reach it?)", "validity", acc_c_best,
                         th["probe_over_chance_min"] * _num(chance), "probes",
                         missing=no_c_best or no_chance).replace(was="new")
    if reachable.passed is False:
        reachable = reachable.replace(reason=f"8.2: out of reach: C itself reaches {_short(reachable.value)} "
                                             f"< {_short(reachable.threshold)}")
    return [ratio, *validate(over_chance, reachable, "unresolve")]


def chance_reachable(acc_c, chance) -> bool | None:
    """Whether a true claim could pass C2's chance check: the probe's accuracy on C (what M reaches
    if M carries the result as C does) is at least 5 x chance. ``False`` means the check fails
    whatever the model does on M, so that failure says nothing about the claim (amendment 2, 8.2:
    the chance check is then unresolved in the amended reading). ``None`` when either number is
    missing."""
    c, ch = _num(acc_c), _num(chance)
    if math.isnan(c) or math.isnan(ch):
        return None
    return bool(c >= THRESHOLDS["C2"]["probe_over_chance_min"] * ch)


def _layer(x) -> int | None:
    return None if x is None or math.isnan(_num(x)) else int(x)


def _c2_row(given) -> dict | None:
    if given is None:
        return None
    if isinstance(given, pd.DataFrame):
        return None if not len(given) else given.iloc[0].to_dict()
    return dict(given)


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion k / n at ``level`` (NaN, NaN when n = 0)."""
    if not n:
        return math.nan, math.nan
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))  # contains k / n exactly, also at 0 and n


C2_NO_LENS = "no memorized example with a differing token: the logit lens has nothing to read on M"
C2_ONE_BLOCK = "section 5: the lens pattern is read at an intermediate layer and a one-block model has none: a fail"


def _c2_lens_missing(lens_table) -> str:
    """Why the logit lens of M has no value (empty: it has one)."""
    if lens_table is None:
        return "the logit-lens table was not given to the verdict"
    p_true = lens_table["p_true"] if "p_true" in lens_table else pd.Series(dtype=float)
    return C2_NO_LENS if not len(p_true) or p_true.isna().all() else ""


def c2_lens_share(table: pd.DataFrame | None, level: float) -> tuple[dict, Check]:
    """Amendment 7.4's lens null from :func:`rote.analysis.lens.ahead_share`: the intermediate layer
    (1..L-1) with the largest share of M with the true token ahead, its Wilson interval, and the check
    that the interval's lower bound is above the training-label prior's share (strictly)."""
    if table is None:
        return {}, Check("c2.lens.null", C2_LENS_NULL, "null", None, None, None, "lens", reason="not given to the verdict")
    last = int(table.layer.max()) if len(table) else 0
    inner = table[(table.layer > 0) & (table.layer < last) & (table.n > 0)]
    null = _num(table.null.iloc[0]) if len(table) else math.nan
    if not len(inner):
        # no intermediate layer (a 1-block model: 7.4 reads "at some intermediate layer", which it has
        # not: a fail by the rule), or no memorized example with a differing token (n = 0: unresolved)
        no_layer = bool(len(table)) and last <= 1
        return ({"lens_share_best_layer": None, "lens_share": math.nan, "lens_share_null": null,
                 "lens_share_n": int(table.n.max()) if len(table) else 0, "lens_intermediate_layers": max(last - 1, 0)},
                Check("c2.lens.null", C2_LENS_NULL, "null", None, None if math.isnan(null) else null,
                      False if no_layer else None, "lens",
                      reason="7.4: the share is read at an intermediate layer and the model has none: a fail"
                      if no_layer else "no memorized example with a differing token: no share to read"
                      if len(table) else "the lens share table is empty"))
    best = inner.loc[inner.ahead.idxmax()]
    k, n = int(best.ahead), int(best.n)
    lo, hi = wilson_interval(k, n, level)
    metrics = {"lens_share_best_layer": int(best.layer), "lens_share": k / n, "lens_share_lo": lo,
               "lens_share_hi": hi, "lens_share_null": null, "lens_share_n": n,
               "lens_share_by_layer": [_num(x) for x in table.share], "lens_intermediate_layers": last - 1}
    check = above("c2.lens.null", C2_LENS_NULL, "null", lo, null, "lens",
                  missing="the training-label prior's share (the null) was not measured")
    return metrics, check


# -- C3 ---------------------------------------------------------------------------------------
C3_CONTROLS = ("random", "matched")  # erasure controls of the sweep: random subspace; information-matched (7.5)
C3_OVERLAP = "circuit overlap (Jaccard of top 5%)"  # the registered overlap check (superseded below its ceiling)


C3_NO_SITE = ("8.5: the intervention cannot run: no layer carries the intermediate result at 5 x chance on C "
              "(no erasure site)")
C3_EMPTY = {"mem": "no memorized example (M is empty)", "gen": "no correctly answered example (C is empty)",
            "mem_unconnected": "no memorized example whose noisy label is unconnected to the bridge"}
C3_NO_CONTROL = {"random": "the random-subspace control was not computed",
                 "matched": "the information-matched control was not computed"}


def c3(sweep: pd.DataFrame, rank: int, overlap: dict, task: str,
       statistics: dict | None = None, erasure_layers: list | None = None) -> tuple[dict, list[Check]]:
    """C3 from the erasure sweep (rows rank, method INLP / random / matched, set mem / gen /
    mem_unconnected, accuracy; rank 0 = before), the all-component overlap of section 5
    (``jaccard``, ``random``: log-prob attribution) and ``statistics``, the overlap statistics of
    amendment 1, 7.5 per attribution metric ({"logprob": ..., "logit_diff": ...}, each
    :func:`rote.analysis.attribution.overlap_statistics`: ``jaccard``, ``split_half_C``,
    ``split_half_M``, ``spearman``, ``ci_low``, ``ci_high``). ``erasure_layers``: the erasure sites'
    layers (where C2's probes find the result at 5 x chance on C); None: not given.

    Registered (section 5): mem drop over the random control >= 0.3 (THR: also on the unconnected
    subset); overlap >= 0.5; overlap >= 3 x random. Amended (7.5): the same margin over the larger
    of the two controls' drops (random, information-matched); gen on C drops more under INLP than
    under the larger control (the sanity check, > 0). The split-half ceiling J(C, C') is a
    ``validity`` check (amendment 2, 8.1: what identical circuits reach, against the overlap
    threshold); where it is below 0.5 the registered overlap check is ``superseded`` by
    J(M, C) >= 0.5 x J(C, C') on the logit-difference attribution (``amended``).

    Missing values (8.5): with no erasure site (``erasure_layers == []``) the intervention cannot
    run, and every erasure check, registered and amended, is unresolved with that reason. Otherwise a
    check whose number is missing is unresolved with its case: an empty set, a control not computed
    (no matched control in the sweep), the overlap not computed (M or C empty), no statistics."""
    th = THRESHOLDS["C3"]
    methods = set(sweep.method)
    no_site = erasure_layers is not None and not list(erasure_layers)

    def acc(s, method, r):
        hit = sweep[(sweep.set == s) & (sweep.method == method) & (sweep["rank"] == r)].accuracy
        return float(hit.iloc[0]) if len(hit) else math.nan

    metrics: dict = {"erasure_rank": rank}
    for s in [x for x in ("mem", "gen", "mem_unconnected") if x in set(sweep.set)]:
        before, inlp = acc(s, "INLP", 0), acc(s, "INLP", rank)
        drops = {m: before - acc(s, m, rank) for m in C3_CONTROLS}
        larger = max(drops.values()) if not any(math.isnan(d) for d in drops.values()) else math.nan
        metrics.update({f"{s}_before": before, f"{s}_inlp": inlp, f"{s}_random": acc(s, "random", rank),
                        f"{s}_matched": acc(s, "matched", rank),
                        f"{s}_drop_over_control": (before - inlp) - drops["random"],
                        f"{s}_drop_over_matched": (before - inlp) - drops["matched"],
                        f"{s}_drop_over_larger_control": (before - inlp) - larger})
    margin = th["erasure_mem_drop_over_control_min"]
    no_matched = None if "matched" in methods else C3_NO_CONTROL["matched"]

    def why(s: str, controls: tuple) -> str | None:
        """Why the erasure check on set ``s`` against ``controls`` has no value, naming the case."""
        if no_site:
            return C3_NO_SITE
        if s not in set(sweep.set):
            return f"the set {s} is not in the erasure sweep" if s != "mem_unconnected" else C3_EMPTY[s]
        return missing_reason((acc(s, "INLP", 0), C3_EMPTY[s]),
                              (acc(s, "INLP", rank), f"the INLP erasure was not computed at rank {rank}"),
                              *[(acc(s, c, rank), C3_NO_CONTROL[c]) for c in controls])

    def erasure_check(check_id, name, kind, key, s, controls, compare=at_least, threshold=margin):
        reason = why(s, controls)
        check = compare(check_id, name, kind, metrics.get(key), threshold, "erasure",
                        missing=reason or f"{key} could not be computed")
        if no_site:  # 8.5: unresolved whatever the sweep holds
            return unresolved(check.replace(value=None), C3_NO_SITE)
        if "matched" in controls and no_matched:  # a control the amended check needs was not run
            return unresolved(check, no_matched)
        return check

    checks = [erasure_check("c3.erasure.random", "erasure: mem drop over random control", "registered",
                            "mem_drop_over_control", "mem", ("random",)),
              erasure_check("c3.erasure", "erasure: mem drop over the larger control (random, information-matched)",
                            "amended", "mem_drop_over_larger_control", "mem", C3_CONTROLS)]
    if task == "thr":
        checks += [erasure_check("c3.erasure.unconnected.random", "erasure: unconnected mem drop over random control",
                                 "registered", "mem_unconnected_drop_over_control", "mem_unconnected", ("random",)),
                   erasure_check("c3.erasure.unconnected", "erasure: unconnected mem drop over the larger control",
                                 "amended", "mem_unconnected_drop_over_larger_control", "mem_unconnected", C3_CONTROLS)]
    checks.append(erasure_check("c3.erasure.gen", "erasure lowers gen on C more than the larger control (sanity)",
                                "amended", "gen_drop_over_larger_control", "gen", C3_CONTROLS, compare=above,
                                threshold=th["gen_drop_over_control_above"]))
    j, rand = _num(overlap.get("jaccard")), _num(overlap.get("random"))
    metrics.update({"overlap": j, "overlap_random": rand, "overlap_over_random": j / rand if rand else math.nan})
    stats = statistics or {}
    for metric, short in (("logprob", "lp"), ("logit_diff", "ld")):
        for key, value in (stats.get(metric) or {}).items():
            if key in ("jaccard", "random", "split_half_C", "split_half_M", "spearman", "ci_low", "ci_high"):
                metrics[f"overlap_{short}_{key}"] = _num(value)
    ceiling = metrics.get("overlap_lp_split_half_C", math.nan)  # what identical circuits reach with the registered metric
    ceiling_ld = metrics.get("overlap_ld_split_half_C", math.nan)
    j_ld = metrics.get("overlap_ld_jaccard", math.nan)
    metrics["overlap_ld_over_ceiling"] = j_ld / ceiling_ld if ceiling_ld else math.nan
    validity = at_least("c3.overlap.ceiling", "split-half ceiling J(C, C') (log-prob) reaches the overlap threshold",
                        "validity", ceiling, th["overlap_min"], "overlap", missing="the split-half ceiling was not computed")
    validity = validity.replace(was="ceiling")
    if validity.passed is False:
        validity = validity.replace(reason=f"7.5: out of reach: two halves of C overlap only {_short(ceiling)}")
    no_overlap = ("the circuit overlap was not given to the verdict" if not overlap else
                  "the circuit overlap could not be computed: M or C has no example to attribute")
    registered = validate(at_least("c3.overlap.registered", C3_OVERLAP, "registered", j, th["overlap_min"], "overlap",
                                   missing=no_overlap), validity, "supersede")
    metrics["overlap_superseded"] = registered[0].kind == "superseded"
    checks += [*registered, at_least("c3.overlap.random", f"circuit overlap vs {th['overlap_over_random_min']} x random",
                                     "registered", j, th["overlap_over_random_min"] * rand, "overlap",
                                     missing=no_overlap)]
    if validity.passed is False:
        checks.append(at_least("c3.overlap", f"circuit overlap vs {th['ceiling_ratio_min']} x split-half ceiling "
                               "(logit difference)", "amended", j_ld, th["ceiling_ratio_min"] * ceiling_ld, "overlap",
                               missing="the logit-difference statistics were not computed"
                               if not stats.get("logit_diff") else "the logit-difference overlap could not be "
                               "computed: M or C has no example to attribute"))
    return metrics, checks


# -- C4 ---------------------------------------------------------------------------------------
LOOKUP_STATISTICS = ("k50", "activity", "positions")  # the C4 statistics the look-up control of 7.6 judges


def c4(summary: dict, lookup: dict | None = None) -> tuple[dict, list[Check]]:
    """C4 from :func:`rote.analysis.neurons.c4_summary` on M (``summary``) and the same statistics
    on a known look-up (``lookup``: :func:`rote.analysis.lookup.lookup_statistics`; THR atomic facts,
    FDA a look-up grafted into the model; None or empty: not computed).

    Section 5's four checks are registered. Amendment 1, 7.6 as amendment 2, 8.1 reads it, per
    statistic (k50 ratio, activity of the top neurons, input positions): a ``validity`` check
    (``c4.<statistic>.lookup``) applies the statistic's own threshold to the look-up and passes when
    the look-up fails it. It never decides: where the look-up passes the statistic (it calls a known
    look-up "distributed", so it cannot tell the two apart) the statistic is ``superseded`` in the
    amended reading; where the look-up was not measured it is ``superseded`` too (8.5: a statistic
    its control does not validate does not count, and does not make the seed unresolved). The
    intermediate result is also judged (``amended``) as the INLP drop minus the information-matched
    control's drop (``intermediate_matched_drop``) >= ``intermediate_over_matched_min``; unresolved
    when ``summary["matched_available"]`` is False. ``metrics["verdict_rests_on"]`` names what still
    decides (the validated statistics and the intermediate dependency).

    Missing values (8.5): ``summary["erasure_layers"] == []`` (no layer carries the intermediate
    result at 5 x chance on C) leaves both intermediate checks unresolved, the intervention cannot
    run; ``n_memorized`` = 0, an undefined k50, no resampled position leave their checks unresolved
    with that case."""
    th = THRESHOLDS["C4"]
    lookup = {k: v for k, v in (lookup or {}).items() if k != "tables"}
    measured_lookup = bool(lookup) and _num(lookup.get("n_lookup", 1)) > 0  # no look-up example: unresolved
    k50_name = f"median k50 on M vs {th['k50_ratio_min']} x median k50 on C"
    statistics = {  # name, key, threshold on M, threshold on the look-up, short name
        "k50": (k50_name, "k50_M", th["k50_ratio_min"] * _num(summary.get("k50_C")),
                th["k50_ratio_min"] * _num(lookup.get("k50_C")), "k50 ratio"),
        "activity": ("median activity fraction of top neurons", "top_activity_median", th["activity_fraction_min"],
                     th["activity_fraction_min"], "top-neuron activity"),
        "positions": (f"input positions removing >= {th['drop_min']} of P(noisy)", "positions_over_min",
                      th["positions_min"], th["positions_min"], "input positions"),
    }
    metrics = dict(summary)
    metrics.update({f"lookup_{k}": v for k, v in lookup.items()})
    no_m = C4_NO_M if summary.get("n_memorized") == 0 else None
    no_c = C4_NO_C if summary.get("n_clean") == 0 else None
    if summary.get("position_drops") == [] and summary.get("positions_over_min") in (0, None):
        summary = {**summary, "positions_over_min": None}  # nothing was resampled: no count, not a count of 0
    missing = {  # why each statistic on M would be missing, by case
        "k50": no_m or missing_reason((summary.get("k50_M"), "k50 on M is undefined (no memorized digit with positive "
                                                             "attribution to its label)"),
                                      (summary.get("k50_C"), no_c or "k50 on C is undefined (no correct answer digit "
                                                                     "with positive attribution)")),
        "activity": no_m or "the top neurons' activity could not be computed (no top neuron of a memorized digit)",
        "positions": no_m or "the input positions were not resampled",
    }
    checks: list[Check] = []
    superseded, validated = [], []
    for stat in LOOKUP_STATISTICS:
        name, key, thr_m, thr_l, short = statistics[stat]
        treatment = at_least(f"c4.{stat}", name, "registered", summary.get(key), thr_m, stat, missing=missing[stat])
        not_measured = "the known look-up was not measured" if not measured_lookup else \
            f"the {short} of the known look-up could not be computed"
        on_lookup = at_least(f"c4.{stat}.lookup", name, "validity", lookup.get(key), thr_l, stat,
                             missing=not_measured)  # True: the look-up passes
        validity = Check(f"c4.{stat}.lookup", f"7.6 look-up control: {short} on a known look-up fails the statistic",
                         "validity", on_lookup.value, on_lookup.threshold, None, stat, was="control")
        if not measured_lookup or on_lookup.passed is None:
            # 8.5: a statistic whose control was not measured does not decide, and does not make the seed
            # unresolved: it is superseded (shown, counted in the registered reading only)
            validity = unresolved(validity, not_measured)
            judged = [supersede(treatment, f"8.5: its look-up control was not measured ({not_measured}); a statistic "
                                           "the control does not validate does not count", amendment2=True), validity]
        else:
            if on_lookup.passed:
                validity = validity.replace(passed=False, reason=f"8.1: a known look-up passes it too "
                                                                 f"({_short(on_lookup.value)} vs {_short(on_lookup.threshold)})")
            else:
                validity = validity.replace(passed=True)
            judged = validate(treatment, validity, "supersede")
        (validated if judged[0].kind == "registered" else superseded).append(stat)
        checks += judged
    # 8.5: the intermediate result is removed where C2's probes find it; with no such layer the
    # removal cannot run, and both intermediate checks are unresolved (never failed by the NaN)
    layers = summary.get("erasure_layers")
    no_site = C4_NO_SITE if layers is not None and not list(layers) else None
    no_removal = no_site or no_m or "the intermediate result was not erased (no drop of P(noisy) was measured)"
    registered = at_least("c4.intermediate.registered", "intermediate result removes share of P(noisy)", "registered",
                          summary.get("intermediate_drop"), th["drop_min"], "intermediate", missing=no_removal)
    over = _num(summary.get("intermediate_drop")) - _num(summary.get("intermediate_matched_drop"))
    metrics["intermediate_over_matched"] = over
    metrics["lookup_superseded"] = superseded
    metrics["verdict_rests_on"] = validated + ["intermediate"]  # 8.1: the statistics that still decide
    metrics["rests_on_intermediate_alone"] = not validated
    no_matched = "the information-matched control could not be computed"
    matched = at_least("c4.intermediate", "7.6: intermediate drop over information-matched control", "amended", over,
                       th["intermediate_over_matched_min"], "intermediate",
                       missing=missing_reason((summary.get("intermediate_drop"), no_removal),
                                              (summary.get("intermediate_matched_drop"), no_matched)))
    if no_site:
        registered, matched = (unresolved(c.replace(value=None), no_site) for c in (registered, matched))
    elif summary.get("matched_available") is False and matched.passed is not None:
        matched = unresolved(matched, no_matched)
    checks += [registered, matched]
    return metrics, checks


C4_NO_M = "no memorized example (M is empty)"
C4_NO_C = "no correctly answered example (C is empty)"
C4_NO_SITE = ("8.5: the intervention cannot run: no layer carries the intermediate result at 5 x chance on C "
              "(no erasure site)")


# -- C5 ---------------------------------------------------------------------------------------
C5_REASONS = {
    "7.7": "7.7: the outlier set holds ~230 of 2,560 units per example, and patching that many units anywhere "
           "disrupts memorization; judged by the dose-response",
    "8.3": "8.3: the section-5 rule calls most units of an untrained model heuristics; judged with the cut "
           "calibrated on an untrained model",
    "8.4": "8.4: after the first noisy digit every position reads a noisy prefix no clean neighbour has (the "
           "never-trained null reaches the same |z|); judged at the first differing digit j*",
    "8.5": "8.5: the pattern check is read at j* over the 8.3 units; judged as c5.pattern.jstar",
}


def _c5_missing(m: dict) -> dict:
    """Why each input of C5's checks would be missing, by case (8.5: each reason names its case)."""
    th = THRESHOLDS["C5"]
    no_m = "no memorized example (M is empty)" if m.get("n_memorized") == 0 else None
    no_jstar = "no memorized example with a differing digit (j*)" if not m.get("jstar_n_M") else None
    no_units = "no heuristic unit at the j* positions under the 8.3 cut"
    grid, tried = list(th["m_grid"]), m.get("jstar_m_tried")
    untried = [x for x in grid if tried is not None and x not in tried]
    fewest = m.get("jstar_units_min")
    units = (f"the fewest 8.3 units of the last layer at an example's j* is {fewest}" if fewest is not None
             else "too few 8.3 units of the last layer at j*")
    no_m50 = "no m50 at j* (no m tried reverts 0.5 of M), so there is no m to read the control at"
    return {
        "share.registered": "the section-5 classifier was not run",
        "share.untrained": missing_reason((m.get("heuristic_fraction"), "the section-5 classifier was not run"),
                                          (m.get("untrained_heuristic_fraction"), "the untrained model was not "
                                                                                  "classified")),
        "share": "the 8.3 classifier was not run",
        "share.null": missing_reason((m.get("cut_heuristic_fraction"), "the 8.3 classifier was not run"),
                                     (m.get("cut_null_fraction"), "the untrained model of the seed was not classified "
                                                                  "under the 8.3 cut")),
        "z.registered": no_m or missing_reason(
            (m.get("median_abs_z_M"), "|z| at memorized digits is undefined (no heuristic unit with enough clean "
                                      "neighbours)"),
            (m.get("median_abs_z_clean") or None, "|z| on clean examples is undefined or 0")) or \
            "the |z| ratio was not given to the verdict",
        "z.untrained_labels": no_m or missing_reason(
            (m.get("median_abs_z_null") or None, "|z| on the never-trained null is undefined or 0")) or \
            "the |z| ratio over the null was not given to the verdict",
        "z": no_jstar or missing_reason((m.get("jstar_z_M"), no_units), (m.get("jstar_z_clean") or None,
                                        "|z| on clean examples at the j* positions is undefined or 0")) or no_units,
        "pattern": no_m or "the pattern correlation is undefined (fewer than 3 memorized examples with a clean-neighbour "
                           "mean at any heuristic unit)",
        "pattern.jstar": no_jstar or "the pattern correlation at j* is undefined (no heuristic unit under the 8.3 cut "
                                     "with 3 memorized examples at j*)",
        "patch": no_m or "the last layer's patching gave no value",
        "dose.top": no_m or "the dose-response of the last layer gave no value",
        "dose.control": no_m or ("no m50 (no m reverts 0.5 of M), so there is no m to read the control at"
                                 if m.get("m50") is None else "the control was not computed at m50"),
        "dose.mismatched": no_m or ("no m50 (no m reverts 0.5 of M), so there is no m to read the control at"
                                    if m.get("m50") is None else "needs a second memorized example"),
        "specificity": no_jstar or (f"8.5: no m of the grid can be tried at j*: {units}, and m needs 2m of them (the "
                                    "top m and m others for the random control)" if tried == [] else
                                    "the top-m patch at j* gave no value"),
        "specificity.unreachable": (f"8.5: m50 cannot be reached: no m up to {max(tried)} reverts 0.5 of M, and m = "
                                    f"{', '.join(str(x) for x in untried)} cannot be tried ({units}; m needs 2m of "
                                    "them)") if tried and untried else None,
        "specificity.random": no_jstar or (no_m50 if m.get("jstar_m50") is None else
                                           "the random control at j* was not drawn"),
        "specificity.mismatched": no_jstar or (no_m50 if m.get("jstar_m50") is None else
                                               "needs a second memorized example"),
    }


def c5(metrics: dict) -> tuple[dict, list[Check]]:
    """C5 from the chapter's measured numbers (protocol section 5, amendments 7.7, 8.3, 8.4 and 8.5).

    Section 5 (the registered reading): ``heuristic_fraction`` (share of neurons that are heuristics
    under the coverage rule), ``z_ratio`` (median |z| on M over clean), ``pattern_corr_M``, and the
    patching of the last layer (``patch_revert_last``, ``control_revert_last``).

    Amended reading (amendment 2): the heuristic share under 8.3's cut, ``cut_heuristic_fraction``
    >= 0.2 (``c5.share``) and >= 2 x ``cut_null_fraction`` (``c5.share.null``); at the first
    differing digit j* (8.4, over the 8.3 units): ``jstar_z_ratio`` >= 2 (``c5.z``),
    ``jstar_pattern_corr_M`` >= 0.5 (``c5.pattern.jstar``), ``jstar_top_revert_max`` >= 0.5 (m50
    exists, ``c5.specificity``), and at m50 ``jstar_random_revert_m50`` and
    ``jstar_mismatched_revert_m50`` < 0.1 (``control``). The specificity at j* ranks and patches the
    8.3 units of the last layer (8.5): ``jstar_m_tried`` lists the m of the grid that could be tried
    (each example's j* holds at least 2m such units: its top m and m others for the random control),
    ``jstar_units_min`` the fewest such units at an example's j*; where no m tried reaches 0.5 and
    some m could not be tried, m50 cannot be reached and the check is unresolved, with that reason
    (without ``jstar_m_tried``, every m counts as tried). Superseded and shown: the section-5 share
    and 7.7's share null (by 8.3), the registered |z| ratio, 7.7's |z| null and 7.7's dose-response
    (by 8.4), the section-5 pattern correlation over every answer position (by 8.5), the registered
    patching checks (by 7.7).

    Missing values (8.5): a check whose number is missing is unresolved with its case (no memorized
    example, no j*, no 8.3 unit at j*, no m50 to read a control at, an analysis not run)."""
    th = THRESHOLDS["C5"]
    m, factor, z_min = metrics, th["untrained_share_factor_min"], th["z_ratio_min"]
    share_min, corr_min = th["heuristic_fraction_min"], th["pattern_corr_min"]
    revert_min, control_max = th["patch_revert_min"], th["control_revert_max"]
    why = _c5_missing(m)
    specificity = at_least("c5.specificity", "8.4: top-m patch of the 8.3 units at j* reverts M at some m (m50 exists)",
                           "amended", m.get("jstar_top_revert_max"), revert_min, "specificity",
                           missing=why["specificity"])
    if specificity.passed is False and why["specificity.unreachable"]:
        specificity = unresolved(specificity, why["specificity.unreachable"])
    checks = [
        supersede(at_least("c5.share.registered", "heuristic share of neurons (section-5 rule)", "registered",
                           m.get("heuristic_fraction"), share_min, "heuristic share", missing=why["share.registered"]),
                  C5_REASONS["8.3"], amendment2=True),
        supersede(at_least("c5.share.untrained", f"7.7: heuristic share of neurons vs {factor:g} x the untrained model",
                           "null", m.get("heuristic_fraction"), factor * _num(m.get("untrained_heuristic_fraction")),
                           "heuristic share", missing=why["share.untrained"]), C5_REASONS["8.3"], amendment2=True),
        at_least("c5.share", "8.3: heuristic share of neurons (cut: 99th percentile of an untrained model)", "amended",
                 m.get("cut_heuristic_fraction"), share_min, "heuristic share", missing=why["share"]),
        at_least("c5.share.null", f"8.3: heuristic share vs {factor:g} x the untrained model's share under the cut",
                 "null", m.get("cut_heuristic_fraction"), factor * _num(m.get("cut_null_fraction")), "heuristic share",
                 missing=why["share.null"]),
        supersede(at_least("c5.z.registered", "median |z| on M over clean", "registered", m.get("z_ratio"), z_min,
                           "outlier |z|", missing=why["z.registered"]), C5_REASONS["8.4"], amendment2=True),
        supersede(at_least("c5.z.untrained_labels", "7.7: median |z| on M over never-trained noisy labels", "null",
                           m.get("z_null_ratio"), z_min, "outlier |z|", missing=why["z.untrained_labels"]),
                  C5_REASONS["8.4"], amendment2=True),
        at_least("c5.z", "8.4: largest |z| over heuristic units at j*, median on M over clean", "amended",
                 m.get("jstar_z_ratio"), z_min, "outlier |z|", missing=why["z"]),
        supersede(at_least("c5.pattern", "pattern correlation on M",
                           "registered", m.get("pattern_corr_M"), corr_min, "outlier |z|", missing=why["pattern"]),
                  C5_REASONS["8.5"], amendment2=True),
        at_least("c5.pattern.jstar", "8.4: pattern correlation on M at j*", "amended",
                 m.get("jstar_pattern_corr_M"), corr_min, "outlier |z|", missing=why["pattern.jstar"]),
        supersede(at_least("c5.patch.registered", "patching the last layer reverts M", "registered",
                           m.get("patch_revert_last"), revert_min, "specificity", missing=why["patch"]),
                  C5_REASONS["7.7"]),
        supersede(below("c5.patch.random.registered", "random control reverts M", "registered",
                        m.get("control_revert_last"), control_max, "specificity", missing=why["patch"]),
                  C5_REASONS["7.7"]),
        supersede(at_least("c5.dose.top", "7.7: top-m patch of the last layer reverts M at some m (m50 exists)",
                           "amended", m.get("top_revert_max"), revert_min, "specificity", missing=why["dose.top"]),
                  C5_REASONS["8.4"], amendment2=True),
        supersede(below("c5.dose.random", "7.7: m random neurons at m50 revert M", "control",
                        m.get("random_revert_m50"), control_max, "specificity", missing=why["dose.control"]),
                  C5_REASONS["8.4"], amendment2=True),
        supersede(below("c5.dose.mismatched", "7.7: another example's top m at m50 revert M", "control",
                        m.get("mismatched_revert_m50"), control_max, "specificity", missing=why["dose.mismatched"]),
                  C5_REASONS["8.4"], amendment2=True),
        specificity,
        below("c5.specificity.random", "8.4: m random 8.3 units at j* (at m50, outside the example's top m) revert M",
              "control", m.get("jstar_random_revert_m50"), control_max, "specificity", missing=why["specificity.random"]),
        below("c5.specificity.mismatched", "8.4: another example's top m at j* (at m50) revert M", "control",
              m.get("jstar_mismatched_revert_m50"), control_max, "specificity", missing=why["specificity.mismatched"]),
    ]
    new = ("c5.share", "c5.share.null", "c5.z", "c5.pattern.jstar", "c5.specificity", "c5.specificity.random",
           "c5.specificity.mismatched")  # added by amendment 2 (8.3, 8.4)
    return dict(metrics), [c.replace(was="new") if c.id in new else c for c in checks]


CLAIM_CHECKS = {"C1": c1, "C2": c2, "C3": c3, "C4": c4, "C5": c5}


# -- records ----------------------------------------------------------------------------------
def seed_result(unit, metrics: dict, checks: list[Check], configs) -> dict:
    """One seed's part of a record: ``unit`` has ``task``, ``condition`` and ``seed`` (a
    :class:`rote.plan.Unit`); ``configs`` are the runs its numbers come from (noisy run first)."""
    checks = list(checks)
    ids = [c.id for c in checks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"check ids must be unique within a seed: {sorted(i for i in set(ids) if ids.count(i) > 1)}")
    configs = list(configs)
    return {"task": unit.task, "condition": unit.condition, "seed": int(unit.seed),
            "registered": seed_verdict(checks, "registered"), "amended": seed_verdict(checks, "amended"),
            "missing_parts": missing_parts(checks, "amended"),
            "precision": configs[0].train.precision if configs else None,
            "metrics": metrics, "checks": [c.to_dict() for c in checks], "run_keys": [c.key for c in configs]}


def records(claim: str, profile: str, results: list[dict]) -> list[claims.ClaimRecord]:
    """One record per (task, condition) from the seed results of :func:`seed_result`, with the
    aggregate verdict of each reading (section 7.1)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        groups.setdefault((r["task"], r["condition"]), []).append(r)
    out = []
    for (task, condition), group in groups.items():
        group = sorted(group, key=lambda r: r["seed"])
        per_seed = [{k: v for k, v in r.items() if k not in ("task", "condition")} for r in group]
        registered = aggregate([r["registered"] for r in group], _failing(claim, group))
        amended = aggregate([r["amended"] for r in group], _failing(claim, group))
        out.append(claims.ClaimRecord(
            claim, task, condition, profile, [r["seed"] for r in group], registered, amended, amended,
            per_seed=claims._plain(per_seed), threshold=dict(THRESHOLDS[claim]), page=claims.CLAIM_PAGES[claim],
            created=time.time()))
    return out


def _failing(claim: str, seeds: list[dict]) -> list[bool] | None:
    """Per seed, whether the check that alone makes ``claim`` fail across seeds failed (None: any failing
    check counts, :data:`FAILS_ONLY_ON`)."""
    check_id = FAILS_ONLY_ON.get(claim)
    if check_id is None:
        return None
    return [_get(find(s["checks"], check_id) or {"passed": None}, "passed") is False for s in seeds]


def deciding_checks(checks: Iterable[Check | dict], reading: str = "amended") -> list:
    """The checks that decide one seed's verdict in ``reading``: the failed ones, else the unresolved
    ones, else every check that counts."""
    judged = [c for c in checks if counts_in(c, reading)]
    failed = [c for c in judged if _get(c, "passed") is False]
    return failed or [c for c in judged if _get(c, "passed") is None] or judged


def deciding(rec: claims.ClaimRecord) -> str:
    """The checks that decide the amended verdict, as short text per seed: the failed ones (else the
    unresolved ones with their reasons, else all), with value and threshold, and any required part
    left without a deciding check."""
    if not rec.per_seed:
        return ""
    parts = []
    for s in rec.per_seed:
        texts = []
        for c in deciding_checks(s["checks"]):
            text = f"{c['id']} {_short(c['value'])} vs {_short(c['threshold'])}" if c["value"] is not None else c["id"]
            texts.append(text + (f" (unresolved: {c['reason']})" if c["passed"] is None and c.get("reason") else ""))
        texts += [f"no deciding check for the part '{p}'" for p in s.get("missing_parts", [])]
        text = "; ".join(texts)
        parts.append(f"seed {s['seed']}: {text}" if len(rec.per_seed) > 1 else text)
    return " | ".join(parts)


def _short(value) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def amendment2_change(rec: claims.ClaimRecord) -> dict:
    """What amendment 2 did to a record's amended verdict: the verdict amendment 1 gives on the same
    checks (``amendment1``), the amended verdict (``amendment2``), and ``why``, one line: the checks
    that decided amendment 1 and no longer count (with their reasons), and the checks amendment 2
    added that do not pass. Empty ``why`` where nothing moved."""
    seeds = rec.per_seed or []
    if rec.claim in claims.UNAMENDED:  # no amendment reads it: nothing moved
        return {"amendment1": rec.verdict_amended, "amendment2": rec.verdict_amended, "why": ""}
    before = aggregate([seed_verdict(s["checks"], AMENDMENT1) for s in seeds], _failing(rec.claim, seeds))
    after = rec.verdict_amended
    if before == after:
        return {"amendment1": before, "amendment2": after, "why": ""}
    dropped: dict[str, str] = {}
    added: dict[str, list[str]] = {}
    for s in seeds:
        for c in s["checks"]:
            was = c.get("was") or ""
            if was not in ("", "new") and counts_in(c, AMENDMENT1) and _outcome(c, AMENDMENT1) is not True:
                stand_in = find(s["checks"], f"{c['id']}.amended")  # unresolved in its place: its reason says why
                dropped.setdefault(c["id"], (stand_in or c).get("reason") or "")
            elif was == "new" and counts_in(c, "amended") and c.get("passed") is not True \
                    and not str(c["id"]).endswith(".amended"):
                added.setdefault(c["id"], []).append(OUTCOME_WORDS[c.get("passed")])
    parts = []
    if dropped:
        parts.append("no longer deciding: " + "; ".join(f"{i} ({r})" if r else i for i, r in dropped.items()))
    if added:
        parts.append("added by amendment 2: " + "; ".join(f"{i} ({', '.join(sorted(set(o)))})" for i, o in added.items()))
    return {"amendment1": before, "amendment2": after, "why": ". ".join(parts) or "required parts (8.1)"}


OUTCOME_WORDS = {True: "pass", False: "fail", None: "unresolved"}

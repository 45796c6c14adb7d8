"""Amendment 3's two checks of a run that finished what it started (protocol 12.2, 12.3), shared by C1
(per seed) and X1 (per width): ``<claim>.twin_trained`` (the noise-free twin's final gen >= 0.9) and
``<claim>.plateau`` (the noisy run's final mem exceeds its mean over the 5 evaluations ending at 90% of
the steps by at most 0.05). Both are ``validity`` checks (8.1) added by section 12: they never decide;
where one fails (or could not be measured), the checks that read its run are unresolved in the amended
reading (:func:`validated`), with their values shown; the registered reading is as it was.
"""

from __future__ import annotations

import math

from ..analysis.curves import PLATEAU_AT, Plateau
from .core import Check, CheckLabel, at_least, validate

DECIMALS = 9  # the rise compares at 1e-9, as X1's checks do
SECTION = "12"  # amendment 3: the section that adds these checks and unresolves what they validate
TWIN_SECTION, PLATEAU_SECTION = "12.2", "12.3"


def twin_trained(label: CheckLabel, twin_gen: float, threshold: float, who: str) -> Check:
    """12.2: the noise-free twin's final gen >= ``threshold``; ``who`` names the twin (``the noise-free twin
    at width 64``). Missing (a NaN among its last 5 evaluations): unmeasured."""
    check = at_least(label, twin_gen, threshold,
                     missing=f"the final gen of {who} is missing (a NaN among its last 5 evaluations)")
    if check.passed is False:
        check = check.replace(reason=f"{who} did not train: its final gen is {check.value:.3f}, below {threshold:g}")
    return check.since(TWIN_SECTION, "validity")


def plateaued(label: CheckLabel, measured: Plateau, threshold: float, who: str) -> Check:
    """12.3: ``measured.rise`` (final mem - mem over the 5 evaluations ending at 90% of the steps) <= ``threshold``
    (margin ``threshold - rise``); ``who`` names the noisy run. A missing mean: unmeasured, with the reason."""
    at = "" if measured.at_step is None else f" (ending at step {measured.at_step})"
    missing = (f"the plateau of {who} could not be measured: "
               + ("its final mem is missing" if math.isnan(measured.final) else
                  f"it has no 5 evaluations with mem up to {PLATEAU_AT:.0%} of its steps{at}"))
    rise = round(measured.rise, DECIMALS)  # 0.95 - 0.90 is a rise of 0.05, not 0.05000000000000004
    check = at_least(label, -rise, -threshold, missing=missing)  # rise <= threshold, margin threshold - rise
    if check.passed is not None:
        check = check.replace(value=measured.rise, threshold=threshold)
    if check.passed is False:
        check = check.replace(reason=f"{who} has not finished memorizing: final mem {measured.final:.3f} against "
                                     f"{measured.earlier:.3f} over the 5 evaluations{at}, a rise of "
                                     f"{measured.rise:.3f} above {threshold:g}")
    return check.since(PLATEAU_SECTION, "validity")


def validated(check: Check, validities: list[Check]) -> list[Check]:
    """``check`` as amendment 3 reads it: as it is where every validity check in ``validities`` passes; else
    superseded from section 12 on, with an unresolved stand-in (``<id>.amended``, its value shown) whose
    reason names every validity check that failed or could not be measured (:func:`rote.verdicts.core.validate`).
    The validity checks themselves are not in the result (each is recorded once by the caller)."""
    failing = [v for v in validities if v.passed is not True]
    if not failing:
        return [check]
    out = validate(check, failing[0], "unresolve", SECTION)[:-1]
    reasons = "; ".join(v.reason or f"{v.id} failed" for v in failing)
    return [out[0], out[1].replace(reason=reasons)]

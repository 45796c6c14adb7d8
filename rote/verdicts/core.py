"""The verdict layer's core: the :class:`Check` every claim module builds, the readings, one seed's
verdict, the aggregate across seeds, and the records (each claim's checks in its own module).

A chapter hands the outputs of its analyses (tables and numbers, no verdicts) to its claim module's
``checks``, which returns the claim's metrics and its checks (:class:`Check`: a stable ``id``, display
``name``, ``kind``, ``value``, ``threshold``, ``passed``, the required ``part`` it decides and a
one-line ``reason``). Kinds (amendment 2, section 8.1): ``registered`` (as the claim registered it);
``amended``, ``control`` (a specificity control the claim must beat), ``null`` (checks the amendments
add or substitute); ``validity`` (a check of the instrument: it never decides; where it fails, the
check it validates is superseded or unresolved, :func:`validate`); ``superseded`` (shown, not counted).

An amendment is data: a check's ``history`` holds its kind from each protocol section on, and a
reading counts the checks by the kind they had as of one section: the **registered reading** as of
the claim's registration (section 5; X1's 9), the **amended reading** as of its latest amendment, a
section (``"7"``) as of that amendment (:func:`readings`, :func:`amendment_change`). A claim module's
``checks`` (wrapped by :func:`as_read`) reads its thresholds as of the reading it builds: where an
amendment moved one, the check as registered keeps its value and an amended copy reads the new one.
One seed's verdict in a reading is ``fail`` if a counted check fails, else ``unresolved`` if one is unresolved or a
required part of the claim (:data:`REQUIRED_PARTS`) has no counted check, else ``pass``. Across
seeds: ``holds``, ``fails``, ``unresolved`` (every seed alike), else ``mixed`` with its three counts;
a single seed is labelled ``(1 seed)``. The analysis modules never import this layer.
"""

from __future__ import annotations

import functools
import json
import math
import time
import dataclasses
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from .. import claims, fmt
from ..claims import FAILS_ONLY_ON, REQUIRED_PARTS, THRESHOLDS
from ..spec import section_key, thresholds_as_of, within
from ..specs import SPECS, amendment_names, spec_of


KINDS = ("registered", "amended", "control", "null", "validity", "superseded")
DECIDING = ("registered", "amended", "control", "null")  # amendment 2, 8.1: the kinds that decide
READINGS = ("registered", "amended")  # the readings a record stores; a section reads as of an amendment
CEILING = "ceiling"  # 7.5's kind of the split-half ceiling: it decided, passing wherever computed (8.1: validity)
REQUIRED_PARTS_SECTION = "8.1"  # the rule of required parts; the stored readings follow the current rules
UNMEASURED_SECTION = "8.5"  # the rule that leaves a check whose validity check was not measured unresolved


def record_was() -> tuple[str, str]:
    """The amendments a record's ``was`` compares (the record format of amendment 2): the kind a check had as
    of the first amendment, where the second changed it (:func:`rote.specs.amendment_names`)."""
    first, second = list(amendment_names())[:2]
    return first, second


@dataclass(frozen=True)
class Check:
    """One check of a claim on one seed.

    ``id`` is stable (``c4.k50``, ``c4.k50.lookup``, ``c5.share``): records, chapters, the scorecard
    and tests find a check by it, never by its display ``name``. ``kind`` is its role (8.1), ``part``
    the required part of the claim it decides; ``reason`` says in one line why it is superseded or
    unresolved. ``passed`` is True, False or None (unresolved). ``history``: ((section, kind), ...),
    the section that added it with its kind, then each that changed its kind (the last is ``kind``);
    the record keeps it as ``section5`` (it counts in the registered reading) and ``was``
    (:func:`record_was`: "" amendment 2 changed nothing, "new" it added the check, else the kind it
    had under amendment 1), and keeps it whole only where those cannot say it."""

    id: str
    name: str
    kind: str
    value: Any
    threshold: Any
    passed: bool | None
    part: str = ""
    section5: bool | None = None
    reason: str = ""
    was: str = ""
    # Section 11: how far the value is from its threshold, signed so that a positive margin passes, in
    # the statistic's units (None where either is missing or the comparison has no single direction);
    # the 95% sampling interval of the value [low, high] in the same units, and its method (wilson,
    # newcombe, bootstrap; "" where the statistic has no per-example sample: crossings, overlaps);
    # ``near``: the interval contains the threshold (None without an interval). Shown, never deciding.
    margin: float | None = None
    interval: tuple[float, float] | None = None
    method: str = ""
    near: bool | None = None
    history: tuple = ()  # left empty: read off section5 and was

    def __post_init__(self):
        _check_id_and_kind(self.id, self.kind, self.name)
        section5 = self.kind == "registered" if self.section5 is None else self.section5
        history = tuple(tuple(e) for e in self.history) or _decode(self.id, self.kind, section5, self.was)
        if history[-1][1] != self.kind or any(k not in KINDS + (CEILING,) for _, k in history):
            raise ValueError(f"{self.id}: its history {history!r} must end with its kind {self.kind!r}")
        object.__setattr__(self, "history", history)
        object.__setattr__(self, "section5", kind_as_of(self, _registered_in(self.id)) == "registered")
        before, after = (kind_as_of(self, s) for s in record_was())
        object.__setattr__(self, "was", "" if before == after else "new" if before is None else before)
        if self.interval is not None:
            low, high = (float(x) for x in self.interval)
            if not (math.isfinite(low) and math.isfinite(high) and low <= high) or not self.method:
                raise ValueError(f"{self.id}: an interval needs finite low <= high and its method, got "
                                 f"{self.interval!r} ({self.method!r})")
            object.__setattr__(self, "interval", (low, high))
            if self.near is None:
                t = numeric(self.threshold)
                object.__setattr__(self, "near", None if math.isnan(t) else bool(low <= t <= high))

    def to_dict(self) -> dict:
        out = asdict(self)
        history = out.pop("history")
        if _by_amendment(self.id, history) != _decode(self.id, self.kind, self.section5, self.was):
            out["history"] = [list(e) for e in history]
        return out

    def replace(self, **changes) -> "Check":
        return dataclasses.replace(self, **changes)

    def since(self, section: str, kind: str | None = None) -> "Check":
        """The check as added in ``section``, with ``kind`` (default: its kind)."""
        kind = kind or self.kind
        return self.replace(kind=kind, history=((section, kind),))


def _registered_in(check_id: str) -> str:
    spec = spec_of(check_id)
    return spec.registered_in if spec else "5"


def _decode(check_id: str, kind: str, section5: bool, was: str) -> tuple:
    """A check's history from its record fields (:func:`record_was`): in the registration where ``section5``,
    with its ``was`` kind as of the first amendment (none where ``was`` is "new"), its ``kind`` after."""
    out = [(_registered_in(check_id), "registered")] if section5 else []
    before, (first, second) = None if was == "new" else was or kind, record_was()
    if before and (not out or out[-1][1] != before):
        out.append((first, before))
    return tuple(out + ([(second, kind)] if kind != before else []))


def _by_amendment(check_id: str, history) -> tuple:
    """A history with each section read as its amendment (the registration's sections as the registration)."""
    registered, out = _registered_in(check_id), []
    for section, kind in history:
        level = registered if within(section, registered) else section.split(".")[0]
        if out and out[-1][0] == level:
            out[-1] = (level, kind)
        elif not out or out[-1][1] != kind:
            out.append((level, kind))
    return tuple(out)


def _history(check) -> tuple:
    if not isinstance(check, dict):
        return check.history
    if check.get("history"):
        return tuple(tuple(e) for e in check["history"])
    return _decode(check["id"], check["kind"], check.get("section5", check["kind"] == "registered"), check.get("was", ""))


def kind_as_of(check, section: str | None) -> str | None:
    """The kind a check had as of ``section`` (None: the latest), None before it was added."""
    found = [k for s, k in _history(check) if within(s, section)]
    return found[-1] if found else None


def _check_id_and_kind(check_id: str, kind: str, name: str) -> None:
    """A check's id is stable, without spaces; its name is the label a reader reads beside the id (plain
    words, never the id itself: :func:`rote.display.labelled`); its kind one of :data:`KINDS`."""
    if not isinstance(name, str) or not name.strip() or name.strip() == check_id:
        raise ValueError(f"check {check_id!r} needs a name in words beside its id, got {name!r}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not check_id or check_id != check_id.strip() or " " in check_id:
        raise ValueError(f"a check needs a stable id without spaces, got {check_id!r}")


@dataclass(frozen=True)
class CheckLabel:
    """What names a check before it is measured: its stable ``id``, display ``name``, ``kind`` and the
    required ``part`` it decides, as in :class:`Check` (validated alike). :func:`at_least`,
    :func:`below` and :func:`above` compare a value with its threshold under it."""

    id: str
    name: str
    kind: str
    part: str = ""

    def __post_init__(self):
        _check_id_and_kind(self.id, self.kind, self.name)


def numeric(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


class MissingValue(ValueError):
    """A check was handed a missing value (None or NaN) without the reason it is missing. Amendment 2,
    8.5: a NaN never decides; the check is unresolved with its reason, or the build fails (this)."""


def _compare(label: CheckLabel, value, threshold, sign: int, ok, missing: str | None, interval) -> Check:
    v, t = numeric(value), numeric(threshold)
    if math.isnan(v) or math.isnan(t):  # 8.5: neither pass nor fail, with the reason the caller states
        if not missing:
            raise MissingValue(f"{label.id}: the {'value' if math.isnan(v) else 'threshold'} is missing and the caller "
                               "gave no reason (amendment 2, 8.5: a NaN never decides)")
        return Check(label.id, label.name, label.kind, None if math.isnan(v) else v, None if math.isnan(t) else t, None,
                     label.part, reason=missing)
    low_high = None if interval is None else (interval.low, interval.high)
    return Check(label.id, label.name, label.kind, v, t, bool(ok(v, t)), label.part, margin=sign * (v - t),
                 interval=low_high, method=interval.method if interval is not None else "")


def at_least(label: CheckLabel, value, threshold, *, missing: str | None, interval=None) -> Check:
    """The check ``label`` of ``value >= threshold``. ``missing`` (required) is why the value or the
    threshold would be missing, naming the case: where either is None or NaN the check is unresolved
    with that reason (amendment 2, 8.5: a NaN never decides); with no reason it raises
    :class:`MissingValue`. ``interval`` (section 11) is the value's sampling interval
    (:class:`rote.analysis.intervals.Interval`, or None); the margin is ``value - threshold``."""
    return _compare(label, value, threshold, 1, lambda v, t: v >= t, missing, interval)


def below(label: CheckLabel, value, threshold, *, missing: str | None, interval=None) -> Check:
    """``value < threshold`` (margin ``threshold - value``); missing values and interval as in :func:`at_least`."""
    return _compare(label, value, threshold, -1, lambda v, t: v < t, missing, interval)


def above(label: CheckLabel, value, threshold, *, missing: str | None, interval=None) -> Check:
    """``value > threshold`` (strictly; margin ``value - threshold``); as :func:`at_least` otherwise."""
    return _compare(label, value, threshold, 1, lambda v, t: v > t, missing, interval)


def missing_reason(*cases: tuple[Any, str]) -> str | None:
    """The reason of the first ``(value, reason)`` whose value is missing (None or NaN), else None:
    a check's ``missing`` argument, one named case per input it reads."""
    return next((why for value, why in cases if math.isnan(numeric(value))), None)


def unresolved(check: Check, reason: str) -> Check:
    """``check`` with no outcome (its analysis could not run, or could not decide), and why."""
    return check.replace(passed=None, reason=reason)


def supersede(check: Check, reason: str, section: str) -> Check:
    """``check`` kept in the record and shown, but no longer counted from ``section`` (the protocol section that
    superseded it) on. An unresolved or failed check keeps the reason it had (why its value is missing, the
    rule it fails by) after the new one."""
    keep = check.reason if check.reason and check.passed is not True else ""
    return check.replace(kind="superseded", reason=f"{reason}; {keep}" if keep else reason,
                         history=check.history + ((section, "superseded"),))


def validate(check: Check, validity: Check, on_fail: str, section: str) -> list[Check]:
    """Amendment 2, 8.1: ``check`` and the ``validity`` check of its instrument, as the amended reading
    takes them. A validity check never decides. Where it passes, ``check`` counts as it is. Where it
    fails, ``check`` stops counting from ``section`` on (the section of the rule; where it could not be
    measured, from :data:`UNMEASURED_SECTION` on, unresolved):

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
    why = validity.reason or (f"{validity.id} failed: {fmt.plain(validity.value)} vs {fmt.plain(validity.threshold)}"
                              if validity.passed is False else f"{validity.id} could not be measured")
    if on_fail == "supersede" and validity.passed is False:
        return [supersede(check, why, section), validity]
    section = section if on_fail == "unresolve" else UNMEASURED_SECTION
    stand_in = check.replace(id=f"{check.id}.amended").since(section, "amended" if check.section5 else check.kind)
    return [supersede(check, f"judged as {check.id}.amended", section), unresolved(stand_in, why), validity]


# -- thresholds as of each reading ------------------------------------------------------------------
def as_read(build):
    """A claim module's ``checks`` (returning its metrics and checks), reading the claim's thresholds as of the
    reading each check belongs to: built once as of the claim's registration, then again as of each section
    that moved one of its thresholds (:meth:`rote.spec.ClaimSpec.moves`), merged by :func:`moved_checks`.
    The metrics are the last build's. A claim none of whose thresholds moved is built once, as it is."""

    @functools.wraps(build)
    def judged(*args, **kwargs):
        spec = SPECS.get(build.__module__.rsplit(".", 1)[-1].upper())
        if spec is None or not spec.moves():
            return build(*args, **kwargs)
        with thresholds_as_of(spec.registered_in):
            metrics, checks = build(*args, **kwargs)
        for section in spec.moves():
            with thresholds_as_of(section):
                metrics, moved = build(*args, **kwargs)
            checks = moved_checks(checks, moved, section)
        return metrics, checks

    return judged


def _alike(a: Check, b: Check) -> bool:
    """Whether two builds of a check are the same (a NaN alike in both)."""
    return a == b or json.dumps(asdict(a), default=str) == json.dumps(asdict(b), default=str)


def _from(check: Check, section: str, copy: bool = False) -> Check:
    """``check`` as added in ``section`` (its kind then, its later changes kept); a ``copy`` of a check that
    reads a moved threshold is ``<id>@<section>``, and ``amended`` where the check was ``registered``."""
    first = kind_as_of(check, section) or check.kind
    history = ((section, "amended" if copy and first == "registered" else first),
               *((s, k) for s, k in check.history if not within(s, section)))
    return check.replace(id=f"{check.id}@{section}" if copy else check.id, kind=history[-1][1], history=history)


def moved_checks(before: list[Check], after: list[Check], section: str) -> list[Check]:
    """The checks built as of the section before ``section`` (``before``) and as of ``section`` (``after``),
    where ``section`` moved a threshold: a check alike in both stays; one that differs and was added before
    ``section`` keeps its value and is ``superseded`` from ``section`` on, its copy ``<id>@<section>`` (the
    value as of ``section``; ``amended`` where it was ``registered``) counting from there; one added in or
    after ``section`` is the new build's. A check only one build makes stops counting (``before``) or starts
    (``after``) at ``section``."""
    built, out = {c.id: c for c in after}, []
    for check in before:
        new = built.pop(check.id, None)
        if new is not None and _alike(new, check):
            out.append(check)
            continue
        if within(section, check.history[0][0]):  # the check is the section's own or later: it reads the new value
            out += [new] if new is not None else []
            continue
        if kind_as_of(check, section) != "superseded":
            kept = tuple(e for e in check.history if within(e[0], section))
            why = f"{section}: a threshold it reads moved" + (f"; judged as {check.id}@{section}" if new else "")
            keep = check.reason if check.reason and check.passed is not True else ""
            check = check.replace(kind="superseded", history=kept + ((section, "superseded"),),
                                  reason=f"{why}; {keep}" if keep else why)
        out.append(check)
        if new is not None and kind_as_of(new, section) not in (None, "superseded"):
            out.append(_from(new, section, copy=True))
    return out + [c if within(section, c.history[0][0]) else _from(c, section) for c in built.values()]


def find(checks: Iterable[Check | dict], check_id: str) -> Check | dict | None:
    """The check with id ``check_id`` (None when the list has none)."""
    return next((c for c in checks if fmt.get(c, "id") == check_id), None)


def _as_of(check, reading: str) -> str | None:
    """The section a reading reads a check as of: the claim's registration (``registered``), the latest
    (``amended``: None), or the reading itself, a section (``"7"``: the checks as of amendment 1)."""
    if reading == "registered":
        return _registered_in(fmt.get(check, "id"))
    if reading == "amended":
        return None
    section_key(reading)  # a reading must be one of READINGS or a section
    return reading


def counts_in(check: Check | dict, reading: str) -> bool:
    """Whether ``check`` counts in ``reading``: its kind as of the reading's section decides (8.1's deciding
    kinds; 7.5's ceiling as of amendment 1), never validity or superseded."""
    return kind_as_of(check, _as_of(check, reading)) in DECIDING + (CEILING,)


def _outcome(check: Check | dict, reading: str) -> bool | None:
    if kind_as_of(check, _as_of(check, reading)) == CEILING:  # 7.5's ceiling passed whenever computed
        return None if fmt.get(check, "value") is None else True
    return fmt.get(check, "passed")


def claim_of(checks: Iterable[Check | dict]) -> str | None:
    """The claim the checks belong to, from their ids (``c4.k50`` -> ``C4``)."""
    for c in checks:
        head = str(fmt.get(c, "id")).split(".")[0].upper()
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
    parts = {fmt.get(c, "part") for c in counted}
    current_rule = reading in READINGS or within(REQUIRED_PARTS_SECTION, reading)
    required = set(REQUIRED_PARTS.get(claim_of(checks), ())) if current_rule else set()
    if any(r is None for r in results) or required - parts:
        return "unresolved"
    return "pass"


def missing_parts(checks: Iterable[Check | dict], reading: str = "amended") -> list[str]:
    """The required parts with no check that counts in ``reading`` (each makes the seed unresolved)."""
    checks = list(checks)
    parts = {fmt.get(c, "part") for c in checks if counts_in(c, reading)}
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


# -- records ----------------------------------------------------------------------------------
def group(cls=None, prefix: str = "", default=dataclasses.MISSING):
    """A metrics field that holds an analysis's own result (a dataclass): in the record its fields stand
    inline, each name after ``prefix`` (:func:`inline`). Its default: ``cls()`` (every field None), or
    ``default`` (a marker of a result the inputs did not give)."""
    made = {"default_factory": cls} if default is dataclasses.MISSING else {"default": default}
    return dataclasses.field(**made, metadata={"group": prefix})


_KEEP = object()


def inline(metrics, absent=_KEEP) -> dict:
    """A dataclass's fields in order, each :func:`group` field that holds a dataclass replaced by that
    dataclass's fields (flattened alike, or its own ``record()``) under the group's prefix; every value that
    is ``absent`` is left out (a group that is ``absent`` whole too). Other dataclasses: their ``asdict``."""
    out = {}
    for f in dataclasses.fields(metrics):
        value = getattr(metrics, f.name)
        if "group" in f.metadata and dataclasses.is_dataclass(value):
            inner = value.record() if hasattr(value, "record") else inline(value, absent)
            out.update({f.metadata["group"] + k: v for k, v in inner.items()})
        elif value is not absent:
            out[f.name] = asdict(value) if dataclasses.is_dataclass(value) else value
    return out


def from_inline(cls, values: dict):
    """The inverse of :func:`inline`: ``cls`` from the record's flat names, each in its group (a group
    with a default factory is built from its prefixed names); a name no field takes is a TypeError."""
    rest = dict(values)

    def build(kind, prefix):
        made = {}
        for f in dataclasses.fields(kind):
            if "group" in f.metadata and f.default_factory is not dataclasses.MISSING:
                made[f.name] = build(f.default_factory, prefix + f.metadata["group"])
            elif prefix + f.name in rest:
                made[f.name] = rest.pop(prefix + f.name)
        return kind(**made)

    built = build(cls, "")
    if rest:
        raise TypeError(f"{cls.__name__} has no fields {sorted(rest)}")
    return built


def flat(metrics) -> dict:
    """A claim's metrics as its record stores them: its ``record()`` where it has one (C2, C3 leave out the
    fields that do not apply), else :func:`inline`; a dict passes as is."""
    if hasattr(metrics, "record"):
        return metrics.record()
    return inline(metrics) if dataclasses.is_dataclass(metrics) else metrics


def seed_result(unit, metrics, checks: list[Check], configs) -> dict:
    """One seed's part of a record: ``unit`` has ``task``, ``condition`` and ``seed`` (a
    :class:`rote.plan.Unit`); ``metrics`` is the claim's metrics dataclass (stored as :func:`flat`) or a
    dict; ``configs`` are the runs its numbers come from (noisy run first)."""
    checks = list(checks)
    ids = [c.id for c in checks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"check ids must be unique within a seed: {sorted(i for i in set(ids) if ids.count(i) > 1)}")
    configs = list(configs)
    return {"task": unit.task, "condition": unit.condition, "seed": int(unit.seed),
            "registered": seed_verdict(checks, "registered"), "amended": seed_verdict(checks, "amended"),
            "missing_parts": missing_parts(checks, "amended"),
            "near": near_checks(checks),
            "precision": configs[0].train.precision if configs else None,
            "metrics": flat(metrics),
            "checks": [c.to_dict() for c in checks], "run_keys": [c.key for c in configs]}


def records(claim: str, profile: str, results: list[dict]) -> list[claims.ClaimRecord]:
    """One record per (task, condition) from the seed results of :func:`seed_result`, with the
    aggregate verdict of each reading (section 7.1). Each seed's checks must be ``claim``'s (ids
    ``<module>.*``): the required parts of another claim, or of none, would judge them."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        if r["checks"] and claim_of(r["checks"]) != claim:
            raise ValueError(f"the checks of {claim}, seed {r['seed']}, are {claim_of(r['checks']) or 'no claim'}'s")
        groups.setdefault((r["task"], r["condition"]), []).append(r)
    out = []
    for (task, condition), group in groups.items():
        group = sorted(group, key=lambda r: r["seed"])
        per_seed = [{k: v for k, v in r.items() if k not in ("task", "condition")} for r in group]
        registered = aggregate([r["registered"] for r in group], failing(claim, group, "registered"))
        amended = aggregate([r["amended"] for r in group], failing(claim, group, "amended"))
        out.append(claims.ClaimRecord(
            claim, task, condition, profile, [r["seed"] for r in group], registered, amended, amended,
            per_seed=claims._plain(per_seed), threshold=dict(THRESHOLDS[claim]), page=claims.CLAIM_PAGES[claim],
            created=time.time()))
    return out


def failing(claim: str, seeds: list[dict], reading: str = "amended") -> list[bool] | None:
    """Per seed, whether the check that alone makes ``claim`` fail across seeds failed in ``reading`` (None: any
    failing check counts, :data:`FAILS_ONLY_ON`): the check itself, or where a later section superseded it, the
    check that stands in for it there (``<id>.amended``, ``<id>@<section>``), e.g. X1's cost at the largest width
    made unresolved by 12.2 or 12.3, which can then never make the claim fail."""
    check_id = FAILS_ONLY_ON.get(claim)
    if check_id is None:
        return None

    def deciding_one(checks: list) -> dict:
        same = [c for c in checks if fmt.get(c, "id") == check_id
                or str(fmt.get(c, "id")).startswith((f"{check_id}.amended", f"{check_id}@"))]
        return ([c for c in same if counts_in(c, reading)] or same or [{"passed": None}])[-1]

    return [fmt.get(deciding_one(s["checks"]), "passed") is False for s in seeds]


def near_checks(checks: Iterable[Check | dict], reading: str = "amended") -> list[str]:
    """Section 11: the ids of the checks near their threshold (their sampling interval contains it) that
    decide ``reading``'s verdict: those that count in it with an outcome (an unresolved check decides
    nothing), and in the amended reading also the ``validity`` checks, which decide whether the statistic
    they validate counts (C2's reachable check made C2 FDA `digit` fragile). Shown; never part of a verdict."""
    return [fmt.get(c, "id") for c in checks if fmt.get(c, "near") is True and fmt.get(c, "passed") is not None
            and (counts_in(c, reading) or (reading == "amended" and fmt.get(c, "kind") == "validity"))]


def near_seeds(rec: claims.ClaimRecord) -> int:
    """Section 11: how many seeds of a record have a near deciding check (one that counts in the amended reading;
    a near ``validity`` check, listed by :func:`near_checks`, decides nothing, 8.1, and does not count here)."""
    return sum(any(counts_in(c, "amended") for c in s["checks"] if fmt.get(c, "id") in near_checks(s["checks"]))
               for s in rec.per_seed or [])


def check_ranges(rec: claims.ClaimRecord) -> dict[str, tuple[float, float]]:
    """Section 11: each check's smallest and largest value across the record's seeds (checks with no
    numeric value on any seed are left out), by check id in the order the checks first appear."""
    values: dict[str, list[float]] = {}
    for s in rec.per_seed or []:
        for c in s["checks"]:
            v = numeric(fmt.get(c, "value"))
            values.setdefault(fmt.get(c, "id"), [])
            if not math.isnan(v):
                values[fmt.get(c, "id")].append(v)
    return {i: (min(v), max(v)) for i, v in values.items() if v}


def deciding_checks(checks: Iterable[Check | dict], reading: str = "amended") -> list:
    """The checks that decide one seed's verdict in ``reading``: the failed ones, else the unresolved
    ones, else every check that counts."""
    judged = [c for c in checks if counts_in(c, reading)]
    failed = [c for c in judged if fmt.get(c, "passed") is False]
    return failed or [c for c in judged if fmt.get(c, "passed") is None] or judged


def deciding(rec: claims.ClaimRecord, name=lambda c: c["id"], value=fmt.plain) -> str:
    """The checks that decide the amended verdict, as short text per seed: the failed ones (else the
    unresolved ones with their reasons, else all), with value and threshold, and any required part
    left without a deciding check. ``name`` names a check (default: its id), ``value`` writes a number."""
    if not rec.per_seed:
        return ""
    parts = []
    for s in rec.per_seed:
        texts = []
        for c in deciding_checks(s["checks"]):
            text = f"{name(c)} {value(c['value'])} vs {value(c['threshold'])}" if c["value"] is not None else name(c)
            texts.append(text + (f" (unresolved: {c['reason']})" if c["passed"] is None and c.get("reason") else ""))
        texts += [f"no deciding check for the part '{p}'" for p in s.get("missing_parts", [])]
        text = "; ".join(texts)
        parts.append(f"seed {s['seed']}: {text}" if len(rec.per_seed) > 1 else text)
    return " | ".join(parts)


def readings(rec: claims.ClaimRecord) -> dict[str, str]:
    """A record's verdict in each of its readings, by name: the registered one, then as of each amendment that
    touches its claim (the last is the amended verdict)."""
    seeds, amendments = rec.per_seed or [], claims.SPECS[rec.claim].amended_in
    names = amendment_names()
    return {name: aggregate([seed_verdict(s["checks"], reading) for s in seeds], failing(rec.claim, seeds, reading))
            for name, reading in [("registered", "registered"), *((names[a], a) for a in amendments[:-1]),
                                  *((names[a], "amended") for a in amendments[-1:])]}


def amendment_change(rec: claims.ClaimRecord, section: str | None = None) -> dict:
    """What the amendment of ``section`` (default: the claim's latest) did to a record's verdict: the verdict as of the
    amendment before it (or the registered one) and as of it, keyed by their names without spaces
    (``amendment1``, ``amendment2``), and ``why``, one line: the checks that decided before and no longer
    count (with their reasons), and the checks it added that do not pass. Empty ``why`` where nothing moved."""
    names, seeds, spec = amendment_names(), rec.per_seed or [], claims.SPECS.get(rec.claim)
    section = section or ((spec.amended_in if spec else ()) or list(names))[-1]  # default: the claim's latest
    order = [a for a in (spec.amended_in if spec else ()) if section_key(a) < section_key(section)]
    previous = order[-1] if order else "registered"  # the claim's amendment before it
    keys = (names.get(previous, previous).replace(" ", ""), names[section].replace(" ", ""))
    if spec is None or section not in spec.amended_in:  # no such amendment reads it: nothing moved
        return {keys[0]: rec.verdict_amended, keys[1]: rec.verdict_amended, "why": ""}
    before, after = (aggregate([seed_verdict(s["checks"], r) for s in seeds], failing(rec.claim, seeds, r))
                     for r in (previous, "amended" if section == spec.amended_in[-1] else section))
    if before == after:
        return {keys[0]: before, keys[1]: after, "why": ""}
    dropped: dict[str, str] = {}
    added: dict[str, list[str]] = {}
    for s in seeds:
        for c in s["checks"]:
            was, now = kind_as_of(c, _as_of(c, previous)), kind_as_of(c, section)
            if was is not None and was != now and counts_in(c, previous) and _outcome(c, previous) is not True:
                stand_in = find(s["checks"], f"{c['id']}.amended")  # unresolved in its place: its reason says why
                dropped.setdefault(c["id"], (stand_in or c).get("reason") or "")
            elif was is None and counts_in(c, section) and c.get("passed") is not True \
                    and not str(c["id"]).endswith(".amended"):
                added.setdefault(c["id"], []).append(OUTCOME_WORDS[c.get("passed")])
    parts = []
    if dropped:
        parts.append("no longer deciding: " + "; ".join(f"{i} ({r})" if r else i for i, r in dropped.items()))
    if added:
        parts.append(f"added by {names[section]}: " + "; ".join(f"{i} ({', '.join(sorted(set(o)))})"
                                                                for i, o in added.items()))
    return {keys[0]: before, keys[1]: after, "why": ". ".join(parts) or f"required parts ({REQUIRED_PARTS_SECTION})"}


OUTCOME_WORDS = {True: "pass", False: "fail", None: "unresolved"}


def amendment_moves(rec: claims.ClaimRecord) -> list[dict]:
    """Each amendment that moved a record's verdict (:func:`amendment_change` for every amendment that touches its
    claim, in order): ``amendment`` (its name), ``before``, ``after`` and ``why``; none where nothing moved."""
    spec, names, out = claims.SPECS.get(rec.claim), amendment_names(), []
    for section in (spec.amended_in if spec and rec.per_seed else ()):
        change = amendment_change(rec, section)
        before, after = list(change.values())[:2]
        if change["why"]:
            out.append({"amendment": names[section], "before": before, "after": after, "why": change["why"]})
    return out


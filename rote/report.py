"""The sentences that results choose, in one tested place (``tests/test_report.py``).

Checks are found by their stable id, never by a display name, so that renaming a check cannot change the
prose. Several seeds' values are written in seed order, ``0.83 / 0.91 / 0.88``, after a head that names
the seeds (:func:`seeds_head`); a value not computed (None or NaN) is :data:`MISSING`; outcomes are
spelled as :data:`rote.verdicts.OUTCOME_WORDS` spells them.
"""

from __future__ import annotations

import math
import re
from statistics import NormalDist
from typing import Iterable, Mapping, Sequence

from . import fmt
from .claims import UNAMENDED
from .verdicts import OUTCOME_WORDS, READINGS, REQUIRED_PARTS, claim_of, counts_in, find

MISSING = "n/a"  # a value that was not computed, inside a list of per-seed values
NOT_COMPUTED = "not computed"  # a check (or a sentence's value) that was not computed at all
NOT_COUNTED = "not counted"  # a part of a claim that no check decides and the claim does not require


# -- numbers ----------------------------------------------------------------------------------------
def measured(x) -> bool:
    """Whether ``x`` is a number that was computed (not None, not NaN)."""
    if x is None:
        return False
    try:
        return not math.isnan(float(x))
    except (TypeError, ValueError):
        return True


def num(x, spec: str = ".2f", missing: str = MISSING) -> str:
    return format(x, spec) if measured(x) else missing


def values(xs: Iterable, spec: str = ".2f", missing: str = MISSING) -> str:
    """One value per seed, in seed order: ``0.83 / 0.91 / 0.88``."""
    return " / ".join(num(x, spec, missing) for x in xs)


def each_seed(table: Mapping, units: Sequence, key: str, spec: str = ".3g", missing: str = MISSING) -> str:
    """:func:`values` of ``key`` of ``table[u]`` (a dict or a dataclass) for each unit of ``units``."""
    return values([table[u][key] if isinstance(table[u], Mapping) else getattr(table[u], key) for u in units],
                  spec, missing)


def listed(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" and {words[-1]}"


def seed_range(seeds: Sequence[int]) -> str:
    """``seed 0``, ``seeds 0-2`` (consecutive), ``seeds 0, 2 and 5``."""
    seeds = list(seeds)
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return f"seeds {listed([str(s) for s in seeds])}"


def per_seed(xs: Sequence, seeds: Sequence[int], spec: str = ".2f") -> str:
    """Values with their seeds, ``0.83, 0.91 and 0.88 on seeds 0-2``; all missing: ``not computed on ...``."""
    words = [num(x, spec, NOT_COMPUTED) for x in xs]
    if len(words) > 1 and set(words) == {NOT_COMPUTED}:
        return f"{NOT_COMPUTED} on {seed_range(seeds)}"
    return f"{listed(words)} on {seed_range(seeds)}"


def ratio(a, b) -> float:
    """``a / b`` for prose: infinite for a positive ``a`` over 0, NaN for 0 / 0 or a missing number."""
    if not (measured(a) and measured(b)):
        return math.nan
    return a / b if b else (math.inf if a > 0 else math.nan)


def layers_text(layers: Sequence[int]) -> str:
    """``no layer``, ``layer 2``, ``layers 1, 2``."""
    if not layers:
        return "no layer"
    return f"layer {layers[0]}" if len(layers) == 1 else "layers " + ", ".join(map(str, layers))


# -- names ------------------------------------------------------------------------------------------
def where(task: str, condition: str) -> str:
    """``FDA, random noise``; THR (one condition): ``THR``."""
    return task.upper() + ("" if condition == "-" else f", {condition} noise")


def label(unit) -> str:
    """A unit in tables and figure titles: ``FDA random s0``."""
    return unit.task.upper() + ("" if unit.condition == "-" else f" {unit.condition}") + f" s{unit.seed}"


def seeds_head(seeds: Sequence[int], sep: str = " / ", plural: bool = False) -> str:
    """``seed 0 / 1 / 2`` (``plural``: ``seeds 0 / 1 / 2`` when there are several)."""
    word = "seeds" if plural and len(seeds) > 1 else "seed"
    return f"{word} " + sep.join(str(s) for s in seeds)


def seed_word(seeds: Sequence) -> str:
    return "seed" if len(seeds) == 1 else "seeds"


# -- how many seeds ----------------------------------------------------------------------------------
def how_many(k: int, n: int) -> str:
    """``every seed``, ``no seed`` or ``k of n seeds``."""
    if k == n:
        return "every seed"
    return "no seed" if k == 0 else f"{k} of {n} seeds"


def outcome(check) -> str:
    """A check's outcome in words (``pass``, ``fail``, ``unresolved``); ``not computed`` for no check."""
    return NOT_COMPUTED if check is None else OUTCOME_WORDS[fmt.get(check, "passed")]


def tally(checks: Sequence) -> dict[str, int]:
    """How many of ``checks`` (one per seed, None where a seed has none) have each outcome."""
    words = [outcome(c) for c in checks]
    return {w: words.count(w) for w in (*OUTCOME_WORDS.values(), NOT_COMPUTED)}


def checks_of(per_seed: Sequence[Sequence], check_id: str) -> list:
    """The check ``check_id`` of each seed (its list of checks), None where a seed has none."""
    return [find(checks, check_id) for checks in per_seed]


def passes(checks: Sequence) -> str:
    """``every seed passes``, or ``k of n seeds pass``."""
    k, n = tally(checks)["pass"], len(checks)
    return "every seed passes" if k == n else f"{k} of {n} seeds pass"


def choose(checks: Sequence, yes: str, no: str, computed: bool = True) -> str:
    """``yes`` when the check passes on every seed, ``no`` on none, else ``yes`` with on how many seeds;
    ``computed=False`` (the measure is missing on every seed) says so."""
    if not computed:
        return "which this build could not measure"
    k, n = tally(checks)["pass"], len(checks)
    if k == n:
        return yes
    return no if k == 0 else f"{yes} on {k} of {n} seeds only"


def choose_by(per_seed: Sequence[Sequence], check_id: str, yes: str, no: str, numbers: Iterable | None = None) -> str:
    """:func:`choose` on each seed's check ``check_id``; ``numbers`` (one per seed) none measured: says so."""
    computed = numbers is None or any(measured(x) for x in numbers)
    return choose(checks_of(per_seed, check_id), yes, no, computed)


def reach(values_: Sequence, thresholds: Sequence, without: str = "without a value") -> str:
    """How many seeds' values reach their threshold (``>=``), the seeds without a value counted apart:
    ``1 of 2 seeds reach it (1 without a value)``."""
    pairs = [(float(v), float(t)) for v, t in zip(values_, thresholds)]
    hits = sum(not (math.isnan(v) or math.isnan(t)) and v >= t for v, t in pairs)
    missing = sum(math.isnan(v) or math.isnan(t) for v, t in pairs)
    text = "every seed reaches it" if hits == len(pairs) else f"{hits} of {len(pairs)} seeds reach it"
    return text + (f" ({missing} {without})" if missing else "")


def versus(check, spec: str = ".3g") -> str:
    """A check as ``value vs threshold: outcome (reason)``; ``not computed`` for no check."""
    if check is None:
        return NOT_COMPUTED
    reason = fmt.get(check, "reason")
    return (f"{_number(fmt.get(check, 'value'), spec)} vs {_number(fmt.get(check, 'threshold'), spec)}: "
            f"{outcome(check)}" + (f" ({reason})" if reason else ""))


def registered_not_passed(per_seed: dict[int, Sequence], key: str = "id", note: str = "") -> str:
    """The section-5 checks that do not pass, each with its seeds (``per_seed``: seed -> checks; ``key``
    names a check): ``Registered checks not passed: c4.k50 (seeds 0, 2).``; else that every one passes."""
    failing: dict[str, list[str]] = {}
    for seed, checks in per_seed.items():
        for c in checks:
            if fmt.get(c, "section5") and fmt.get(c, "passed") is not True:
                failing.setdefault(fmt.get(c, key), []).append(str(seed))
    if not failing:
        return "Every registered check passes on every seed."
    return (f"Registered checks not passed{note}: "
            + "; ".join(f"{name} ({seed_word(s)} {', '.join(s)})" for name, s in failing.items()) + ".")


# -- against chance ---------------------------------------------------------------------------------
def chance_side(share, n: int, chance: float = 0.5, level: float = 0.95) -> str:
    """Where a share of ``n`` trials lies against ``chance`` by its normal-approximation interval:
    ``more often than chance``, ``less often ...``, ``indistinguishable from chance``."""
    if not n or not measured(share):
        return "no outlier shifts to count"
    z = round(NormalDist().inv_cdf(0.5 + level / 2), 2)  # 1.96 at 95%
    half_width = z * math.sqrt(chance * (1 - chance) / n)
    if share - half_width > chance:
        return "more often than chance"
    if share + half_width < chance:
        return "less often than chance"
    return "indistinguishable from chance"


# -- the verdict of a part ----------------------------------------------------------------------------
def _counted(checks, part: str, reading: str) -> list:
    return [c for c in checks if fmt.get(c, "part") == part and counts_in(c, reading)]


def part_outcome(checks: Sequence, part: str, reading: str = "amended") -> str:
    """One seed's outcome on one part of a claim, by :func:`rote.verdicts.seed_verdict`'s rule within the
    part; a part with no counted check is ``unresolved`` where the claim requires it, else ``not counted``."""
    checks = list(checks)
    results = [fmt.get(c, "passed") for c in _counted(checks, part, reading)]
    if any(r is False for r in results):
        return OUTCOME_WORDS[False]
    if not results:
        required = part in REQUIRED_PARTS.get(claim_of(checks), ()) and reading in READINGS
        return OUTCOME_WORDS[None] if required else NOT_COUNTED
    return OUTCOME_WORDS[None] if any(r is None for r in results) else OUTCOME_WORDS[True]


def _outcomes(per_seed: dict[int, Sequence], part: str, reading: str) -> dict[int, str]:
    """seed -> the part's outcome on that seed (:func:`part_outcome`)."""
    return {seed: part_outcome(checks, part, reading) for seed, checks in per_seed.items()}


def _deciding(per_seed: dict[int, Sequence], outcomes: dict[int, str], part: str, reading: str,
              key: str = "id") -> tuple[dict, list[int]]:
    """The checks that keep a part from passing: (check named by ``key``, outcome) -> [(seed, check)], on the seeds
    it fails (its failing checks) or is unresolved (its unresolved checks), in order; and the seeds no check decides."""
    deciding: dict[tuple[str, bool | None], list] = {}
    undecided = []
    for seed, checks in per_seed.items():
        if outcomes[seed] in (OUTCOME_WORDS[True], NOT_COUNTED):
            continue
        wanted = False if outcomes[seed] == OUTCOME_WORDS[False] else None
        counted = _counted(checks, part, reading)
        for c in counted:
            if fmt.get(c, "passed") is wanted:
                deciding.setdefault((fmt.get(c, key), wanted), []).append((seed, c))
        if not counted:
            undecided.append(seed)
    return deciding, undecided


def part_summary(per_seed: dict[int, Sequence], part: str, reading: str = "amended") -> str:
    """One part's outcome across seeds with the checks that decide it where it does not pass:
    ``fail on every seed (c3.erasure fails on seeds 0-2: 0.05, 0.1 and 0.02 vs 0.3)``."""
    outcomes = _outcomes(per_seed, part, reading)
    n = len(outcomes)
    counts = {w: list(outcomes.values()).count(w) for w in (*OUTCOME_WORDS.values(), NOT_COUNTED)}
    same = next((w for w, k in counts.items() if k == n), None)
    summary = (f"{same} on every seed" if same and n > 1 else same if same else
               ", ".join(f"{w} on {how_many(k, n)}" for w, k in counts.items() if k))
    deciding, undecided = _deciding(per_seed, outcomes, part, reading)
    why = [_deciding_text(check_id, passed, found) for (check_id, passed), found in deciding.items()]
    if undecided:
        why.append(f"no check decides it on {seed_range(undecided)}")
    return summary + (f" ({'; '.join(why)})" if why else "")


def _numbers(found: list, reasons: Sequence[str] = ()) -> str:
    """The values of one check on the seeds of ``found`` ([(seed, check)]) against its thresholds: ``0, 0 and 0.01
    vs 0.9``; "" where no seed has a value and ``reasons`` say why, or neither a value nor a threshold is known."""
    vals = [_number(fmt.get(c, "value")) for _, c in found]
    limits = [_number(fmt.get(c, "threshold")) for _, c in found]
    if set(vals) == {MISSING} and (reasons or set(limits) == {MISSING}):
        return ""
    if len(set(limits)) == 1:  # one threshold: the values, once where every seed has the same
        return (vals[0] if len(set(vals)) == 1 else listed(vals)) + f" vs {limits[0]}"
    return ", ".join(f"{v} vs {t}" for v, t in zip(vals, limits))


def _deciding_text(check_id: str, passed, found: list) -> str:
    """``c1.mem fails on seeds 0-2: 0, 0 and 0.01 vs 0.9``: one check's values on the seeds it decides, and its
    reasons."""
    reasons = list(dict.fromkeys(fmt.get(c, "reason") for _, c in found if fmt.get(c, "reason")))
    details = "; ".join(x for x in (_numbers(found, reasons), *reasons) if x)
    verb = "fails" if passed is False else "is unresolved"
    seeds = seed_range([seed for seed, _ in found])
    return f"{check_id} {verb} on {seeds}" + (f": {details}" if details else "")


def _number(x, spec: str = ".3g") -> str:
    """A check's value or threshold: a number as :func:`num` writes it, a boolean as itself."""
    return str(x) if isinstance(x, bool) else num(x, spec)


def decided_parts(groups: dict, checks: dict, parts: Sequence[str], reading: str = "amended") -> str:
    """What a section decides, per (task, condition) of ``groups`` and part of ``parts``;
    ``checks``: unit -> its checks, or (metrics, checks) as a claim's verdict function returns them."""
    def of(u):
        return checks[u][1] if isinstance(checks[u], tuple) else checks[u]

    lines = [f"- **{where(task, condition)}**: "
             + "; ".join(f"*{part}*: {part_summary({u.seed: of(u) for u in members}, part, reading)}" for part in parts)
             + "." for (task, condition), members in groups.items()]
    return (f"**What this decides**, part by part of the claim ({reading} reading; the Verdict section has every "
            "check):\n\n" + "\n".join(lines))


# -- what a chapter found, under its title ---------------------------------------------------------
# The outcome of a part on every seed of a record -> the head of its group in a finding; "mixed": it differs by seed.
FINDING_GROUPS = {"fail": "What fails", "unresolved": "What could not be decided", "mixed": "What differs by seed",
                  "pass": "What holds"}
PART_VERBS = {"pass": "holds", "fail": "fails", "unresolved": "is unresolved"}
_SECTION_PREFIX = re.compile(r"^(?:section )?\d+(?:\.\d+)*: ")  # "8.5: ", "section 5: ": the protocol, not the reason


def plain_reason(reason: str) -> str:
    """A check's reason without the protocol section it opens with (``8.5: no site`` -> ``no site``)."""
    return _SECTION_PREFIX.sub("", reason or "")


def _parts(claim: str, per_seed: dict[int, Sequence], reading: str) -> list[str]:
    """The claim's required parts, then any other part a counted check decides, in the order first met."""
    found = [fmt.get(c, "part") for checks in per_seed.values() for c in checks if counts_in(c, reading)]
    return list(dict.fromkeys([*REQUIRED_PARTS.get(claim, ()), *(p for p in found if p)]))


def _evidence(deciding: dict, mixed: bool) -> list[str]:
    """Why a part does not pass, from :func:`_deciding` keyed by check name: each check's values against its threshold
    (named where several checks decide; with its seeds where the part differs by seed; a yes/no check as its name and
    ``no``), then each reason once, without its protocol section."""
    texts, reasons, several = [], [], len({name for name, _ in deciding}) > 1
    for (name, _), found in deciding.items():
        own = [plain_reason(fmt.get(c, "reason")) for _, c in found if fmt.get(c, "reason")]
        yes_no = [fmt.get(c, "value") for _, c in found if isinstance(fmt.get(c, "value"), bool)]
        numbers = ("yes" if all(yes_no) else "no") if yes_no else _numbers(found, own)
        label = " ".join(x for x in (name if several or yes_no else "",
                                     f"on {seed_range([seed for seed, _ in found])}" if mixed else "") if x)
        texts += [": ".join(x for x in (label, numbers) if x)] if numbers else []
        reasons += own
    return texts + list(dict.fromkeys(reasons))


def _part_finding(per_seed: dict[int, Sequence], part: str, reading: str) -> tuple[str, str] | None:
    """(group of :data:`FINDING_GROUPS`, the part with why it does not pass: ``final mem (0 vs 0.9)``);
    None for a part no check counts in and the claim does not require."""
    outcomes = _outcomes(per_seed, part, reading)
    words = list(dict.fromkeys(w for w in outcomes.values() if w != NOT_COUNTED))
    if not words:
        return None
    group = words[0] if len(words) == 1 else "mixed"
    deciding, undecided = _deciding(per_seed, outcomes, part, reading, key="name")
    why = _evidence(deciding, group == "mixed")
    if undecided:
        why.append("no check decides it" + (f" on {seed_range(undecided)}" if group == "mixed" else ""))
    if group == "mixed":
        by_word = {w: [s for s, o in outcomes.items() if o == w] for w in words}
        why.insert(0, ", ".join(f"{PART_VERBS[w]} on {seed_range(seeds)}" for w, seeds in by_word.items()))
    return group, part + (f" ({'; '.join(why)})" if why else "")


def _as_dict(check) -> dict:
    return check if isinstance(check, Mapping) else check.to_dict()


def finding_sentence(rec) -> str:
    """What a record (one claim, task and noise condition) found, in words, from its checks: its verdict, then
    the claim's parts grouped by what they did on every seed (fails, could not be decided, differs by seed,
    holds), each that does not pass with its values against their thresholds and its checks' reasons.
    The amended reading, or the registered one for a claim with no amendment; a record not run says why."""
    claim, head = fmt.get(rec, "claim"), f"**{where(fmt.get(rec, 'task'), fmt.get(rec, 'condition', '-'))}**"
    per_seed = {s["seed"]: s["checks"] for s in fmt.get(rec, "per_seed") or []}
    if not per_seed:
        reason = fmt.get(rec, "reason")
        return f"{head}: not judged in this build" + (f": {reason}" if reason else "") + "."
    reading = "registered" if claim in UNAMENDED else "amended"
    groups: dict[str, list[str]] = {}
    for part in _parts(claim, per_seed, reading):
        found = _part_finding(per_seed, part, reading)
        if found:
            groups.setdefault(found[0], []).append(found[1])
    body = " ".join(f"{words}: {listed(groups[g])}." for g, words in FINDING_GROUPS.items() if g in groups)
    return f"{head}, {seed_range(list(per_seed))}: **{fmt.get(rec, f'verdict_{reading}')}**. {body}".rstrip()


def finding_sentences(records: Iterable) -> str:
    """Markdown: one :func:`finding_sentence` per record (task and noise condition), as a list; a chapter glues it
    under its title."""
    return "\n".join(f"- {finding_sentence(r)}" for r in records) or "- No record: this chapter judged nothing."

"""How fragile is each verdict (protocol section 10): a row's amended verdict recomputed under the other
training precision and with seeds 3 and 4 added, compared by its verdict word: ``stable``, ``fragile`` or
``not run``. A perturbed record counts only when it compares like with like (8.6, :func:`refusal`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .fmt import get as _get
from .verdicts.core import OUTCOME_WORDS, aggregate, failing

STABLE, FRAGILE, NOT_RUN = "stable", "fragile", "not run"
EXTRA_SEEDS = (3, 4)  # protocol 10: seeds 3 and 4 join the default 0-2


def verdict_word(verdict: str) -> str:
    """The word a verdict is compared by: holds, fails, unresolved, mixed, not run (``pass (1 seed)``
    reads ``holds``, ``fail (1 seed)`` ``fails``)."""
    text = str(verdict).strip()
    if text.startswith(NOT_RUN):
        return NOT_RUN
    word = text.split(":")[0].split(" (")[0].strip()
    return {"pass": "holds", "fail": "fails"}.get(word, word)  # one seed passing is every seed passing


@dataclass(frozen=True)
class Moved:
    """One seed's check whose outcome differs under a change (``check`` "" for the seed's verdict)."""

    seed: int
    check: str
    before: object  # the value (or the seed's verdict) in the default record; None where the seed is new
    after: object
    outcome_before: str  # pass, fail, unresolved, or "" where the seed is new
    outcome_after: str


@dataclass(frozen=True)
class ChangeResult:
    """The verdict word under one change, and what moved."""

    change: str
    verdict: str  # the aggregate's own words (``mixed: 4 pass, 1 fail, 0 unresolved``), or "not run"
    moved_verdict: bool | None  # None: not run
    reason: str = ""  # why not run, or which seeds moved it
    moved: list[Moved] = field(default_factory=list)


@dataclass(frozen=True)
class Stability:
    """A row's stability entry, stored in its default record."""

    status: str  # stable, fragile, not run
    reason: str
    changes: dict[str, ChangeResult]

    def to_dict(self) -> dict:
        return asdict(self)


def _checks_by_id(seed_part: dict) -> dict[str, dict]:
    return {str(c.get("id") or c.get("name")): c for c in seed_part.get("checks", [])}


def _seeds_text(seeds) -> str:
    """``seed 3``, ``seeds 3, 4`` ("" for none)."""
    seeds = sorted(set(seeds))
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}" if seeds else ""


def _outcome(check: dict) -> str:
    return OUTCOME_WORDS[check.get("passed")]


def refusal(default, perturbed, change: str) -> str:
    """Why ``perturbed`` cannot be compared with ``default`` (8.6), or "": other (or unnamed) code, not
    later than the default record, or (precision) a seed trained in the default's precision."""
    if perturbed is None or not _get(perturbed, "per_seed"):
        return ""  # nothing to refuse: the change's own reason says it is not trained
    mine, theirs = _get(default, "code") or "", _get(perturbed, "code") or ""
    if not mine or not theirs:
        which = "the default record" if not mine else f"the {change} record"
        return f"{which} does not name the code that computed it (a record from before 8.6): rerun its chapter"
    if mine != theirs:
        return (f"the {change} record was computed by other code ({theirs}) than the default record ({mine}): "
                "rerun the stability build")
    if not float(_get(perturbed, "created") or 0) > float(_get(default, "created") or 0):
        return (f"the {change} record is not later than the default record (the default was recomputed after it): "
                "rerun the stability build")
    if change == "precision":
        default_seeds = {s["seed"]: s.get("precision") for s in _get(default, "per_seed")}
        same = [seed for seed in sorted(default_seeds) for s in _get(perturbed, "per_seed")
                if s["seed"] == seed and s.get("precision") in (None, default_seeds[seed])]
        if same:
            return (f"the runs of {_seeds_text(same)} in the precision record are not in another precision "
                    "than the default's")
    return ""


def precision_change(default, twin, reason_not_run: str = "") -> ChangeResult:
    """The row under the precision change (``twin``: the record on the other precision's runs; a
    ``reason_not_run`` makes it not run). Moved: per seed, every check id whose outcome differs."""
    if reason_not_run or twin is None or not _get(twin, "per_seed"):
        return ChangeResult("precision", NOT_RUN, None,
                            reason_not_run or "the runs in the other precision are not trained")
    default_seeds, twin_seeds = ({s["seed"]: s for s in _get(r, "per_seed")} for r in (default, twin))
    if sorted(default_seeds) != sorted(twin_seeds):
        return ChangeResult("precision", NOT_RUN, None, f"the other precision has seeds {sorted(twin_seeds)}, "
                                                        f"the default record {sorted(default_seeds)}")
    moved = []
    for seed in sorted(default_seeds):
        a, b = _checks_by_id(default_seeds[seed]), _checks_by_id(twin_seeds[seed])
        for cid in [*a, *(k for k in b if k not in a)]:
            ca, cb = a.get(cid, {}), b.get(cid, {})
            if _outcome(ca) != _outcome(cb) or (cid in a) != (cid in b):
                moved.append(Moved(seed, cid, ca.get("value"), cb.get("value"),
                                   _outcome(ca) if ca else "", _outcome(cb) if cb else ""))
    verdict = _get(twin, "verdict_amended")
    changed = verdict_word(verdict) != verdict_word(_get(default, "verdict_amended"))
    return ChangeResult("precision", verdict, changed, _seeds_text(m.seed for m in moved), moved)


def seeds_change(default, extra, reason_not_run: str = "") -> ChangeResult:
    """The row under the seeds change (``extra``: the record on seeds 3 and 4): the 5-seed verdict by
    8.1's rule; moved: each extra seed whose verdict is not the default word's, with its deciding checks."""
    if reason_not_run or extra is None or not _get(extra, "per_seed"):
        return ChangeResult("seeds", NOT_RUN, None, reason_not_run or f"{_seeds_text(EXTRA_SEEDS)} are not trained")
    base = list(_get(default, "per_seed"))
    known = {s["seed"] for s in base}
    added = [s for s in _get(extra, "per_seed") if s["seed"] not in known]
    if not added:
        return ChangeResult("seeds", NOT_RUN, None, "the extra record holds no seed beyond the default ones")
    seeds = sorted(base + added, key=lambda s: s["seed"])
    verdict = aggregate([s["amended"] for s in seeds], failing(_get(default, "claim"), seeds))
    word = verdict_word(_get(default, "verdict_amended"))
    expected = {"holds": "pass", "fails": "fail", "unresolved": "unresolved"}.get(word)
    moved = []
    for s in added:
        if expected is not None and s["amended"] != expected:
            for c in s.get("checks", []):
                if c.get("kind") in ("registered", "amended", "control", "null") and c.get("passed") is not True:
                    moved.append(Moved(s["seed"], str(c.get("id")), None, c.get("value"), "", _outcome(c)))
            if not any(m.seed == s["seed"] for m in moved):
                moved.append(Moved(s["seed"], "", None, s["amended"], "", s["amended"]))
    return ChangeResult("seeds", verdict, verdict_word(verdict) != word, _seeds_text(m.seed for m in moved), moved)


def stability(default, twin=None, extra=None, precision_not_run: str = "", seeds_not_run: str = "") -> Stability:
    """The stability entry of a default record from its precision twin's and extra seeds' records
    (None, a given reason or a :func:`refusal`: that change not run)."""
    changes = {"precision": precision_change(default, twin, precision_not_run or refusal(default, twin, "precision")),
               "seeds": seeds_change(default, extra, seeds_not_run or refusal(default, extra, "seeds"))}
    moved = [c for c in changes.values() if c.moved_verdict]
    not_run = [c for c in changes.values() if c.moved_verdict is None]
    if moved:
        status = FRAGILE
        reason = "; ".join(f"{c.change}: {verdict_word(_get(default, 'verdict_amended'))} -> {c.verdict}"
                           + (f" ({c.reason})" if c.reason else "") for c in moved)
    elif not_run:
        status = NOT_RUN
        reason = "; ".join(f"{c.change}: {c.reason}" for c in not_run)
    else:
        status, reason = STABLE, "the same verdict word under both changes"
    return Stability(status, reason, changes)


def label(entry: dict | Stability | None) -> str:
    """A scorecard cell: ``stable``, ``fragile (precision)``, ``not run``; "" without an entry."""
    if not entry:
        return ""
    entry = entry.to_dict() if isinstance(entry, Stability) else entry
    if entry["status"] == FRAGILE:
        return f"fragile ({', '.join(name for name, c in entry['changes'].items() if c.get('moved_verdict'))})"
    return entry["status"]


# -- the stability build's runs (protocol 10) --------------------------------------------------------
def other_precision(task: str) -> str:
    """The precision a task's twin trains in: not the one ``auto`` resolves to here."""
    from .config import precision_for

    return "bf16" if precision_for(task) == "fp32" else "fp32"


def precision_not_run() -> str:
    """Why the precision change cannot run here ("" where it can): bf16 is not native."""
    from .config import native_precision

    return "" if native_precision() == "bf16" else (
        "this machine has no native bf16 (bf16 would train ~12x slower than fp32): the precision change is not run")


def precision_twins(profile: str, seeds: list[int], tasks=None) -> list:
    """The default plan's C1-C5 runs (seeds ``seeds``), each trained in its task's other precision."""
    from .plan import plan

    return [c.replace(precision=other_precision(c.task)) for c in plan(profile, seeds, tasks=tasks)]


def extra_seed_runs(profile: str, tasks=None) -> list:
    """The default plan's C1-C5 runs on seeds 3 and 4 (default precision)."""
    from .plan import plan

    return plan(profile, list(EXTRA_SEEDS), tasks=tasks)

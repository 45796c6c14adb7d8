"""The tables of claims (derived from their specs, :mod:`rote.spec`) and the claim record: saved by a
chapter (:func:`save`), read by the scorecard (:func:`load_all`; never computed: ``not run``).

A record of the protocol's seeds is ``<profile>/<claim>-<task>[-<condition>].json``; one of other seeds
(``-p seeds 7``) lies beside it, ``...seeds-7.json``, never over it. :func:`load_all` returns the record
of the seeds asked for (the book's, :attr:`rote.settings.Settings.seeds`; else the protocol's); :func:`other_records`
the rest.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import fmt
from .config import PROJECT_ROOT
from .spec import PAPER_GROUP
from .specs import SPECS, Table, addition_label, additions, specs

# Every table of claims is derived from the specs (rote/specs/<claim>.py), never written here.
CLAIMS = Table(lambda s: (s.id, s.title))
CLAIM_TASKS = Table(lambda s: (s.id, s.tasks))
CLAIM_CONDITIONS = Table(lambda s: (s.id, s.conditions) if s.conditions else None)  # others: conditions(task)
CLAIM_GROUPS = Table(lambda s: (s.id, s.group) if s.group != PAPER_GROUP else None)
UNAMENDED = Table(lambda s: (s.id, True) if not s.amended_in else None)  # one reading: the registered one
THRESHOLDS = Table(lambda s: (s.id, s.read()))  # by claim: the latest values, or as of rote.spec.thresholds_as_of
CLAIM_PAGES = Table(lambda s: (s.id, s.notebook))  # the chapter that computes each
REQUIRED_PARTS = Table(lambda s: (s.id, s.parts))
FAILS_ONLY_ON = Table(lambda s: (s.id, s.fails_only_on) if s.fails_only_on else None)
CLAIM_CHAPTERS = Table(lambda s: (s.id, s.chapter) if s.stability else None)  # the chapters protocol 10 reruns
# What each chapter trains: the parts of the plan (rote.plan.PARTS) its notebook loads; the tasks chapter
# builds datasets and the scorecard reads records
CHAPTER_RUNS = Table(lambda s: (s.chapter, s.runs), before={"tasks": ()}, after={"scorecard": ()})


def threshold_rows() -> list[dict]:
    """Every threshold with its registered value and section, and its value as amended with the sections
    that moved it (the registered value where none did): the scorecard's threshold table."""
    return [{"claim": s.id, "threshold": name, "registered": t.value, "section": t.section,
             "amended": t.as_of(), "amended in": ", ".join(x for x, _ in t.moved)}
            for s in specs() for name, t in s.thresholds.items()]


def amendments_markdown(anchor) -> str:
    """The front page's list of what the protocol added after section 5 (:func:`rote.specs.additions`): one item
    per section with its name, a link (``anchor``: section -> the protocol page's target), its date and what
    it changed."""
    return "\n".join(f"- **{addition_label(a)}** ({{ref}}`section {a.section} <{anchor(a.section)}>`, {a.date}): "
                     f"{a.summary}" for a in additions())


VERDICT_ANCHOR = "verdict"  # every claim chapter ends with a "## Verdict" section (its HTML id)
NOT_RUN = "not run"


def claim_conditions(claim: str, task: str) -> tuple[str, ...]:
    """The noise conditions ``claim`` is judged in on ``task``: the task's (7.3: FDA's noise kinds, the primary
    first; THR ``-``), or those of them its spec opts in to (X1: FDA random)."""
    from .plan import task_conditions

    known = task_conditions(task)
    opted = CLAIM_CONDITIONS.get(claim, known)
    return tuple(c for c in known if c in opted)


def group(claim: str) -> str:
    """The scorecard group of a claim: the paper's claims, or beyond the paper."""
    return CLAIM_GROUPS.get(claim, PAPER_GROUP)


@dataclass(frozen=True)
class ClaimRecord:
    """One claim, task, noise condition and profile, over the seeds that ran: per seed its metrics, checks,
    verdicts and run keys. ``status``: the amended verdict or ``not run``; ``reason``: why not run."""

    claim: str
    task: str
    condition: str
    profile: str
    seeds: list[int]
    verdict_registered: str
    verdict_amended: str
    status: str
    per_seed: list[dict] = field(default_factory=list)
    threshold: dict[str, Any] = field(default_factory=dict)
    page: str = ""
    anchor: str = VERDICT_ANCHOR
    created: float = 0.0
    reason: str = ""
    # The fingerprint of the library that computed the record (:func:`library_code`, stamped by :func:`save`;
    # "" where not recorded: a record from before 8.6). Protocol 10 (8.6) compares a perturbed record with the
    # default one only when the same code computed both.
    code: str = ""
    # The fingerprint of the judging code that computed its verdicts (:func:`judging_code`, stamped by :func:`save`;
    # "" in a record from before it): a record whose judging code is not today's is stale (:func:`shown`).
    judging: str = ""
    # Where it was computed and how each run behind it trained (:func:`how_computed`, by :func:`stamped`; {} in a
    # record from before it, and in a record without seeds).
    ran: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.claim not in CLAIMS:
            raise ValueError(f"unknown claim {self.claim!r}")
        if self.task not in CLAIM_TASKS[self.claim]:
            raise ValueError(f"claim {self.claim} does not apply to task {self.task!r}")
        allowed = claim_conditions(self.claim, self.task)
        if self.condition not in allowed:
            raise ValueError(f"claim {self.claim} on task {self.task!r} has no condition {self.condition!r}; "
                             f"choose one of {', '.join(allowed)}")

    @property
    def run_keys(self) -> list[str]:
        return [k for s in self.per_seed for k in s.get("run_keys", [])]


def placeholder(claim: str, task: str, condition: str, profile: str, seeds: list[int] | None = None,
                reason: str = "") -> ClaimRecord:
    """A record without a verdict, ``not run`` in its place (never computed, or written by a chapter that could
    not judge the claim), and why (``reason``); :func:`shown` turns one into ``stale``."""
    return ClaimRecord(claim, task, condition, profile, list(seeds or []), NOT_RUN, NOT_RUN, NOT_RUN,
                       threshold=dict(THRESHOLDS[claim]), page=CLAIM_PAGES[claim], reason=reason)


def expected(profile: str) -> list[ClaimRecord]:
    """A ``not run`` placeholder for every (claim, task, condition) of the protocol."""
    return [placeholder(c, t, cond, profile) for c, tasks in CLAIM_TASKS.items() for t in tasks
            for cond in claim_conditions(c, t)]


def runs_are_profile_defaults(rec: ClaimRecord) -> bool | None:
    """Whether every run behind the record is one of the profile's own for its seeds (its condition's noisy
    run and noise-free twin; X1's grid): False for overrides and old records; None without runs."""
    from .plan import units, x1_keys

    keys = rec.run_keys
    if not keys:
        return None
    if "x1" in SPECS[rec.claim].runs:  # its grid of widths and noise ratios (protocol 9), a rate per width (12.4)
        return set(keys) <= x1_keys(rec.profile, list(rec.seeds))
    mine = [u for u in units(rec.profile, tasks=[rec.task], seeds=list(rec.seeds)) if u.condition == rec.condition]
    own = {c.key for u in mine for c in (u.noisy, u.clean)}
    return set(keys) <= own


def _plain(value):
    """JSON-safe copy: numpy and torch scalars to Python numbers, NaN to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def results_root() -> Path:
    """The project's default records folder (a caller with a results folder setting passes it as ``root``)."""
    return PROJECT_ROOT / "_build" / "results"


def seeds_label(seeds) -> str:
    """A seed list as the file names write it: ``7``, ``0_2``."""
    text = "_".join(str(int(x)) for x in seeds)
    if len(text) > 80:  # a long list: its first and last seed and a digest, so the name stays short
        text = f"{seeds[0]}_to_{seeds[-1]}_{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    return text


def record_path(root: Path, profile: str, claim: str, task: str, condition: str,
                seeds: list[int] | None = None) -> Path:
    """``<claim>-<task>[-<condition>].json`` for the protocol's seeds (or ``seeds`` None), else
    ``<claim>-<task>[-<condition>].seeds-<seeds>.json`` beside it."""
    from .plan import protocol_seeds

    stem = f"{claim}-{task}" + ("" if condition == "-" else f"-{condition}")
    if seeds is not None and list(seeds) != protocol_seeds(profile):
        return root / profile / f"{stem}.seeds-{seeds_label(seeds)}.json"
    return root / profile / f"{stem}.json"


@functools.lru_cache(maxsize=None)
def library_code() -> str:
    """A hash of every module of the package (path and bytes), once per process: a record stores it, so that
    stability compares records only where the same code computed both (8.6). Bytes, not the normalized
    sources of :func:`rote.config.fingerprint_sources`: 20 ms instead of a second per chapter."""
    package = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


JUDGING_MODULES = ("spec.py", "claims.py", "specs/*.py", "verdicts/*.py", "analysis/*.py")  # and what they import
STALE = "stale"


@functools.lru_cache(maxsize=None)
def judging_code() -> str:
    """A hash of the code that judges a claim (:data:`JUDGING_MODULES`: the specs, the verdicts, the claim
    records and the analyses, and every module of the package they import), each module by its tokens without
    comments, docstrings and layout, as :func:`rote.config.fingerprint_sources` reads it (hashed like an analysis's
    code, :func:`rote.analysis_cache.sources_fingerprint`): a comment or a docstring leaves the records current,
    any change to the code makes them stale. Once per process."""
    from .analysis_cache import sources_fingerprint

    package = Path(__file__).resolve().parent
    roots = tuple(p.relative_to(package).as_posix() for pattern in JUDGING_MODULES
                  for p in sorted(package.glob(pattern)))
    return sources_fingerprint(roots, package)


def is_stale(rec: ClaimRecord) -> bool:
    """Whether a record's verdicts were computed by judging code other than today's (or by code that did not
    say which: a record from before :func:`judging_code`). A record without seeds holds no verdict."""
    return bool(rec.per_seed) and rec.judging != judging_code()


def rebuild_command(rec: ClaimRecord) -> str:
    """The command that computes ``rec`` again with today's code: its chapter, profile and seeds."""
    chapter, seeds = SPECS[rec.claim].chapter, list(rec.seeds)
    if seeds == list(range(len(seeds))):
        return f"python -m rote book --profile {rec.profile} --chapter {chapter} --seeds {len(seeds)}"
    return f"python -m rote run {chapter} --profile {rec.profile} -p seeds '{json.dumps(seeds)}'"


def shown(records: list[ClaimRecord]) -> list[ClaimRecord]:
    """The records as the scorecard, the front page and ``rote claims`` show them: a stale one (:func:`is_stale`)
    as a ``stale`` record with the command that rebuilds it and no seeds' checks, so that it never counts as a
    verdict; the others as they are."""
    def stale(r: ClaimRecord) -> ClaimRecord:
        why = (f"judged by code other than today's (judging code {r.judging or 'not recorded'}, today "
               f"{judging_code()}); rebuild it with `{rebuild_command(r)}`")
        return dataclasses.replace(placeholder(r.claim, r.task, r.condition, r.profile, r.seeds, why),
                                   verdict_registered=STALE, verdict_amended=STALE, status=STALE)

    return [stale(r) if is_stale(r) else r for r in records]


def load_shown(profile: str | None = None, root: Path | None = None,
               seeds: list[int] | None = None) -> list[ClaimRecord]:
    """:func:`load_all`, each record as :func:`shown` shows it (a stale one as ``stale``)."""
    return shown(load_all(profile, root, seeds))


def _write(path: Path, data: dict) -> Path:
    """Write ``data`` as JSON at ``path`` atomically (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(_plain(data), indent=2))
    os.replace(tmp, path)
    return path


def how_computed(rec: ClaimRecord, runs: Path | None = None) -> dict:
    """Where ``rec`` is being computed (this process's analysis device, :func:`rote.model.pick_device`, its host and
    torch) and how each of its runs trained (:func:`rote.runs.how_trained`, read from the runs folder ``runs``,
    None: the project's; None for a run not stored there), by run key. {} for a record without seeds."""
    if not rec.per_seed:
        return {}
    import torch

    from .model import pick_device
    from .runs import how_trained

    return {"device": pick_device().type, "host": os.uname().nodename, "torch": torch.__version__.split("+")[0],
            "runs": {key: how_trained(rec.task, key, runs) for key in dict.fromkeys(rec.run_keys)}}


def stamped(rec: ClaimRecord, runs: Path | None = None) -> ClaimRecord:
    """``rec`` stamped with :func:`library_code`, :func:`judging_code` and :func:`how_computed` (its runs read from
    ``runs``) where it names none: the record as :func:`save` stores it and a chapter shows it."""
    return dataclasses.replace(rec, code=rec.code or library_code(), judging=rec.judging or judging_code(),
                               ran=rec.ran or how_computed(rec, runs))


def save(rec: ClaimRecord, root: Path | None = None, runs: Path | None = None) -> Path:
    """Store a record under the seeds it came from (:func:`record_path`), :func:`stamped`."""
    path = record_path(root or results_root(), rec.profile, rec.claim, rec.task, rec.condition, rec.seeds)
    return _write(path, asdict(stamped(rec, runs)))


def _scan(profile: str | None, root: Path | None, seeds: list[int] | None) -> tuple[list[ClaimRecord], list[ClaimRecord]]:
    """Per (claim, task, condition): the record of the wanted seeds (or a placeholder), and the other
    stored records (:func:`load_all`, :func:`other_records`)."""
    from .plan import seed_list

    root = root or results_root()
    stored = {p.name for p in root.iterdir() if p.is_dir()} if root.exists() else set()
    main, others = [], []
    for prof in [profile] if profile else sorted(stored | {"quick"}):  # always the default profile
        wanted = list(seeds) if seeds is not None else seed_list(prof)
        for ph in expected(prof):
            found = []
            default = record_path(root, prof, ph.claim, ph.task, ph.condition)
            for path in [default, *sorted(default.parent.glob(f"{default.stem}.seeds-*.json"))]:
                if not path.exists() or path.name.endswith(".stability.json"):
                    continue
                try:
                    rec = ClaimRecord(**json.loads(path.read_text()))
                except (TypeError, ValueError):  # a record of an older schema: rerun its chapter
                    continue
                names = (rec.claim, rec.task, rec.condition, rec.profile)
                if names != (ph.claim, ph.task, ph.condition, ph.profile):  # a copied or renamed file
                    fmt.say(f"{path} holds the record of {' '.join(names)}, not the one its name says; "
                            f"ignored (shown as not run)")
                    continue
                canonical = path == record_path(root, prof, rec.claim, rec.task, rec.condition, rec.seeds)
                found.append((canonical, rec.created, rec))
            mine = [f for f in found if list(f[2].seeds) == wanted]
            chosen = max(mine, key=lambda f: f[:2])[2] if mine else None
            main.append(chosen or ph)
            others += [f[2] for f in found if f[2] is not chosen]
    return main, others


def load_all(profile: str | None = None, root: Path | None = None, seeds: list[int] | None = None) -> list[ClaimRecord]:
    """Every (claim, task, condition) for the profile(s): the stored record of ``seeds`` (default: the book's,
    :func:`rote.plan.seed_list`), else a ``not run`` placeholder (also for an older format, and for a file
    holding another row's record, refused with a line on stderr)."""
    return _scan(profile, root, seeds)[0]


def other_records(profile: str | None = None, root: Path | None = None,
                  seeds: list[int] | None = None) -> list[ClaimRecord]:
    """The stored records that :func:`load_all` does not return for the same ``seeds``, in its order."""
    return _scan(profile, root, seeds)[1]


# -- stability (protocol 10) --------------------------------------------------------------------------
def stability_path(rec: ClaimRecord, root: Path | None = None) -> Path:
    """Beside the record, ``<record>.stability.json``: a stability build never rewrites the record."""
    path = record_path(root or results_root(), rec.profile, rec.claim, rec.task, rec.condition, rec.seeds)
    return path.with_name(path.stem + ".stability.json")


def save_stability(rec: ClaimRecord, entry: dict, root: Path | None = None) -> Path:
    """Store a record's stability entry, tied to the record (its ``created`` time and amended verdict)."""
    tie = {"record_created": rec.created, "verdict_amended": rec.verdict_amended, "seeds": list(rec.seeds)}
    return _write(stability_path(rec, root), {**tie, **entry})


def load_stability(rec: ClaimRecord, root: Path | None = None) -> dict | None:
    """A record's stability entry, or None: never computed, unreadable, or for an earlier record."""
    try:
        entry = json.loads(stability_path(rec, root).read_text())
    except (OSError, ValueError):
        return None
    if entry.get("record_created") != rec.created or entry.get("verdict_amended") != rec.verdict_amended:
        return None
    return entry

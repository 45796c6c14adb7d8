"""The front page (``book/intro.md``) as the site stages it: places marked by a pair of HTML comments
(``<!-- rote:results -->`` ... ``<!-- /rote:results -->``) around text that reads well without a build are
filled (:func:`fill`) with what the build's records say and how long a build takes. The protocol page
(``book/protocol.md``) is staged with a target per numbered section (:func:`protocol_markdown`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from .. import claims, fmt
from ..config import PROJECT_ROOT
from ..fmt import get as _get, md_cell
from ..report import listed
from ..specs import additions
from ..stability import label, verdict_word

RESULTS = "rote:results"  # the marked place of the generated results section
BUILD_TIME = "rote:build-time"  # the marked place of the sentence on how long a cold build takes
GLANCE = "rote:glance"  # the marked place of the scorecard's "At a glance" figure, near the top
PROTOCOL_SOURCE = PROJECT_ROOT / "book" / "protocol.md"  # the protocol, a page of the book
PROTOCOL_PAGE = "protocol"  # the page: book/protocol.md ({doc}`protocol`)
AMENDMENTS = "rote:amendments"  # the marked place of the list of amendments (rote.claims.amendments_markdown)
LINKED_SECTIONS = ("5", *(a.section for a in additions()))  # the sections the staged book/intro.md links

# The order in which a claim's sentence names its rows' verdict words.
WORDS = ("holds", "fails", "mixed", "unresolved", "not run", claims.STALE)


# -- rows ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One (claim, task, condition) of the build, as the front page shows it."""

    claim: str
    task: str
    condition: str
    amended: str  # the record's verdicts, as stored
    registered: str
    seeds: tuple[int, ...] = ()
    counts: dict = field(default_factory=dict)  # amended per-seed verdicts: pass / fail / unresolved -> count
    stability: str = ""  # rote.stability.label of the row's entry; "" where no stability build computed it
    reason: str = ""  # why a record a chapter wrote is not run
    page: str = ""


@dataclass(frozen=True)
class Build:
    """What the front page reads from a build: profile, seeds (and the protocol's), records
    (:func:`rote.claims.load_all`), chapter seconds added up, and the results root of stability entries."""

    profile: str
    seeds: tuple[int, ...]
    protocol_seeds: tuple[int, ...]
    records: tuple = ()
    chapter_seconds: float | None = None
    results_root: Path | None = None


def rows(records: Iterable, root: Path | None = None) -> list[Row]:
    """The build's rows from its records, with each record's stability entry (under ``root``)."""
    out = []
    for rec in records:
        per_seed = _get(rec, "per_seed") or []
        counts = {w: sum(s.get("amended") == w for s in per_seed) for w in ("pass", "fail", "unresolved")}
        entry = claims.load_stability(rec, root) if per_seed and not isinstance(rec, dict) else None
        out.append(Row(_get(rec, "claim"), _get(rec, "task"), _get(rec, "condition"),
                       str(_get(rec, "verdict_amended") or claims.NOT_RUN),
                       str(_get(rec, "verdict_registered") or claims.NOT_RUN),
                       tuple(_get(rec, "seeds") or ()) if per_seed else (), counts if per_seed else {},
                       label(entry) if entry else "", _get(rec, "reason") or "",
                       _get(rec, "page") or claims.CLAIM_PAGES.get(_get(rec, "claim"), "")))
    return out


# -- words -----------------------------------------------------------------------------------------
def where(row: Row) -> str:
    """A row's task and noise condition in a sentence: ``FDA `random```, ``THR``."""
    return row.task.upper() + ("" if row.condition in ("-", "", None) else f" `{row.condition}`")


def word(verdict: str) -> str:
    """The verdict word a sentence groups rows by (:data:`WORDS`; a 1-seed pass reads ``holds``)."""
    found = verdict_word(verdict)
    return found if found in WORDS else "mixed"


def _named(row: Row, said: str) -> str:
    """A row named in a sentence (``said``: its verdict word), with a mixed row's per-seed counts
    (``2 pass, 1 fail``), why not run, or under which change fragile."""
    counts = ", ".join(f"{n} {w}" for w, n in row.counts.items() if n)
    notes = [counts if said == "mixed" else "", row.reason.rstrip(".") if said in ("not run", claims.STALE) else "",
             # "fragile (precision, seeds)" -> "fragile: precision, seeds"
             row.stability.replace(" (", ": ").rstrip(")") if row.stability.startswith("fragile") else ""]
    notes = [n for n in notes if n]
    return where(row) + (f" ({'; '.join(notes)})" if notes else "")


VERBS = {"holds": "holds", "fails": "fails", "mixed": "is mixed", "unresolved": "is unresolved",
         "not run": "has not run yet", claims.STALE: "is stale (judged by older code)"}


def _clauses(claim_rows: Sequence[Row], verdict_of, one_seed: bool) -> list[str]:
    groups: dict[str, list[Row]] = {}
    for r in claim_rows:
        groups.setdefault(word(verdict_of(r)), []).append(r)
    clauses = []
    for w in [w for w in WORDS if w in groups]:
        named = [_named(r, w) for r in groups[w]]
        every = len(groups) == 1 and len(claim_rows) > 1
        target = f"every task and condition ({', '.join(named)})" if every else listed(named)
        clauses.append(f"{'passes' if one_seed and w == 'holds' else VERBS[w]} for {target}")
    return clauses


def claim_sentence(claim: str, claim_rows: Sequence[Row], subject: str | None = None) -> str:
    """One sentence on ``claim``'s amended reading, rows grouped by verdict word (``C1 holds for FDA
    `digit` and THR; it fails for FDA `random`.``); one seed says ``passes`` and ends ``(1 seed)``; rows
    whose registered reading has another word come last. ``subject``: how it names the claim."""
    subject = subject or claim
    claim_rows = [r for r in claim_rows if r.claim == claim]
    if not claim_rows:
        return f"{subject} has no record in this build."
    ran = [r for r in claim_rows if r.seeds]
    one_seed = bool(ran) and all(len(r.seeds) == 1 for r in ran)
    clauses = _clauses(claim_rows, lambda r: r.amended, one_seed)
    sentence = f"{subject} {clauses[0]}" + "".join(f"; it {c}" for c in clauses[1:])
    differs = [r for r in ran if word(r.registered) != word(r.amended) and claim not in claims.UNAMENDED]
    if differs:
        sentence += f"; in the registered reading it {'; it '.join(_clauses(differs, lambda r: r.registered, one_seed))}"
    return sentence + (" (1 seed)." if one_seed else ".")


# -- the results section ---------------------------------------------------------------------------
def results_table(build_rows: Sequence[Row]) -> list[str]:
    """A markdown table of the rows: claim (linked), task, condition, both verdicts, stability where any."""
    with_stability = any(r.stability for r in build_rows)
    head = ["claim", "task", "condition", "amended", "registered"] + (["stability"] if with_stability else [])
    lines = ["| " + " | ".join(head) + " |", "|" + ":--|" * len(head)]
    for r in build_rows:
        cells = [f"{{doc}}`{r.claim} <{r.page}>`" if r.page else r.claim, r.task.upper(), r.condition, r.amended,
                 r.registered, *([r.stability or (claims.NOT_RUN if r.seeds else "")] if with_stability else [])]
        lines.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
    return lines


def _seeds_text(seeds: Sequence[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else "seeds " + listed([str(s) for s in seeds])


def results_markdown(build: Build) -> str:
    """The front page's results: which records, one sentence per claim, and the table of every row."""
    build_rows = rows(build.records, build.results_root)
    seeds, protocol = list(build.seeds), list(build.protocol_seeds)
    n_run = sum(bool(r.seeds) for r in build_rows)
    own = "the protocol's seeds" if seeds == protocol else (
        f"not the protocol's {_seeds_text(protocol)}: a quick look, whose verdicts say `(1 seed)`"
        if len(seeds) == 1 else f"not the protocol's {_seeds_text(protocol)}")
    lines = [f"This build of the `{build.profile}` profile ran {_seeds_text(seeds)} ({own}); "
             f"{fmt.page(n_run)} of its {fmt.page(len(build_rows))} claim records {'holds' if n_run == 1 else 'hold'} verdicts"
             + (f"; the others say {' or '.join(sorted({f'*{r.amended}*' for r in build_rows if not r.seeds}))}."
                if n_run < len(build_rows) else ".")
             + " In the amended reading (the protocol's amendments, below), a claim **holds** where every "
             "seed passes, **fails** where every seed fails, is **unresolved** where no seed could be "
             "decided, and is **mixed** otherwise:", ""]
    for claim, title in claims.CLAIMS.items():
        page = claims.CLAIM_PAGES.get(claim)
        subject = f"**{claim}** ({{doc}}`{title} <{page}>`)" if page else f"**{claim}**"
        lines.append("- " + claim_sentence(claim, build_rows, subject))
    lines += ["", "Every row, in both readings (the registered one is protocol section 5 as written):", "",
              *results_table(build_rows), ""]
    if not any(r.stability for r in build_rows):
        lines.append("How fragile each verdict is (protocol section 10) was not computed for this build "
                     "(`make stability`).")
    lines.append("The {doc}`scorecard` has every check behind these verdicts, with its numbers.")
    return "\n".join(lines)


# -- how long a build takes ------------------------------------------------------------------------
def build_time_markdown(build: Build, estimator=None, workers: int | None = None) -> str:
    """How long a cold build takes: the default plan's training on ``workers`` cores (default: this
    machine's) by ``estimator`` (default: the run cache's, never probing), and the chapters' execution."""
    from ..plan import plan
    from .timings import Estimator, default_workers, fmt_seconds, pool_seconds

    estimator = Estimator(probe=False) if estimator is None else estimator
    workers = default_workers() if workers is None else workers
    profile, seeds = build.profile, list(build.seeds)
    configs = plan(profile, seeds)
    estimates = [estimator.estimate(c) for c in configs]
    total = pool_seconds([e.seconds for e in estimates], workers)
    cores = f"{fmt.page(workers)} core{'s' if workers != 1 else ''}"
    if estimates and all(e.source == "measured" for e in estimates):
        how = "estimated from the runs of the same shapes that the build machine finished (its timings store, " \
              "`rote plan`)"
    else:
        how = f"by the plan's estimate, not a measurement of a build (`rote plan`; {estimator.summary(configs)})"
    text = (f"A cold build of the `{profile}` profile (`python -m rote book --profile {profile}`, "
            f"{_seeds_text(seeds)}, nothing cached, X1's grid aside) trains {fmt.page(len(configs))} runs: "
            f"about {fmt_seconds(total)} on the build machine's {cores}, {how}.")
    if build.chapter_seconds:
        text += (f" Executing the chapters took {fmt_seconds(build.chapter_seconds)} (each chapter's latest execution "
                 "for this profile, wall times added up; a chapter that waited for its runs to train counts the wait).")
    return text


# -- staging ---------------------------------------------------------------------------------------
def fill(text: str, marker: str, content: str) -> str:
    """``text`` with what lies between ``marker``'s pair of comments (kept) replaced by ``content``; a
    page without the pair unchanged, an unclosed pair an error."""
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    if start not in text:
        return text
    before, _, rest = text.partition(start)
    if end not in rest:
        raise ValueError(f"the page opens {start} but never closes it ({end})")
    _, _, after = rest.partition(end)
    return f"{before}{start}\n{content.strip()}\n{end}{after}"


def glance_markdown(image: str, profile: str) -> str:
    """The front page's figure: the scorecard's "At a glance" heat map (``image``, beside the page)."""
    return (f"```{{figure}} {image}\n:name: at-a-glance\n:alt: A grid with one row per claim and one column per "
            f"task and noise condition; each cell is coloured and labelled with its amended verdict on the "
            f"{profile} profile.\n\nAt a glance: the amended verdict of every claim, task and noise condition of "
            "this build, each cell labelled with its verdict. The {doc}`scorecard` has the checks behind each.\n```")


def stage_intro(text: str, build: Build, estimator=None, workers: int | None = None, glance: str = "") -> str:
    """``book/intro.md``'s text with its results, build-time and (``glance``: its image) figure places
    filled from ``build``."""
    text = fill(fill(text, RESULTS, results_markdown(build)), AMENDMENTS, claims.amendments_markdown(protocol_anchor))
    if glance:
        text = fill(text, GLANCE, glance_markdown(glance, build.profile))
    if f"<!-- {BUILD_TIME} -->" in text:
        text = fill(text, BUILD_TIME, build_time_markdown(build, estimator, workers))
    return text


def protocol_anchor(section: str) -> str:
    """The MyST target of a protocol section: ``7`` -> ``protocol-7``, ``8.5`` -> ``protocol-8-5``."""
    return "protocol-" + section.replace(".", "-")


SECTION_HEADING = re.compile(r"^#{2,6} (\d+(?:\.\d+)*)\.?\s")


def protocol_sections(text: str) -> list[str]:
    """The numbered sections of the protocol's ``text`` (``5``, ``7.5``), in order: its numbered headings."""
    return [found.group(1) for found in map(SECTION_HEADING.match, text.splitlines()) if found]


def protocol_markdown(text: str | None = None) -> str:
    """The protocol page as the site stages it: the committed ``book/protocol.md`` (``text``: another
    protocol's) with a note under its title and a MyST target (:func:`protocol_anchor`) before every
    numbered section's heading. The targets are added here, not committed, so the book's copy stays
    identical to the project's design document (``tests/test_protocol_page.py``)."""
    text = PROTOCOL_SOURCE.read_text() if text is None else text
    note = ("```{note}\nThe project's replication protocol, kept in the book (`book/protocol.md`) identical to "
            "its design document. Thresholds were registered in it before any result; its amendments change how "
            "verdicts are reached, never a threshold.\n```")
    out, titled = [], False
    for line in text.splitlines():
        found = SECTION_HEADING.match(line)
        out += [f"({protocol_anchor(found.group(1))})=", line] if found else [line]
        if not titled and line.startswith("# "):
            out += ["", note]
            titled = True
    return "\n".join(out) + "\n"


CITATION = re.compile(r"\b(?:[Ss]ections?|[Pp]rotocol(?: section)?|[Cc]larification)[- ](\d+(?:\.\d+)*"
                      r"(?:(?:, | and | or |-)\d+(?:\.\d+)*)*)")


def cited_sections(value) -> set[str]:
    """The protocol sections ``value`` cites (a record, a check, text; walked through dicts and lists):
    each check history's sections (``[["7.5", "ceiling"], ["8.1", "validity"]]``) and each section named
    in words (``section 8.5``, ``protocol 7.1``, ``sections 8.3-8.6``)."""
    if isinstance(value, str):
        return {s for run in CITATION.findall(value) for s in re.findall(r"\d+(?:\.\d+)*", run)}
    if isinstance(value, dict):
        history = {str(e[0]) for e in value.get("history") or () if isinstance(e, (list, tuple)) and e}
        return history.union(*(cited_sections(v) for k, v in value.items() if k != "history"))
    if isinstance(value, (list, tuple)):
        return set().union(*(cited_sections(v) for v in value))
    return set()

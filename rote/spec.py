"""A claim declared once: its :class:`ClaimSpec` (``SPEC`` in ``rote/specs/<claim>.py``), its
:class:`Threshold` values by protocol section; the registry every table of claims is derived from is
:mod:`rote.specs`.

The id (``X1``) names the claim's modules and check ids (``x1``: :attr:`ClaimSpec.module`); the notebook
(``07_benign_memorization``) its page and, without the number, its chapter (:attr:`ClaimSpec.chapter`).
An amendment is data: a threshold holds its registered value and its values by amendment, keyed by
protocol section (``"5"``, ``"7.5"``); a claim names the amendments that touch it, and the table of what
the protocol added after section 5 (:data:`rote.specs.AMENDMENTS`, :class:`Addition`) names and dates them.
A verdict module reads the thresholds as of the reading it builds (:func:`thresholds_as_of`). A bad spec
fails when it is built, with one line naming the field; the registry (:mod:`rote.specs`) refuses a second
claim with the same id, module, notebook or chapter.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from dataclasses import dataclass
from typing import Any

from .config import TASKS
from .plan import task_conditions

PAPER_GROUP, BEYOND_GROUP = "Claims of the paper", "Beyond the paper"  # the scorecard's groups, in order


def section_key(section: str) -> tuple[int, ...]:
    """``"7.5"`` -> (7, 5): sections in protocol order."""
    if not isinstance(section, str) or not re.fullmatch(r"\d+(\.\d+)*", section):
        raise ValueError(f"a protocol section is written like '5' or '7.5', got {section!r}")
    return tuple(int(x) for x in section.split("."))


def within(section: str, as_of: str | None) -> bool:
    """Whether ``section`` is in force as of ``as_of`` (None: as of the latest section): ``"7.5"`` is
    as of ``"7"`` and of ``"8.1"``, not as of ``"5"``."""
    if as_of is None:
        return True
    k = section_key(as_of)
    return section_key(section)[:len(k)] <= k


@dataclass(frozen=True)
class Threshold:
    """A threshold's value as its claim registered it in ``section`` (an amendment's section where an
    amendment added it) and ``moved``: (section, value) for each amendment that moved it, in order."""

    value: Any
    section: str = "5"
    moved: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        sections = [self.section, *(s for s, _ in self.moved)]
        keys = [section_key(s) for s in sections]
        if keys != sorted(set(keys)):
            raise ValueError(f"a threshold's sections must increase, got {sections}")

    @property
    def values(self) -> tuple[tuple[str, Any], ...]:
        """(section, value): the registered one, then one per amendment that moved it."""
        return ((self.section, self.value), *self.moved)

    def as_of(self, section: str | None = None) -> Any:
        """The value in force as of ``section`` (None: the latest; also None before it was registered)."""
        found = [v for s, v in self.values if within(s, section)]
        return found[-1] if found else None

    def read(self, section: str | None = None) -> Any:
        """The value a check built as of ``section`` compares with: :meth:`as_of`, or where an amendment
        registered the threshold after ``section``, its registered value (the check that reads it is that
        amendment's)."""
        found = self.as_of(section)
        return self.value if found is None else found



@dataclass(frozen=True)
class Addition:
    """A section the protocol added after section 5, as the book lists it: an ``amendment`` (its readings
    are named ``amendment 1``, ``amendment 2`` ... in protocol order), a ``clarification`` of one, or a
    ``registration`` of something new (``label``: what the list calls it, e.g. ``X1``); its date, the
    protocol heading's words after the date (``title``) and one paragraph (``summary``) for the front page."""

    section: str
    kind: str
    date: str
    title: str
    summary: str
    label: str = ""

    def __post_init__(self):
        section_key(self.section)
        if self.kind not in ("amendment", "clarification", "registration"):
            raise ValueError(f"section {self.section}: kind must be amendment, clarification or registration")
        if self.kind == "amendment" and "." in self.section:
            raise ValueError(f"section {self.section}: an amendment is a whole section")
        if not re.fullmatch(r"\d{4}-\d\d-\d\d", self.date) or not self.title.strip() or not self.summary.strip():
            raise ValueError(f"section {self.section}: date (YYYY-MM-DD), title and summary are required")


_READ_AS_OF: contextvars.ContextVar = contextvars.ContextVar("thresholds_as_of", default=None)


@contextlib.contextmanager
def thresholds_as_of(section: str | None):
    """Within it, :meth:`ClaimSpec.read` (and so ``rote.claims.THRESHOLDS``) gives the thresholds as of
    ``section`` (None: the latest): a verdict module builds each reading's checks under it."""
    if section is not None:
        section_key(section)  # refuses a malformed section
    token = _READ_AS_OF.set(section)
    try:
        yield
    finally:
        _READ_AS_OF.reset(token)


@dataclass(frozen=True)
class ClaimSpec:
    """Everything the book, the plan, the verdicts and the scorecard need to know about one claim.

    ``runs``: the parts of the plan (:data:`rote.plan.PARTS`) its chapter trains; ``parts``: its
    required parts (8.1: a seed without a deciding check for one is unresolved); ``thresholds``: name ->
    value or :class:`Threshold` (a plain value is registered in ``registered_in``); ``conditions``: the
    noise conditions it opts in to (None: every condition of each task, 7.3); ``amendments``: the
    sections of the amendments that touch it; ``fails_only_on``: the check whose failure on every seed
    alone makes the claim fail across seeds (X1, protocol 9); ``stability``: protocol 10 reruns it."""

    id: str
    title: str
    tasks: tuple[str, ...]
    notebook: str
    runs: tuple[str, ...]
    parts: tuple[str, ...]
    thresholds: dict[str, Any]
    conditions: tuple[str, ...] | None = None
    registered_in: str = "5"
    amendments: tuple[str, ...] = ()
    group: str = PAPER_GROUP
    fails_only_on: str = ""
    stability: bool = True

    def __post_init__(self):
        object.__setattr__(self, "thresholds", {k: v if isinstance(v, Threshold) else Threshold(v, self.registered_in)
                                                for k, v in dict(self.thresholds or {}).items()})
        for problem in self._problems():
            raise ValueError(f"ClaimSpec {self.id!r}: {problem}")

    def _problems(self):
        words = lambda v: isinstance(v, tuple) and v and all(isinstance(x, str) and x for x in v)  # noqa: E731
        if not isinstance(self.id, str) or not re.fullmatch(r"[A-Z]\d+", self.id):
            yield "id must be a capital letter and a number (C1, X1)"
        if not isinstance(self.title, str) or not self.title.strip():
            yield "title is missing"
        if not words(self.tasks) or not set(self.tasks) <= set(TASKS):
            yield f"tasks must be a non-empty tuple of {', '.join(TASKS)}"
        if self.conditions is not None and not words(self.conditions):
            yield "conditions must be None or a non-empty tuple of noise conditions"
        elif self.conditions is not None and set(self.conditions) - set(self.known_conditions):
            yield f"conditions must be noise conditions of its tasks ({', '.join(self.known_conditions)})"
        if not isinstance(self.notebook, str) or not re.fullmatch(r"\d\d_[a-z0-9_]+", self.notebook):
            yield "notebook must be the notebook's stem in book/, e.g. 02_learning_dynamics"
        for name in ("runs", "parts"):
            if not words(getattr(self, name)) or len(set(getattr(self, name))) != len(getattr(self, name)):
                yield f"{name} must be a non-empty tuple of distinct names"
        if not self.thresholds:
            yield "thresholds are missing"
        if self.group not in (PAPER_GROUP, BEYOND_GROUP):
            yield f"group must be {PAPER_GROUP!r} or {BEYOND_GROUP!r}"
        if self.fails_only_on and not self.fails_only_on.startswith(f"{self.module}."):
            yield f"fails_only_on must be a check id of the claim ({self.module}.*)"
        try:
            order = [section_key(s) for s in (self.registered_in, *self.amendments)]
        except ValueError as e:
            yield f"registered_in / amendments: {e}"
            return
        if order != sorted(set(order)) or any(len(k) != 1 for k in order[1:]):
            yield "amendments must be whole sections (7, 8) after registered_in, in order"
        for name, t in self.thresholds.items():
            if any(not within(s, self.registered_in) and s.split(".")[0] not in self.amendments for s, _ in t.values):
                yield f"threshold {name}: a section no amendment of the claim holds ({[s for s, _ in t.values]})"

    @property
    def known_conditions(self) -> tuple[str, ...]:
        """The noise conditions of the claim's tasks (:func:`rote.plan.task_conditions`), the ones it may opt in to."""
        return tuple(c for task in self.tasks for c in task_conditions(task))

    @property
    def module(self) -> str:
        """The claim's module name (``rote/specs``, ``rote/verdicts``, ``rote/chapters``) and check-id prefix."""
        return self.id.lower()

    @property
    def chapter(self) -> str:
        """The chapter's name in the book (``rote book --chapter``): the notebook without its number."""
        return self.notebook.split("_", 1)[1]

    def values(self, section: str | None = None) -> dict[str, Any]:
        """Threshold name -> value as of ``section`` (None: the latest), as the records carry them."""
        return {k: t.as_of(section) for k, t in self.thresholds.items() if t.as_of(section) is not None}

    def read(self, section: str | None = None) -> dict[str, Any]:
        """Threshold name -> the value a check built as of ``section`` compares with (:meth:`Threshold.read`;
        default: the section of :func:`thresholds_as_of`, else the latest)."""
        section = section if section is not None else _READ_AS_OF.get()
        return {k: t.read(section) for k, t in self.thresholds.items()}

    @property
    def amended_in(self) -> tuple[str, ...]:
        """The amendments that touch the claim, in protocol order: those it names and those that moved one of
        its thresholds (each is a reading of its records, :func:`rote.verdicts.core.readings`)."""
        moved = {s.split(".")[0] for s in self.moves() if not within(s, self.registered_in)}
        return tuple(sorted(set(self.amendments) | moved, key=section_key))

    def moves(self) -> tuple[str, ...]:
        """The sections, in protocol order, where an amendment moved one of the claim's thresholds: its checks
        are built again as of each (:func:`rote.verdicts.core.as_read`)."""
        return tuple(sorted({s for t in self.thresholds.values() for s, _ in t.moved}, key=section_key))


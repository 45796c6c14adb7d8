"""Chapter parameters: one frozen dataclass per chapter, every value checked before any work.

A chapter's dataclass names the parameters of its notebook's ``parameters`` cell (papermill), in the
cell's order and with the cell's defaults (``tests/test_chapter_params.py`` keeps the two equal), and
says what each value may be. :func:`rote.driver.resolve_parameters` builds it from the defaults and the
values given on the command line, so a bad value stops ``rote run`` or ``rote book`` with one line (a
:class:`~rote.config.ConfigError` naming the parameter, its value and its valid range) before
anything trains or a cell executes.

A field is declared with :func:`param`: its default and its :class:`Rule`. The claim chapters'
dataclasses live beside their sections (``rote.chapters.c1.Params`` .. ``c5.Params``, ``x1.Params``); the two
chapters without a claim module (``tasks``, ``scorecard``) are here (X1's: ``rote.chapters.x1.Params``).
:func:`chapter_params` maps a chapter name (as :func:`rote.driver.chapters` names them) to its class.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable

from ..analysis.ranges import is_whole
from ..config import PROFILES, TASKS, ConfigError
from ..specs import Table


# -- rules --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """What a parameter's value may be: ``wanted`` says it in words (the error's range), ``ok`` tests it."""

    wanted: str
    ok: Callable[[Any], bool]

    def check(self, name: str, value: Any) -> None:
        if not self.ok(value):
            raise ConfigError(f"{name} must be {self.wanted}, got {value!r}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _interval(low, high, low_open: bool, high_open: bool) -> str:
    if high is None:
        return f"> {low}" if low_open else f">= {low}"
    return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def whole(low: int, high: int | None = None) -> Rule:
    """A whole number (not a bool) in [low, high] (no upper end when ``high`` is None)."""
    return Rule(f"a whole number {_interval(low, high, False, False)}",
                lambda v: is_whole(v) and v >= low and (high is None or v <= high))


def number(low: float, high: float | None = None, *, low_open: bool = False, high_open: bool = False) -> Rule:
    """A finite number (an int is one) between ``low`` and ``high``, each end open or closed."""
    def ok(v) -> bool:
        return (_is_number(v) and (v > low if low_open else v >= low)
                and (high is None or (v < high if high_open else v <= high)))

    return Rule(f"a number {_interval(low, high, low_open, high_open)}", ok)


def one_of(choices) -> Rule:
    return Rule(f"one of {', '.join(choices)}", lambda v: v in choices)


def flag() -> Rule:
    return Rule("true or false", lambda v: isinstance(v, bool))


def mapping() -> Rule:
    return Rule("a dict (a JSON object)", lambda v: isinstance(v, dict))


def _is_list(value) -> bool:
    return isinstance(value, (list, tuple)) and len(value) > 0


def task_list(allowed=TASKS) -> Rule:
    """A non-empty list of distinct task names from ``allowed``."""
    return Rule(f"a non-empty list of distinct tasks from {', '.join(allowed)}",
                lambda v: _is_list(v) and all(t in allowed for t in v) and len(set(v)) == len(v))


def seed_list() -> Rule:
    """``None`` (the book's seeds) or a non-empty list of distinct whole numbers >= 0."""
    return Rule("None or a non-empty list of distinct whole numbers >= 0",
                lambda v: v is None or (_is_list(v) and all(is_whole(s) and s >= 0 for s in v)
                                        and len(set(v)) == len(v)))


def increasing(low: int = 1) -> Rule:
    """A non-empty, strictly increasing list of whole numbers >= ``low`` (ranks)."""
    return Rule(f"a non-empty, strictly increasing list of whole numbers >= {low}",
                lambda v: _is_list(v) and all(is_whole(r) and r >= low for r in v)
                and all(a < b for a, b in zip(v, v[1:])))


def noise_ratios() -> Rule:
    """``None`` (the chapter's default) or a non-empty list of noise ratios, each in [0, 1)."""
    each = number(0, 1, high_open=True)
    return Rule("None or a non-empty list of noise ratios in [0, 1)",
                lambda v: v is None or (_is_list(v) and all(each.ok(r) for r in v)))


def positions_by_task(lengths: dict[str, int]) -> Rule:
    """A dict task -> list of input positions, each position inside that task's prompt (``lengths``)."""
    def inside(task, positions) -> bool:
        return (task in lengths and isinstance(positions, (list, tuple))
                and all(is_whole(p) and 0 <= p < lengths[task] for p in positions))

    def ok(v) -> bool:
        return isinstance(v, dict) and all(inside(task, positions) for task, positions in v.items())

    where = ", ".join(f"{task}: 0 .. {n - 1}" for task, n in lengths.items())
    return Rule(f"a dict of task -> list of prompt positions ({where})", ok)


def checked_elsewhere(wanted: str) -> Rule:
    """Any value here: a check that needs more than the value runs in ``check_together``."""
    return Rule(wanted, lambda v: True)


def param(default, rule: Rule):
    """A parameter field: its default (a fresh copy for a list or a dict) and the rule its value obeys."""
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata={"rule": rule})
    return dataclasses.field(default=default, metadata={"rule": rule})


# -- the base -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChapterParams:
    """A chapter's parameters. Every field's rule is checked in field order (the first bad value is
    the one reported), then :meth:`check_together`, the checks that involve several fields."""

    profile: str = param("quick", one_of(PROFILES))  # the cell reads $ROTE_PROFILE, else "quick"

    def __post_init__(self):
        for f in dataclasses.fields(self):
            f.metadata["rule"].check(f.name, getattr(self, f.name))
        self.check_together()

    def check_together(self) -> None:
        """Checks across fields (none here; a chapter overrides this)."""

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Parameter name -> default value, in the cell's order."""
        return {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                for f in dataclasses.fields(cls)}


def at_most(name: str, value, bound_name: str, bound) -> None:
    """A check across fields: ``value`` (already a whole number >= 1) may not exceed ``bound``."""
    if value > bound:
        raise ConfigError(f"{name} must be a whole number in [1, {bound_name}={bound}], got {value!r}")


# -- the chapters without a claim module ----------------------------------------------------------
@dataclass(frozen=True)
class TasksParams(ChapterParams):
    """Chapter 01 (the tasks): the datasets of one seed, a few examples of each."""

    tasks: list[str] = param(["fda", "thr"], task_list())
    seed: int = param(0, whole(0))  # data, noise and model seed alike
    overrides: dict = param({}, mapping())
    n_show: int = param(6, whole(2))  # n_show // 2 clean and n_show // 2 noisy examples per table


@dataclass(frozen=True)
class ScorecardParams(ChapterParams):
    """The scorecard: the records of the profile (its only parameter)."""


# -- chapter name -> its class ---------------------------------------------------------------------
# book name (rote.driver.chapters) -> "module:class", imported when asked for: a claim's from its spec
CHAPTER_PARAMS = Table(lambda s: (s.chapter, f"{s.module}:Params"), before={"tasks": "params:TasksParams"},
                       after={"scorecard": "params:ScorecardParams"})


def chapter_params(name: str) -> type[ChapterParams]:
    """The parameter dataclass of the chapter ``name`` (a claim chapter's module is imported here)."""
    if name not in CHAPTER_PARAMS:
        raise ConfigError(f"chapter {name!r} declares no parameters; known chapters: {', '.join(CHAPTER_PARAMS)}")
    module, cls = CHAPTER_PARAMS[name].split(":")
    return getattr(importlib.import_module(f".{module}", __package__), cls)

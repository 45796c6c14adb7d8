"""Chapter parameters, declared once: one frozen dataclass per chapter, every value checked before any work.

A chapter's dataclass names the parameters of its notebook's ``parameters`` cell (papermill), in the
cell's order and with the cell's defaults (``tests/test_chapter_params.py`` keeps the two equal). Each field
is declared with :func:`param`: its default, its :class:`Rule` (what the value may be, in words and as a
test; how ``-p NAME TEXT`` reads it; the values at the edges of its range), what the analysis needs of it,
and the field it may not exceed (``at_most``). From that declaration follow:

- the checks: the dataclass checks every field, then the bounds, then :meth:`ChapterParams.check_together`
  (a chapter's checks that need more than the values, X1's grid);
- the command line: :func:`rote.build.driver.resolve_parameters` reads each ``-p`` value with
  :meth:`ChapterParams.parse`, so a bad value stops ``rote run`` or ``rote book`` with one line (a
  :class:`~rote.config.ConfigError` naming the parameter, its value, its range and what the analysis needs)
  before anything trains or a cell executes;
- the build's settings (:mod:`rote.settings`): ``profile`` and ``settings`` are set by the build (``--profile``,
  ``--seeds``, the folders), never with ``-p``; a chapter rebuilds them with ``Settings(profile=profile, **settings)``;
- the notebook: ``Params.from_namespace(globals())`` rebuilds the checked parameters from the cell's values;
- the reference page (:mod:`rote.reference`): type, valid values, default and bounds from :meth:`declared`;
- the tests: ``tests/test_param_edges.py`` tries every rule's edges.

The claim chapters' dataclasses live beside their sections (``rote.chapters.c1.Params`` .. ``c5.Params``,
``x1.Params``); the two chapters without a claim module (``tasks``, ``scorecard``) are here.
:func:`chapter_params` maps a chapter name (as :func:`rote.build.driver.chapters` names them) to its class.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from ..analysis.ranges import is_whole
from ..config import PROFILES, TASKS, ConfigError
from ..specs import Table


# -- rules --------------------------------------------------------------------------------------
def parse_text(text):
    """A value given as text (``-p NAME TEXT``), JSON-decoded where it parses (``"3"`` -> 3), else the text."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_list(text):
    """A list given as text: JSON (``"[2, 4]"``, ``"null"``), else comma text (``"fda,thr"``, ``"2,4"``)."""
    value = parse_text(text)
    if isinstance(value, str):
        return [parse_text(v) for v in value.split(",") if v]
    return value


YES_NO = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def parse_flag(text):
    """A yes/no value given as text (true/false, yes/no, 1/0); anything else as given (refused by its rule)."""
    return YES_NO.get(str(text).strip().lower(), text) if not isinstance(text, bool) else text


def parse_seeds(text):
    """Seeds given as text: one seed (``"1"`` -> [1]), comma text (``"0,1,2"``) or JSON (``"[0, 2]"``)."""
    value = parse_text(text)
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, str):
        try:
            return [int(v) for v in value.split(",") if v.strip()]
        except ValueError:
            raise ConfigError(f"seeds must be whole numbers, e.g. -p seeds 0,1,2; got {text!r}") from None
    return value


@dataclass(frozen=True)
class Rule:
    """What a parameter's value may be: ``wanted`` says it in words (the error's range), ``ok`` tests it,
    ``parse`` reads it from the text after ``-p NAME``, and ``edges`` are values at the edge of the range,
    each with whether it is valid (the lowest valid value and the one just outside, ...; tests try them)."""

    wanted: str
    ok: Callable[[Any], bool]
    parse: Callable[[Any], Any] = parse_text
    edges: tuple[tuple[Any, bool], ...] = ()


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _interval(low, high, low_open: bool, high_open: bool) -> str:
    if high is None:
        return f"> {low}" if low_open else f">= {low}"
    return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def whole(low: int, high: int | None = None) -> Rule:
    """A whole number (not a bool) in [low, high] (no upper end when ``high`` is None)."""
    edges = ((low, True), (low - 1, False), (low + 0.5, False), (True, False))
    return Rule(f"a whole number {_interval(low, high, False, False)}",
                lambda v: is_whole(v) and v >= low and (high is None or v <= high),
                edges=edges + (((high, True), (high + 1, False)) if high is not None else ()))


def _end(bound: float, is_open: bool, inward: float) -> tuple[tuple[float, bool], ...]:
    """The edge values at one end of an interval: the bound, and the nearest float on its other side."""
    beyond = math.nextafter(bound, -inward * math.inf)
    inside = math.nextafter(bound, inward * math.inf)
    return ((bound, False), (inside, True)) if is_open else ((bound, True), (beyond, False))


def number(low: float, high: float | None = None, *, low_open: bool = False, high_open: bool = False) -> Rule:
    """A finite number (an int is one) between ``low`` and ``high``, each end open or closed."""
    def ok(v) -> bool:
        return (_is_number(v) and (v > low if low_open else v >= low)
                and (high is None or (v < high if high_open else v <= high)))

    edges = _end(low, low_open, 1) + (_end(high, high_open, -1) if high is not None else ((math.inf, False),))
    return Rule(f"a number {_interval(low, high, low_open, high_open)}", ok, edges=edges + (("abc", False),))


def one_of(choices) -> Rule:
    return Rule(f"one of {', '.join(choices)}", lambda v: v in choices,
                edges=tuple((c, True) for c in choices) + (("nightly", False),))


def flag() -> Rule:
    return Rule("true or false", lambda v: isinstance(v, bool), parse_flag,
                edges=((True, True), (False, True), ("maybe", False)))


def mapping() -> Rule:
    return Rule("a dict (a JSON object)", lambda v: isinstance(v, dict), edges=(({}, True), ([1, 2], False)))


def noisy_overrides() -> Rule:
    """Run parameters for a chapter that reads memorized noisy labels: a dict whose ``noise_ratio``, where it
    is given, is > 0 (no noise: no noisy label to memorize, and the noisy run is its own noise-free twin)."""
    def ok(v) -> bool:
        ratio = v.get("noise_ratio", 1) if isinstance(v, dict) else None
        return isinstance(v, dict) and _is_number(ratio) and ratio > 0

    return Rule("a dict (a JSON object) whose noise_ratio, where given, is > 0", ok,
                edges=(({}, True), ({"noise_ratio": math.nextafter(0.0, 1.0)}, True), ({"noise_ratio": 0}, False),
                       ({"noise_ratio": -0.1}, False), ([1, 2], False)))


def _is_list(value) -> bool:
    return isinstance(value, (list, tuple)) and len(value) > 0


def task_list(allowed=TASKS) -> Rule:
    """A non-empty list of distinct task names from ``allowed``."""
    others = [t for t in TASKS if t not in allowed]
    return Rule(f"a non-empty list of distinct tasks from {', '.join(allowed)}",
                lambda v: _is_list(v) and all(t in allowed for t in v) and len(set(v)) == len(v), parse_list,
                edges=(([allowed[0]], True), (list(allowed), True), ([], False), ([allowed[0]] * 2, False),
                       ([others[0] if others else "add"], False)))


def seed_list() -> Rule:
    """``None`` (the book's seeds) or a non-empty list of distinct whole numbers >= 0."""
    return Rule("None or a non-empty list of distinct whole numbers >= 0",
                lambda v: v is None or (_is_list(v) and all(is_whole(s) and s >= 0 for s in v)
                                        and len(set(v)) == len(v)), parse_seeds,
                edges=((None, True), ([0], True), ([-1], False), ([], False), ([0, 0], False)))


def book_settings() -> Rule:
    """The book's settings but the profile (:meth:`rote.settings.Settings.parameter`): a dict of the book's seeds,
    folders and progress display; ``{}``: the defaults. The build sets it (``--seeds``, ``$ROTE_RUNS``, ...)."""
    from ..settings import Settings

    def ok(v) -> bool:
        try:
            return isinstance(v, dict) and "profile" not in v and isinstance(Settings(**v), Settings)
        except (TypeError, ConfigError):
            return False

    return Rule("a dict of the book's settings (rote.settings.Settings but the profile: seeds, runs, results, "
                "analysis, figures, plain_progress)", ok,
                edges=(({}, True), ({"seeds": 1}, True), ({"seeds": 0}, False), ({"profile": "smoke"}, False),
                       ({"colour": 1}, False), ([1], False)))


def increasing(low: int = 1) -> Rule:
    """A non-empty, strictly increasing list of whole numbers >= ``low`` (ranks)."""
    return Rule(f"a non-empty, strictly increasing list of whole numbers >= {low}",
                lambda v: _is_list(v) and all(is_whole(r) and r >= low for r in v)
                and all(a < b for a, b in zip(v, v[1:])), parse_list,
                edges=(([low], True), ([low - 1], False), ([], False), ([low + 1, low], False)))


def noise_ratios() -> Rule:
    """``None`` (the chapter's default) or a non-empty list of noise ratios, each in [0, 1)."""
    each = number(0, 1, high_open=True)
    return Rule("None or a non-empty list of noise ratios in [0, 1)",
                lambda v: v is None or (_is_list(v) and all(each.ok(r) for r in v)), parse_list,
                edges=((None, True), ([], False), (0.2, False))
                + tuple(([value], valid) for value, valid in each.edges if not isinstance(value, str)))


def positions_by_task(lengths: dict[str, int]) -> Rule:
    """A dict task -> list of input positions, each position inside that task's prompt (``lengths``)."""
    def inside(task, positions) -> bool:
        return (task in lengths and isinstance(positions, (list, tuple))
                and all(is_whole(p) and 0 <= p < lengths[task] for p in positions))

    def ok(v) -> bool:
        return isinstance(v, dict) and all(inside(task, positions) for task, positions in v.items())

    where = ", ".join(f"{task}: 0 .. {n - 1}" for task, n in lengths.items())
    edges = (({}, True),) + tuple(edge for task, n in lengths.items() for edge in (
        ({task: [0]}, True), ({task: [-1]}, False), ({task: [n - 1]}, True), ({task: [n]}, False)))
    return Rule(f"a dict of task -> list of prompt positions ({where})", ok, edges=edges + (({"add": [0]}, False),))


def checked_elsewhere(wanted: str, parse: Callable[[Any], Any] = parse_text, edges=()) -> Rule:
    """Any value here: a check that needs more than the value runs in ``check_together`` (``edges``: values
    at the edge of what that check accepts)."""
    return Rule(wanted, lambda v: True, parse, tuple(edges))


def param(default, rule: Rule, needs: str = "", at_most: str | None = None,
          per_profile: Callable[[str], Any] | None = None):
    """A parameter field: its default (a fresh copy for a list or a dict), the rule its value obeys, what the
    analysis needs of it (said in the error and on the reference page), the field it may not exceed, and
    for a default of None, what it stands for on each profile (``per_profile(profile)``)."""
    metadata = {"rule": rule, "needs": needs, "at_most": at_most, "per_profile": per_profile}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Declared:
    """One declared parameter, as :func:`param` states it: what the driver parses, the chapter checks and
    the reference page shows."""

    name: str
    type: str
    default: Any
    rule: Rule
    needs: str
    at_most: str | None
    per_profile: Callable[[str], Any] | None = None

    def profile_defaults(self) -> dict[str, Any]:
        """Profile -> the value a default of None stands for there (empty where the declaration says none)."""
        return {p: self.per_profile(p) for p in PROFILES} if self.per_profile and self.default is None else {}

    @property
    def valid(self) -> str:
        """The valid values in words, with what the analysis needs and the field bounding it."""
        bound = f"; at most {self.at_most}" if self.at_most else ""
        return self.rule.wanted + bound + (f" ({self.needs})" if self.needs else "")

    def check(self, value) -> None:
        """A ConfigError naming the parameter, the value, its range and what the analysis needs, if it is out."""
        if not self.rule.ok(value):
            raise ConfigError(f"{self.name} must be {self.rule.wanted}, got {value!r}"
                              + (f" ({self.needs})" if self.needs else ""))


# -- the base -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChapterParams:
    """A chapter's parameters. Every field's rule is checked in field order (the first bad value is
    the one reported), then each ``at_most`` bound, then :meth:`check_together`."""

    profile: str = param("quick", one_of(PROFILES))  # the cell reads $ROTE_PROFILE, else "quick"
    # the book's seeds and folders (rote.settings): the cell reads $ROTE_SEEDS, $ROTE_RUNS, ..., else {}
    settings: dict = param({}, book_settings(), "set by the build: --seeds, $ROTE_RUNS, $ROTE_RESULTS, ...")

    def __post_init__(self):
        declared = self.declared()
        for d in declared.values():
            d.check(getattr(self, d.name))
        for d in declared.values():
            if d.at_most:
                at_most(d.name, getattr(self, d.name), d.at_most, getattr(self, d.at_most))
        self.check_together()

    def check_together(self) -> None:
        """Checks across fields beyond the declared bounds (none here; a chapter overrides this)."""

    @property
    def book(self):
        """The book's settings these parameters name (:class:`rote.settings.Settings`): the profile and ``settings``."""
        from ..settings import Settings

        return Settings(profile=self.profile, **self.settings)

    @classmethod
    def declared(cls) -> dict[str, Declared]:
        """Parameter name -> its declaration, in the cell's order."""
        return {f.name: Declared(f.name, f.type if isinstance(f.type, str) else f.type.__name__,
                                 f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default,
                                 f.metadata["rule"], f.metadata.get("needs", ""), f.metadata.get("at_most"),
                                 f.metadata.get("per_profile"))
                for f in dataclasses.fields(cls)}

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Parameter name -> default value, in the cell's order."""
        return {name: d.default for name, d in cls.declared().items()}

    @classmethod
    def parse(cls, name: str, text) -> Any:
        """The value of ``-p NAME TEXT``, read as the parameter's rule reads text and checked by it alone."""
        declared = cls.declared()[name]
        value = declared.rule.parse(text)
        declared.check(value)
        return value

    @classmethod
    def from_namespace(cls, namespace) -> "ChapterParams":
        """The parameters from a namespace that holds them (a notebook's ``globals()``), checked."""
        return cls(**{name: namespace[name] for name in cls.declared()})


def at_most(name: str, value, bound_name: str, bound) -> None:
    """A check across fields: ``value`` (already a whole number >= 1) may not exceed ``bound``."""
    if value > bound:
        raise ConfigError(f"{name} must be a whole number in [1, {bound_name}={bound}], got {value!r}")


@dataclass(frozen=True)
class ClaimParams(ChapterParams):
    """A claim chapter's first parameters: the tasks whose runs it loads, their seeds and run parameters; the
    chapter declares its own after them (an FDA claim redeclares ``tasks``, in the same place)."""

    tasks: list[str] = param(["fda", "thr"], task_list())
    seeds: list[int] | None = param(None, seed_list())  # None: the book's (settings["seeds"])
    overrides: dict = param({}, mapping())  # flat run parameters, checked against every run the chapter asks for


# the erasure of the intermediate result, as chapters C3 and C4 both fit it (the same parameter in each)
def erasure_rank_param():
    return param(8, whole(1), "INLP removes at least one direction at each site")


def erasure_fit_param():
    return param(2000, whole(1), "clean training examples to fit INLP on")


# -- the chapters without a claim module ----------------------------------------------------------
@dataclass(frozen=True)
class TasksParams(ChapterParams):
    """Chapter 01 (the tasks): the datasets of one seed, a few examples of each."""

    tasks: list[str] = param(["fda", "thr"], task_list())
    seed: int = param(0, whole(0))  # data, noise and model seed alike
    overrides: dict = param({}, mapping())
    n_show: int = param(6, whole(2), "n_show // 2 clean and n_show // 2 noisy examples per table: one of each at least")


@dataclass(frozen=True)
class ScorecardParams(ChapterParams):
    """The scorecard: the records of the profile (its only parameter)."""


# -- chapter name -> its class ---------------------------------------------------------------------
# book name (rote.build.driver.chapters) -> "module:class", imported when asked for: a claim's from its spec
CHAPTER_PARAMS = Table(lambda s: (s.chapter, f"{s.module}:Params"), before={"tasks": "params:TasksParams"},
                       after={"scorecard": "params:ScorecardParams"})


def chapter_params(name: str) -> type[ChapterParams]:
    """The parameter dataclass of the chapter ``name`` (a claim chapter's module is imported here)."""
    if name not in CHAPTER_PARAMS:
        raise ConfigError(f"chapter {name!r} declares no parameters; known chapters: {', '.join(CHAPTER_PARAMS)}")
    module, cls = CHAPTER_PARAMS[name].split(":")
    return getattr(importlib.import_module(f".{module}", __package__), cls)

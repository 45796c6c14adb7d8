"""What a chapter module provides: the contract of ``rote/chapters/<claim>.py``, written as protocols.

Every claim's chapter module (named by its spec's :attr:`~rote.spec.ClaimSpec.module`) is a
:class:`ChapterModule`, and follows one of two flows its notebook calls in order:

- :class:`ClaimChapterModule` (the paper's claims, C1-C5): ``glue_thresholds`` for the method text, ``load``
  the units' runs, one call per section (each with its ``*_figure`` and ``*_text``), ``evaluate`` the sections
  once, ``results`` for the records, which :func:`rote.chapters.verdict` saves and shows;
- :class:`GridChapterModule` (X1, beyond the paper): ``grid`` checks the parameters before anything trains,
  ``glue_values``, ``load`` the grid's metric tables, ``study`` them (its records), ``evaluate`` the grid.

:func:`problems` says where a module departs from a protocol: a missing name, or a function whose first
parameters or return type are not the protocol's (a chapter may ask for more parameters after them where
the protocol ends in ``*more``).
"""

from __future__ import annotations

import inspect
import typing
from types import ModuleType
from typing import Any, Mapping, Protocol, runtime_checkable

import pandas as pd

from ..spec import ClaimSpec
from . import Build, ClaimResult
from .params import ChapterParams


@runtime_checkable
class ChapterModule(Protocol):
    """Every chapter module: its claim's ``SPEC`` (rote/specs/<claim>.py), its ``Params`` (the notebook's
    parameters, checked before anything trains: a :class:`~rote.chapters.params.ChapterParams`), ``load`` (its
    runs, trained or read from the cache) and ``evaluate`` (the only caller of its verdict module)."""

    SPEC: ClaimSpec
    Params: type[ChapterParams]

    def load(self, *args: Any, **kwargs: Any) -> Any: ...

    def evaluate(self, *args: Any, **kwargs: Any) -> Any: ...


@runtime_checkable
class ClaimChapterModule(ChapterModule, Protocol):
    """A chapter of the paper's claims: ``T`` (the thresholds in force), ``glue_thresholds`` (glues the ones
    its method text quotes), ``load`` (every unit's runs), ``evaluate`` (the sections' inputs -> the claim's
    metrics and checks) and ``results`` (each unit's seed result for the record)."""

    T: Mapping[str, Any]

    def glue_thresholds(self, *more: Any) -> None: ...

    def load(self, profile: str, tasks: Any, seeds: Any, overrides: Any, *more: Any) -> Build: ...

    def evaluate(self, build: Build, sections: Any, /) -> ClaimResult: ...

    def results(self, build: Build, result: ClaimResult, /) -> list[dict]: ...


@runtime_checkable
class GridChapterModule(ChapterModule, Protocol):
    """A chapter over a grid of runs (X1): ``grid`` (the checked grid), ``glue_values`` (the prose's values),
    ``load`` (run key -> metric table), ``study`` (the tables, sentences and records; the run-time estimates
    come from the notebook, since the library never imports the book tool's timings) and ``evaluate``."""

    def grid(self, profile: str, tasks: Any, seeds: Any, overrides: Any, *more: Any) -> Any: ...

    def glue_values(self, grid: Any, /) -> dict[str, object]: ...

    def load(self, grid: Any, /, *more: Any) -> dict[str, pd.DataFrame]: ...

    def study(self, grid: Any, metrics: Any, costs: Any, /) -> Any: ...


def _members(protocol: type) -> list[str]:
    """The names a protocol declares (its and its bases' annotations and methods), as isinstance checks them."""
    own = [c for c in protocol.__mro__ if c not in (Protocol, typing.Generic, object)]
    return sorted({name for c in own for name in (*c.__dict__.get("__annotations__", {}), *vars(c))
                   if not name.startswith("_")})


def _return_problem(wanted: Any, found: Any) -> str:
    same = found == wanted or (isinstance(wanted, type) and isinstance(found, type) and issubclass(found, wanted))
    return "" if wanted is Any or same else f"returns {found}, not {wanted}"


def _signature_problems(function, declared) -> list[str]:
    """Where ``function``'s first parameters and return type depart from the ``declared`` method's."""
    wanted = list(inspect.signature(declared).parameters.values())[1:]  # without self
    if any(p.kind == p.VAR_KEYWORD for p in wanted):  # (*args, **kwargs): any parameters
        return []
    more = bool(wanted) and wanted[-1].kind == inspect.Parameter.VAR_POSITIONAL
    wanted = wanted[:-1] if more else wanted
    found = list(inspect.signature(function).parameters.values())
    first, rest = found[:len(wanted)], found[len(wanted):]
    fits = (len(first) == len(wanted) and all(w.kind == w.POSITIONAL_ONLY or w.name == f.name
                                              for w, f in zip(wanted, first))
            and (more or all(p.default is not p.empty for p in rest)))
    out = [] if fits else [f"takes ({', '.join(p.name for p in found)}), not "
                           f"({', '.join([p.name for p in wanted] + (['...'] if more else []))})"]
    hint = _return_problem(typing.get_type_hints(declared).get("return", Any),
                           typing.get_type_hints(function).get("return", Any))
    return out + ([hint] if hint else [])


def problems(module: ModuleType, protocol: type) -> list[str]:
    """Where ``module`` departs from ``protocol``: each missing name, and each function whose first parameters
    or return type are not the protocol's ("load: takes (...), not (...)")."""
    out = []
    for name in _members(protocol):
        if not hasattr(module, name):
            out.append(f"{name}: missing")
        elif inspect.isfunction(getattr(protocol, name, None)):
            out += [f"{name}: {p}" for p in _signature_problems(getattr(module, name), getattr(protocol, name))]
    return out

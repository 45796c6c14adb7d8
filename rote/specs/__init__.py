"""One :class:`rote.spec.ClaimSpec` per claim, ``SPEC`` in ``rote/specs/<claim>.py``, and the registry
every table of claims is derived from: importing this package (or any one spec module) registers every
one. Adding a claim adds a module here. :mod:`rote.spec` holds the types and imports nothing of this
package, so that the spec modules and the registry form no import circle."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Callable

from ..spec import ClaimSpec, section_key


SPECS: dict[str, ClaimSpec] = {}


def register(spec: ClaimSpec) -> ClaimSpec:
    """Add a spec to the registry; refuses one whose id, module, notebook or chapter is taken."""
    for other in SPECS.values():
        for what in ("id", "module", "notebook", "chapter"):
            if getattr(other, what) == getattr(spec, what):
                raise ValueError(f"ClaimSpec {spec.id!r}: {what} {getattr(spec, what)!r} is already {other.id}'s")
    SPECS[spec.id] = spec
    return spec


def unregister(claim: str) -> None:
    SPECS.pop(claim, None)


def specs() -> list[ClaimSpec]:
    """Every registered spec, in the order of their notebooks (the book's reading order)."""
    return sorted(SPECS.values(), key=lambda s: s.notebook)


def spec_of(check_id: str) -> ClaimSpec | None:
    """The spec a check id belongs to (``c4.k50`` -> C4's), None for no registered claim."""
    return SPECS.get(str(check_id).split(".")[0].upper())


def amendment_names() -> dict[str, str]:
    """Amendment section -> its name (``{"7": "amendment 1", "8": "amendment 2"}``), over every spec."""
    sections = sorted({s for spec in SPECS.values() for s in spec.amendments}, key=section_key)
    return {s: f"amendment {i}" for i, s in enumerate(sections, 1)}


class Table(Mapping):
    """A table derived from the registered specs, read afresh at every access (so a spec registered
    later, such as a test's planted claim, is in it at once): ``row(spec)`` gives (key, value), or None
    to leave the spec out; ``before`` and ``after`` are fixed rows around the specs' rows."""

    def __init__(self, row: Callable[[ClaimSpec], tuple | None], before: dict | None = None,
                 after: dict | None = None):
        self._row, self._before, self._after = row, before or {}, after or {}

    def _table(self) -> dict:
        return {**self._before, **dict(r for r in map(self._row, specs()) if r is not None), **self._after}

    def __getitem__(self, key):
        return self._table()[key]

    def __iter__(self):
        return iter(self._table())

    def __len__(self):
        return len(self._table())


def _discover() -> None:
    """Register the spec of every module of :mod:`rote.specs` (its ``SPEC``)."""
    for found in pkgutil.iter_modules(__path__):
        spec = importlib.import_module(f"{__name__}.{found.name}").SPEC
        if spec.module != found.name:
            raise ValueError(f"ClaimSpec {spec.id!r}: declared in rote/specs/{found.name}.py, not {spec.module}.py")
        if spec.id not in SPECS:
            register(spec)


_discover()

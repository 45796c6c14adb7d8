"""One :class:`rote.spec.ClaimSpec` per claim, ``SPEC`` in ``rote/specs/<claim>.py``, and the registry
every table of claims is derived from: importing this package (or any one spec module) registers every
one. Adding a claim adds a module here. :mod:`rote.spec` holds the types and imports nothing of this
package, so that the spec modules and the registry form no import circle. :data:`AMENDMENTS`: every section
the protocol added after section 5, in protocol order (amendments, clarifications, registrations), as the book
lists them and the readings name them; adding an amendment adds an entry here."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Callable

from ..spec import Addition, ClaimSpec, section_key


AMENDMENTS = (
    Addition("7", "amendment", "2026-11-30", "after the first `quick` results",
             "every record carries two verdicts side by side, the **registered** one (section 5 exactly as "
             "written) and the **amended** one, which judges each claim across seeds, times C1 by interpolated "
             "crossings, uses the mean of the last evaluations as \"final\", adds the controls, nulls and ceilings "
             "a claim must also beat, and judges FDA in a second noise condition (`digit`, one answer digit "
             "changed) beside the primary `random`."),
    Addition("8", "amendment", "2026-12-01", "after the first 3-seed `quick` book",
             "a check of the instrument (`validity`) never decides a verdict; a seed passes, fails or is "
             "*unresolved*, and C5's heuristics are calibrated on an untrained model and its outliers read at the "
             "first noisy answer digit."),
    Addition("8.5", "clarification", "2026-12-01", "missing values and the units of 8.4",
             "a check whose value could not be computed (an intervention with no site to act on, a missing "
             "number) is unresolved with its reason, never failed by the missing value."),
    Addition("8.6", "clarification", "2026-12-02", "checks that can fail, and what each reads",
             "every deciding check can fail, and each reads the inputs the protocol names (chance on the "
             "examples it judges, erasure at the sites that C2's probes found)."),
    Addition("9", "registration", "2026-12-01", "beyond the paper: X1, when is memorization benign?",
             "a question beyond the paper, registered before its runs: does memorizing the noise cost less "
             "generalization as the model gets wider?", label="X1"),
    Addition("10", "registration", "2026-12-01", "how fragile is each verdict?",
             "every row's amended verdict is recomputed with the runs trained in the other precision and with "
             "two more seeds; a row whose verdict word moves is *fragile*. Stability is shown, never a verdict.",
             label="Stability"),
    Addition("11", "registration", "2026-12-02", "how close to its threshold is each deciding check?",
             "every deciding check on every seed states how far its value lies from its threshold, with a "
             "sampling interval where it has one; a check whose interval contains its threshold is *near*, which "
             "is shown and changes no verdict.", label="Margins"),
    Addition("12", "amendment", "2026-12-04",
             "after the first GPU runs and a read of the verdict code against 8.6 and 9",
             "a chance threshold a probe can reach (C2); a noise-free twin that trained and a noisy run that "
             "finished memorizing, checked before C1's and X1's final values count; X1's learning rate chosen "
             "per width. The amended reading is the checks as of this amendment."),
)


def additions() -> tuple[Addition, ...]:
    """What the protocol added after section 5 (:data:`rote.specs.AMENDMENTS`), in protocol order."""
    return tuple(sorted(AMENDMENTS, key=lambda a: section_key(a.section)))


def addition_label(addition: Addition) -> str:
    """How the book names an addition: ``Amendment 1``, ``Clarification 8.5``, or its own label (``X1``)."""
    if addition.kind == "amendment":
        return amendment_names()[addition.section].capitalize()
    return addition.label or f"{addition.kind.capitalize()} {addition.section}"


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
    """Amendment section -> its name (``amendment 1``, ...), in protocol order: the amendments of the table
    (:func:`additions`) and any a spec names beyond it."""
    table = {a.section for a in additions() if a.kind == "amendment"}
    sections = sorted(table | {s for spec in SPECS.values() for s in spec.amendments}, key=section_key)
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

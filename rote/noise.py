"""FDA's noise kinds, declared once (protocol 7.3): :data:`NOISE_KINDS`, the table from which follow the noisy
labels (:func:`rote.tasks.fda.noisy_sums`), the configuration's check of ``noise_kind`` and its noise-free twin
rule (:class:`rote.config.FDAConfig`), the plan's conditions (:func:`rote.plan.task_conditions`), the conditions a
claim is judged in (its spec opts in to fewer) and the valid values on the parameter reference page.

A new kind is one entry here: a name, how it draws a wrong label, and a description. The table sits beside the
configuration rather than in ``tasks/fda.py``: the configuration checks a kind when it is built and is the layer
above the tasks (the tasks package imports it, and torch), so the table imports nothing of either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Answers:
    """The true answers noise replaces: their values (``sums``, [N]), the range a label's value may take
    (``low`` .. ``high``, both included) and how a value is written as a label (``digits``: [N] -> [N, width]
    digits in answer order)."""

    sums: np.ndarray
    low: int
    high: int
    digits: Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class NoiseKind:
    """One FDA noise condition: ``name`` (the ``noise_kind`` value, the condition in plans and record names),
    ``draw(answers, rng)`` (a label different from the true one for each answer, as [N, width] digits),
    whether it is the ``primary`` condition (7.3: listed first; a noise-free run carries its name, so that
    every condition shares one twin) and a ``description`` (the parameter reference page)."""

    name: str
    draw: Callable[[Answers, np.random.Generator], np.ndarray]
    primary: bool
    description: str

    def __post_init__(self):
        if not (isinstance(self.name, str) and self.name.isidentifier() and self.name.islower()):
            raise ValueError(f"a noise kind's name is a lower-case word (it names record files), got {self.name!r}")
        if not callable(self.draw):
            raise ValueError(f"noise kind {self.name!r}: draw must be a function (answers, rng) -> digits")
        if not isinstance(self.primary, bool):
            raise ValueError(f"noise kind {self.name!r}: primary must be True or False")
        if not (isinstance(self.description, str) and self.description.strip()):
            raise ValueError(f"noise kind {self.name!r}: the description is missing")


def other_sum(answers: Answers, rng: np.random.Generator) -> np.ndarray:
    """A value uniform over the answer range without the true sum."""
    draw = rng.integers(answers.low, answers.high, size=len(answers.sums))  # high - low values ...
    draw = draw + (draw >= answers.sums)  # ... shifted past the true sum: uniform over the others
    return answers.digits(draw)


def one_digit_changed(answers: Answers, rng: np.random.Generator) -> np.ndarray:
    """The true label with one digit (uniform position) replaced by one of the nine others."""
    digits = answers.digits(answers.sums).copy()
    n = len(answers.sums)
    position = rng.integers(0, digits.shape[1], size=n)
    rows = range(n)
    digits[rows, position] = (digits[rows, position] + rng.integers(1, 10, size=n)) % 10
    return digits


NOISE_KINDS: dict[str, NoiseKind] = {kind.name: kind for kind in (
    NoiseKind("random", other_sum, primary=True, description="a different sum, uniform over the possible sums"),
    NoiseKind("digit", one_digit_changed, primary=False, description="one answer digit changed"),
)}


def kind_names() -> tuple[str, ...]:
    """The kinds' names, the primary first (7.3), then in the table's order."""
    return (primary_kind(), *(name for name, kind in NOISE_KINDS.items() if not kind.primary))


def primary_kind() -> str:
    """The name of the one primary kind."""
    primary = [name for name, kind in NOISE_KINDS.items() if kind.primary]
    if len(primary) != 1:
        raise ValueError(f"the noise kinds' table needs exactly one primary kind, has {primary}")
    return primary[0]


def noise_kind(name: str) -> NoiseKind:
    """The kind called ``name``; an unknown name is an error that lists the kinds."""
    if name not in kind_names():
        raise ValueError(f"unknown noise kind {name!r}; choose one of {kinds_text()}")
    return NOISE_KINDS[name]


def kinds_text(described: bool = False) -> str:
    """The kinds' names as the checks write them ('random' or 'digit'), ``described``: each with its description,
    as the parameter reference page writes them."""
    quoted = [f"'{name}'" + (f" ({NOISE_KINDS[name].description})" if described else "") for name in kind_names()]
    return " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)

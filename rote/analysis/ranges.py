"""The value tests that the settings dataclasses of :mod:`rote.analysis` validate with, in one place:
a bool is neither a count nor a number here, and numpy scalars count like Python's."""

from __future__ import annotations

import math
import numbers


def is_whole(value) -> bool:
    """An integer (Python or numpy), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value) -> bool:
    """A real number (Python or numpy), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_finite_at_least(value, low: float = 0) -> bool:
    """A real number in [low, inf)."""
    return is_real(value) and low <= value < math.inf


def whole_at_least(low: int) -> tuple:
    """The :func:`check_fields` rule of an integer >= ``low``."""
    return (lambda v: is_whole(v) and v >= low, f"an int >= {low}")


# rules of :func:`check_fields`: (test, what the value must be)
COUNT = whole_at_least(1)
SHARE = (lambda v: is_real(v) and 0 <= v <= 1, "a number in [0, 1]")


def check_fields(settings, **rules) -> None:
    """Raise a ValueError naming the first field of ``settings`` whose value breaks its rule."""
    for name, (ok, wanted) in rules.items():
        if not ok(getattr(settings, name)):
            raise ValueError(f"{type(settings).__name__}.{name} must be {wanted}, got {getattr(settings, name)!r}")

"""The verdict layer: :mod:`.core` (the :class:`Check`, the readings, one seed's verdict, the aggregate
across seeds, the records) and one module per claim (its spec's ``module``: :mod:`.c1` ... :mod:`.x1`),
each with a ``checks`` function that its claim's chapter module calls in ``evaluate`` and nowhere else.

``rote.verdicts.X`` names the core's public API (the package's interface; the claim modules are
reached as ``rote.verdicts.c1`` ...)."""

import importlib

from .core import (
    KINDS, DECIDING, READINGS, REQUIRED_PARTS, FAILS_ONLY_ON, Check, CheckLabel,
    numeric, MissingValue, at_least, below, above, missing_reason,
    unresolved, supersede, validate, find, counts_in, kind_as_of,
    claim_of, seed_verdict, missing_parts, aggregate, group, inline, from_inline, flat, seed_result, records,
    deciding_checks, deciding, readings, amendment_change, OUTCOME_WORDS, near_checks, near_seeds, check_ranges,
)
from .core import amendment_moves, as_read
from ..specs import specs

__all__ = ['KINDS', 'DECIDING', 'READINGS', 'REQUIRED_PARTS', 'FAILS_ONLY_ON', 'Check', 'CheckLabel', 'numeric', 'MissingValue', 'at_least', 'below', 'above', 'missing_reason', 'unresolved', 'supersede', 'validate', 'find', 'counts_in', 'kind_as_of', 'claim_of', 'seed_verdict', 'missing_parts', 'aggregate', 'group', 'inline', 'from_inline', 'flat', 'seed_result', 'records', 'deciding_checks', 'deciding', 'readings', 'amendment_change', 'OUTCOME_WORDS', 'near_checks', 'near_seeds', 'check_ranges',
           'amendment_moves', 'as_read']



def __getattr__(name: str):
    """A claim's module (``rote.verdicts.c5``), imported when first asked for: the core alone stays free of
    the analyses (and of torch) for the site and the scorecard."""
    if name in {s.module for s in specs()}:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

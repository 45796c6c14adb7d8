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
from ..spec import specs

__all__ = ['KINDS', 'DECIDING', 'READINGS', 'REQUIRED_PARTS', 'FAILS_ONLY_ON', 'Check', 'CheckLabel', 'numeric', 'MissingValue', 'at_least', 'below', 'above', 'missing_reason', 'unresolved', 'supersede', 'validate', 'find', 'counts_in', 'kind_as_of', 'claim_of', 'seed_verdict', 'missing_parts', 'aggregate', 'group', 'inline', 'from_inline', 'flat', 'seed_result', 'records', 'deciding_checks', 'deciding', 'readings', 'amendment_change', 'OUTCOME_WORDS', 'near_checks', 'near_seeds', 'check_ranges']

for _spec in specs():  # the claim modules (they import the core above)
    importlib.import_module(f".{_spec.module}", __name__)

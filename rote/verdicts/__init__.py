"""The verdict layer: :mod:`.core` (the :class:`Check`, the two readings, one seed's verdict, the
aggregate across seeds, the records) and one module per claim, :mod:`.c1` ... :mod:`.c5`, each with
a ``checks`` function that its claim's chapter module calls in ``evaluate`` and nowhere else.

``rote.verdicts.X`` names the core's public API (the package's interface; the claim modules are
reached as ``rote.verdicts.c1`` ...)."""

from .core import (
    KINDS, DECIDING, READINGS, REQUIRED_PARTS, FAILS_ONLY_ON, Check, CheckLabel,
    numeric, MissingValue, at_least, below, above, missing_reason,
    unresolved, supersede, validate, find, counts_in, AMENDMENT1,
    claim_of, seed_verdict, missing_parts, aggregate, seed_result, records,
    deciding_checks, deciding, amendment2_change, OUTCOME_WORDS, near_checks, near_seeds, check_ranges,
)
from . import c1, c2, c3, c4, c5, x1  # noqa: E402  (the claim modules import the core above)

__all__ = ['KINDS', 'DECIDING', 'READINGS', 'REQUIRED_PARTS', 'FAILS_ONLY_ON', 'Check', 'CheckLabel', 'numeric', 'MissingValue', 'at_least', 'below', 'above', 'missing_reason', 'unresolved', 'supersede', 'validate', 'find', 'counts_in', 'AMENDMENT1', 'claim_of', 'seed_verdict', 'missing_parts', 'aggregate', 'seed_result', 'records', 'deciding_checks', 'deciding', 'amendment2_change', 'OUTCOME_WORDS', 'near_checks', 'near_seeds', 'check_ranges']

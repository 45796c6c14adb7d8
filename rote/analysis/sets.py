"""The example sets that every analysis compares: M (memorized) and C (clean, answered correctly)."""

from __future__ import annotations

from ..model import HookedTransformer
from ..tasks import Examples, TaskData
from ..scoring import exact_match


def memorized(model: HookedTransformer, data: TaskData) -> Examples:
    """M: noisy training examples whose greedy output equals their noisy label."""
    noisy = data.train_noisy
    return noisy[exact_match(model, noisy, "label").cpu()]


def correct(model: HookedTransformer, examples: Examples) -> Examples:
    """The examples whose greedy output equals their true label (C, when given the test set)."""
    return examples[exact_match(model, examples, "true_label").cpu()]

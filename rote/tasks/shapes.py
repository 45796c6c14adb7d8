"""A task's vocabulary size and context length, as ``rote.train.build_model`` gives them to the model
(``len(data.vocab)``, ``data.n_ctx``), from the task modules. Run-time estimates key on them
(:func:`rote.build.timings.shape`); training does not import this module (no part of the run fingerprint)."""

from __future__ import annotations

import functools

from ..config import RunConfig, make_config
from . import build_task, fda, thr


def vocab_size(config: RunConfig) -> int:
    """The task's vocabulary size (the unembedding's width)."""
    d = config.data
    return len(fda.make_vocab() if config.task == "fda" else thr.make_vocab(d.n_entities, d.n_relations))


@functools.lru_cache(maxsize=None)
def _context(task: str) -> int:
    return build_task(make_config(task, "smoke")).n_ctx


def n_ctx(config: RunConfig) -> int:
    """Tokens in one model input (the longest prompt and the answer but its last token), what a step's
    cost scales with. A task's prompt and answer lengths do not depend on its parameters."""
    return _context(config.task)

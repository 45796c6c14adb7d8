"""The two synthetic reasoning tasks with noisy labels: FDA and THR."""

from __future__ import annotations

from ..config import RunConfig
from . import fda, thr
from .base import IGNORE, PAD, Examples, TaskData, Vocab

__all__ = ["build_task", "Examples", "TaskData", "Vocab", "IGNORE", "PAD", "fda", "thr"]


def build_task(config: RunConfig) -> TaskData:
    """Generate the task's data from its configuration (deterministic in the data and noise seeds)."""
    return {"fda": fda.build, "thr": thr.build}[config.task](config.data)

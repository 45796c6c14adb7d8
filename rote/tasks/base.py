"""Pieces shared by the tasks: a vocabulary/tokenizer and a container for labelled examples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    import pandas as pd

PAD = "<pad>"
IGNORE = -100  # target value that the loss skips


class Vocab:
    """Token strings <-> ids. ``sep`` is how decode joins tokens ("" for digits, " " for names)."""

    def __init__(self, tokens: list[str], sep: str):
        if len(set(tokens)) != len(tokens):
            raise ValueError("vocabulary tokens must be unique")
        self.tokens = list(tokens)
        self.sep = sep
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def pad_id(self) -> int:
        return self.index[PAD]

    def split(self, text: str) -> list[str]:
        return text.split() if self.sep else list(text)

    def encode(self, text: str) -> list[int]:
        try:
            return [self.index[t] for t in self.split(text)]
        except KeyError as err:
            raise ValueError(f"unknown token {err.args[0]!r} in {text!r}") from None

    def decode(self, ids) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return self.sep.join(self.tokens[i] for i in ids)


@dataclass
class Examples:
    """A set of examples whose prompts share one length and whose answers share one length.

    ``label`` is what the model is trained on; ``true_label`` what the rule gives; ``is_noisy``
    marks label != true_label. ``info`` holds per-example integer tensors that analyses use
    (operands, bridge entities, ...).
    """

    prompt: torch.Tensor  # [N, P] long
    label: torch.Tensor  # [N, A] long
    true_label: torch.Tensor  # [N, A] long
    info: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.prompt)
        assert self.label.shape == self.true_label.shape and len(self.label) == n
        assert all(len(v) == n for v in self.info.values())

    @property
    def is_noisy(self) -> torch.Tensor:
        return (self.label != self.true_label).any(dim=1)

    def __len__(self) -> int:
        return len(self.prompt)

    def __getitem__(self, index) -> "Examples":
        """Subset by a boolean mask, an index tensor or a slice."""
        return Examples(self.prompt[index], self.label[index], self.true_label[index],
                        {k: v[index] for k, v in self.info.items()})

    def to_frame(self, vocab: Vocab) -> "pd.DataFrame":
        """One row per example: prompt, label, true label, noisy flag and the info columns."""
        import pandas as pd

        return pd.DataFrame({
            "prompt": [vocab.decode(p) for p in self.prompt],
            "label": [vocab.decode(a) for a in self.label],
            "true_label": [vocab.decode(a) for a in self.true_label],
            "is_noisy": self.is_noisy.tolist(),
            **{k: v.tolist() for k, v in self.info.items() if v.dim() == 1},
        })

    def with_label(self, label: torch.Tensor) -> "Examples":
        return Examples(self.prompt, label, self.true_label, dict(self.info))

    def to(self, device) -> "Examples":
        return Examples(self.prompt.to(device), self.label.to(device), self.true_label.to(device),
                        {k: v.to(device) for k, v in self.info.items()})

    def sequences(self, which: str = "label") -> torch.Tensor:
        """Prompt followed by the chosen answer ("label" or "true_label"): [N, P + A]."""
        return torch.cat([self.prompt, getattr(self, which)], dim=1)

    @property
    def answer_positions(self) -> torch.Tensor:
        """Positions in ``sequences()`` whose next-token prediction is an answer token."""
        p, a = self.prompt.shape[1], self.label.shape[1]
        return torch.arange(p - 1, p + a - 1)


@dataclass
class TaskData:
    """A generated task: training examples (noisy labels included), a clean test set, and for THR
    the atomic facts that are trained on but never noised."""

    task: str
    vocab: Vocab
    train: Examples
    test: Examples
    atomic: Examples | None = None
    atomic_repeat: int = 1
    meta: dict = field(default_factory=dict)

    @property
    def train_clean(self) -> Examples:
        return self.train[~self.train.is_noisy]

    @property
    def train_noisy(self) -> Examples:
        return self.train[self.train.is_noisy]

    @property
    def answer_len(self) -> int:
        return self.train.label.shape[1]

    def training_sequences(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and next-token targets of every training sequence, right-padded to one length.

        Targets are ``IGNORE`` except at answer positions, so the loss covers answer tokens only.
        THR atomic facts are repeated ``atomic_repeat`` times.
        """
        parts = [self.train] + [self.atomic] * self.atomic_repeat if self.atomic is not None else [self.train]
        width = self.n_ctx
        inputs, targets = [], []
        for part in parts:
            seq = part.sequences("label")
            x = torch.full((len(part), width), self.vocab.pad_id, dtype=torch.long)
            y = torch.full((len(part), width), IGNORE, dtype=torch.long)
            x[:, :seq.shape[1] - 1] = seq[:, :-1]
            answer = part.answer_positions
            y[:, answer] = seq[:, answer + 1]
            inputs.append(x)
            targets.append(y)
        return torch.cat(inputs), torch.cat(targets)

    @property
    def n_ctx(self) -> int:
        """Longest model input: the longest prompt plus all answer tokens but the last."""
        parts = [self.train, self.test] + ([self.atomic] if self.atomic is not None else [])
        return max(p.prompt.shape[1] for p in parts) + self.answer_len - 1


def choose_noisy(n: int, noise_ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Exactly round(noise_ratio * n) distinct indices, sorted."""
    return np.sort(rng.choice(n, size=round(noise_ratio * n), replace=False))

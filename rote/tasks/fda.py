"""FDA: four-digit addition with noisy labels.

Prompt ``a+b=`` (one token per character), answer ``a + b`` as five zero-padded digits, most
significant first (``msb``) or reversed (``lsb``). Noise replaces the label of exactly
round(noise_ratio * n_train) training examples by a different sum, drawn as its noise kind says
(:data:`rote.noise.NOISE_KINDS`: uniform over [2000, 19998], ``random``, or one answer digit changed, ``digit``).
"""

from __future__ import annotations

import numpy as np
import torch

from ..config import FDAConfig
from ..noise import Answers, noise_kind
from .base import PAD, Examples, TaskData, Vocab, choose_noisy

ANSWER_LEN = 5
MIN_OPERAND, MAX_OPERAND = 1000, 9999
MIN_SUM, MAX_SUM = 2 * MIN_OPERAND, 2 * MAX_OPERAND


def make_vocab() -> Vocab:
    return Vocab([*"0123456789", "+", "=", PAD], sep="")


def answer_digits(values: np.ndarray, order: str) -> np.ndarray:
    """[N] integers -> [N, 5] digits in answer order."""
    digits = (values[:, None] // 10 ** np.arange(ANSWER_LEN - 1, -1, -1)) % 10  # msb first
    return digits if order == "msb" else np.ascontiguousarray(digits[:, ::-1])


def digits_to_int(digits: torch.Tensor, order: str) -> torch.Tensor:
    """[N, 5] answer digits (token ids equal digit values) -> [N] integers."""
    msb = digits if order == "msb" else digits.flip(1)
    return (msb * 10 ** torch.arange(ANSWER_LEN - 1, -1, -1, device=digits.device)).sum(1)


def operand_pairs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n distinct (a, b) pairs, uniform over [1000, 9999]^2, in random order."""
    keys = np.empty(0, dtype=np.int64)
    while len(keys) < n:
        draw = rng.integers(MIN_OPERAND, MAX_OPERAND + 1, size=(2 * (n - len(keys)) + 16, 2))
        new = draw[:, 0] * 10000 + draw[:, 1]
        merged = np.concatenate([keys, new])
        _, first = np.unique(merged, return_index=True)
        keys = merged[np.sort(first)]
    keys = keys[:n]
    return keys // 10000, keys % 10000


def noisy_sums(true_sums: np.ndarray, kind: str, order: str, rng: np.random.Generator) -> np.ndarray:
    """A label != the true sum for each entry, as answer digits [N, 5], drawn as the noise kind ``kind``
    (:data:`rote.noise.NOISE_KINDS`; an unknown kind is an error)."""
    answers = Answers(true_sums, MIN_SUM, MAX_SUM, lambda values: answer_digits(values, order))
    return noise_kind(kind).draw(answers, rng)


def _examples(vocab: Vocab, a: np.ndarray, b: np.ndarray, order: str) -> Examples:
    chars = np.char.add(np.char.add(a.astype(str), "+"), np.char.add(b.astype(str), "="))
    prompt = torch.tensor([vocab.encode(c) for c in chars], dtype=torch.long).reshape(len(a), 10)
    true = torch.from_numpy(answer_digits(a + b, order).astype(np.int64))
    info = {"a": torch.from_numpy(a.astype(np.int64)), "b": torch.from_numpy(b.astype(np.int64))}
    return Examples(prompt, true.clone(), true, info)


def build(config: FDAConfig) -> TaskData:
    vocab = make_vocab()
    a, b = operand_pairs(config.n_train + config.n_test, np.random.default_rng(config.data_seed))
    train = _examples(vocab, a[:config.n_train], b[:config.n_train], config.answer_order)
    test = _examples(vocab, a[config.n_train:], b[config.n_train:], config.answer_order)
    noise_rng = np.random.default_rng([config.noise_seed, 1])
    noisy = choose_noisy(config.n_train, config.noise_ratio, noise_rng)
    sums = (train.info["a"] + train.info["b"]).numpy()
    label = train.label.clone()
    label[noisy] = torch.from_numpy(noisy_sums(sums[noisy], config.noise_kind, config.answer_order, noise_rng))
    train = train.with_label(label)
    return TaskData("fda", vocab, train, test, meta={"answer_order": config.answer_order})


def carries(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[N, 4] carry out of each column, units column first (column i = 10^i)."""
    out, carry = [], torch.zeros_like(a)
    for i in range(4):
        s = (a // 10 ** i) % 10 + (b // 10 ** i) % 10 + carry
        carry = (s >= 10).long()
        out.append(carry)
    return torch.stack(out, dim=1)


def column_sums(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[N, 4] digit sums a_i + b_i (0..18) of each column, units column first."""
    return torch.stack([(a // 10 ** i) % 10 + (b // 10 ** i) % 10 for i in range(4)], dim=1)

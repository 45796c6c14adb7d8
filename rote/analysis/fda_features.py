"""Four-digit-addition inputs and the Boolean features heuristic neurons are scored on (claim C5).

Predicates of (a, b), place ``i`` (0: units): operand digits ``a1=7`` and digit ranges ``a1∈[3,5]``
(widths 2-5), column sums ``a1+b1=12`` and their ranges, carries ``carry1=1`` / ``carry1=0``, answer
digits ``s2=4`` and ranges, answer ranges ``sum∈[12000,13999]`` (windows of 1000, 2000, 4000) and
residues ``sum≡3 (mod 7)`` (m = 2..9). Clean neighbours: one operand shifted by 1 to 3 either way.
"""

from __future__ import annotations

import numpy as np
import torch

from ..tasks import Examples, fda

FEATURE_KINDS = ("operand digit", "operand digit range", "column sum", "column sum range", "carry",
                 "answer digit", "answer digit range", "answer range", "answer residue")
RANGE_WIDTHS = (2, 3, 4, 5)
RESIDUE_MODULI = tuple(range(2, 10))
ANSWER_WINDOWS = (1000, 2000, 4000)


def make_examples(a, b, order: str = "msb", label: torch.Tensor | None = None) -> Examples:
    """FDA examples for operand tensors ``a``, ``b`` (clean labels unless ``label`` is given)."""
    a, b = torch.as_tensor(a, dtype=torch.long), torch.as_tensor(b, dtype=torch.long)
    vocab = fda.make_vocab()
    plus, eq = vocab.index["+"], vocab.index["="]
    place = 10 ** torch.arange(3, -1, -1)
    da, db = (a[:, None] // place) % 10, (b[:, None] // place) % 10  # token id == digit value
    n = len(a)
    prompt = torch.cat([da, torch.full((n, 1), plus), db, torch.full((n, 1), eq)], dim=1)
    true = torch.from_numpy(fda.answer_digits((a + b).numpy(), order).astype(np.int64).copy())
    return Examples(prompt, true.clone() if label is None else label, true, {"a": a, "b": b})


def operand_grid(n: int, seed: int = 0, order: str = "msb") -> Examples:
    """``n`` distinct clean inputs, uniform over the operand square [1000, 9999]^2."""
    a, b = fda.operand_pairs(n, np.random.default_rng([seed, 5]))
    return make_examples(torch.from_numpy(a), torch.from_numpy(b), order)


def _ranges(lo: int, hi: int):
    for w in RANGE_WIDTHS:
        for start in range(lo, hi - w + 2):
            yield start, start + w - 1


def feature_list() -> list[tuple[str, str]]:
    """(name, kind) of every candidate feature, in the column order of :func:`feature_table`."""
    out = []
    for op in "ab":
        for i in range(4):
            out += [(f"{op}{i}={v}", "operand digit") for v in range(10)]
            out += [(f"{op}{i}∈[{lo},{hi}]", "operand digit range") for lo, hi in _ranges(0, 9)]
    for i in range(4):
        out += [(f"a{i}+b{i}={v}", "column sum") for v in range(19)]
        out += [(f"a{i}+b{i}∈[{lo},{hi}]", "column sum range") for lo, hi in _ranges(0, 18)]
        out += [(f"carry{i}={v}", "carry") for v in (1, 0)]
    for i in range(5):
        out += [(f"s{i}={v}", "answer digit") for v in range(10)]
        out += [(f"s{i}∈[{lo},{hi}]", "answer digit range") for lo, hi in _ranges(0, 9)]
    for w in ANSWER_WINDOWS:
        out += [(f"sum∈[{lo},{lo + w - 1}]", "answer range") for lo in range(2000, 20000 - w + 1, 1000)]
    for m in RESIDUE_MODULI:
        out += [(f"sum≡{r} (mod {m})", "answer residue") for r in range(m)]
    return out


def feature_table(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Bool [N, F]: the value of every feature of :func:`feature_list` on operands (a, b)."""
    a, b = torch.as_tensor(a, dtype=torch.long), torch.as_tensor(b, dtype=torch.long)
    place4 = 10 ** torch.arange(4)
    A, B = (a[:, None] // place4) % 10, (b[:, None] // place4) % 10  # [N, 4], units first
    S = A + B
    carry = fda.carries(a, b)
    total = a + b
    D = (total[:, None] // 10 ** torch.arange(5)) % 10  # answer digits, units first
    cols = []

    def digit_feats(x):
        cols.extend(x == v for v in range(10))
        cols.extend((x >= lo) & (x <= hi) for lo, hi in _ranges(0, 9))

    for X in (A, B):
        for i in range(4):
            digit_feats(X[:, i])
    for i in range(4):
        cols.extend(S[:, i] == v for v in range(19))
        cols.extend((S[:, i] >= lo) & (S[:, i] <= hi) for lo, hi in _ranges(0, 18))
        cols.extend([carry[:, i] == 1, carry[:, i] == 0])
    for i in range(5):
        digit_feats(D[:, i])
    for w in ANSWER_WINDOWS:
        cols.extend((total >= lo) & (total <= lo + w - 1) for lo in range(2000, 20000 - w + 1, 1000))
    for m in RESIDUE_MODULI:
        cols.extend(total % m == r for r in range(m))
    return torch.stack(cols, dim=1)


def neighbour_offsets(max_shift: int = 3) -> torch.Tensor:
    """[4 x max_shift, 2] the clean neighbours' shifts (d, 0) then (0, d), d = -max_shift..-1, 1..max_shift
    (protocol section 5: "one operand +-1..3"; 8.6 restates it)."""
    r = torch.arange(-max_shift, max_shift + 1)
    d = r[r != 0]
    zero = torch.zeros_like(d)
    return torch.cat([torch.stack([d, zero], 1), torch.stack([zero, d], 1)])

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


def _features(a: torch.Tensor, b: torch.Tensor) -> list[tuple[str, str, torch.Tensor]]:
    """(name, kind, bool [N] value on operands (a, b)) of every candidate feature, in column order."""
    place4 = 10 ** torch.arange(4)
    digits = {"a": (a[:, None] // place4) % 10, "b": (b[:, None] // place4) % 10}  # [N, 4], units first
    sums, carry, total = digits["a"] + digits["b"], fda.carries(a, b), a + b
    answer = (total[:, None] // 10 ** torch.arange(5)) % 10  # answer digits, units first
    out = []

    def values_and_ranges(name, x, kind, high):
        out.extend((f"{name}={v}", kind, x == v) for v in range(high + 1))
        out.extend((f"{name}∈[{lo},{hi}]", f"{kind} range", (x >= lo) & (x <= hi)) for lo, hi in _ranges(0, high))

    for op in "ab":
        for i in range(4):
            values_and_ranges(f"{op}{i}", digits[op][:, i], "operand digit", 9)
    for i in range(4):
        values_and_ranges(f"a{i}+b{i}", sums[:, i], "column sum", 18)
        out += [(f"carry{i}={v}", "carry", carry[:, i] == v) for v in (1, 0)]
    for i in range(5):
        values_and_ranges(f"s{i}", answer[:, i], "answer digit", 9)
    for w in ANSWER_WINDOWS:
        out += [(f"sum∈[{lo},{lo + w - 1}]", "answer range", (total >= lo) & (total <= lo + w - 1))
                for lo in range(2000, 20000 - w + 1, 1000)]
    for m in RESIDUE_MODULI:
        out += [(f"sum≡{r} (mod {m})", "answer residue", total % m == r) for r in range(m)]
    return out


def feature_list() -> list[tuple[str, str]]:
    """(name, kind) of every candidate feature, in the column order of :func:`feature_table`."""
    none = torch.zeros(0, dtype=torch.long)
    return [(name, kind) for name, kind, _ in _features(none, none)]


def feature_table(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Bool [N, F]: the value of every feature of :func:`feature_list` on operands (a, b)."""
    a, b = torch.as_tensor(a, dtype=torch.long), torch.as_tensor(b, dtype=torch.long)
    return torch.stack([column for _, _, column in _features(a, b)], dim=1)


def neighbour_offsets(max_shift: int = 3) -> torch.Tensor:
    """[4 x max_shift, 2] the clean neighbours' shifts (d, 0) then (0, d), d = -max_shift..-1, 1..max_shift
    (protocol section 5: "one operand +-1..3"; 8.6 restates it)."""
    r = torch.arange(-max_shift, max_shift + 1)
    d = r[r != 0]
    zero = torch.zeros_like(d)
    return torch.cat([torch.stack([d, zero], 1), torch.stack([zero, d], 1)])

"""Heuristic neurons in four-digit addition and the outliers that memorize noisy sums (claim C5).

Nikankin et al. (2024, arXiv 2410.21272) found that language models add with a "bag of
heuristics": single MLP neurons that fire for an input pattern (an operand in a range, a result
modulo m, ...) and promote a set of answer tokens. This module adapts their classification to
digit-level addition and asks how memorized noisy sums pass through such neurons.

Units
-----
A *unit* is one MLP neuron (layer l, index i) at one answer position j: neurons are read at the
sequence positions that predict the answer digits (positions 9..13 for ``a+b=`` prompts: the
``=`` and the first four answer tokens), teacher-forced on the answer, as the model runs when it
generates. The same neuron at two positions computes different things, so it is classified per
position. Arrays over units have shape [L, A, d_mlp] (L analysed layers, A = 5 answer positions).

Features
--------
Boolean predicates of (a, b) with place index ``i`` (``0`` = units column):
operand digits ``a1=7`` and digit ranges ``a1∈[3,5]`` (widths 2-5), column sums ``a1+b1=12`` and
their ranges, carries out of a column ``carry1=1`` / ``carry1=0``, answer (sum) digits ``s2=4`` and
digit ranges, answer ranges ``sum∈[12000,13999]`` (aligned windows of 1000, 2000 and 4000) and
answer residues ``sum≡3 (mod 7)`` (m = 2..9). On a grid of clean inputs only predicates with a base
rate between ``min_base`` and ``max_base`` are candidates (an always-true predicate explains
nothing).

Classification
--------------
For each unit take its ``top_k`` most activating grid inputs. A feature's *coverage* is the share
of them that satisfy it. The *best* feature is the one whose coverage is the least likely under its
base rate pi: it maximises the binomial log-likelihood ratio ``k * KL(coverage || pi)`` (zero when
coverage <= pi). This prefers a feature that covers all top inputs and is rare (``a1∈[3,5]`` over
``a1∈[2,6]``) and lets a broad feature with full coverage (a carry) beat a narrow one with partial
coverage. A unit is a *heuristic* when its best feature covers at least ``coverage_min`` of its
top inputs.

Outliers and patching
---------------------
The clean neighbours of an input x = (a, b) are the inputs (a + da, b + db) with |da|, |db| <= 3,
not both zero (48 at most), each teacher-forced on its own true sum. For a unit, only neighbours
that share x's value of the unit's best feature count ("share its feature value"), at least
``min_count`` of them. (The protocol's "one operand +-1..3" would leave no neighbour sharing any
sum-based feature, e.g. a residue of the sum, because moving one operand always moves the sum;
moving both operands keeps neighbours with the same sum.) z = (act(x) - mean) / sd with the
neighbours' sd, floored at ``sd_floor`` times the unit's sd over the grid so that a unit that is
flat around x does not give infinite z (and at least 1e-6). x itself is teacher-forced on its own label (the noisy
one for memorized examples), as the model runs when it generates it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..model import HookedTransformer
from ..tasks import Examples, fda
from .neurons import folded_unembed, mlp_activations

FEATURE_KINDS = ("operand digit", "operand digit range", "column sum", "column sum range", "carry",
                 "answer digit", "answer digit range", "answer range", "answer residue")
RANGE_WIDTHS = (2, 3, 4, 5)
RESIDUE_MODULI = tuple(range(2, 10))
ANSWER_WINDOWS = (1000, 2000, 4000)


# -- inputs ---------------------------------------------------------------------------------------
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


# -- features -------------------------------------------------------------------------------------
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


# -- classification -------------------------------------------------------------------------------
@dataclass
class HeuristicMap:
    """The classification of every unit (layer, answer position, neuron); arrays are [L, A, d_mlp]."""

    layers: list[int]
    feature_names: list[str]  # the candidate features (base rate within bounds)
    feature_kinds: list[str]
    feature_columns: torch.Tensor  # [F'] their columns in feature_table
    best: torch.Tensor  # long: index into feature_names
    coverage: torch.Tensor
    base_rate: torch.Tensor
    score: torch.Tensor
    heuristic: torch.Tensor  # bool
    grid_sd: torch.Tensor  # the unit's activation sd over the grid
    top_k: int
    coverage_min: float

    def table(self) -> pd.DataFrame:
        """One row per unit: layer, position, neuron, feature, kind, coverage, base_rate, score, heuristic."""
        L, A, D = self.best.shape
        l, j, i = torch.meshgrid(torch.arange(L), torch.arange(A), torch.arange(D), indexing="ij")
        best = self.best.flatten().numpy()
        return pd.DataFrame({
            "layer": np.asarray(self.layers)[l.flatten().numpy()], "position": j.flatten().numpy(),
            "neuron": i.flatten().numpy(), "feature": np.asarray(self.feature_names, dtype=object)[best],
            "kind": np.asarray(self.feature_kinds, dtype=object)[best], "coverage": self.coverage.flatten().numpy(),
            "base_rate": self.base_rate.flatten().numpy(), "score": self.score.flatten().numpy(),
            "heuristic": self.heuristic.flatten().numpy()})

    def per_layer(self) -> pd.DataFrame:
        """Share of units per layer that are heuristics, by the kind of their best feature."""
        t = self.table()
        counts = t[t.heuristic].groupby(["layer", "kind"]).size().rename("units").reset_index()
        totals = t.groupby("layer").size()
        counts["fraction"] = counts["units"] / counts["layer"].map(totals)
        return counts

    @property
    def heuristic_fraction(self) -> float:
        return float(self.heuristic.double().mean())

    def layer_fractions(self) -> list[float]:
        return [float(x) for x in self.heuristic.double().mean(dim=(1, 2))]


def _kl_score(cov: torch.Tensor, base: torch.Tensor, k: int) -> torch.Tensor:
    """k * KL(Bernoulli(cov) || Bernoulli(base)) where cov > base, else 0."""
    eps = 1e-9
    c, p = cov.clamp(eps, 1 - eps), base.clamp(eps, 1 - eps)
    kl = c * (c / p).log() + (1 - c) * ((1 - c) / (1 - p)).log()
    return torch.where(cov > base, k * kl, torch.zeros_like(kl))


def classify_activations(acts: torch.Tensor, features: torch.Tensor, *, top_k: int, coverage_min: float,
                         min_base: float = 0.005, max_base: float = 0.6, names: Sequence[tuple[str, str]] | None = None,
                         layers: Sequence[int] | None = None) -> HeuristicMap:
    """Classify units from their activations on a grid.

    ``acts`` [G, ...unit dims] (e.g. [G, A, L, D] from :func:`mlp_activations`, or [G, U]) and
    ``features`` bool [G, F] (columns of :func:`feature_list` unless ``names`` is given).
    Returns a :class:`HeuristicMap` whose arrays have the unit shape permuted to [L, A, D] when the
    input was [G, A, L, D], else the unit shape as given.
    """
    names = list(names) if names is not None else feature_list()
    if acts.dim() == 4:  # [G, A, L, D] -> [G, L, A, D]
        acts = acts.permute(0, 2, 1, 3)
    unit_shape = acts.shape[1:]
    flat = acts.reshape(len(acts), -1).float().cpu()
    feats = features.cpu()
    base_all = feats.float().mean(0)
    keep = ((base_all >= min_base) & (base_all <= max_base)).nonzero().squeeze(1)
    F = feats[:, keep].float()  # [G, F']
    base = base_all[keep]
    k = min(top_k, len(flat))
    top = flat.topk(k, dim=0).indices.T  # [U, k]
    cov = torch.empty(top.shape[0], len(keep))
    for s in range(0, top.shape[0], 256):  # gather in chunks: [256, k, F']
        cov[s:s + 256] = F[top[s:s + 256]].mean(1)
    score = _kl_score(cov, base[None], k)
    score = score - 1e-6 * base[None]  # ties: the rarer feature
    best = score.argmax(-1)
    u = torch.arange(len(best))
    coverage = cov[u, best]
    shape = tuple(unit_shape)
    return HeuristicMap(
        layers=list(layers) if layers is not None else list(range(shape[0])) if len(shape) == 3 else [0],
        feature_names=[names[c][0] for c in keep.tolist()], feature_kinds=[names[c][1] for c in keep.tolist()],
        feature_columns=keep, best=best.reshape(shape), coverage=coverage.reshape(shape),
        base_rate=base[best].reshape(shape), score=score[u, best].reshape(shape),
        heuristic=(coverage >= coverage_min).reshape(shape), grid_sd=flat.std(0).reshape(shape), top_k=k,
        coverage_min=coverage_min)


def classify_neurons(model: HookedTransformer, grid: Examples, *, coverage_min: float, top_k: int = 50,
                     layers: Sequence[int] | None = None, min_base: float = 0.005,
                     max_base: float = 0.6) -> HeuristicMap:
    """Classify every MLP neuron at every answer position of ``model`` on the clean ``grid``."""
    layers = list(range(model.shape.n_layers)) if layers is None else list(layers)
    acts = mlp_activations(model, grid, "true_label", layers)  # [G, A, L, D]
    return classify_activations(acts, feature_table(grid.info["a"], grid.info["b"]), top_k=top_k,
                                coverage_min=coverage_min, min_base=min_base, max_base=max_base, layers=layers)


# -- clean neighbours -----------------------------------------------------------------------------
def neighbour_offsets(max_shift: int = 3) -> torch.Tensor:
    """[K, 2] operand shifts (da, db), |da|, |db| <= max_shift, not both zero."""
    r = torch.arange(-max_shift, max_shift + 1)
    da, db = torch.meshgrid(r, r, indexing="ij")
    off = torch.stack([da.flatten(), db.flatten()], 1)
    return off[(off != 0).any(1)]


@dataclass
class NeighbourStats:
    """Activations of examples and of their clean neighbours, per unit; arrays [N, L, A, D]."""

    act: torch.Tensor  # on x, teacher-forced on its own label
    mean: torch.Tensor  # neighbours that share the unit's feature value (NaN if fewer than min_count)
    sd: torch.Tensor
    count: torch.Tensor
    mean_all: torch.Tensor  # all clean neighbours
    z: torch.Tensor
    differs: torch.Tensor  # bool [N, A]: label digit != true digit at that answer position
    layers: list[int] = field(default_factory=list)

    @property
    def expected(self) -> torch.Tensor:
        """The clean-neighbour expectation used for patching: feature-matched mean, else all neighbours."""
        return torch.where(self.mean.isnan(), self.mean_all, self.mean)


@torch.no_grad()
def neighbour_stats(model: HookedTransformer, examples: Examples, hmap: HeuristicMap, *, order: str = "msb",
                    max_shift: int = 3, min_count: int = 3, sd_floor: float = 0.1,
                    chunk: int = 32) -> NeighbourStats:
    """Clean-neighbour expectations of every unit of ``hmap`` for each example, and z-scores."""
    layers = hmap.layers
    L, A, D = hmap.best.shape
    n = len(examples)
    offsets = neighbour_offsets(max_shift)
    K = len(offsets)
    unit_feat = hmap.feature_columns[hmap.best.flatten()]  # [U] column in feature_table
    act = mlp_activations(model, examples, "label", layers).permute(0, 2, 1, 3).cpu()  # [N, L, A, D]
    out = {k: torch.full((n, L * A * D), math.nan) for k in ("mean", "sd", "mean_all")}
    count = torch.zeros(n, L * A * D, dtype=torch.int16)
    fx_all = feature_table(examples.info["a"], examples.info["b"])[:, unit_feat]  # [N, U]
    for s in range(0, n, chunk):
        a, b = examples.info["a"][s:s + chunk], examples.info["b"][s:s + chunk]
        m = len(a)
        na, nb = a[:, None] + offsets[:, 0], b[:, None] + offsets[:, 1]  # [m, K]
        valid = (na >= fda.MIN_OPERAND) & (na <= fda.MAX_OPERAND) & (nb >= fda.MIN_OPERAND) & (nb <= fda.MAX_OPERAND)
        na, nb = na.clamp(fda.MIN_OPERAND, fda.MAX_OPERAND), nb.clamp(fda.MIN_OPERAND, fda.MAX_OPERAND)
        nbrs = make_examples(na.flatten(), nb.flatten(), order)
        nact = mlp_activations(model, nbrs, "true_label", layers).permute(0, 2, 1, 3).reshape(m, K, -1).cpu()
        fn = feature_table(na.flatten(), nb.flatten())[:, unit_feat].reshape(m, K, -1)  # [m, K, U]
        match = (fn == fx_all[s:s + m, None]) & valid[:, :, None]
        w = match.float()
        cnt = w.sum(1)
        mean = (nact * w).sum(1) / cnt.clamp(min=1)
        sd = (((nact - mean[:, None]) ** 2 * w).sum(1) / cnt.clamp(min=1)).sqrt()
        enough = cnt >= min_count
        out["mean"][s:s + m] = torch.where(enough, mean, math.nan)
        out["sd"][s:s + m] = torch.where(enough, sd, math.nan)
        v = valid[:, :, None].float()
        out["mean_all"][s:s + m] = (nact * v).sum(1) / v.sum(1).clamp(min=1)
        count[s:s + m] = cnt.to(torch.int16)
    shape = (n, L, A, D)
    mean, sd = out["mean"].reshape(shape), out["sd"].reshape(shape)
    floor = (sd_floor * hmap.grid_sd[None]).clamp(min=1e-6)  # 1e-6: units that are constant on the grid
    z = (act - mean) / torch.maximum(sd, floor)
    return NeighbourStats(act=act, mean=mean, sd=sd, count=count.reshape(shape), mean_all=out["mean_all"].reshape(shape),
                          z=z, differs=(examples.label != examples.true_label), layers=list(layers))


def _nanmedian(x: torch.Tensor) -> float:
    x = x[~x.isnan()]
    return float(x.median()) if len(x) else math.nan


def _unit_corr(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pearson correlation over the first dim, per unit, ignoring NaN pairs. [N, ...] -> [...]"""
    ok = ~(x.isnan() | y.isnan())
    w = ok.float()
    cnt = w.sum(0)
    x0, y0 = torch.where(ok, x, 0.0), torch.where(ok, y, 0.0)
    mx, my = x0.sum(0) / cnt.clamp(min=1), y0.sum(0) / cnt.clamp(min=1)
    dx, dy = (x0 - mx) * w, (y0 - my) * w
    cov = (dx * dy).sum(0)
    den = ((dx ** 2).sum(0) * (dy ** 2).sum(0)).sqrt()
    r = cov / den
    return torch.where((cnt >= 3) & (den > 1e-12), r, torch.full_like(r, math.nan))


def outlier_summary(stats: NeighbourStats, hmap: HeuristicMap, memorized_digits: bool = False) -> dict:
    """|z| and pattern agreement over the heuristic units.

    ``median_abs_z``: median |z| over all (example, heuristic unit) pairs with a defined z, at every
    answer position or, with ``memorized_digits``, only where the example's label digit differs
    from the true digit (where a memorized example must produce something the rule does not);
    ``median_abs_z_by_position``: the same per answer position; ``pattern_corr``: median over
    heuristic units of the correlation, across the examples, between act(x) and its clean-neighbour
    mean (does the heuristic pattern still hold on these examples?).
    """
    h = hmap.heuristic[None].expand_as(stats.z)
    if memorized_digits:
        h = h & stats.differs[:, None, :, None]
    absz = stats.z.abs()
    by_pos = [_nanmedian(absz[:, :, j][h[:, :, j]]) for j in range(absz.shape[2])]
    corr = _unit_corr(stats.act, stats.mean)[hmap.heuristic]
    return {"median_abs_z": _nanmedian(absz[h]), "pattern_corr": _nanmedian(corr),
            "median_abs_z_by_position": by_pos, "n_examples": int(stats.act.shape[0]),
            "n_units": int(hmap.heuristic.sum())}


def outlier_comparison(memorized: NeighbourStats, clean: NeighbourStats, hmap: HeuristicMap) -> dict:
    """Memorized examples (at their memorized digits) against clean examples (all positions):
    the medians of |z| over heuristic units, their ratio (also with M at all positions), the
    pattern correlations and the per-position medians."""
    m, m_all, c = (outlier_summary(memorized, hmap, memorized_digits=True), outlier_summary(memorized, hmap),
                   outlier_summary(clean, hmap))
    ratio = (lambda x: x / c["median_abs_z"] if c["median_abs_z"] and not math.isnan(c["median_abs_z"]) else math.nan)
    return {"median_abs_z_M": m["median_abs_z"], "median_abs_z_clean": c["median_abs_z"],
            "z_ratio": ratio(m["median_abs_z"]), "z_ratio_all_positions": ratio(m_all["median_abs_z"]),
            "pattern_corr_M": m["pattern_corr"], "pattern_corr_clean": c["pattern_corr"],
            "median_abs_z_by_position_M": m["median_abs_z_by_position"],
            "median_abs_z_by_position_clean": c["median_abs_z_by_position"]}


def example_outliers(stats: NeighbourStats, hmap: HeuristicMap, k: int = 4, kind: str = "strongest",
                     z_min: float = 2.0) -> pd.DataFrame:
    """Example (memorized example, heuristic unit) pairs at memorized digits (label digit != true
    digit), at most one per unit: the ``k`` with the largest |z| (``kind="strongest"``) or the ``k``
    outliers (|z| >= ``z_min``) closest to the median |z| of all outliers (``kind="typical"``).
    Columns: example, layer, position, neuron, feature, z, act, expected."""
    cols = ["example", "layer", "position", "neuron", "feature", "z", "act", "expected"]
    t = z_table(stats, hmap, "M")
    t = t[t.differs].assign(absz=lambda d: d.z.abs())
    if kind == "typical":
        t = t[t.absz >= z_min]
        t = t.assign(key=(t.absz - t.absz.median()).abs()).sort_values("key")
    elif kind == "strongest":
        t = t.sort_values("absz", ascending=False)
    else:
        raise ValueError(f"kind must be 'strongest' or 'typical', got {kind!r}")
    t = t.drop_duplicates(["layer", "position", "neuron"]).head(k)
    if t.empty:
        return pd.DataFrame(columns=cols)
    li = [hmap.layers.index(l) for l in t.layer]
    t["feature"] = [hmap.feature_names[hmap.best[a, j, i]] for a, j, i in zip(li, t.position, t.neuron)]
    t["act"] = [float(stats.act[n, a, j, i]) for n, a, j, i in zip(t.example, li, t.position, t.neuron)]
    t["expected"] = [float(stats.mean[n, a, j, i]) for n, a, j, i in zip(t.example, li, t.position, t.neuron)]
    return t[cols].reset_index(drop=True)


def z_table(stats: NeighbourStats, hmap: HeuristicMap, set_name: str) -> pd.DataFrame:
    """Long table of z over (example, heuristic unit): set, example, layer, position, neuron, z, differs."""
    n, l, j, i = (hmap.heuristic[None].expand_as(stats.z) & ~stats.z.isnan()).nonzero(as_tuple=True)
    return pd.DataFrame({"set": set_name, "example": n.numpy(), "layer": np.asarray(hmap.layers)[l.numpy()],
                         "position": j.numpy(), "neuron": i.numpy(), "z": stats.z[n, l, j, i].numpy(),
                         "differs": stats.differs[n, j].numpy()})


@torch.no_grad()
def shift_direction(model: HookedTransformer, examples: Examples, stats: NeighbourStats, hmap: HeuristicMap, *,
                    z_min: float = 2.0) -> dict:
    """Does each outlier shift push toward the noisy digit?

    For every (memorized example, heuristic unit) with |z| >= ``z_min`` at an answer position where
    the noisy digit differs from the true one, the shift act(x) - mean moves the unit's direct
    logit difference (noisy digit - true digit) by shift * W_out[:, i] . (w_noisy - w_true)
    (:func:`~rote.analysis.neurons.folded_unembed`; the positive LayerNorm scale does not change the
    sign). Returns the share of such shifts that raise the noisy digit (0.5 is chance), and counts.
    """
    if len(examples) == 0:
        return {"toward_noisy": math.nan, "n_shifts": 0}
    w = folded_unembed(model).cpu()
    diff = w[examples.label] - w[examples.true_label]  # [N, A, d_model]
    pushes = []
    for li, l in enumerate(hmap.layers):
        W = model.blocks[l].mlp.W_out.weight.detach().cpu()  # [d_model, D]
        pushes.append(diff @ W)  # [N, A, D]
    push = torch.stack(pushes, 1)  # [N, L, A, D]
    shift = stats.act - stats.mean
    sel = hmap.heuristic[None] & (stats.z.abs() >= z_min) & stats.differs[:, None, :, None] & ~stats.z.isnan()
    toward = (shift * push)[sel] > 0
    return {"toward_noisy": float(toward.double().mean()) if len(toward) else math.nan, "n_shifts": int(sel.sum())}


# -- patching -------------------------------------------------------------------------------------
@torch.no_grad()
def _patched_match(model: HookedTransformer, examples: Examples, which: str, layer: int, mask: torch.Tensor,
                   values: torch.Tensor, batch_size: int = 2048) -> torch.Tensor:
    """Bool [N]: exact match on ``examples.<which>`` with layer ``layer``'s neurons replaced by
    ``values`` [N, A, D] where ``mask`` ([N, A, D] or [1, A, D]) is set, at the answer positions."""
    seq = examples.sequences(which).to(model.device)
    pos = examples.answer_positions.to(model.device)
    target = getattr(examples, which).to(model.device)
    out = []
    for s in range(0, len(seq), batch_size):
        v = values[s:s + batch_size].to(model.device)
        m = (mask[s:s + batch_size] if len(mask) == len(seq) else mask).to(model.device)

        def patch(act, hook, v=v, m=m):
            act = act.clone()
            act[:, pos] = torch.where(m, v, act[:, pos])
            return act

        with model.hooks([(f"blocks.{layer}.mlp.hook_post", patch)]):
            logits = model(seq[s:s + batch_size, :-1])[:, pos]
        out.append((logits.argmax(-1) == target[s:s + batch_size]).all(1))
    return torch.cat(out).cpu() if out else torch.zeros(0, dtype=torch.bool)


def _random_like(counts: torch.Tensor, n_units: int, gen: torch.Generator) -> torch.Tensor:
    """Bool [..., n_units] with ``counts[...]`` units set, chosen uniformly at random."""
    scores = torch.rand(*counts.shape, n_units, generator=gen)
    kth = scores.sort(-1).values.gather(-1, (counts[..., None] - 1).clamp(min=0))
    return (scores <= kth) & (counts[..., None] > 0)


def layer_patching(model: HookedTransformer, memorized: Examples, stats: NeighbourStats, hmap: HeuristicMap, *,
                   z_min: float = 2.0, n_controls: int = 3, seed: int = 0) -> pd.DataFrame:
    """Layer-wise activation patching of MLP neurons to their clean-neighbour expectations, on M.

    For each analysed layer, three sets of units are patched at the answer positions (one set at
    a time, the other layers untouched):

    - ``outliers``: the layer's heuristic units whose activation on the example is an outlier
      (|z| >= ``z_min``); a different set for each example;
    - ``heuristics``: every heuristic unit of the layer;
    - ``all``: every neuron of the layer.

    Each of the first two has a random control (``control`` True): the same number of units, per
    example and answer position, drawn uniformly from the layer's neurons and patched the same
    way; mean over ``n_controls`` draws. Columns: layer, units, control, n_units (mean per
    example), reverted (share of M no longer giving the noisy label), recovered (share now giving
    the true answer). With patched values fixed, teacher-forced exact match equals greedy decoding.
    """
    cols = ["layer", "units", "control", "n_units", "reverted", "recovered"]
    if len(memorized) == 0:
        return pd.DataFrame(columns=cols)
    gen = torch.Generator().manual_seed(seed)
    expected = stats.expected
    n = len(memorized)
    rows = []
    for li, l in enumerate(hmap.layers):
        values = expected[:, li]  # [N, A, D]
        heur = hmap.heuristic[li][None].expand(n, -1, -1)  # [N, A, D]
        z = stats.z[:, li]
        outl = heur & (z.abs() >= z_min) & ~z.isnan()
        sets = [("outliers", outl), ("heuristics", heur), ("all", torch.ones_like(heur))]
        for name, mask in sets:
            conditions = [(False, [mask])]
            if name != "all":
                counts = mask.sum(-1)  # [N, A]
                conditions.append((True, [_random_like(counts, mask.shape[-1], gen) for _ in range(n_controls)]))
            for control, masks in conditions:
                rev = [1 - _patched_match(model, memorized, "label", l, m, values).double().mean().item() for m in masks]
                rec = [_patched_match(model, memorized, "true_label", l, m, values).double().mean().item() for m in masks]
                rows.append({"layer": l, "units": name, "control": control,
                             "n_units": float(mask.sum((1, 2)).float().mean()),
                             "reverted": float(np.mean(rev)), "recovered": float(np.mean(rec))})
    return pd.DataFrame(rows, columns=cols)


def patching_summary(table: pd.DataFrame, layer: int) -> dict:
    """The numbers of one layer of :func:`layer_patching` as a flat dict: ``{units}_{metric}`` and
    ``{units}_control_{metric}`` (NaN when the table is empty)."""
    out = {}
    for units in ("outliers", "heuristics", "all"):
        for control in ((False, True) if units != "all" else (False,)):
            for metric in ("reverted", "recovered"):
                row = table[(table.layer == layer) & (table.units == units) & (table.control == control)] \
                    if len(table) else table
                out[f"{units}{'_control' if control else ''}_{metric}"] = float(row[metric].iloc[0]) if len(row) else math.nan
    return out


# -- pictures -------------------------------------------------------------------------------------
@torch.no_grad()
def operand_neighbourhood(model: HookedTransformer, example: Examples, layer: int, position: int,
                          neurons: Sequence[int], *, radius: int = 6, order: str = "msb") -> dict:
    """Activations of chosen neurons over the operand square around one example.

    ``grid`` [len(neurons), 2r+1, 2r+1]: clean inputs (a + da, b + db), rows da = -r..r, columns
    db = -r..r, each teacher-forced on its true sum; ``example_value`` [len(neurons)]: the
    activation on the example itself, teacher-forced on its own (noisy) label. Also ``a``, ``b``.
    """
    a, b = int(example.info["a"][0]), int(example.info["b"][0])
    r = torch.arange(-radius, radius + 1)
    da, db = torch.meshgrid(r, r, indexing="ij")
    ga = (a + da.flatten()).clamp(fda.MIN_OPERAND, fda.MAX_OPERAND)
    gb = (b + db.flatten()).clamp(fda.MIN_OPERAND, fda.MAX_OPERAND)
    acts = mlp_activations(model, make_examples(ga, gb, order), "true_label", [layer])[:, position, 0]
    own = mlp_activations(model, example[:1], "label", [layer])[0, position, 0]
    idx = torch.as_tensor(list(neurons), dtype=torch.long)
    return {"grid": acts[:, idx].T.reshape(len(idx), 2 * radius + 1, 2 * radius + 1).cpu().numpy(),
            "example_value": own[idx].cpu().numpy(), "a": a, "b": b, "radius": radius}

"""MLP neurons of a memorized example (claim C4): who writes the label (direct logit attribution, k50),
how specific they are (activity on clean inputs), and C4's summary and intervals. Neurons are read at
the answer positions, teacher-forced on ``which``; the final LayerNorm is folded into the unembedding
with the example's scale frozen, and attribution is to the label's logit minus the mean logit. Every
hook is removed before a function returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from .. import scoring
from ..model import HookedTransformer
from ..tasks import Examples
from .intervals import Interval, bootstrap
from .patching import intermediate_removal
from .ranges import COUNT, SHARE, check_fields, is_finite_at_least, whole_at_least

# -- activations and attribution --------------------------------------------------------------
def folded_unembed(model: HookedTransformer) -> torch.Tensor:
    """[vocab, d_model]: unembedding rows with the final LayerNorm gain folded in, centred over
    d_model (LayerNorm's mean subtraction) and over the vocabulary (softmax invariance)."""
    with torch.no_grad():
        w = model.unembed.weight * model.ln_final.weight[None, :]
        w = w - w.mean(dim=1, keepdim=True)
        return w - w.mean(dim=0, keepdim=True)


def _layers(model: HookedTransformer, layers: Sequence[int] | None) -> list[int]:
    layers = list(range(model.shape.n_layers)) if layers is None else [int(l) for l in layers]
    for l in layers:
        if not 0 <= l < model.shape.n_layers:
            raise ValueError(f"layer {l} out of range for a {model.shape.n_layers}-layer model")
    return layers


def mlp_activations(model: HookedTransformer, examples: Examples, which: str = "label",
                    layers: Sequence[int] | None = None, with_scale: bool = False):
    """MLP activations [N, A, L, d_mlp] at the answer positions, teacher-forced on ``examples.<which>``;
    with ``with_scale`` also the final LayerNorm scale [N, A]."""
    posts = [model.hook_name("post", l) for l in _layers(model, layers)]
    names = posts + ([model.hook_name("scale")] if with_scale else [])
    cache = scoring.answer_activations(model, examples, names, which)
    acts = torch.stack([cache[name] for name in posts], dim=2)
    return (acts, cache[model.hook_name("scale")][..., 0]) if with_scale else acts


@torch.no_grad()
def neuron_dla(model: HookedTransformer, examples: Examples, which: str = "label") -> torch.Tensor:
    """[N, A, L, d_mlp]: each MLP neuron's direct logit attribution to answer token ``examples.<which>``
    (minus the mean logit, the final LayerNorm's scale frozen), teacher-forced on the same answer."""
    acts, sigma = mlp_activations(model, examples, which, with_scale=True)
    w = folded_unembed(model)[getattr(examples, which).to(model.device)]  # [N, A, d_model]
    out = torch.empty_like(acts)
    for l, block in enumerate(model.blocks):
        out[:, :, l] = acts[:, :, l] * (w @ block.mlp.W_out.weight) / sigma[..., None]  # W_out: [d_model, d_mlp]
    return out


def k50(attributions: torch.Tensor) -> torch.Tensor:
    """The fewest units carrying half of the total positive attribution (last dim); NaN where none is positive."""
    pos = attributions.clamp(min=0)
    total = pos.sum(-1, keepdim=True)
    cum = pos.sort(dim=-1, descending=True).values.cumsum(-1)
    k = (cum < 0.5 * total).sum(-1).float() + 1
    return k.masked_fill(total.squeeze(-1) <= 0, math.nan)


def memorized_positions(examples: Examples) -> torch.Tensor:
    """Bool [N, A]: answer positions whose label differs from the true label (the memorized digits)."""
    return examples.label != examples.true_label


def k50_table(model: HookedTransformer, memorized: Examples, clean: Examples,
              mask: torch.Tensor | None = None) -> pd.DataFrame:
    """k50 per (example, answer position): on M to the noisy label where it differs from the true one (or
    at ``mask``), on C to the true label everywhere; every layer's neurons compete."""
    frames = []
    m_mask = memorized_positions(memorized) if mask is None else mask.bool()
    for name, ex, which, mask in (("M", memorized, "label", m_mask),
                                  ("C", clean, "true_label", torch.ones_like(clean.label, dtype=torch.bool))):
        att = neuron_dla(model, ex, which).flatten(-2).cpu()  # [N, A, U]
        n, j = mask.nonzero(as_tuple=True)
        frames.append(pd.DataFrame({"set": name, "example": n.numpy(), "position": j.numpy(),
                                    "k50": k50(att[n, j]).numpy(),
                                    "positive": att[n, j].clamp(min=0).sum(-1).numpy()}))
    return pd.concat(frames, ignore_index=True)


# -- specificity ----------------------------------------------------------------------------------
def _quantile(x: torch.Tensor, q: float) -> torch.Tensor:
    """Quantile of all values of ``x`` (no size limit, unlike torch.quantile)."""
    flat = x.flatten().sort().values
    if len(flat) == 0:
        return torch.tensor(math.nan)
    idx = q * (len(flat) - 1)
    lo, hi = int(math.floor(idx)), int(math.ceil(idx))
    return flat[lo] + (flat[hi] - flat[lo]) * (idx - lo)


ACTIVITY_THRESHOLD = "layer"  # 8.6: "above its 90th percentile" is the layer's percentile, not each neuron's own


def active_fractions(acts: torch.Tensor, quantile: float,
                     per: str = ACTIVITY_THRESHOLD) -> tuple[torch.Tensor, torch.Tensor]:
    """The share of inputs on which each neuron of ``acts`` [N, A, L, D] is active: above its layer's
    ``quantile`` (``per="layer"``, C4's reading) or its own (``per="neuron"``: ``1 - quantile`` by
    construction, shown only to say why not). Returns fractions [A, L, D] and thresholds, on the CPU."""
    if per not in ("layer", "neuron"):
        raise ValueError(f"per must be 'layer' or 'neuron', got {per!r}")
    n_ans, n_layers = acts.shape[1], acts.shape[2]
    if per == "layer":
        thr = torch.full((n_ans, n_layers), math.nan)
        for j in range(n_ans):
            for l in range(n_layers):
                thr[j, l] = _quantile(acts[:, j, l], quantile)
        cut = thr.to(acts.device)[None, :, :, None]
    else:  # each neuron's own quantile over the inputs (linear interpolation, as _quantile)
        thr = acts.quantile(quantile, dim=0).cpu() if len(acts) else torch.full(acts.shape[1:], math.nan)
        cut = thr.to(acts.device)[None]
    frac = (acts > cut).float().mean(0) if len(acts) else torch.full(acts.shape[1:], math.nan, device=acts.device)
    return frac.cpu(), thr.cpu()


@dataclass(frozen=True)
class SpecificitySettings:
    """How :func:`top_neuron_specificity` picks its neurons: the ``top`` neurons by attribution (with
    ``within_k50`` only those among the k50 neurons), a neuron being active on an input where it
    exceeds the ``quantile`` of its layer's activations on the clean inputs."""

    top: int
    quantile: float
    within_k50: bool = True

    def __post_init__(self):
        check_fields(self, top=COUNT, quantile=SHARE, within_k50=(lambda v: isinstance(v, bool), "a bool"))


def top_neuron_specificity(model: HookedTransformer, memorized: Examples, clean: Examples,
                           settings: SpecificitySettings, *, mask: torch.Tensor | None = None) -> pd.DataFrame:
    """Per memorized (example, position) (or those of ``mask``), its ``settings.top`` neurons by DLA to
    the noisy label (with ``within_k50``, only those among its k50: a look-up neuron is not outvoted by
    bystanders) and the share of clean inputs each is active on (:func:`active_fractions`, 8.6)."""
    top, quantile, within_k50 = settings.top, settings.quantile, settings.within_k50
    cols = ["example", "position", "rank", "layer", "neuron", "attribution", "activity"]
    if len(memorized) == 0:
        return pd.DataFrame(columns=cols)
    frac, _ = active_fractions(mlp_activations(model, clean, "true_label"), quantile)
    att = neuron_dla(model, memorized, "label").cpu()  # [N, A, L, D]
    d_mlp = att.shape[3]
    n, j = (memorized_positions(memorized) if mask is None else mask.bool()).nonzero(as_tuple=True)
    flat = att[n, j].flatten(-2)  # [pairs, U]
    k = min(top, flat.shape[-1])
    val, idx = flat.topk(k, dim=-1)
    layer, neuron = idx // d_mlp, idx % d_mlp
    activity = frac[j[:, None].expand(-1, k), layer, neuron]
    rank = torch.arange(k).expand(len(n), -1)
    keep = val > 0
    if within_k50:
        keep &= rank < k50(flat).nan_to_num(0)[:, None]
    return pd.DataFrame({
        "example": n[:, None].expand(-1, k)[keep].numpy(), "position": j[:, None].expand(-1, k)[keep].numpy(),
        "rank": rank[keep].numpy(), "layer": layer[keep].numpy(), "neuron": neuron[keep].numpy(),
        "attribution": val[keep].numpy(), "activity": activity[keep].numpy()}, columns=cols)


# -- input dependency: resample ablation and erasure, in rote.analysis.patching -------------------
def intermediate_table(model: HookedTransformer, examples: Examples, erasure, random_controls=(),
                       matched_controls=()) -> pd.DataFrame:
    """:func:`intermediate_removal` with both controls: ``random`` subspaces and ``matched`` (7.5)."""
    return intermediate_removal(model, examples, erasure, list(random_controls), matched=list(matched_controls or ()))


@dataclass(frozen=True)
class C4Summary:
    """The numbers C4 is judged on (:func:`c4_summary`); NaN where a table is empty, None: not given.
    ``intervals``: section 11's bootstrap intervals (:func:`c4_intervals`), not part of the record."""

    k50_M: float | None = None  # median k50 on M
    k50_C: float | None = None  # median k50 on C
    k50_ratio: float | None = None
    top_activity_median: float | None = None  # median activity share of the top neurons
    position_drops: list[float] | None = None  # mean drop of P(label) per prompt position
    positions_over_min: int | float | None = None  # positions whose mean drop reaches drop_min
    max_position_drop: float | None = None
    intermediate_drop: float | None = None  # mean drop under INLP
    intermediate_control_drop: float | None = None  # under random subspaces
    intermediate_matched_drop: float | None = None  # under the information-matched erasure
    intervals: dict = field(default_factory=dict, compare=False)

    def record(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "intervals"}


def c4_summary(k50s: pd.DataFrame, specificity: pd.DataFrame, positions: pd.DataFrame,
               intermediate: pd.DataFrame, *, drop_min: float) -> C4Summary:
    """C4's numbers from :func:`k50_table`, :func:`top_neuron_specificity`,
    :func:`rote.analysis.patching.resample_positions` and :func:`intermediate_table`."""
    def med(frame, col):
        return float(frame[col].median()) if len(frame) and frame[col].notna().any() else math.nan

    k_m, k_c = med(k50s[k50s.set == "M"], "k50"), med(k50s[k50s.set == "C"], "k50")
    per_pos, inter = mean_by(positions, "position"), mean_by(intermediate, "method")
    # 8.6: a position whose mean is missing leaves the count and the largest drop missing, never the others'
    gap = bool(per_pos.isna().any())
    return C4Summary(k_m, k_c, k_m / k_c if k_c and not math.isnan(k_c) else math.nan, med(specificity, "activity"),
                     [float(v) for v in per_pos.values], math.nan if gap else int((per_pos >= drop_min).sum()),
                     float(per_pos.max()) if len(per_pos) and not gap else math.nan,
                     *(float(inter.get(m, math.nan)) for m in ("INLP", "random", "matched")),
                     intervals=c4_intervals(k50s, specificity, positions, intermediate, drop_min=drop_min))


def mean_by(table: pd.DataFrame, key: str) -> pd.Series:
    """The mean ``drop`` per ``key`` (position, method); NaN where one of its examples' drops is (8.6: a
    missing value makes the mean missing, not the mean of the others)."""
    if not len(table):
        return pd.Series(dtype=float)
    return table.groupby(key)["drop"].agg(lambda d: d.mean(skipna=False))


# -- section 11: the sampling intervals of C4's statistics, a percentile bootstrap over examples ------
def c4_intervals(k50s: pd.DataFrame, specificity: pd.DataFrame, positions: pd.DataFrame,
                 intermediate: pd.DataFrame, *, drop_min: float) -> dict[str, Interval | None]:
    """Section 11: the 95% percentile bootstrap interval of each judged statistic of :func:`c4_summary`
    over its examples (an example's rows resampled together); None where a table is empty. ``k50``: the
    ratio of the two medians (M and C resampled on their own) times the median on C; ``positions``: the
    count of positions reaching ``drop_min``; ``intermediate_over_matched``: paired, per example."""
    m, c = (_example_rows(k50s[k50s.set == name], "k50") for name in ("M", "C"))
    k_c = np.median(c[0]) if len(c[0]) else math.nan
    k50 = None
    if len(m[0]) and k_c > 0:
        on_m, on_c = _median_of(m), _median_of(c)
        ratio = bootstrap(lambda a, b: on_m(a) / on_c(b), [np.arange(m[2]), np.arange(c[2])])
        k50 = ratio.scaled(float(k_c)) if ratio is not None else None
    activity = _example_rows(specificity, "activity")
    drops = _drops_by_example(intermediate)
    return {"k50": k50,
            "activity": bootstrap(_median_of(activity), np.arange(activity[2])) if len(activity[0]) else None,
            "positions": _positions_interval(positions, drop_min),
            "intermediate": bootstrap(np.mean, drops["INLP"]) if "INLP" in drops else None,
            "intermediate_over_matched": bootstrap(np.mean, drops["INLP"] - drops["matched"])
            if "INLP" in drops and "matched" in drops else None}


def _example_rows(frame: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray, int]:
    """The values of ``col`` that are numbers, the example of each (0 .. n - 1) and n, the number of
    examples in the table (an example whose values are all missing counts: it can be drawn)."""
    ids = frame["example"].to_numpy() if "example" in frame.columns else np.arange(len(frame))
    _, example = np.unique(ids, return_inverse=True)
    values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float) if len(frame) else np.zeros(0)
    keep = ~np.isnan(values)
    return values[keep], example.reshape(-1)[keep], int(example.max()) + 1 if len(example) else 0


def _median_of(rows: tuple[np.ndarray, np.ndarray, int]):
    """The statistic of a resample of examples (their indices): the median of the rows of the drawn
    examples, each as often as drawn; the same number as ``np.median`` of those rows, without copying
    them (the values are sorted once; a resample only weighs them)."""
    values, example, n = rows
    order = np.argsort(values, kind="stable")
    values, example = values[order], example[order]

    def median(drawn: np.ndarray) -> float:
        cumulative = np.cumsum(np.bincount(drawn.astype(int), minlength=n)[example])
        total = int(cumulative[-1]) if len(cumulative) else 0
        if total == 0:
            return math.nan
        low, high = np.searchsorted(cumulative, [(total - 1) // 2 + 1, total // 2 + 1])  # the middle rank(s)
        return float(values[low] + values[high]) / 2

    return median


def _by_example(table: pd.DataFrame, within: str) -> pd.DataFrame:
    """``table`` with its ``example`` column (a table without one: the row's rank within its ``within``)."""
    return table if "example" in table.columns else table.assign(example=table.groupby(within).cumcount())


def _drops_by_example(intermediate: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per method of :func:`intermediate_table`, each example's drop, the examples in one order."""
    if not len(intermediate):
        return {}
    wide = _by_example(intermediate, "method").pivot_table(index="example", columns="method", values="drop",
                                                           aggfunc="mean")
    return {method: wide[method].to_numpy(dtype=float) for method in wide.columns}


def _positions_interval(positions: pd.DataFrame, drop_min: float) -> Interval | None:
    """The interval of the count of input positions whose mean drop over examples reaches ``drop_min``."""
    if not len(positions):
        return None
    wide = _by_example(positions, "position").pivot_table(index="example", columns="position", values="drop",
                                                          aggfunc="mean", dropna=False)
    drops = wide.to_numpy(dtype=float)  # [examples, positions], NaN where an example has no value
    seen, filled = ~np.isnan(drops), np.nan_to_num(drops)

    def count(drawn: np.ndarray) -> float:
        w = np.bincount(drawn.astype(int), minlength=len(drops)).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (w @ filled) / (w @ seen)
        return float((means >= drop_min).sum())

    return bootstrap(count, np.arange(len(drops)))


def prompt_position_names(task: str, n_positions: int) -> list[str]:
    """Readable names of the prompt positions: FDA ``a3 a2 a1 a0 + b3 b2 b1 b0 =`` (digit i = the
    10^i place), THR ``h r1 r2``; ``p0, p1, ...`` otherwise."""
    if task == "fda" and n_positions == 10:
        return ["a3", "a2", "a1", "a0", "+", "b3", "b2", "b1", "b0", "="]
    if task == "thr" and n_positions == 3:
        return ["h", "r1", "r2"]
    return [f"p{i}" for i in range(n_positions)]


@dataclass(frozen=True)
class HypothesisThresholds:
    """The numbers :func:`hypotheses_table` quotes: the activity ``quantile`` the statistics used and
    the pass thresholds of C4's measures (``k50_ratio_min``, ``activity_min``, ``drop_min``,
    ``positions_min``)."""

    quantile: float
    k50_ratio_min: float
    activity_min: float
    drop_min: float
    positions_min: int

    def __post_init__(self):
        check_fields(self, quantile=SHARE, k50_ratio_min=(is_finite_at_least, "a number >= 0"), activity_min=SHARE,
                     drop_min=SHARE, positions_min=whole_at_least(0))


def hypotheses_table(summary: C4Summary, thresholds: HypothesisThresholds, *, n_clean: int) -> pd.DataFrame:
    """What a look-up table and a distributed encoding each predict for the measures of
    :func:`c4_summary`, next to what was observed and the pass threshold (``thresholds``)."""
    t = thresholds
    rows = [("k50 on M / k50 on C", "~1 / k50_C (one neuron)", "~1", t.k50_ratio_min, summary.k50_ratio),
            ("median activity of top neurons", f"~1/{n_clean} = {1 / max(n_clean, 1):.4f}",
             f"~{1 - t.quantile:.2f} (layer average)", t.activity_min, summary.top_activity_median),
            ("input positions removing >= 20% of P(noisy)", "all (any change breaks the key)", f">= {t.positions_min}",
             t.positions_min, summary.positions_over_min),
            ("share of P(noisy) removed with the intermediate result", "~0 (the label bypasses the reasoning)", "large",
             t.drop_min, summary.intermediate_drop)]
    return pd.DataFrame([{"measure": m, "look-up predicts": lookup, "distributed predicts": distributed,
                          "threshold": f">= {threshold}", "observed": observed}
                         for m, lookup, distributed, threshold, observed in rows]).set_index("measure")

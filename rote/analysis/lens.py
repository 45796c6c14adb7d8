"""The logit lens: every layer's residual stream read through the final LayerNorm and unembedding.

Layer 0 is the embedding (``blocks.0.hook_resid_pre``), layer l the output of block l - 1; the lens at
the last layer is the model's output. Inputs are teacher-forced (:mod:`rote.analysis.targets`).
:func:`label_race` gives P(true) and P(trained) per layer, :func:`lens_curves` and :func:`lens_verdict`
C2's summary of it on M, :func:`ahead_share` 7.4's share against the training-label prior, and
:func:`trace` one worked example."""

from __future__ import annotations

import math

import pandas as pd
import torch

from .. import scoring
from ..model import HOOK_KINDS, HookedTransformer
from ..scoring import model_inputs
from ..tasks import Examples

def layer_hook_name(layer: int) -> str:
    """Hook point of the residual stream at ``layer`` (0 = embeddings, l = after block l - 1)."""
    kind, block = ("resid_pre", 0) if layer == 0 else ("resid_post", layer - 1)
    return HOOK_KINDS[kind].format(layer=block)


@torch.no_grad()
def residual_stack(model: HookedTransformer, tokens: torch.Tensor, positions=None,
                   batch_size: int = scoring.BATCH) -> torch.Tensor:
    """Residual stream at every layer and the chosen positions (all by default): [L+1, N, P, d]."""
    names = [layer_hook_name(l) for l in range(model.shape.n_layers + 1)]
    pos = slice(None) if positions is None else torch.as_tensor(positions, dtype=torch.long)
    n_pos = tokens.shape[1] if positions is None else len(pos)
    out = []
    for start in range(0, len(tokens), batch_size):
        _, cache = model.run_with_cache(tokens[start:start + batch_size].to(model.device), names)
        out.append(torch.stack([cache[n][:, pos] for n in names]).cpu())
    if not out:
        return torch.zeros(len(names), 0, n_pos, model.shape.d_model)
    return torch.cat(out, dim=1)


@torch.no_grad()
def logit_lens(model: HookedTransformer, tokens: torch.Tensor, positions=None,
               batch_size: int = scoring.BATCH) -> torch.Tensor:
    """Log-probabilities of the logit lens at every layer and the chosen positions: [L+1, N, P, vocab]."""
    resid = residual_stack(model, tokens, positions, batch_size)
    return model.unembed_residual(resid.to(model.device)).log_softmax(-1).cpu()


def label_race(model: HookedTransformer, examples: Examples, which: str = "label") -> dict[str, torch.Tensor]:
    """Teacher-forced on ``examples.<which>``: ``true`` and ``noisy`` [L+1, N, A] lens probabilities of the
    true and the trained answer token, their ranks, and ``differs`` [N, A] (the tokens differ)."""
    names = [layer_hook_name(layer) for layer in range(model.shape.n_layers + 1)]
    resid = scoring.answer_activations(model, examples, names, which)  # the scorer's pass: {name: [N, A, d]}
    with torch.no_grad():
        logp = model.unembed_residual(torch.stack([resid[n] for n in names])).log_softmax(-1).cpu()  # [L+1, N, A, V]
    out = {"differs": examples.label != examples.true_label}
    for key, ids in (("true", examples.true_label), ("noisy", examples.label)):
        idx = ids[None, :, :, None].expand(logp.shape[0], -1, -1, 1)
        lp = logp.gather(-1, idx).squeeze(-1)
        out[key] = lp.exp()
        out[f"{key}_rank"] = (logp > lp.unsqueeze(-1)).sum(-1)
    return out


def lens_curves(race: dict[str, torch.Tensor]) -> pd.DataFrame:
    """Per layer over the pairs where the tokens differ: mean P(true), P(noisy), the share with the true one
    ahead and the mean ranks (NaN without such pairs)."""
    mask = race["differs"]
    n = int(mask.sum())
    rows = []
    for layer in range(race["true"].shape[0]):
        t, s = race["true"][layer][mask], race["noisy"][layer][mask]
        means = {"p_true": t, "p_noisy": s, "true_ahead": (t > s).double(),
                 "rank_true": race["true_rank"][layer][mask].float(),
                 "rank_noisy": race["noisy_rank"][layer][mask].float()}
        rows.append({"layer": layer, "n": n, **{k: v.mean().item() if n else math.nan for k, v in means.items()}})
    return pd.DataFrame(rows)


def first_differing(race: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per example, the first answer position where the true and the trained token differ (-1: none)."""
    differs = race["differs"]
    first = differs.float().argmax(-1)
    return torch.where(differs.any(-1), first, torch.full_like(first, -1))


def label_prior(labels: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """The training-label prior: the frequency of each token at each answer position among ``labels``
    [N, A] (the labels the model was trained on, noisy ones included). Returns [A, vocab]."""
    labels = labels.long()
    counts = torch.zeros(labels.shape[1], vocab_size, dtype=torch.float64)
    counts.scatter_add_(1, labels.T, torch.ones(labels.T.shape, dtype=torch.float64))
    return counts / max(len(labels), 1)


def ahead_share(race: dict[str, torch.Tensor], examples: Examples, prior: torch.Tensor) -> pd.DataFrame:
    """Per layer: ``n`` examples, ``ahead`` (P(true) > P(noisy) at the first differing answer position: one
    trial per example, the prefix still the true answer's), ``share`` and ``null``, the share expected under
    ``prior`` (1 where the true token is the more frequent training label there, 0 where the noisy one, 1/2
    on a tie)."""
    pos = first_differing(race)
    keep = pos >= 0
    idx = torch.arange(len(pos))[keep]
    p = pos[keep]
    true_tok, noisy_tok = examples.true_label[idx, p].long(), examples.label[idx, p].long()
    pt, pn = prior[p, true_tok], prior[p, noisy_tok]
    null_each = (pt > pn).double() + 0.5 * (pt == pn).double()
    n = int(keep.sum())
    null = null_each.mean().item() if n else math.nan
    rows = []
    for layer in range(race["true"].shape[0]):
        ahead = int((race["true"][layer][idx, p] > race["noisy"][layer][idx, p]).sum()) if n else 0
        rows.append({"layer": layer, "n": n, "ahead": ahead, "share": ahead / n if n else math.nan, "null": null})
    return pd.DataFrame(rows, columns=["layer", "n", "ahead", "share", "null"])


def lens_verdict(curves: pd.DataFrame) -> dict:
    """The lens pattern of C2 on M (layer 0 excluded): the layers where mean P(true) or P(noisy) is ahead,
    ``true_ahead_intermediate`` (at some layer 1..L-1) and ``noisy_only_last`` (the noisy label is ahead in a
    final run of layers after the last where the true one is)."""
    layers = curves[curves.layer > 0]
    last = int(curves.layer.max()) if len(curves) else 0
    if not len(layers) or layers.p_true.isna().all():
        return {"true_ahead_layers": [], "noisy_ahead_layers": [], "true_ahead_intermediate": False,
                "noisy_only_last": False, "takeover_layer": None}
    ahead = layers.p_true > layers.p_noisy
    true_layers = [int(l) for l in layers.layer[ahead]]
    noisy_layers = [int(l) for l in layers.layer[~ahead]]
    intermediate = [l for l in true_layers if l < last]
    takeover = min(noisy_layers) if noisy_layers else None
    suffix = bool(noisy_layers) and noisy_layers == list(range(takeover, last + 1))
    return {"true_ahead_layers": true_layers, "noisy_ahead_layers": noisy_layers,
            "true_ahead_intermediate": bool(intermediate),
            "noisy_only_last": bool(suffix and intermediate and takeover > max(intermediate)),
            "takeover_layer": takeover}


def trace(model: HookedTransformer, example: Examples, reads: dict[str, tuple[int, int]],
          which: str = "label") -> pd.DataFrame:
    """Logit lens of one example (``example`` holds one row): for each read ``name -> (position,
    token id)``, the probability and rank of that token at that position, per layer."""
    if len(example) != 1:
        raise ValueError(f"trace expects one example, got {len(example)}")
    logp = logit_lens(model, model_inputs(example, which))[:, 0]  # [L+1, P, V]
    rows = []
    for name, (position, token) in reads.items():
        for layer in range(logp.shape[0]):
            lp = logp[layer, position]
            rows.append({"read": name, "layer": layer, "position": position, "token": int(token),
                         "prob": lp[token].exp().item(), "rank": int((lp > lp[token]).sum())})
    return pd.DataFrame(rows)


def most_visible(race: dict[str, torch.Tensor], among: torch.Tensor | None = None) -> int | None:
    """The example (among ``among``) whose true answer is most visible at an intermediate layer: the largest
    mean P(true) - P(noisy) where they differ; None when none qualifies."""
    diff = race["true"] - race["noisy"]
    diff = diff[1:-1] if diff.shape[0] > 2 else diff  # intermediate layers (all, for a 1-layer model)
    mask = race["differs"].float()
    per_example = ((diff * mask).sum(-1) / mask.sum(-1).clamp_min(1)).max(0).values  # [N]
    ok = mask.sum(-1) > 0
    if among is not None:
        ok &= among
    if not ok.any():
        return None
    return int(per_example.masked_fill(~ok, -math.inf).argmax())


def example_reads(example: Examples, task: str) -> dict[str, tuple[int, int]]:
    """What :func:`trace` reads for a memorized example: FDA, the true and noisy digit where they differ;
    THR, the bridge at r1 and the last position and the true and noisy tail there."""
    if len(example) != 1:
        raise ValueError(f"expects one example, got {len(example)}")
    if task == "fda":
        reads = {}
        start = int(example.answer_positions[0])
        for j in range(example.label.shape[1]):
            t, s = int(example.true_label[0, j]), int(example.label[0, j])
            if t != s:
                reads[f"true digit {j + 1}: {t}"] = (start + j, t)
                reads[f"noisy digit {j + 1}: {s}"] = (start + j, s)
        return reads
    if task == "thr":
        b, t, s = int(example.info["bridge"][0]), int(example.true_label[0, 0]), int(example.label[0, 0])
        return {f"bridge e{b} @ r1": (1, b), f"bridge e{b} @ r2": (2, b), f"true tail e{t} @ r2": (2, t),
                f"noisy label e{s} @ r2": (2, s)}
    raise ValueError(f"unknown task {task!r}")

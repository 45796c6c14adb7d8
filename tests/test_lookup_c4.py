"""Planted answers for C4's positive control (amendment 1, 7.6): a look-up grafted into a model must
fail C4's statistics, a distributed encoding must pass them, and the verdict must supersede a
statistic that calls a known look-up distributed."""

import functools
import math

import pandas as pd
import torch

from rote import scoring, verdicts
from rote.analysis import lookup as L
from rote.analysis import neurons as N
from rote.claims import THRESHOLDS
from rote.model import HookedTransformer, ModelShape
from rote.tasks import Examples

T = THRESHOLDS["C4"]
C4_SETTINGS = L.LookupSettings(top=T["top_neurons"], quantile=T["activity_quantile"], drop_min=T["drop_min"])


@functools.lru_cache(maxsize=1)  # built once per session; nothing below modifies it (plant_lookup copies)
def fda_like_model_and_sets(n_clean=300, n_keys=12):
    """A random 2-layer model on FDA-shaped inputs (10 prompt tokens, 5 answer digits) whose "true
    label" is its own greedy answer, so that it answers every example correctly."""
    torch.manual_seed(0)
    model = HookedTransformer(ModelShape(n_layers=2, d_model=32, n_heads=2, vocab_size=13, n_ctx=15)).eval()
    with torch.no_grad():  # attention outputs large against the rest: inputs look different inside
        for block in model.blocks:
            block.attn.W_O.weight.mul_(20)
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 10, (n_clean + n_keys, 10), generator=g)
    prompt[:, 4], prompt[:, 9] = 10, 11  # "+" and "="
    prompt = torch.unique(prompt, dim=0)[torch.randperm(n_clean + n_keys, generator=g)]
    answer = torch.zeros(len(prompt), 5, dtype=torch.long)
    for j in range(5):  # greedy decoding, one digit at a time
        seq = torch.cat([prompt, answer[:, :j]], 1)
        answer[:, j] = model(seq)[:, -1].argmax(-1)
    ex = Examples(prompt, answer, answer.clone())
    return model, ex[n_keys:], ex[:n_keys]


def test_widened_model_computes_the_same():
    model, clean, _ = fda_like_model_and_sets()
    wide = L.widened(model, 7)
    assert wide.blocks[0].mlp.W_in.out_features == model.blocks[0].mlp.W_in.out_features + 7
    seq = clean.sequences()[:, :-1]
    assert torch.allclose(model(seq), wide(seq), atol=1e-6)


def test_planted_lookup_fails_c4_statistics():
    model, clean, keys = fda_like_model_and_sets()
    pl = L.plant_lookup(model, clean, keys)
    assert len(pl.keys) >= len(keys) // 2  # most keys are now answered with their planted label
    assert (pl.keys.label != pl.keys.true_label).sum(1).eq(1).all()  # one digit changed: the last
    assert (pl.keys.label[:, -1] != pl.keys.true_label[:, -1]).all()
    assert scoring.exact_match(pl.model, pl.keys, "label").all()
    assert scoring.exact_match(model, pl.keys, "label").sum() == 0  # the original model does not
    assert len(pl.clean) == len(clean)  # clean answers untouched
    # each look-up neuron fires for its key only (at the answer position it writes)
    acts = N.mlp_activations(pl.model, clean, "true_label", [pl.layer])[:, pl.answer_index, 0, pl.neurons]
    assert acts.abs().max() < 1e-3
    own = N.mlp_activations(pl.model, pl.keys, "label", [pl.layer])[:, pl.answer_index, 0, pl.neurons]
    assert (own.diagonal() > 3).all()
    st = L.lookup_statistics(pl.model, L.LookupSets(pl.keys, pl.clean, pl.clean, clean), C4_SETTINGS)
    assert st.summary.k50_M == 1.0 and st.summary.k50_ratio < T["k50_ratio_min"]  # one neuron writes the label
    top = st.tables["specificity"]
    assert set(top.neuron) <= set(pl.neurons) and (top.activity == 0).all()  # active on no clean input
    assert st.summary.positions_over_min >= 2  # the key reads many positions: this statistic cannot tell
    # the verdict: k50 and activity separate the look-up (control passes), positions does not
    treatment = N.C4Summary(**{"k50_M": 10.0, "k50_C": 12.0, "top_activity_median": 0.2, "positions_over_min": 3,
                 "intermediate_drop": 0.5, "intermediate_matched_drop": 0.1})
    _, checks = verdicts.c4.checks(treatment, st)
    by = {c.id: c for c in checks}
    assert by["c4.k50.lookup"].passed is True and by["c4.activity.lookup"].passed is True
    assert by["c4.positions.lookup"].passed is False and by["c4.positions.lookup"].kind == "validity"
    assert by["c4.k50"].kind == "registered" and by["c4.activity"].kind == "registered"
    assert by["c4.positions"].kind == "superseded" and "look-up" in by["c4.positions"].reason
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    # amendment 2, 8.1: the statistic that cannot discriminate stops counting; it does not fail the claim
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert not pl.model.has_hooks()


def spread_model(n_writers=40, V=40, D=64, label=3):
    """Neurons 0..n_writers-1 are active on every input and each writes a little of ``label``."""
    torch.manual_seed(0)
    model = HookedTransformer(ModelShape(n_layers=1, d_model=D, n_heads=2, vocab_size=V, n_ctx=2)).eval()
    with torch.no_grad():
        model.embed.weight.copy_(torch.eye(V, D))
        model.pos_embed.weight.zero_()
        model.blocks[0].attn.W_O.weight.zero_()
        model.blocks[0].attn.W_O.bias.zero_()
        mlp = model.blocks[0].mlp
        mlp.W_out.weight.mul_(0.1)
        mlp.W_in.bias[:n_writers] = 1.0
        u = model.unembed.weight[label] / model.unembed.weight[label].norm()
        mlp.W_out.weight[:, :n_writers] = 0.5 * u[:, None]
    return model


def test_distributed_encoding_passes_and_supersedes_when_taken_for_a_lookup():
    model = spread_model()
    t = torch.arange(40)
    ex = Examples(torch.stack([torch.zeros_like(t), t], 1), torch.full((40, 1), 3), torch.full((40, 1), 3))
    st = L.lookup_statistics(model, L.LookupSets(ex[:5], ex[5:], ex, ex), C4_SETTINGS,
                             mask=torch.ones(5, 1, dtype=torch.bool))
    assert st.summary.k50_M >= 15 and st.summary.k50_ratio >= T["k50_ratio_min"]  # many writers
    assert st.summary.top_activity_median >= T["activity_fraction_min"]  # shared with other inputs
    # had this been the "known look-up", both statistics would call it distributed: superseded
    treatment = N.C4Summary(**{"k50_M": 10.0, "k50_C": 12.0, "top_activity_median": 0.2, "positions_over_min": 3,
                 "intermediate_drop": 0.5, "intermediate_matched_drop": 0.1})
    _, checks = verdicts.c4.checks(treatment, st)
    superseded = [c.name for c in checks if c.kind == "superseded"]
    assert any(n.startswith("median k50") for n in superseded)
    # (8.6: the name also says which percentile "active" reads, the layer's)
    assert any(n.startswith("median activity fraction of top neurons (active: above the layer's") for n in superseded)


def test_empty_lookup_is_unmeasured():
    model, clean, keys = fda_like_model_and_sets()
    pl = L.plant_lookup(model, clean, keys[:0])
    st = L.lookup_statistics(pl.model, L.LookupSets(pl.keys, clean, clean, clean),
                             L.LookupSettings(top=10, quantile=0.9, drop_min=0.2))
    assert st.n_lookup == 0 and math.isnan(st.summary.k50_M) and math.isnan(st.summary.positions_over_min)
    _, checks = verdicts.c4.checks(N.C4Summary(k50_M=10.0, k50_C=12.0), st)
    assert all(c.passed is None for c in checks if c.kind == "control")


def test_intermediate_table_has_the_matched_control():
    from rote.analysis.inlp import Erasure

    model = spread_model()
    t = torch.arange(6)
    ex = Examples(torch.stack([torch.zeros_like(t), t], 1), torch.full((6, 1), 3), torch.full((6, 1), 3))
    D = 64
    writers = torch.linalg.qr(model.blocks[0].mlp.W_out.weight[:, :1].detach())[0]
    g = torch.Generator().manual_seed(0)
    far = torch.linalg.qr(torch.randn(D, 1, generator=g))[0]
    erase = Erasure({(1, 1): writers}, {(1, 1): torch.zeros(D)})
    other = Erasure({(1, 1): far}, {(1, 1): torch.zeros(D)})
    table = N.intermediate_table(model, ex, erase, [other], [other, other])
    assert set(table.method) == {"INLP", "random", "matched"}
    drop = table.groupby("method")["drop"].mean()
    assert drop["matched"] == pd.Series(drop["random"]).iloc[0]  # the same subspace: the same drop
    assert drop["INLP"] > drop["random"] + 0.2
    s = N.c4_summary(pd.DataFrame({"set": [], "k50": []}), pd.DataFrame({"activity": []}),
                     pd.DataFrame({"position": [], "drop": []}), table, drop_min=0.2)
    assert s.intermediate_matched_drop == drop["matched"]
    assert len(N.intermediate_table(model, ex, erase, [other])) == 12  # no matched rows without controls


def test_atomic_lookup_keeps_the_facts_the_model_answers():
    from types import SimpleNamespace

    import pytest

    model = spread_model()  # answers 3 to every input
    t = torch.arange(10)
    label = torch.where(t < 4, 3, 5)[:, None]  # four facts answered 3, six answered 5
    facts = Examples(torch.stack([torch.zeros_like(t), t], 1), label, label.clone())
    kept = L.atomic_lookup(model, SimpleNamespace(task="thr", atomic=facts))
    assert kept.prompt[:, 1].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        L.atomic_lookup(model, SimpleNamespace(task="fda", atomic=None))


def test_settings_reject_out_of_range_values():
    import pytest

    assert (C4_SETTINGS.n_samples, C4_SETTINGS.seed) == (3, 0)
    for bad in ({"top": 0}, {"quantile": 1.5}, {"drop_min": -0.1}, {"n_samples": 0}, {"seed": -1}, {"top": 2.5}):
        with pytest.raises(ValueError, match="LookupSettings"):
            L.LookupSettings(**{"top": 10, "quantile": 0.9, "drop_min": 0.2, **bad})
    with pytest.raises(ValueError, match="SpecificitySettings.quantile"):
        N.SpecificitySettings(top=10, quantile=float("nan"))
    good = {"quantile": 0.9, "k50_ratio_min": 0.5, "activity_min": 0.05, "drop_min": 0.2, "positions_min": 2}
    for bad in ({"k50_ratio_min": -1}, {"activity_min": 2}, {"positions_min": 1.5}):
        with pytest.raises(ValueError, match="HypothesisThresholds"):
            N.HypothesisThresholds(**{**good, **bad})
    table = N.hypotheses_table(N.C4Summary(**{"k50_ratio": 1.0, "top_activity_median": 0.1, "positions_over_min": 3,
                                "intermediate_drop": 0.4}), N.HypothesisThresholds(**good), n_clean=100)
    assert table.threshold.tolist() == [">= 0.5", ">= 0.05", ">= 2", ">= 0.2"]
    assert table.loc["median activity of top neurons", "look-up predicts"] == "~1/100 = 0.0100"

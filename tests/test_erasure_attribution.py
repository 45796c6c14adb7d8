"""INLP erasure and attribution patching (claim C3's instruments)."""

import contextlib
import math

import pandas as pd
import pytest
import torch

from rote import scoring
from rote.analysis import attribution as A
from rote.analysis import erasure as E
from rote.analysis import inlp, lens, patching, probes, targets
from rote.config import make_config
from rote.tasks import build_task


@pytest.fixture(scope="module")
def fda_data():
    return build_task(make_config("fda", "smoke"))


def _sites(model, data, clean, min_over_chance, max_train=300):
    """The erasure sites (8.6) from C2's probe sweep of ``model`` read on ``clean``, without the cache."""
    sweep = probes.probe_sweep(model, data, data.train_clean, {"C": clean},
                               probes.ProbeTargets(positions=targets.probe_positions(data.task)),
                               probes.ProbeSettings(max_train=max_train, seed=0))
    return E.sites_from_sweep(sweep, data.task, min_over_chance)


def _patched(model, edits):
    return model.hooks(patching.edit_hooks(edits)(slice(None)))


def _erased(model, erasure):
    return _patched(model, patching.erasure_edits(model, erasure))


def _planted(n=3000, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(d, generator=g)
    u = u / u.norm()
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, d, generator=g) + 2.0 * (2 * y[:, None] - 1) * u  # label lives along u only
    return x, y, u


def test_inlp_removes_planted_direction_and_keeps_its_complement():
    x, y, u = _planted()
    Q = inlp.inlp_basis(x, y, rank=1)
    P = torch.eye(len(u)) - Q @ Q.T
    torch.testing.assert_close(P, P.T)
    torch.testing.assert_close(P @ P, P, atol=1e-5, rtol=0)
    assert abs(torch.trace(P).item() - (len(u) - 1)) < 1e-4
    assert (P @ u).norm() < 0.1  # the planted direction is gone (up to the classifier's estimation error)
    # its orthogonal complement is left unchanged
    g = torch.Generator().manual_seed(5)
    v = torch.randn(len(u), 8, generator=g)
    v = v - u[:, None] * (u @ v)[None]
    assert ((P @ v) - v).norm() / v.norm() < 0.1
    Q = torch.linalg.svd(torch.eye(len(u)) - P).U[:, :1]
    w = torch.randn(len(u), 8, generator=g)
    w = w - Q @ (Q.T @ w)  # exactly orthogonal to the removed direction: untouched
    torch.testing.assert_close(P @ w, w, atol=1e-5, rtol=0)
    # and the label is no longer linearly readable
    xp = x @ P
    before = probes.fit_probes(x[:2000], y[:2000], 2).accuracy(x[2000:][None], y[2000:]).item()
    after = probes.fit_probes(xp[:2000], y[:2000], 2).accuracy(xp[2000:][None], y[2000:]).item()
    assert before > 0.95 and after < 0.65


def test_inlp_rank_and_multiple_targets():
    x, y, u = _planted(d=12)
    y2 = (x[:, 0] > 0).long()
    Q = inlp.inlp_basis(x, torch.stack([y, y2], 1), rank=5)
    assert Q.shape == (12, 5)
    torch.testing.assert_close(Q.T @ Q, torch.eye(5), atol=1e-5, rtol=0)
    assert (Q.T @ u).norm() > 0.95  # both planted features among the first directions
    assert Q[0].norm() > 0.9


def test_random_basis():
    Q = inlp.random_basis(16, 4, seed=3)
    P = torch.eye(16) - Q @ Q.T
    torch.testing.assert_close(P @ P, P, atol=1e-5, rtol=0)
    assert abs(torch.trace(P).item() - 12) < 1e-4
    assert not torch.allclose(Q, inlp.random_basis(16, 4, seed=4))


def test_erasure_hook_projects_only_chosen_layers_and_positions(tiny_model, fda_data):
    tokens = scoring.model_inputs(fda_data.test[:6])
    Q, mean = inlp.random_basis(16, 3, seed=0), torch.randn(16)
    P = torch.eye(16) - Q @ Q.T
    erasure = inlp.Erasure({(1, 9): Q, (1, 10): Q}, {(1, 9): mean, (1, 10): mean})
    assert erasure.rank == 3 and erasure.layers == [1] and erasure.positions == [9, 10]
    _, clean = tiny_model.run_with_cache(tokens, ["blocks.0.hook_resid_post"])
    with _erased(tiny_model, erasure):
        assert tiny_model.has_hooks()
        _, cache = tiny_model.run_with_cache(tokens, ["blocks.0.hook_resid_post"])
    assert not tiny_model.has_hooks()
    got, x = cache["blocks.0.hook_resid_post"], clean["blocks.0.hook_resid_post"]
    torch.testing.assert_close(got[:, [9, 10]], mean + (x[:, [9, 10]] - mean) @ P)
    torch.testing.assert_close(got[:, :9], x[:, :9])
    with pytest.raises(RuntimeError):
        with _erased(tiny_model, erasure):
            raise RuntimeError("boom")
    assert not tiny_model.has_hooks()


def test_fit_erasure_on_model(tiny_model, fda_data):
    sites = E.ErasureSites(["carry_0", "carry_1"], layers=[1], positions=[9, 10])
    er = E.fit_erasure(tiny_model, fda_data, fda_data.train_clean, sites, 4)
    assert er.rank == 4 and set(er.bases) == {(1, 9), (1, 10)}
    # INLP directions come in order: a lower rank is a prefix
    er2 = E.fit_erasure(tiny_model, fda_data, fda_data.train_clean, sites, 2)
    torch.testing.assert_close(er.truncate(2).bases[1, 9], er2.bases[1, 9])
    ctrl = inlp.random_erasure(er, seed=1)
    assert ctrl.rank == 4 and ctrl.positions == [9, 10]
    sets = {"test": (fda_data.test, "true_label"), "none": (fda_data.test[:0], "label")}
    acc = patching.patched_accuracy(tiny_model, sets, patching.erasure_edits(tiny_model, er))
    assert 0 <= acc["test"] <= 1 and math.isnan(acc["none"])
    settings = patching.ErasureSweepSettings(ranks=[0, 2, 4], n_controls=2)
    sweep = patching.erasure_outcomes(tiny_model, er, sets, settings).table
    assert len(sweep) == 3 * 2 * 2 and set(sweep.method) == {"INLP", "random"}
    assert not tiny_model.has_hooks()


def test_erasure_sites_follow_the_probe_threshold(tiny_model, fda_data):
    everywhere = _sites(tiny_model, fda_data, fda_data.test, 0.0)
    assert everywhere["group"] == "carries" and everywhere["targets"] == [f"carry_{i}" for i in range(4)]
    expected = targets.intermediate_targets(fda_data.test[:1], fda_data)
    assert everywhere["positions"] == sorted({expected[n].position for n in everywhere["targets"]})
    assert everywhere["layers"] == [1, 2]  # 8.6: every layer C2 reads after the embeddings (0), the last (2) included
    nowhere = _sites(tiny_model, fda_data, fda_data.test, 1e9)
    assert nowhere["layers"] == [] and nowhere["positions"] == everywhere["positions"]


def test_attribution_patching_agrees_with_activation_patching(tiny_model, fda_data):
    """First-order attribution vs real patching, one component at a time: all 4 heads and every
    third of the 128 neurons (both layers). Tolerance: correlation >= 0.99 and every per-example
    error <= 10% of the largest effect."""
    ex = fda_data.test[:12]
    cor = A.resample(fda_data.train_clean, len(ex), seed=1)
    n_heads, n_neurons = A.n_components(tiny_model)
    components = list(range(n_heads)) + list(range(n_heads, n_heads + n_neurons, 3))
    approx = A.attribution_scores(tiny_model, ex, "label", cor, batch_size=5)
    assert approx.shape == (12, n_heads + n_neurons)
    approx = approx[:, components]
    actual = patching.patching_effects(tiny_model, ex, "label", cor, components)
    assert actual.shape == (12, len(components))
    assert torch.corrcoef(torch.stack([approx.flatten(), actual.flatten()]))[0, 1] > 0.99
    assert (approx - actual).abs().max() <= 0.1 * actual.abs().max()
    assert not tiny_model.has_hooks()


def test_component_scores(tiny_model, fda_data):
    ref = fda_data.train_clean
    scores = A.mean_importance(A.example_importance(tiny_model, fda_data.test[:10], "label", ref))
    assert len(scores) == sum(A.n_components(tiny_model)) == 2 * 2 + 2 * 64 and (scores >= 0).all()
    assert torch.isnan(A.mean_importance(A.example_importance(tiny_model, fda_data.test[:0], "label", ref))).all()


def test_top_k_and_jaccard():
    s = torch.arange(100.0)
    assert A.top_k(s, 0.05) == {95, 96, 97, 98, 99}
    assert A.jaccard({1, 2, 3}, {2, 3, 4}) == 0.5 and math.isnan(A.jaccard(set(), set()))
    assert A.random_jaccard(10, 10) == 1.0
    assert A.random_jaccard(100, 1) == pytest.approx(0.01)
    # exact expectation agrees with simulation
    g = torch.Generator().manual_seed(0)
    sim = sum(A.jaccard(set(torch.randperm(200, generator=g)[:10].tolist()),
                        set(torch.randperm(200, generator=g)[:10].tolist())) for _ in range(4000)) / 4000
    assert sim == pytest.approx(A.random_jaccard(200, 10), abs=0.004)


def test_mean_ablation(tiny_model, fda_data):
    ex = fda_data.test[:6]
    means = A.component_means(tiny_model, fda_data.train_clean[:50])
    tokens = scoring.model_inputs(ex)
    n_heads, _ = A.n_components(tiny_model)
    with _patched(tiny_model, patching.component_edits(tiny_model, {1, n_heads + 3}, means)):  # L0H1, L0N3
        _, cache = tiny_model.run_with_cache(tokens, ["blocks.0.attn.hook_z", "blocks.0.mlp.hook_post"])
    assert not tiny_model.has_hooks()
    torch.testing.assert_close(cache["blocks.0.attn.hook_z"][:, :, 1],
                               means["blocks.0.attn.hook_z"][:, 1].expand(6, -1, -1))
    torch.testing.assert_close(cache["blocks.0.mlp.hook_post"][:, :, 3],
                               means["blocks.0.mlp.hook_post"][:, 3].expand(6, -1))


def test_overlap_and_matched_random_control(tiny_model):
    n_heads, n_neurons = A.n_components(tiny_model)
    g = torch.Generator().manual_seed(0)
    a = torch.rand(n_heads + n_neurons, generator=g)
    o = A.overlap(tiny_model, a, a.clone(), 0.05)
    assert o["all"]["jaccard"] == 1.0 and o["all"]["k_a"] == round(0.05 * (n_heads + n_neurons))
    assert all(c >= n_heads for c in o["neurons"]["top_a"])
    b = torch.rand(n_heads + n_neurons, generator=g)
    o2 = A.overlap(tiny_model, a, b, 0.05)
    assert o2["all"]["random"] == pytest.approx(A.random_jaccard(n_heads + n_neurons, o2["all"]["k_a"]))
    chosen = {0, n_heads + 1, n_heads + 2, n_heads + 64 + 5}  # a head, two layer-0 neurons, one layer-1 neuron
    control = A.random_components(tiny_model, chosen, seed=1, exclude=chosen)
    assert len(control) == 4 and not control & chosen
    assert sorted(A._stratum(tiny_model, c) for c in control) == sorted(A._stratum(tiny_model, c) for c in chosen)


def test_inlp_bases_fit_each_site_separately():
    x1, y, u1 = _planted(seed=0)
    g = torch.Generator().manual_seed(9)
    R, _ = torch.linalg.qr(torch.randn(16, 16, generator=g))
    x2, u2 = x1 @ R, R.T @ u1  # the same labels, stored along another direction at the second site
    Q = inlp.inlp_bases(torch.stack([x1, x2]), y, rank=2)
    assert Q.shape == (2, 16, 2)
    assert (Q[0].T @ u1).norm() > 0.99 and (Q[1].T @ u2).norm() > 0.99
    assert (Q[0].T @ u2).norm() < 0.9  # not the same subspace


def test_rank_zero_erases_nothing_and_an_erased_carry_is_unreadable(tiny_model):
    """A model that writes carry_0 at (layer 1, position 12) along a planted direction (a hook reads
    the digits from the embeddings): a probe reads the carry there; after an INLP erasure of carry_0
    at that site a fresh probe is near chance; the same erasure at rank 0 changes nothing at all."""
    data = build_task(make_config("fda", "quick"))
    train, test = data.train_clean[:1000], data.test[:300]
    u = torch.randn(16, generator=torch.Generator().manual_seed(3))
    u = u / u.norm()
    state = {}

    def read_tokens(act, hook):
        state["tokens"] = (act[:, :, None, :] - tiny_model.embed.weight[None, None]).norm(dim=-1).argmin(-1)

    def write_carry(act, hook):
        tok = state["tokens"]
        carry = (tok[:, 3] + tok[:, 8] >= 10).float()  # msb prompt: a_0 at 3, b_0 at 8
        act = act.clone()
        act[:, 12] += 4.0 * (2 * carry - 1)[:, None] * u
        return act

    def carry(ex):
        return targets.intermediate_targets(ex, data)["carry_0"].labels

    def probe_accuracy(erasure=None):
        with _erased(tiny_model, erasure) if erasure is not None else contextlib.nullcontext():
            acts = [lens.residual_stack(tiny_model, scoring.model_inputs(ex), positions=[12])[1:2, :, 0]
                    for ex in (train, test)]
        fitted = probes.fit_probes(acts[0], carry(train), 2)
        return float(fitted.accuracy(acts[1], carry(test))), acts[1]

    with tiny_model.hooks([("hook_embed", read_tokens), ("blocks.0.hook_resid_post", write_carry)]):
        tiny_model(scoring.model_inputs(test[:5]))
        assert torch.equal(state["tokens"], scoring.model_inputs(test[:5]))  # the hook reads the inputs right
        before, acts = probe_accuracy()
        er = E.fit_erasure(tiny_model, data, train, E.ErasureSites(["carry_0"], layers=[1], positions=[12]), 3,
                           E.ErasureSettings(seed=0))
        after, _ = probe_accuracy(er)
        none, acts_rank0 = probe_accuracy(er.truncate(0))
        sets = {"test": (test[:100], "true_label")}
        sweep = patching.erasure_outcomes(tiny_model, er, sets,
                                          patching.ErasureSweepSettings(ranks=[0, 3], n_controls=2))
        unerased = patching.patched_accuracy(tiny_model, sets)["test"]
    assert not tiny_model.has_hooks()
    chance = probes.chance_accuracy(carry(test))
    assert before > 0.95 and after < chance + 0.05
    assert torch.equal(acts_rank0, acts) and none == before  # rank 0: exactly no erasure
    at0 = sweep.table[sweep.table["rank"] == 0]
    assert set(at0.method) == {"INLP", "random"} and (at0.accuracy == unerased).all()


def test_a_run_without_an_erasure_site_leaves_the_intervention_unresolved_end_to_end(tiny_model, fda_data):
    """Amendment 2, 8.5, planted: a probe threshold no layer reaches (no site). The chain the chapters run
    gives an erasure without sites, no information-matched control (None: not available, where an empty
    list added NaN "matched" rows to the sweep), and C3's erasure checks and C4's intermediate checks
    unresolved with the reason, never failed by the NaN (before: both claims failed on that seed)."""
    from rote import verdicts
    from rote.analysis import neurons

    found = _sites(tiny_model, fda_data, fda_data.test, 1e9)
    assert found["layers"] == []
    fit = E.ErasureSettings(max_train=300, seed=0)
    fitted = E.fit_erasure(tiny_model, fda_data, fda_data.train_clean,
                           E.ErasureSites(found["targets"], found["layers"], found["positions"]), 4, fit)
    assert not fitted.bases
    matched = E.information_matched(tiny_model, fda_data, fda_data.train_clean, fitted, fit, n_controls=2)
    assert matched is None
    sets = {"mem": (fda_data.train_noisy[:40], "label"), "gen": (fda_data.test[:40], "true_label")}
    settings = patching.ErasureSweepSettings(ranks=[0, 4], n_controls=2)
    sweep = patching.erasure_outcomes(tiny_model, fitted, sets, settings, matched=matched).table
    assert set(sweep.method) == {"INLP", "random"}  # no NaN "matched" rows
    assert sweep[sweep["rank"] == 4].accuracy.isna().all()
    _, checks = verdicts.c3.checks(sweep, 4, {"jaccard": 0.6, "random": 0.03}, "fda", erasure_layers=found["layers"])
    erasure = [c for c in checks if c.part == "erasure"]
    assert erasure and all(c.passed is None and c.reason == verdicts.c3.C3_NO_SITE for c in erasure)
    # C4: the removal has nothing to remove, and the chapter says the matched control is not available
    table = neurons.intermediate_table(tiny_model, fda_data.train_noisy[:20], None, [], matched)
    assert table.empty
    summary = neurons.c4_summary(pd.DataFrame(columns=["set", "k50"]), pd.DataFrame(columns=["activity"]),
                                 pd.DataFrame(columns=["position", "drop"]), table, drop_min=0.2)
    _, checks = verdicts.c4.checks(summary, None, verdicts.c4.Setting(n_memorized=20, erasure_layers=found["layers"],
                                                                       matched_available=False))
    for check_id in ("c4.intermediate", "c4.intermediate.registered"):
        c = verdicts.find(checks, check_id)
        assert c.passed is None and c.reason == verdicts.c4.C4_NO_SITE
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def _greedy(model, ex):
    """``ex`` labelled with the model's own greedy answer: every example is answered exactly before erasure."""
    from rote.tasks import Examples

    label = ex.label.clone()
    for j in range(label.shape[1]):  # teacher forcing: the logits at answer position j read label[:, :j] only
        label[:, j] = scoring.answer_logits(model, Examples(ex.prompt, label, ex.true_label, dict(ex.info)),
                                            "label").argmax(-1)[:, j].cpu()
    return Examples(ex.prompt, label, ex.true_label, dict(ex.info))


def test_erasure_outcomes_keep_each_examples_outcome_behind_the_sweep(tiny_model, fda_data):
    """Section 11: the sweep keeps each example's outcome (nothing scored twice): each accuracy of the table
    is the mean of its outcomes, INLP's outcomes those of the erasure by hand."""
    import numpy as np

    ex = _greedy(tiny_model, fda_data.test[:80])
    sets = {"mem": (ex, "label"), "none": (ex[:0], "label")}
    er = E.fit_erasure(tiny_model, fda_data, fda_data.train_clean,
                       E.ErasureSites(["carry_0", "carry_1"], layers=[1], positions=[9, 10]), 4)
    settings = patching.ErasureSweepSettings(ranks=[0, 2, 4, 8], n_controls=2)
    matched = [inlp.random_erasure(er, seed=7)]
    swept = patching.erasure_outcomes(tiny_model, er, sets, settings, matched=matched)
    assert list(swept.table.columns) == ["rank", "method", "set", "accuracy"] and len(swept.table) == 4 * 3 * 2
    assert (swept.correct[(0, "INLP", "mem")] == 1).all()
    for (rank, method, s), outcome in swept.correct.items():
        row = swept.table[(swept.table["rank"] == rank) & (swept.table.method == method) & (swept.table.set == s)]
        if s == "mem":
            assert row.accuracy.iloc[0] == pytest.approx(outcome.mean())
        else:
            assert len(outcome) == 0 and math.isnan(row.accuracy.iloc[0])
    hooks = patching.edit_hooks(patching.erasure_edits(tiny_model, er.truncate(4)))
    by_hand = scoring.exact_match(tiny_model, ex, "label", hooks=hooks).cpu().numpy()
    assert np.array_equal(swept.correct[(4, "INLP", "mem")], by_hand.astype(float))
    random_mean = swept.correct[(4, "random", "mem")]  # two draws: each example's share is 0, 1/2 or 1
    assert set(np.unique(random_mean)) <= {0.0, 0.5, 1.0}
    assert (8, "INLP", "mem") not in swept.correct  # beyond the fitted rank: no result, no outcome
    iv = swept.drop_over("mem", 4, ("random", "matched"))
    value = min(random_mean.mean(), swept.correct[(4, "matched", "mem")].mean()) - by_hand.mean()
    assert iv.method == "bootstrap" and iv.low <= value + 1e-12 and value - 1e-12 <= iv.high
    assert not tiny_model.has_hooks()

"""Logit lens, linear probes and the intermediate-result targets (claim C2's instruments)."""

import math

import pytest
import torch

from rote import scoring
from rote.analysis import lens, probes, targets
from rote.analysis.sets import correct, memorized
from rote.config import make_config
from rote.tasks import build_task
from rote.train import answer_logits


@pytest.fixture(scope="module")
def fda_data():
    return build_task(make_config("fda", "smoke"))


def test_lens_last_layer_equals_model_logits(tiny_model, fda_data):
    tokens = scoring.model_inputs(fda_data.test[:20])
    logp = lens.logit_lens(tiny_model, tokens, batch_size=7)  # several batches
    assert logp.shape == (3, 20, tokens.shape[1], 13)
    with torch.no_grad():
        expected = tiny_model(tokens).log_softmax(-1)
    torch.testing.assert_close(logp[-1], expected, atol=1e-5, rtol=1e-5)
    # earlier layers are genuinely different readouts
    assert (logp[1] - expected).abs().max() > 1e-3
    assert not tiny_model.has_hooks()


def test_residual_stack_layers_match_hooks(tiny_model, fda_data):
    tokens = scoring.model_inputs(fda_data.test[:5])
    stack = lens.residual_stack(tiny_model, tokens, positions=[9, 11])
    _, cache = tiny_model.run_with_cache(tokens)
    torch.testing.assert_close(stack[0], cache["blocks.0.hook_resid_pre"][:, [9, 11]])
    torch.testing.assert_close(stack[2], cache["blocks.1.hook_resid_post"][:, [9, 11]])


def test_label_race_last_layer_is_the_output(tiny_model, fda_data):
    ex = fda_data.train_noisy[:8]
    race = lens.label_race(tiny_model, ex)
    probs = answer_logits(tiny_model, ex, "label").softmax(-1)
    torch.testing.assert_close(race["noisy"][-1], probs.gather(-1, ex.label[..., None]).squeeze(-1))
    torch.testing.assert_close(race["true"][-1], probs.gather(-1, ex.true_label[..., None]).squeeze(-1))
    assert race["differs"].equal(ex.label != ex.true_label)
    curves = lens.lens_curves(race)
    assert list(curves.layer) == [0, 1, 2] and (curves.n == race["differs"].sum().item()).all()


def test_lens_verdict_reads_the_takeover():
    import pandas as pd

    def curves(p_true, p_noisy):
        return pd.DataFrame({"layer": range(len(p_true)), "p_true": p_true, "p_noisy": p_noisy})

    good = lens.lens_verdict(curves([0.1, 0.5, 0.6, 0.2], [0.1, 0.2, 0.3, 0.7]))
    assert good["true_ahead_intermediate"] and good["noisy_only_last"] and good["takeover_layer"] == 3
    never = lens.lens_verdict(curves([0.1, 0.1, 0.1, 0.2], [0.1, 0.3, 0.4, 0.7]))
    assert not never["true_ahead_intermediate"] and not never["noisy_only_last"]
    flip = lens.lens_verdict(curves([0.1, 0.1, 0.6, 0.2], [0.1, 0.3, 0.3, 0.7]))  # noisy ahead, then true, then noisy
    assert flip["true_ahead_intermediate"] and not flip["noisy_only_last"]
    empty = lens.lens_verdict(curves([math.nan] * 3, [math.nan] * 3))
    assert not empty["true_ahead_intermediate"]


def test_probe_recovers_planted_feature_and_not_noise():
    g = torch.Generator().manual_seed(0)
    n, d = 1200, 24
    x = torch.randn(n, d, generator=g) * torch.linspace(0.5, 3, d)  # uneven scales
    w = torch.randn(d, generator=g)
    planted = (x @ w > 0.3).long()
    noise = torch.randint(0, 2, (n,), generator=g)
    train, test = slice(0, 800), slice(800, None)
    p = probes.fit_probes(x[train], planted[train], 2)
    assert p.accuracy(x[test][None], planted[test]).item() > 0.95
    q = probes.fit_probes(x[train], noise[train], 2)
    chance = probes.chance_accuracy(noise[test])
    assert abs(q.accuracy(x[test][None], noise[test]).item() - chance) < 0.1


def test_probe_reads_a_token_from_the_model_and_not_noise(tiny_model, fda_data):
    """In a random model, the embedding layer at position 0 holds the first digit of a (a planted,
    linearly readable feature); a label unrelated to the input stays at chance."""
    tr, te = fda_data.train[:300], fda_data.test
    acts = lens.residual_stack(tiny_model, scoring.model_inputs(tr), positions=[0])[:, :, 0]
    acts_te = lens.residual_stack(tiny_model, scoring.model_inputs(te), positions=[0])[:, :, 0]
    digit = lambda ex: ex.prompt[:, 0]  # token id = digit value
    p = probes.fit_probes(acts, digit(tr), 10)
    acc = p.accuracy(acts_te, digit(te))
    assert acc[0] > 0.95 and acc[-1] > 0.9
    rand_tr = torch.randint(0, 4, (len(tr),), generator=torch.Generator().manual_seed(1))
    rand_te = torch.randint(0, 4, (len(te),), generator=torch.Generator().manual_seed(2))
    q = probes.fit_probes(acts, rand_tr, 4)
    assert (q.accuracy(acts_te, rand_te) - probes.chance_accuracy(rand_te)).abs().max() < 0.2


def test_targets_fda_conventions():
    data = build_task(make_config("fda", "smoke"))
    ex = data.test[:1]
    ex.info["a"][:], ex.info["b"][:] = 1234, 5678  # 1234 + 5678 = 06912
    ex.true_label[:] = torch.tensor([0, 6, 9, 1, 2])
    t = targets.fda_targets(ex, "msb")
    assert [int(t[f"carry_{i}"].labels) for i in range(4)] == [1, 1, 0, 0]
    assert int(t["carry_pattern"].labels) == 1 + 2
    assert [int(t[f"colsum_{i}"].labels) for i in range(4)] == [12, 10, 8, 6]
    assert [t[f"digit_{j}"].position for j in range(5)] == [9, 10, 11, 12, 13]
    # msb: column i's digit is answer token 4 - i, predicted at 9 + 4 - i; carry i is first needed there for column i + 1
    assert t["colsum_0"].position == 13 and t["carry_0"].position == 12 and t["carry_3"].position == 9
    lsb = targets.fda_targets(ex, "lsb")
    assert lsb["colsum_0"].position == 9 and lsb["carry_0"].position == 10


def test_targets_thr_and_differs():
    data = build_task(make_config("thr", "smoke"))
    t = targets.intermediate_targets(data.train, data)
    assert t["bridge"].position == 1 and t["tail"].position == 2
    graph = data.meta["graph"]
    h, r1 = data.train.info["head"], data.train.info["r1"]
    assert (t["bridge"].labels == torch.from_numpy(graph[h.numpy(), r1.numpy()])).all()
    assert t["tail"].differs.equal(data.train.is_noisy)
    assert set(targets.headline_targets("thr")) == {"bridge", "true tail"}


def test_probe_sweep_on_smoke_run(smoke_runs):
    run = smoke_runs["thr"]
    m, data = run.model, run.data
    M, C = memorized(m, data), correct(m, data.test)
    empty = data.train_noisy[torch.zeros(len(data.train_noisy), dtype=torch.bool)]
    sweep = probes.probe_sweep(m, data, data.train_clean, {"M": M, "C": C, "T": data.test, "E": empty},
                               probes.ProbeTargets(positions=[1, 2]))
    assert set(sweep.target) == {"bridge", "tail"} and set(sweep.position) == {1, 2}
    assert sweep[sweep.set == "E"].accuracy.isna().all()
    read = sweep[sweep.set != "E"]
    assert len(M) and len(C) and read.accuracy.notna().all() and read.accuracy.between(0, 1).all()
    assert (read.accuracy == read.correct / read.n).all()
    # the bridge at r1 after block 0 (it has read h): well above the chance of 1 in n_entities, and
    # above the embedding, which holds r1 alone
    uniform = 1 / data.meta["graph"].shape[0]
    bridge = sweep[(sweep.target == "bridge") & (sweep.position == 1)].set_index(["set", "layer"]).accuracy
    for name in ("C", "T"):
        assert bridge[name, 1] >= max(0.5, 5 * uniform) and bridge[name, 1] > bridge[name, 0], name
    curves = probes.group_curves(sweep[sweep.position.eq(1) | sweep.target.eq("tail")], "thr")
    summary = probes.best_layer_summary(curves, memorized="E")
    assert summary.best_layer.isna().all() and summary.acc_M.isna().all()
    assert not m.has_hooks()


def test_joint_carries_and_found_layers(tiny_model, fda_data):
    ex = {"A": fda_data.test[:40], "B": fda_data.train_noisy}
    sweep = probes.probe_sweep(tiny_model, fda_data, fda_data.train_clean, ex,
                               settings=probes.ProbeSettings(max_train=200, max_iter=10))
    joint = sweep[sweep.target == "carries"]
    assert set(joint.position) == {-1} and len(joint) == 3 * 2
    for (layer, s), g in sweep[sweep.target.str.fullmatch(r"carry_\d")].groupby(["layer", "set"]):
        j = joint[(joint.layer == layer) & (joint.set == s)].iloc[0]
        assert j.correct <= g.correct.min()  # all four right is rarer than each one right
    # the true digits of noisy examples are scored only where the noisy digit differs
    digit0 = sweep[(sweep.target == "digit_0") & (sweep.set == "B")].n.iloc[0]
    noisy = fda_data.train_noisy
    assert digit0 == int((noisy.label[:, 0] != noisy.true_label[:, 0]).sum())
    curves = probes.group_curves(sweep, "fda")
    assert set(curves.group) == {"carries", "answer digits"}
    import pandas as pd
    fake = pd.DataFrame({"group": "g", "set": "C", "layer": [0, 1, 2, 3], "accuracy": [0.9, 0.5, 0.05, 0.9],
                         "chance": 0.1})
    assert probes.found_layers(fake, "g", 5.0) == [1, 3]  # not the embedding; 8.6: the last layer included


def test_most_visible_picks_the_planted_example():
    """Layers 0..3 (1 and 2 intermediate), 5 examples, 2 answer positions. The answer is example 1: the
    largest mean P(true) - P(noisy) over its differing positions at an intermediate layer. Decoys: a
    larger gap at the embedding (2) or at the last layer (0), at a position where the labels agree (2),
    a larger sum but smaller mean over two positions (3), and an example whose labels agree everywhere (4)."""
    true, noisy = torch.zeros(4, 5, 2), torch.zeros(4, 5, 2)
    differs = torch.tensor([[True, False], [True, False], [True, False], [True, True], [False, False]])
    true[3, 0, 0] = 0.9  # example 0: only at the last layer
    true[1, 1, 0], noisy[1, 1, 0] = 0.5, 0.2  # example 1: 0.3 at layer 1 -- the answer
    true[0, 2, 0] = 0.9  # example 2: at the embedding ...
    true[2, 2, 1] = 0.9  # ... and where its labels agree
    true[2, 2, 0] = 0.1  # what counts: 0.1
    true[2, 3] = 0.25  # example 3: 0.25 at both positions (sum 0.5, mean 0.25)
    true[1:3, 4] = 0.9  # example 4: nothing differs
    race = {"true": true, "noisy": noisy, "differs": differs}
    assert lens.most_visible(race) == 1
    assert lens.most_visible(race, among=torch.tensor([True, False, True, True, True])) == 3
    assert lens.most_visible(race, among=torch.tensor([True, False, False, False, False])) == 0
    assert lens.most_visible(race, among=torch.tensor([False, False, False, False, True])) is None
    # a one-layer model (layers 0 and 1) has no intermediate layer: every layer counts
    assert lens.most_visible({"true": true[2:], "noisy": noisy[2:], "differs": differs}) == 0


def test_worked_example_helpers(tiny_model, fda_data):
    ex = fda_data.train_noisy[:10]
    race = lens.label_race(tiny_model, ex)
    i = lens.most_visible(race)
    assert 0 <= i < 10
    assert lens.most_visible(race, among=torch.zeros(10, dtype=torch.bool)) is None
    reads = lens.example_reads(ex[i:i + 1], "fda")
    differ = int((ex.label[i] != ex.true_label[i]).sum())
    assert len(reads) == 2 * differ
    tr = lens.trace(tiny_model, ex[i:i + 1], reads)
    assert len(tr) == len(reads) * 3 and tr.prob.between(0, 1).all()


def test_group_curves_use_own_positions_only(smoke_runs):
    run = smoke_runs["thr"]
    data = run.data
    sets = {"T": data.test}
    both = probes.probe_sweep(run.model, data, data.train_clean, sets, probes.ProbeTargets(positions=[1, 2]))
    own = probes.probe_sweep(run.model, data, data.train_clean, sets)
    assert both.own.sum() == len(own) and (own.own).all()
    c_both, c_own = probes.group_curves(both, "thr"), probes.group_curves(own, "thr")
    assert (c_both.n.values == c_own.n.values).all()


def test_best_layer_summary_reads_c_at_its_own_best_layer_beside_the_layer_m_chose():
    """8.5: C2's reachable check reads C at C's own best layer; the summary's other columns (the best layer
    on M and both accuracies there) stay as they were."""
    import pandas as pd

    rows = []
    for layer, m, c in ((0, 0.1, 0.2), (1, 0.6, 0.4), (2, 0.3, 0.97)):  # M best at 1, C best at 2
        rows += [{"group": "answer digits", "layer": layer, "set": "M", "n": 50, "accuracy": m, "chance": 0.19},
                 {"group": "answer digits", "layer": layer, "set": "C", "n": 80, "accuracy": c, "chance": 0.18}]
    summary = probes.best_layer_summary(pd.DataFrame(rows)).iloc[0]
    assert summary.best_layer == 1 and summary.acc_M == 0.6 and summary.acc_C == 0.4 and summary.chance == 0.19
    assert summary.best_layer_C == 2 and summary.acc_C_best == 0.97
    empty_c = probes.best_layer_summary(pd.DataFrame([r for r in rows if r["set"] == "M"])).iloc[0]
    assert empty_c.best_layer_C is None and math.isnan(empty_c.acc_C_best)


def test_probe_settings_and_targets_keep_the_defaults_and_refuse_out_of_range_values():
    s = probes.ProbeSettings()
    assert (s.max_train, s.seed, s.weight_decay, s.max_iter, s.chunk, s.mask_seed) == (3000, 0, 1e-3, 50, 48, 0)
    for bad in (dict(max_train=0), dict(seed=-1), dict(weight_decay=-1.0), dict(max_iter=0), dict(chunk=0),
                dict(mask_seed=True), dict(max_train=2.5)):
        with pytest.raises(ValueError, match="ProbeSettings"):
            probes.ProbeSettings(**bad)
    assert probes.ProbeTargets(["bridge"], positions=[2, 1]).positions == (2, 1)
    with pytest.raises(ValueError, match="names"):
        probes.ProbeTargets("bridge")
    with pytest.raises(ValueError, match="positions"):
        probes.ProbeTargets(positions=[-1])

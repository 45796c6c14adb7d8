"""Claim C3's information-matched erasure control (protocol section 7.5)."""

import pytest
import torch

from rote.analysis import erasure as E
from rote.analysis import inlp, patching
from rote.analysis.targets import intermediate_targets
from rote.config import make_config
from rote.model import HookedTransformer, ModelShape
from rote.tasks import build_task


@pytest.fixture(scope="module")
def fda_data():
    return build_task(make_config("fda", "smoke"))


@pytest.fixture(scope="module")
def thr_data():
    return build_task(make_config("thr", "smoke"))


def _model(vocab, n_ctx, seed=0):
    torch.manual_seed(seed)
    return HookedTransformer(ModelShape(n_layers=2, d_model=16, n_heads=2, vocab_size=vocab, n_ctx=n_ctx)).eval()


def test_thr_relabeling_keeps_the_key_and_the_bridge_class_sizes(thr_data):
    ex = thr_data.train_clean
    labels, n_classes = E.matched_labels(ex, thr_data, ["bridge"], seed=3)
    assert n_classes == [thr_data.meta["graph"].shape[0]] and labels.shape == (len(ex), 1)
    key, _ = E.input_key(ex, thr_data, "bridge")
    for k in key.unique()[:20]:  # a function of (h, r1)
        assert labels[key == k, 0].unique().numel() == 1
    # over the graph's (h, r1) pairs the classes have exactly the bridge's sizes, but not its map
    table, _ = E.random_relabeling(thr_data, "bridge", torch.Generator().manual_seed(3))
    graph = torch.as_tensor(thr_data.meta["graph"]).flatten()
    assert torch.equal(table[graph >= 0].sort().values, graph[graph >= 0].sort().values)
    assert (table[graph >= 0] != graph[graph >= 0]).float().mean() > 0.5
    assert (table[graph < 0] == -1).all()
    again, _ = E.matched_labels(ex, thr_data, ["bridge"], seed=3)
    other, _ = E.matched_labels(ex, thr_data, ["bridge"], seed=4)
    assert torch.equal(labels, again) and not torch.equal(labels, other)


def test_fda_relabeling_is_a_balanced_function_of_the_column_digits(fda_data):
    ex = fda_data.train_clean
    targets = ["carry_0", "carry_1"]
    labels, n_classes = E.matched_labels(ex, fda_data, targets, seed=0)
    assert n_classes == [2, 2] and labels.shape == (len(ex), 2)
    a, b = ex.info["a"], ex.info["b"]
    for j, i in enumerate((0, 1)):
        da, db = (a // 10 ** i) % 10, (b // 10 ** i) % 10
        for x, y in [(0, 0), (3, 7), (9, 9)]:
            sel = (da == x) & (db == y)
            if sel.any():
                assert labels[sel, j].unique().numel() == 1
        table, _ = E.random_relabeling(fda_data, f"carry_{i}", torch.Generator().manual_seed(j))
        assert int(table.sum()) == 50  # balanced over the 100 digit pairs
    assert not torch.equal(labels[:, 0], labels[:, 1])  # one independent function per target
    with pytest.raises(ValueError):
        E.input_key(ex, fda_data, "colsum_0")


@pytest.mark.parametrize("task", ["fda", "thr"])
def test_information_matched_has_the_treatments_sites_rank_and_targets(task, fda_data, thr_data):
    data = fda_data if task == "fda" else thr_data
    model = _model(len(data.vocab), data.train.sequences("label").shape[1])
    targets = ["carry_0", "carry_1"] if task == "fda" else ["bridge"]
    positions = sorted({t.position for name, t in intermediate_targets(data.test[:1], data).items() if name in targets})
    fit = E.ErasureSettings(max_train=300, seed=0)
    at = E.ErasureSites(targets, layers=[1, 2], positions=positions)
    er = E.fit_erasure(model, data, data.train_clean, at, 3, fit)
    assert er.targets == tuple(targets) and er.truncate(2).targets == tuple(targets)
    controls = E.information_matched(model, data, data.train_clean, er, fit, n_controls=2)
    # fitted together on one pass of the fitting examples: the same erasures, bit for bit
    together, matched = E.fit_with_matched(model, data, at, 3, fit, n_controls=2)
    for one, other in zip([together, *matched], [er, *controls]):
        assert list(one.bases) == list(other.bases)
        assert all(torch.equal(one.bases[s], other.bases[s]) and torch.equal(one.means[s], other.means[s])
                   for s in one.bases)
    assert E.fit_with_matched(model, data, E.ErasureSites(targets, [], positions), 3, fit,
                              n_controls=2)[1] is None  # no site: no control
    assert len(controls) == 2
    for c in controls:
        assert set(c.bases) == set(er.bases) and c.rank == er.rank and c.targets == er.targets
        for site in er.bases:
            torch.testing.assert_close(c.means[site], er.means[site])  # fitted on the same examples
            Q = c.bases[site]
            torch.testing.assert_close(Q.T @ Q, torch.eye(3), atol=1e-4, rtol=0)
    # a different relabeling per control, and not the treatment's directions
    site = sorted(er.bases)[0]
    overlap = lambda P, Q: float((P.T @ Q).norm() ** 2 / P.shape[1])  # 1 = the same subspace
    assert overlap(controls[0].bases[site], controls[1].bases[site]) < 0.99
    assert overlap(controls[0].bases[site], er.bases[site]) < 0.99
    # usable wherever random controls are: in the sweep, as method "matched"
    sets = {"test": (data.test, "true_label")}
    sweep = patching.erasure_outcomes(model, er, sets, patching.ErasureSweepSettings(ranks=[0, 2], n_controls=1),
                                      matched=controls).table
    assert set(sweep.method) == {"INLP", "random", "matched"} and len(sweep) == 2 * 3
    row = sweep[(sweep.method == "matched") & (sweep["rank"] == 2)].accuracy.iloc[0]
    by_hand = sum(patching.patched_accuracy(model, sets, patching.erasure_edits(model, c.truncate(2)))["test"]
                  for c in controls) / 2
    assert row == pytest.approx(by_hand)
    assert not model.has_hooks()
    one_rank = patching.ErasureSweepSettings(ranks=[2], n_controls=1)
    assert patching.erasure_outcomes(model, er, sets, one_rank).table.method.nunique() == 2  # no matched rows


def test_information_matched_needs_targets(fda_data):
    model = _model(len(fda_data.vocab), fda_data.train.sequences("label").shape[1])
    fit = E.ErasureSettings(max_train=200)
    er = E.fit_erasure(model, fda_data, fda_data.train_clean, E.ErasureSites(["carry_0"], layers=[1], positions=[13]),
                       2, fit)
    anonymous = inlp.Erasure(er.bases, er.means)
    with pytest.raises(ValueError):
        E.information_matched(model, fda_data, fda_data.train_clean, anonymous, fit, n_controls=1)
    # no site (8.5: the intervention cannot run): the control is not available (None), not an empty list of draws
    assert E.information_matched(model, fda_data, fda_data.train_clean, inlp.Erasure({}, {}, ("carry_0",)), fit,
                                 n_controls=2) is None


def test_matched_control_removes_a_planted_lookup_that_inlp_of_the_result_leaves():
    """At the tensor level: activations that store the result along u and a random function of
    the same key along v. INLP of the result removes u, INLP of the relabeling removes v."""
    g = torch.Generator().manual_seed(0)
    n, d = 4000, 12
    key = torch.randint(0, 100, (n,), generator=g)
    result = (key % 10 + key // 10 >= 10).long()  # a carry from the two digits
    table = torch.zeros(100, dtype=torch.long)
    table[torch.randperm(100, generator=g)[:50]] = 1
    lookup = table[key]
    u, v = torch.eye(d)[0], torch.eye(d)[1]
    x = 0.3 * torch.randn(n, d, generator=g) + 2.0 * (result[:, None] - 0.5) * u + 2.0 * (lookup[:, None] - 0.5) * v
    Qt = inlp.inlp_basis(x, result, rank=1)
    Qm = inlp.inlp_basis(x, lookup, rank=1)
    assert abs(float(Qt[:, 0] @ u)) > 0.95 and abs(float(Qm[:, 0] @ v)) > 0.95


def test_information_matched_fits_a_balanced_random_function_of_the_key_not_the_result(monkeypatch):
    """Through matched_labels and information_matched: activations that hold the input key of carry_0
    (the digit pair (a_0, b_0)) as a one-hot, so that every function of the key is linearly readable.
    The treatment's direction then weighs the key by the carry; each control's direction by its own
    random relabeling: balanced (50 of the 100 keys on one side), unrelated to the carry, and another
    one per control. A control that relabeled with the result itself would point along the treatment."""
    data = build_task(make_config("fda", "quick"))
    train = data.train_clean

    def one_hot_keys(model, tokens, positions=None, batch_size=None):
        key = 10 * tokens[:, 3] + tokens[:, 8]  # msb prompt: a_0 at 3, b_0 at 8
        g = torch.Generator().manual_seed(int(key.sum()))
        x = 3.0 * torch.nn.functional.one_hot(key, 100).float() + 0.3 * torch.randn(len(key), 100, generator=g)
        return x[None, :, None].expand(2, -1, tokens.shape[1] if positions is None else len(positions), -1)

    monkeypatch.setattr(E, "residual_stack", one_hot_keys)
    site = (1, 12)
    fit = E.ErasureSettings(max_train=4000, seed=0)
    er = E.fit_erasure(None, data, train, E.ErasureSites(["carry_0"], layers=[1], positions=[12]), 1, fit)
    controls = E.information_matched(None, data, train, er, fit, n_controls=3)
    keys = torch.arange(100)
    carry = ((keys // 10 + keys % 10) >= 10).float()

    def corr(a, b):
        return float(torch.corrcoef(torch.stack([a, b]))[0, 1])

    w = er.bases[site][:, 0]
    assert abs(corr(w, carry)) > 0.9  # the treatment reads the result
    directions = [c.bases[site][:, 0] for c in controls]
    for wc in directions:
        assert abs(corr(wc, carry)) < 0.4  # not the result
        order = wc.sort().values
        assert int((order[1:] - order[:-1]).argmax()) == 49  # two groups of 50 keys: a balanced function
        split = (wc > (order[49] + order[50]) / 2).float()
        assert abs(corr(wc, split)) > 0.9
    for a in range(3):
        for b in range(a + 1, 3):
            assert abs(corr(directions[a], directions[b])) < 0.5  # a fresh relabeling per control


def test_erasure_settings_keep_the_defaults_and_refuse_out_of_range_values():
    fit = E.ErasureSettings()
    assert (fit.max_train, fit.seed, fit.inlp) == (2000, 0, inlp.InlpSettings(None, 1e-3, 50))
    assert patching.ErasureSweepSettings([0, 4, 2]) == patching.ErasureSweepSettings((0, 4, 2), n_controls=3, seed=0)
    assert E.ErasureSites(["carry_0"], [1], []).layers == (1,)
    bad = [(inlp.InlpSettings, dict(per_iteration=0)), (inlp.InlpSettings, dict(weight_decay=-1.0)),
           (inlp.InlpSettings, dict(max_iter=0)), (E.ErasureSettings, dict(max_train=0)),
           (E.ErasureSettings, dict(seed=-1)), (E.ErasureSettings, dict(inlp=None)),
           (E.ErasureSites, dict(targets=[], layers=[1], positions=[9])),
           (E.ErasureSites, dict(targets=["carry_0"], layers=[-1], positions=[9])),
           (patching.ErasureSweepSettings, dict(ranks=[-1])),
           (patching.ErasureSweepSettings, dict(ranks=[2], n_controls=0)),
           (patching.ErasureSweepSettings, dict(ranks=[2], seed=-1))]
    for cls, kw in bad:
        with pytest.raises(ValueError, match=cls.__name__):
            cls(**kw)

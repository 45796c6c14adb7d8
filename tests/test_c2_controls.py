"""Amendment 7.4's analyses for claim C2, on planted answers: the masked true-tail read-out, the bridge
read at r2, and the logit-lens share against the training-label prior."""

import math

import pytest
import torch

from rote import scoring
from rote.analysis import lens, probes, targets
from rote.config import make_config
from rote.tasks import build_task
from rote.tasks.base import Examples


@pytest.fixture(scope="module")
def thr_data():
    return build_task(make_config("thr", "smoke"))


def test_masked_class_hides_the_noisy_label_or_a_wrong_class(thr_data):
    ex = thr_data.train
    t = targets.intermediate_targets(ex, thr_data)["tail"]
    hidden = targets.masked_class(t, ex, seed=3)
    noisy = ex.is_noisy
    assert noisy.any() and (~noisy).any()
    assert hidden[noisy].equal(ex.label[noisy, 0])  # M: the noisy label's class
    assert (hidden[~noisy] != t.labels[~noisy]).all()  # C: never the true class
    assert len(hidden[~noisy].unique()) > 1  # ... but a random wrong one
    assert hidden.equal(targets.masked_class(t, ex, seed=3))
    assert not hidden[~noisy].equal(targets.masked_class(t, ex, seed=4)[~noisy])


def _planted_stack(monkeypatch, table):
    """Make probes.residual_stack return planted activations [L+1=2, N, 1, d] for known inputs."""

    def fake(model, tokens, positions=None, batch_size=None):
        return table[tokens.numpy().tobytes()]

    monkeypatch.setattr(probes, "residual_stack", fake)


def _acts(parts, n_classes, noise, gen):
    """Sum of weighted one-hot codes plus noise, at 2 'layers' (the same both times): [2, N, 1, d]."""
    n = len(parts[0][1])
    x = torch.zeros(n, n_classes + 8)
    for w, labels in parts:
        x[torch.arange(n), labels] += w
    x += noise * torch.randn(x.shape, generator=gen)
    return torch.stack([x, x])[:, :, None]


@pytest.mark.parametrize("memorized_by", ["reasoning", "look-up"])
def test_masked_tail_finds_a_planted_true_tail_and_only_then(monkeypatch, thr_data, memorized_by):
    """A probe trained where tail = output reads the output: on M (the noisy label written more
    strongly than the true tail) the unmasked read gives the noisy label, the masked read the true
    tail. When M carries only the noisy label (a look-up), the masked read falls to chance."""
    gen = torch.Generator().manual_seed(0)
    k = int(thr_data.meta["graph"].shape[0])
    train, M, C = thr_data.train_clean, thr_data.train_noisy, thr_data.test
    true_m, noisy_m = M.true_label[:, 0], M.label[:, 0]
    m_parts = [(1.0, noisy_m), (0.6, true_m)] if memorized_by == "reasoning" else [(1.0, noisy_m)]
    table = {scoring.model_inputs(train).numpy().tobytes(): _acts([(1.0, train.label[:, 0])], k, 0.1, gen),
             scoring.model_inputs(M).numpy().tobytes(): _acts(m_parts, k, 0.1, gen),
             scoring.model_inputs(C).numpy().tobytes(): _acts([(1.0, C.label[:, 0])], k, 0.1, gen)}
    _planted_stack(monkeypatch, table)
    sweep = probes.masked_probe_sweep(None, thr_data, train, {"M": M, "C": C},
                                      settings=probes.ProbeSettings(max_train=10_000))
    at = sweep[sweep.layer == 1].set_index("set")
    assert at.loc["M", "chance_uniform"] == pytest.approx(1 / (k - 1))  # 7.4's chance
    assert at.loc["M", "chance"] == pytest.approx(probes.chance_accuracy(true_m))  # 12.1: the majority share read
    assert at.loc["M", "n"] == len(M) and at.loc["C", "n"] == len(C)
    assert at.loc["C", "accuracy"] > 0.95 and at.loc["C", "accuracy_unmasked"] > 0.95
    assert at.loc["M", "reads_masked"] > 0.9 and at.loc["M", "accuracy_unmasked"] < 0.1  # reads the output
    if memorized_by == "reasoning":
        assert at.loc["M", "accuracy"] > 0.8
    else:
        assert at.loc["M", "accuracy"] < 5 * at.loc["M", "chance"]
    summary = probes.masked_summary(sweep)
    assert summary.iloc[0].acc_M == pytest.approx(sweep[sweep.set == "M"].accuracy.max())
    assert summary.iloc[0].reads_masked_M == pytest.approx(at.loc["M", "reads_masked"])


def test_position_summary_reads_the_bridge_at_r2(smoke_runs):
    run = smoke_runs["thr"]
    sets = {"M": run.data.train_noisy, "C": run.data.test}
    sweep = probes.probe_sweep(run.model, run.data, run.data.train_clean, sets,
                               probes.ProbeTargets(["bridge"], positions=[1, 2]))
    r2 = probes.position_summary(sweep, "bridge", targets.THR_LAST, "bridge at r2")
    part = sweep[(sweep.position == 2) & (sweep.set == "M")]
    assert r2.iloc[0].group == "bridge at r2" and r2.iloc[0].acc_M == pytest.approx(part.accuracy.max())
    assert r2.iloc[0].best_layer == int(part.set_index("layer").accuracy.idxmax())
    missing = probes.position_summary(sweep, "bridge", 7)
    assert missing.iloc[0].best_layer is None and math.isnan(missing.iloc[0].acc_M)


def _examples(true, label):
    true, label = torch.tensor(true), torch.tensor(label)
    return Examples(torch.zeros(len(true), 1, dtype=torch.long), label, true)


def test_label_prior_counts_trained_labels_per_position():
    prior = lens.label_prior(torch.tensor([[1, 2], [1, 3], [4, 3], [1, 3]]), 5)
    assert prior.shape == (2, 5)
    assert prior[0].tolist() == [0, 0.75, 0, 0, 0.25] and prior[1, 3] == 0.75 and prior.sum(1).tolist() == [1, 1]


def test_ahead_share_one_trial_per_example_at_the_first_differing_position():
    ex = _examples([[1, 2], [3, 4], [5, 6], [7, 8]], [[1, 9], [0, 0], [5, 6], [9, 8]])  # third: no difference
    # P(true) > P(noisy) at layer 1: ex 0 at its position 1, ex 1 at position 0 (not at 1: ignored), ex 3 not
    p_true = torch.tensor([[[0.1, 0.1], [0.1, 0.1], [0.1, 0.1], [0.1, 0.1]],
                           [[0.0, 0.6], [0.7, 0.0], [0.1, 0.1], [0.2, 0.9]]])
    p_noisy = torch.tensor([[[0.2, 0.2], [0.2, 0.2], [0.2, 0.2], [0.2, 0.2]],
                            [[0.9, 0.2], [0.1, 0.9], [0.1, 0.1], [0.5, 0.0]]])
    race = {"true": p_true, "noisy": p_noisy, "differs": ex.label != ex.true_label}
    assert lens.first_differing(race).tolist() == [1, 0, -1, 0]
    prior = torch.zeros(2, 10)
    prior[1, 2], prior[1, 9] = 0.5, 0.1  # ex 0: the prior favours the true token (1)
    prior[0, 3] = prior[0, 0] = 0.2  # ex 1: a tie (1/2)
    prior[0, 9] = 0.3  # ex 3: the prior favours the noisy token (0)
    table = lens.ahead_share(race, ex, prior)
    assert table.n.tolist() == [3, 3] and table.ahead.tolist() == [0, 2]
    assert table.share[1] == pytest.approx(2 / 3) and table.null[0] == pytest.approx(0.5)


def test_ahead_share_of_a_prior_only_model_equals_its_null(smoke_runs):
    """A model whose every layer outputs the training-label prior is 'ahead' exactly as often as the
    null says (ties aside): the null is what label frequencies alone earn."""
    data = smoke_runs["thr"].data
    M = data.train_noisy
    prior = lens.label_prior(data.train.label, len(data.vocab))
    jitter = 1e-9 * torch.rand(prior.shape[1], generator=torch.Generator().manual_seed(0))
    probs = prior + jitter  # break ties at random
    p_true = probs[0, M.true_label[:, 0]][None, :, None].expand(3, -1, 1)
    p_noisy = probs[0, M.label[:, 0]][None, :, None].expand(3, -1, 1)
    table = lens.ahead_share({"true": p_true, "noisy": p_noisy, "differs": M.label != M.true_label}, M, prior)
    ties = (prior[0, M.true_label[:, 0]] == prior[0, M.label[:, 0]]).double().mean().item()
    assert abs(table.share[1] - table.null[1]) <= ties / 2 + 1e-9
    assert list(table.layer) == [0, 1, 2] and (table.n == len(M)).all()
    assert (table.share == table.share[0]).all() and (table.null == table.null[0]).all()  # every layer alike

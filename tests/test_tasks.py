import pytest
import torch

from rote.config import make_config
from rote.tasks import build_task, fda


def fda_data(**kw):
    return build_task(make_config("fda", "smoke", **kw))


def thr_data(**kw):
    return build_task(make_config("thr", "smoke", **kw))


@pytest.mark.parametrize("order", ["msb", "lsb"])
def test_fda_true_labels_are_sums(order):
    data = fda_data(answer_order=order)
    for split in (data.train, data.test):
        sums = fda.digits_to_int(split.true_label, order)
        assert torch.equal(sums, split.info["a"] + split.info["b"])
        assert split.info["a"].min() >= 1000 and split.info["b"].max() <= 9999
    # prompts spell the operands
    text = data.vocab.decode(data.test.prompt[0])
    a, b = text.rstrip("=").split("+")
    assert int(a) == data.test.info["a"][0] and int(b) == data.test.info["b"][0]


@pytest.mark.parametrize("kind", ["random", "digit"])
@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.33])
def test_fda_noise_count_and_labels_differ(kind, ratio):
    data = fda_data(noise_kind=kind, noise_ratio=ratio, n_train=301)
    noisy = data.train.is_noisy
    assert int(noisy.sum()) == round(ratio * 301)
    assert len(data.train_noisy) + len(data.train_clean) == 301
    assert (data.train_noisy.label != data.train_noisy.true_label).any(1).all()
    assert torch.equal(data.train_clean.label, data.train_clean.true_label)
    assert not data.test.is_noisy.any()
    if kind == "digit" and ratio:
        assert ((data.train_noisy.label != data.train_noisy.true_label).sum(1) == 1).all()
    if kind == "random" and ratio:
        values = fda.digits_to_int(data.train_noisy.label, "msb")
        assert values.min() >= 2000 and values.max() <= 19998


def test_fda_seeds():
    a, b = fda_data(), fda_data()
    assert torch.equal(a.train.prompt, b.train.prompt) and torch.equal(a.train.label, b.train.label)
    c = fda_data(noise_seed=1)
    assert torch.equal(a.train.prompt, c.train.prompt) and not torch.equal(a.train.label, c.train.label)
    d = fda_data(data_seed=1)
    assert not torch.equal(a.train.prompt, d.train.prompt)


def test_fda_splits_disjoint():
    data = fda_data(n_train=2000, n_test=500)
    pairs = lambda s: set(zip(s.info["a"].tolist(), s.info["b"].tolist()))  # noqa: E731
    train, test = pairs(data.train), pairs(data.test)
    assert len(train) == 2000 and len(test) == 500 and not train & test


def test_fda_carries_and_column_sums():
    a, b = torch.tensor([1999, 5050]), torch.tensor([1, 4950])
    assert fda.carries(a, b).tolist() == [[1, 1, 1, 0], [0, 1, 1, 1]]
    assert fda.column_sums(a, b).tolist() == [[10, 9, 9, 1], [0, 10, 9, 9]]


def test_thr_two_hop_consistent_with_atomic():
    data = thr_data()
    graph = data.meta["graph"]
    rel0 = 20  # smoke: 20 entities
    for split in (data.train, data.test):
        h, r1, r2 = split.prompt[:, 0], split.prompt[:, 1] - rel0, split.prompt[:, 2] - rel0
        bridge = torch.from_numpy(graph[h, r1])
        assert torch.equal(bridge, split.info["bridge"])
        assert torch.equal(torch.from_numpy(graph[bridge, r2]), split.true_label[:, 0])
    atomic = data.atomic
    assert torch.equal(torch.from_numpy(graph[atomic.prompt[:, 0], atomic.prompt[:, 1] - rel0]), atomic.label[:, 0])
    assert not atomic.is_noisy.any() and len(atomic) == 20 * 4


def test_thr_splits_noise_and_unconnected():
    cfg = make_config("thr", "smoke", noise_ratio=0.25)
    data = build_task(cfg)
    facts = lambda s: set(map(tuple, s.prompt.tolist()))  # noqa: E731
    assert not facts(data.train) & facts(data.test)
    assert len(data.train) == round(cfg.data.phi * cfg.data.n_atomic) and len(data.test) == cfg.data.n_test
    assert int(data.train.is_noisy.sum()) == round(0.25 * len(data.train))
    assert (data.train_noisy.label != data.train_noisy.true_label).all()
    graph = data.meta["graph"]
    for i in torch.nonzero(data.train.is_noisy)[:, 0].tolist():
        reachable = set(graph[int(data.train.info["bridge"][i])].tolist())
        assert bool(data.train.info["unconnected"][i]) == (int(data.train.label[i, 0]) not in reachable)
    assert not data.train.info["unconnected"][~data.train.is_noisy].any()


def test_thr_seeds():
    a, b = thr_data(), thr_data()
    assert torch.equal(a.train.prompt, b.train.prompt) and torch.equal(a.train.label, b.train.label)
    assert not torch.equal(a.train.prompt, thr_data(data_seed=3).train.prompt)


def test_training_sequences_mask_prompt():
    data = thr_data()
    x, y = data.training_sequences()
    n_two_hop, n_atomic = len(data.train), len(data.atomic) * data.atomic_repeat
    assert len(x) == n_two_hop + n_atomic and x.shape[1] == data.n_ctx == 3
    # two-hop: only the last position has a target; atomic: position 1, padded after
    assert (y[:n_two_hop, :2] == -100).all() and torch.equal(y[:n_two_hop, 2], data.train.label[:, 0])
    assert torch.equal(y[n_two_hop:, 1], data.atomic.label[:, 0].repeat(data.atomic_repeat))
    assert (x[n_two_hop:, 2] == data.vocab.pad_id).all()
    fx, fy = fda_data().training_sequences()
    assert fx.shape[1] == 14 and ((fy != -100).sum(1) == 5).all()


def test_tokenizer_round_trip():
    data = fda_data()
    ids = data.vocab.encode("1234+5678=")
    assert len(ids) == 10 and data.vocab.decode(ids) == "1234+5678="
    tvocab = thr_data().vocab
    assert tvocab.decode(tvocab.encode("e3 r1 r7")) == "e3 r1 r7"
    for text in [data.vocab.decode(p) for p in data.train.prompt[:20]]:
        assert data.vocab.decode(data.vocab.encode(text)) == text
    with pytest.raises(ValueError, match="unknown token"):
        tvocab.encode("e3 zz")


@pytest.mark.parametrize("profile", ["smoke", "quick"])
def test_thr_every_test_fact_has_both_atomic_facts_in_the_training_stream(profile):
    """Test facts are unseen two-hop compositions of seen atomic facts: following the training
    stream's atomic facts, (h, r1) -> bridge then (bridge, r2) -> tail, answers every test fact."""
    cfg = make_config("thr", profile)
    data = build_task(cfg)
    x, y = data.training_sequences()
    atomic_rows = x[:, 2] == data.vocab.pad_id  # "h r <pad>" with the tail as the target at position 1
    counts: dict[tuple[int, int], int] = {}
    tail_of: dict[tuple[int, int], int] = {}
    for (h, r), t in zip(x[atomic_rows, :2].tolist(), y[atomic_rows, 1].tolist()):
        assert tail_of.setdefault((h, r), t) == t, "one (head, relation) with two tails"
        counts[(h, r)] = counts.get((h, r), 0) + 1
    assert set(counts.values()) == {cfg.data.atomic_repeat}
    assert len(tail_of) == cfg.data.n_atomic
    test = data.test
    for (h, r1, r2), tail, bridge in zip(test.prompt.tolist(), test.true_label[:, 0].tolist(),
                                         test.info["bridge"].tolist()):
        assert (h, r1) in tail_of, f"first hop of test fact {(h, r1, r2)} is not trained"
        assert tail_of[(h, r1)] == bridge
        assert (bridge, r2) in tail_of, f"second hop of test fact {(h, r1, r2)} is not trained"
        assert tail_of[(bridge, r2)] == tail

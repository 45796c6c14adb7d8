"""THR: two-hop relational reasoning over a random knowledge graph (after Wang et al. 2024).

Each entity has ``out_degree`` distinct relations with a uniformly random tail: atomic facts
(h, r) -> t. Two-hop facts (h, r1, r2) -> t go through the bridge b = f(h, r1), t = f(b, r2).
Training holds every atomic fact plus round(phi * |atomic|) two-hop facts; the test set holds
other two-hop facts. Noise gives exactly round(noise_ratio * n_train) training two-hop facts a
uniformly random tail != the true one; atomic facts are never noised.
"""

from __future__ import annotations

import numpy as np
import torch

from ..config import THRConfig
from .base import PAD, Examples, TaskData, Vocab, choose_noisy


def make_vocab(n_entities: int, n_relations: int) -> Vocab:
    return Vocab([f"e{i}" for i in range(n_entities)] + [f"r{i}" for i in range(n_relations)] + [PAD], sep=" ")


def build_graph(config: THRConfig, rng: np.random.Generator) -> np.ndarray:
    """[n_entities, n_relations] tail entity of (h, r), or -1 where h has no relation r."""
    graph = np.full((config.n_entities, config.n_relations), -1, dtype=np.int64)
    for h in range(config.n_entities):
        rels = rng.choice(config.n_relations, size=config.out_degree, replace=False)
        graph[h, rels] = rng.integers(0, config.n_entities, size=config.out_degree)
    return graph


def two_hop_facts(graph: np.ndarray) -> np.ndarray:
    """Every (h, r1, r2, bridge, tail) the graph allows, as rows of an [M, 5] array."""
    h, r1 = np.nonzero(graph >= 0)
    bridge = graph[h, r1]
    rows = []
    for hh, rr, bb in zip(h, r1, bridge):
        r2 = np.nonzero(graph[bb] >= 0)[0]
        rows.append(np.stack([np.full_like(r2, hh), np.full_like(r2, rr), r2, np.full_like(r2, bb), graph[bb, r2]], 1))
    return np.concatenate(rows)


def build(config: THRConfig) -> TaskData:
    vocab = make_vocab(config.n_entities, config.n_relations)
    rel0 = config.n_entities  # token id of relation 0
    rng = np.random.default_rng(config.data_seed)
    graph = build_graph(config, rng)
    facts = two_hop_facts(graph)[rng.permutation(config.n_two_hop)]
    test_facts = facts[:config.n_test]
    train_facts = facts[config.n_test:config.n_test + config.n_train_two_hop]

    def two_hop(rows: np.ndarray) -> Examples:
        t = torch.from_numpy(rows)
        prompt = torch.stack([t[:, 0], t[:, 1] + rel0, t[:, 2] + rel0], 1)
        info = {"head": t[:, 0], "r1": t[:, 1], "r2": t[:, 2], "bridge": t[:, 3], "tail": t[:, 4]}
        return Examples(prompt, t[:, 4:5].clone(), t[:, 4:5].clone(), info)

    train, test = two_hop(train_facts), two_hop(test_facts)
    noise_rng = np.random.default_rng([config.noise_seed, 2])
    noisy = choose_noisy(len(train), config.noise_ratio, noise_rng)
    true_tail = train_facts[noisy, 4]
    draw = noise_rng.integers(0, config.n_entities - 1, size=len(noisy))
    noisy_tail = draw + (draw >= true_tail)  # uniform over the other entities
    label = train.label.clone()
    label[noisy, 0] = torch.from_numpy(noisy_tail)
    train = train.with_label(label)
    # A noisy label is "unconnected" when no relation leads from the bridge to it.
    bridge_tails = graph[train_facts[:, 3]]  # [N, n_relations]
    connected = (bridge_tails == label[:, 0].numpy()[:, None]).any(axis=1)
    train.info["unconnected"] = torch.from_numpy(~connected & train.is_noisy.numpy())

    h, r = np.nonzero(graph >= 0)
    tails = torch.from_numpy(graph[h, r])[:, None]
    atomic = Examples(torch.from_numpy(np.stack([h, r + rel0], 1)), tails.clone(), tails.clone(),
                      {"head": torch.from_numpy(h), "r1": torch.from_numpy(r)})
    return TaskData("thr", vocab, train, test, atomic=atomic, atomic_repeat=config.atomic_repeat,
                    meta={"graph": graph})

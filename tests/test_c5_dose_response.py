"""Amendment 1, 7.7 (C5): planted answers for the dose-response, the |z| null and neurons as units."""

import math

import pandas as pd
import pytest
import torch

from rote.analysis import fda_features as F
from rote.analysis import heuristics as H
from rote.analysis import neuron_patching as NP
from rote.analysis import outliers as O
from rote.tasks import fda
from rote.train import exact_match
from planted import outlier_model

PLANTED = {0: (3, 7), 1: (10, 8), 2: (20, 1), 3: (30, 4)}  # example -> (its planted neuron, its noisy token)


@pytest.fixture(scope="module")
def grid():
    return F.operand_grid(600, seed=1)


def _model():
    return outlier_model(PLANTED)  # the planted neurons: silent on clean inputs; each writes its token


def _plant(model, examples, size=5.0):
    """Hooks that add ``size`` to example k's planted neuron on example k only (recognised by its
    prompt embeddings): each example is 'memorized' through its own planted outlier."""
    keys = model.embed(examples.prompt).detach()  # [K, P, d]
    state = {}

    def find(act, hook):
        same = (act[:, None, :keys.shape[1]] == keys[None]).all(-1).all(-1)  # [B, K]
        state["which"] = torch.where(same.any(1), same.float().argmax(1), torch.full((len(act),), -1))

    def bump(act, hook):
        act = act.clone()
        for k, (neuron, _) in PLANTED.items():
            act[state["which"] == k, :, neuron] += size
        return act

    return [("hook_embed", find), ("blocks.0.mlp.hook_post", bump)]


def _memorized():
    a, b = torch.tensor([4321, 2718, 5555, 8080]), torch.tensor([1234, 3141, 1212, 1717])
    label = torch.tensor([[t] * 5 for _, t in PLANTED.values()])
    return F.make_examples(a, b, label=label)


def test_planted_outliers_are_reverted_by_their_own_top_m_only(grid):
    model, M = _model(), _memorized()
    hmap = H.classify_neurons(model, grid, H.ClassifySettings(0.8, top_k=20))
    with model.hooks(_plant(model, M)):
        assert exact_match(model, M, "label").all()  # each memorized through its planted neuron
        stats = O.neighbour_stats(model, M, hmap)
        scores = NP.neuron_scores(stats, 0)
        assert scores.argmax(1).tolist() == [n for n, _ in PLANTED.values()]  # top 1 by |z|: the planted neuron
        table = NP.dose_response(model, M, stats, [0], NP.DoseSettings([1, 2, 5], n_controls=5, seed=0))
        first_two = NP.dose_response(model, M, stats, [0], NP.DoseSettings([1], n_controls=1, max_examples=2))
    assert not model.has_hooks()
    assert first_two.set_index("units").reverted["top"] == 1.0
    assert math.isnan(first_two.set_index("units").recovered["random"])  # recovered: top m only
    t = table.set_index(["m", "units"]).reverted
    for m in (1, 2, 5):
        assert t[(m, "top")] == 1.0  # its own top m (which holds the planted neuron) reverts every example
        assert t[(m, "mismatched")] == 0.0  # another example's planted neuron is silent here
    assert t[(1, "random")] <= 0.1
    summary = NP.dose_summary(table, layer=0, revert_min=0.5)
    assert summary.m50 == 1 and summary.top_revert_m50 == 1.0
    assert summary.random_revert_m50 < 0.1 and summary.mismatched_revert_m50 == 0.0
    assert summary.curve_m == [1, 2, 5] and summary.curve_top == [1.0, 1.0, 1.0]


def test_no_memorized_examples_give_an_empty_curve_and_no_m50(grid):
    model, M = _model(), _memorized()
    hmap = H.classify_neurons(model, grid, H.ClassifySettings(0.8, top_k=20))
    empty = NP.dose_response(model, M[:0], O.neighbour_stats(model, M[:0], hmap), [0], NP.DoseSettings([1, 5]))
    assert empty.empty
    s = NP.dose_summary(empty, layer=0, revert_min=0.5)
    assert s.m50 is None and math.isnan(s.random_revert_m50) and math.isnan(s.top_revert_max)


def test_a_set_that_no_m_reverts_has_no_m50():
    table = pd.DataFrame(
        [{"layer": 1, "m": m, "units": u, "reverted": r, "recovered": 0.0, "n": 10}
         for m in (1, 2, 5) for u, r in (("top", 0.1 * m), ("random", 0.0), ("mismatched", 0.0))])
    s = NP.dose_summary(table, layer=1, revert_min=0.5)
    assert s.m50 == 5 and s.top_revert_m50 == pytest.approx(0.5)
    s = NP.dose_summary(table, layer=1, revert_min=0.6)
    assert s.m50 is None and s.top_revert_max == pytest.approx(0.5)


def test_mismatch_partner_is_never_the_example_itself():
    for n in (2, 3, 17):
        p = NP.mismatch_partner(n, seed=n)
        assert sorted(p.tolist()) == list(range(n)) and (p != torch.arange(n)).all()
    assert len(NP.mismatch_partner(1)) == 0


def test_top_mask_picks_the_highest_scores():
    scores = torch.tensor([[0.1, 5.0, -math.inf, 2.0], [3.0, 1.0, 2.0, 0.0]])
    assert NP._top_mask(scores, 2).tolist() == [[False, True, False, True], [True, False, True, False]]
    assert NP._top_mask(scores, 10).all()  # m above the layer width: the whole layer


@pytest.mark.parametrize("kind", ["random", "digit"])
def test_fresh_noisy_labels_follow_the_noise_process(kind):
    ex = F.make_examples(torch.arange(1000, 1400), torch.arange(5000, 5400))
    null = O.fresh_noisy_labels(ex, kind, "msb", seed=3)
    assert torch.equal(null.true_label, ex.true_label) and torch.equal(null.prompt, ex.prompt)
    differs = (null.label != null.true_label).sum(1)
    assert (differs >= 1).all()  # every label is wrong
    if kind == "digit":
        assert (differs == 1).all()
    assert torch.equal(O.fresh_noisy_labels(ex, kind, "msb", seed=3).label, null.label)  # a fixed seed
    sums = fda.digits_to_int(null.label, "msb")
    assert ((sums >= fda.MIN_SUM) & (sums <= fda.MAX_SUM)).all() or kind == "digit"


def test_null_comparison_of_identical_sets_is_one_and_reports_position_9(grid):
    model, M = _model(), _memorized()
    hmap = H.classify_neurons(model, grid, H.ClassifySettings(0.0, top_k=20))  # every unit counts
    stats = O.neighbour_stats(model, M, hmap)
    out = O.null_comparison(stats, stats, hmap)
    assert out.z_null_ratio == pytest.approx(1.0)
    assert out.z_null_ratio_position9 == pytest.approx(1.0)
    assert len(out.median_abs_z_by_position_null) == 5


def test_neurons_as_units_use_each_neurons_home_position():
    acts = torch.zeros(100, 5, 1, 3)  # [G, A, L, D]
    feats = torch.zeros(100, 1, dtype=torch.bool)
    feats[:10, 0] = True  # one feature, true on inputs 0..9
    acts[:10, 2, 0, 0] = 5.0  # neuron 0: fires for the feature at position 2 (home), a heuristic there
    acts[:, 0, 0, 0] = torch.linspace(0, 1, 100)  # ... and weakly, without pattern, at position 0
    acts[:10, 1, 0, 1] = 1.0  # neuron 1: a heuristic at position 1, but its home is position 4
    acts[50:60, 4, 0, 1] = 9.0
    hmap = H.classify_activations(acts, feats, H.ClassifySettings(0.8, top_k=10, min_base=0.0, max_base=1.0),
                                  names=[("f", "operand digit")])
    assert hmap.home_position[0].tolist()[:2] == [2, 4]
    assert hmap.neuron_heuristic[0].tolist() == [True, False, False]
    assert hmap.neuron_fraction == pytest.approx(1 / 3)
    assert hmap.any_position_fraction == pytest.approx(2 / 3)  # shown, never judged
    assert hmap.neuron_layer_fractions() == [pytest.approx(1 / 3)]


def test_dose_settings_are_validated():
    assert NP.DoseSettings([1, 2]).m_grid == (1, 2)  # a list is kept as a tuple
    for bad in (dict(m_grid=[0, 1]), dict(m_grid=[1], n_controls=0), dict(m_grid=[1], max_examples=-1),
                dict(m_grid=[1], revert_min=1.5)):
        with pytest.raises(ValueError):
            NP.DoseSettings(**bad)
    with pytest.raises(ValueError):
        NP.LayerPatchSettings(n_controls=0)
    with pytest.raises(ValueError):
        NP.Patch(0, torch.ones(3, 5, dtype=torch.bool), reference=torch.zeros(2, 5))
    with pytest.raises(ValueError):
        NP.Patch(0, torch.ones(3, 5, dtype=torch.bool), torch.ones(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="revert_min"):
        NP.jstar_analysis(None, {}, {}, None, 0, NP.DoseSettings([1]))

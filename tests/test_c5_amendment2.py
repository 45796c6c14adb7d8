"""Amendment 2 (C5): planted answers for the calibrated heuristic cut (8.3) and for reading
memorization at the first differing digit j* (8.4)."""

import math
from types import SimpleNamespace

import pytest
import torch

from rote.analysis import fda_features as F
from rote.analysis import heuristics as H
from rote.analysis import neuron_patching as NP
from rote.analysis import outliers as O
from rote.analysis import units as U
from rote import scoring
from rote import verdicts
from rote.model import HookedTransformer, ModelShape
from planted import outlier_model

# -- 8.3: the cut calibrated on an untrained model -----------------------------------------------


@pytest.fixture(scope="module")
def grid():
    return F.operand_grid(1000, seed=1)


def _feature(grid, name):
    col = [n for n, _ in F.feature_list()].index(name)
    return F.feature_table(grid.info["a"], grid.info["b"])[:, col].float()


def _acts(grid, seed, planted=()):
    """[G, A=5, L=2, D=100] Gaussian activations; ``planted``: (position, layer, neurons, feature)
    units that follow a feature (plus a little noise)."""
    g = torch.Generator().manual_seed(seed)
    acts = torch.randn(len(grid), 5, 2, 100, generator=g)
    for j, l, neurons, name in planted:
        f = _feature(grid, name)
        acts[:, j, l, neurons] = 4 * f[:, None] + 0.1 * torch.randn(len(grid), len(neurons), generator=g)
    return acts


def test_cut_finds_planted_units_per_layer_and_position(grid):
    table = F.feature_table(grid.info["a"], grid.info["b"])
    # the untrained reference has a strong pattern at position 3 of layer 0 in every neuron: there
    # the cut is high, and a trained unit must beat it there, not a global cut
    ref_planted = [(3, 0, list(range(100)), "s1=7")]
    reference = H.classify_activations(_acts(grid, 1000, ref_planted), table, H.ClassifySettings(0.8, top_k=50))
    trained_planted = [(1, 0, list(range(10)), "a2∈[3,5]"), (3, 0, list(range(10)), "a2∈[3,5]")]
    trained = H.classify_activations(_acts(grid, 0, trained_planted), table, H.ClassifySettings(0.8, top_k=50))
    cut = H.score_cut(reference)
    assert cut.shape == (2, 5) and cut[0, 3] > cut[0, 1]
    cm = H.with_cut(trained, cut)
    assert cm.heuristic[0, 1, :10].all()  # planted, where the untrained reference has no pattern
    assert not cm.heuristic[0, 3, :10].any()  # as strong as coverage goes, but the reference is stronger there
    assert trained.heuristic[0, 3, :10].all()  # (the section-5 coverage rule calls them heuristics)
    random_units = torch.ones_like(cm.heuristic)
    random_units[0, 1, :10] = random_units[0, 3, :10] = False
    assert cm.heuristic[random_units].float().mean() <= 0.05  # noise units: about 1% pass the 99th percentile
    assert torch.equal(cm.best, trained.best) and cm.score_cut is not None
    # the null: the same cut on another untrained model passes about 1% of its units
    null = H.with_cut(H.classify_activations(_acts(grid, 7, ref_planted), table, H.ClassifySettings(0.8, top_k=50)),
                      cut)
    s = H.cut_summary(cm, null)
    assert s.cut_null_fraction_units <= 0.05
    assert s.cut_heuristic_fraction_units > s.cut_null_fraction_units
    assert len(s.cut_heuristic_fraction_per_layer) == 2
    assert s.cut_heuristic_fraction == pytest.approx(cm.neuron_fraction)


def test_a_layer_with_no_unit_over_the_cut_is_reported(grid):
    table = F.feature_table(grid.info["a"], grid.info["b"])
    hm = H.classify_activations(_acts(grid, 0, [(1, 0, [0, 1], "carry1=1")]), table, H.ClassifySettings(0.8, top_k=50))
    cut = torch.zeros(2, 5)
    cut[1] = math.inf  # nothing of layer 1 exceeds it
    cm = H.with_cut(hm, cut)
    assert cm.empty_layers() == [1]
    s = H.cut_summary(cm, cm)
    assert s.cut_empty_layers == [1] and s.cut_heuristic_fraction_per_layer[1] == 0.0
    assert H.with_cut(hm, torch.full((2, 5), math.inf)).neuron_fraction == 0.0


def test_untrained_models_of_two_seeds_share_about_one_percent(grid):
    def untrained(seed):
        torch.manual_seed(seed)
        model = HookedTransformer(ModelShape(n_layers=2, d_model=16, n_heads=2, vocab_size=13, n_ctx=14)).eval()
        return H.classify_neurons(model, grid[:600], H.ClassifySettings(0.8, top_k=20))

    other, own = untrained(1000), untrained(0)
    null = H.with_cut(own, H.score_cut(other))
    assert null.heuristic_fraction <= 0.06  # the 99th percentile of another initialization
    assert H.with_cut(other, H.score_cut(other)).heuristic_fraction <= 0.02  # its own: at most the top 1%


# -- 8.4: j* and the outlier statistic there -------------------------------------------------------


def test_first_differing_digit():
    ex = F.make_examples(torch.tensor([1234, 1234, 1234, 1234]), torch.tensor([5678] * 4))  # 06912
    label = ex.true_label.clone()
    label[0, 2] = 5  # 06512: j* = 2
    label[1, 0], label[1, 3] = 1, 0  # j* = 0 (the first of two)
    label[3, 4] = 9  # j* = 4
    jstar = O.first_differing(ex.with_label(label))
    assert jstar.tolist() == [2, 0, -1, 3 + 1]


def _stats(z: torch.Tensor) -> U.NeighbourStats:
    """NeighbourStats around given z [N, L, A, D] (sd 1, a pattern that holds: act = mean + z)."""
    g = torch.Generator().manual_seed(int(z.numel()))
    mean = torch.randn(z.shape, generator=g) * 3
    return U.NeighbourStats(act=mean + z, mean=mean, sd=torch.ones_like(z), count=torch.full(z.shape, 10),
                            mean_all=mean, z=z, differs=torch.zeros(z.shape[0], z.shape[2], dtype=torch.bool),
                            layers=[0])


def _planted_sets(after: bool, n_m=40, n_c=200, D=200, units=(5, 17, 123), size=10.0):
    g = torch.Generator().manual_seed(0)
    jstar = torch.randint(0, 3, (n_m,), generator=g)
    zm, zc = torch.randn(n_m, 1, 5, D, generator=g), torch.randn(n_c, 1, 5, D, generator=g)
    for n, j in enumerate(jstar.tolist()):  # a handful of shifted units, at j* or at every position after it
        zm[n, 0, j + (1 if after else 0):(j + 1 if not after else 5), list(units)] += size
    return _stats(zm), _stats(zc), jstar, SimpleNamespace(heuristic=torch.ones(1, 5, D, dtype=torch.bool))


def test_largest_z_at_jstar_finds_a_handful_of_shifted_units_that_the_median_misses():
    M, C, jstar, hmap = _planted_sets(after=False)
    out = O.jstar_comparison(M, C, hmap, jstar)
    assert 0.8 <= out.jstar_median_z_ratio <= 1.25  # the median over all units stays at its clean value
    assert out.jstar_z_ratio >= 2  # the largest |z| finds the shifted units
    assert out.jstar_z_M > 7 and out.jstar_z_clean < 4
    assert out.jstar_n_M == 40 and sum(out.jstar_counts.values()) == 40 and out.jstar_n_without == 0
    assert out.jstar_pattern_corr_M > 0.9  # act = mean + z: the pattern holds


def test_shifts_after_jstar_leave_the_jstar_statistic_at_its_clean_value():
    M, C, jstar, hmap = _planted_sets(after=True)
    out = O.jstar_comparison(M, C, hmap, jstar)
    assert 0.8 <= out.jstar_z_ratio <= 1.25
    null = _stats(torch.randn(40, 1, 5, 200, generator=torch.Generator().manual_seed(3)))
    after = O.after_jstar_comparison(M, null, hmap, jstar, jstar)
    assert after.after_jstar_max_z_ratio_null >= 2  # shown, not judged: the shift is after j*
    assert 0.8 <= after.after_jstar_z_ratio_null <= 1.25


def test_clean_reference_is_weighted_like_the_jstar_of_M():
    D = 4
    zc = torch.zeros(10, 1, 5, D)
    zc[:, 0, 0], zc[:, 0, 1] = 1.0, 5.0  # clean: max |z| 1 at position 0, 5 at position 1
    zm = torch.zeros(3, 1, 5, D)
    zm[:, 0, 1] = 10.0
    hmap = SimpleNamespace(heuristic=torch.ones(1, 5, D, dtype=torch.bool))
    out = O.jstar_comparison(_stats(zm), _stats(zc), hmap, torch.tensor([1, 1, -1]))
    assert out.jstar_z_clean == 5.0 and out.jstar_z_M == 10.0 and out.jstar_z_ratio == 2.0
    assert out.jstar_counts == {1: 2} and out.jstar_n_without == 1
    none = O.jstar_comparison(_stats(zm), _stats(zc), hmap, torch.tensor([-1, -1, -1]))
    assert none.jstar_n_M == 0 and math.isnan(none.jstar_z_ratio) and math.isnan(none.jstar_z_M)


def test_weighted_median():
    assert O.weighted_median(torch.tensor([1.0, 2.0, 3.0]), torch.ones(3)) == 2.0
    assert O.weighted_median(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.0, 0.0, 1.0])) == 3.0
    assert O.weighted_median(torch.tensor([1.0, math.nan, 3.0]), torch.tensor([3.0, 100.0, 1.0])) == 1.0
    assert math.isnan(O.weighted_median(torch.tensor([math.nan]), torch.ones(1)))


# -- 8.4: specificity at j* on a model with planted memorization -------------------------------------

PLANTED = {0: (3, 7), 1: (10, 8), 2: (20, 1), 3: (30, 4)}  # example -> (its planted neuron, its noisy token)
JSTAR = [0, 1, 2, 3]


def _model():
    return outlier_model(PLANTED)  # the planted neurons: silent on clean inputs; each writes its token


def _memorized():
    a, b = torch.tensor([4321, 2718, 5555, 8080]), torch.tensor([1234, 3141, 1212, 1717])
    ex = F.make_examples(a, b)
    label = ex.true_label.clone()
    for k, (_, token) in PLANTED.items():
        assert label[k, JSTAR[k]] != token
        label[k, JSTAR[k]:] = token  # noisy from j* on
    return ex.with_label(label)


def _plant(model, examples, where: str, size=5.0):
    """Hooks that memorize example k's noisy token on example k only (recognised by its prompt
    embeddings): ``where="jstar"`` bumps its planted neuron at its j* alone; ``where="after"``
    writes the token at j* straight into the residual stream (no neuron moves there) and bumps the
    planted neuron at the positions after j* only."""
    keys = model.embed(examples.prompt).detach()
    P0 = examples.prompt.shape[1] - 1  # the sequence position of answer position 0
    state = {}

    def find(act, hook):
        same = (act[:, None, :keys.shape[1]] == keys[None]).all(-1).all(-1)
        state["which"] = torch.where(same.any(1), same.float().argmax(1), torch.full((len(act),), -1))

    def bump(act, hook):
        act = act.clone()
        for k, (neuron, _) in PLANTED.items():
            rows = state["which"] == k
            if where == "jstar":
                act[rows, P0 + JSTAR[k], neuron] += size
            else:
                act[rows, P0 + JSTAR[k] + 1:, neuron] += size
        return act

    def write(act, hook):
        act = act.clone()
        for k, (_, token) in PLANTED.items():
            u = model.unembed.weight[token].detach()
            act[state["which"] == k, P0 + JSTAR[k]] += 50 * u / u.norm()
        return act

    hooks = [("hook_embed", find), ("blocks.0.mlp.hook_post", bump)]
    return hooks + ([("blocks.0.hook_resid_post", write)] if where == "after" else [])


def _jstar_dose(model, M, stats, jstar, settings, units=None):
    """8.4's specificity: the dose-response of layer 0 at each example's j*, read against its label."""
    return NP.position_dose_response(model, M, stats, NP.Patch(0, O.jstar_mask(jstar, 5), units, M.label), settings)


def _prediction_at_jstar(model, M):
    pred = scoring.answer_logits(model, M, "label").argmax(-1).cpu()
    return pred[torch.arange(len(M)), torch.tensor(JSTAR)]


def _clean(n=120):
    g = torch.Generator().manual_seed(5)
    return F.make_examples(torch.randint(1000, 9000, (n,), generator=g), torch.randint(1000, 9000, (n,), generator=g))


def test_outliers_planted_at_jstar_are_found_and_reverted_by_their_own_top_m_only(grid):
    model, M = _model(), _memorized()
    hmap = H.classify_neurons(model, grid[:600], H.ClassifySettings(0.8, top_k=20))
    hmap.heuristic[:] = True  # every unit counts (the planted ones among them)
    jstar = O.first_differing(M)
    assert jstar.tolist() == JSTAR
    with model.hooks(_plant(model, M, "jstar")):
        assert _prediction_at_jstar(model, M).tolist() == [t for _, t in PLANTED.values()]  # memorized at j*
        stats = O.neighbour_stats(model, M, hmap)
        clean = O.neighbour_stats(model, _clean(), hmap)
        comp = O.jstar_comparison(stats, clean, hmap, jstar)
        table = _jstar_dose(model, M, stats, jstar, NP.DoseSettings([1, 2, 5], n_controls=5, seed=0))
    assert not model.has_hooks()
    assert comp.jstar_z_ratio >= 2 and comp.jstar_z_M > 50
    t = table.set_index(["m", "units"]).reverted
    for m in (1, 2, 5):
        assert t[(m, "top")] == 1.0
        assert t[(m, "mismatched")] == 0.0  # another example's planted neuron is silent here
    assert t[(1, "random")] <= 0.1
    s = NP.jstar_summary(table, 0, 0.5)
    assert s.m50 == 1 and s.top_revert_m50 == 1.0 and s.n == 4
    assert s.random_revert_m50 < 0.1 and s.mismatched_revert_m50 == 0.0
    assert 0.0 <= s.recovered_m50 <= 1.0


def test_memorization_carried_after_jstar_is_not_found_at_jstar(grid):
    """Each example's noisy token at j* comes from the residual stream, and its planted neuron is
    shifted only after j*: the 7.7 ranking (all positions) picks the planted neuron, but the j*
    statistic stays near its clean value and patching neurons at j* reverts nothing."""
    model, M = _model(), _memorized()
    hmap = H.classify_neurons(model, grid[:600], H.ClassifySettings(0.8, top_k=20))
    hmap.heuristic[:] = True
    jstar = O.first_differing(M)
    with model.hooks(_plant(model, M, "after")):
        assert _prediction_at_jstar(model, M).tolist() == [t for _, t in PLANTED.values()]
        stats = O.neighbour_stats(model, M, hmap)
        clean = O.neighbour_stats(model, _clean(), hmap)
        comp = O.jstar_comparison(stats, clean, hmap, jstar)
        table = _jstar_dose(model, M, stats, jstar, NP.DoseSettings([1, 2, 5], n_controls=3))
        after = NP.position_dose_response(model, M, stats, NP.Patch(0, O.jstar_mask(jstar, 5, after=True)),
                                          NP.DoseSettings([1], n_controls=3))
    assert not model.has_hooks()
    assert NP.neuron_scores(stats, 0).argmax(1).tolist() == [n for n, _ in PLANTED.values()]  # 7.7 finds them
    assert comp.jstar_z_ratio < 2  # the j* statistic stays near its clean value
    assert (table[table.units == "top"].reverted == 0.0).all()
    assert NP.jstar_summary(table, 0, 0.5).m50 is None
    after = after.set_index("units")
    assert after.reverted["top"] == 1.0  # after j*, the planted neuron carries the suffix (shown, not judged)


def test_degenerate_sets_give_no_m50_and_no_crash(grid):
    model, M = _model(), _memorized()
    hmap = H.classify_neurons(model, grid[:300], H.ClassifySettings(0.8, top_k=20))
    stats = O.neighbour_stats(model, M, hmap)
    none = torch.full((4,), -1)
    empty = _jstar_dose(model, M, stats, none, NP.DoseSettings([1, 5]))
    assert empty.empty
    s = NP.jstar_summary(empty, 0, 0.5)
    assert s.m50 is None and s.n == 0 and math.isnan(s.top_revert_max)
    one = _jstar_dose(model, M, stats, torch.tensor([0, -1, -1, -1]), NP.DoseSettings([1, 200], n_controls=1))
    assert one.n.eq(1).all() and one[one.units == "mismatched"].reverted.isna().all()
    s = NP.jstar_summary(one, 0, 0.0)  # revert_min 0: m50 = 1, with no second example to mismatch
    assert s.m50 == 1 and s.mismatched_revert_m50 is None
    out = O.jstar_comparison(stats, stats, hmap, none)
    assert out.jstar_n_M == 0 and out.jstar_n_without == 4 and out.jstar_counts == {}
    empty_stats = O.neighbour_stats(model, M[:0], hmap)
    out = O.jstar_comparison(empty_stats, stats, hmap, torch.zeros(0, dtype=torch.long))
    assert out.jstar_n_M == 0 and math.isnan(out.jstar_pattern_corr_M)
    after = O.after_jstar_comparison(empty_stats, stats, hmap, torch.zeros(0, dtype=torch.long), O.first_differing(M))
    assert math.isnan(after.after_jstar_z_ratio_null)
    assert not model.has_hooks()


def test_jstar_analysis_gathers_the_metric_keys_of_one_run(grid):
    model, M = _model(), _memorized()
    hmap = H.classify_neurons(model, grid[:600], H.ClassifySettings(0.8, top_k=20))
    hmap.heuristic[:] = True
    null = O.fresh_noisy_labels(_clean(40), "random", "msb", seed=0)
    with model.hooks(_plant(model, M, "jstar")):
        stats = {name: O.neighbour_stats(model, ex, hmap) for name, ex in (("M", M), ("clean", _clean()), ("null", null))}
        out = NP.jstar_analysis(model, {"M": M, "null": null}, stats, hmap, 0,
                                NP.DoseSettings([1, 2], n_controls=2, revert_min=0.5))
    m = verdicts.flat(verdicts.c5.C5Metrics(jstar=out.comparison, after=out.after, jdose=out.summary, curves=out.curves))
    assert out.summary.m50 == 1 and out.comparison.jstar_n_M == 4 and out.comparison.jstar_z_ratio >= 2
    for key in ("jstar_counts", "jstar_z_M", "jstar_z_clean", "jstar_pattern_corr_M", "jstar_top_revert_max",
                "jstar_top_revert_m50", "jstar_random_revert_m50", "jstar_mismatched_revert_m50",
                "jstar_recovered_m50", "after_jstar_z_ratio_null", "after_jstar_patch_revert",
                "after_jstar_null_patch_revert"):
        assert key in m, key
    assert len(m["after_jstar_patch_revert"]) == 2 and len(m["after_jstar_null_patch_revert"]) == 2
    assert out.jstar.tolist() == JSTAR and not model.has_hooks()


# -- 8.5: specificity at j* ranks and patches the 8.3 units of the last layer ---------------------------------
def _units_at_jstar(neurons_at: dict) -> torch.Tensor:
    """[A=5, D=64] 8.3 units of layer 0: ``neurons_at`` {answer position: neurons}."""
    units = torch.zeros(5, 64, dtype=torch.bool)
    for j, neurons in neurons_at.items():
        units[j, neurons] = True
    return units


def test_specificity_at_jstar_ranks_patches_and_draws_only_the_83_units(grid):
    """8.5, 8.6: the top m are the example's top m among the 8.3 units at its j*, the random m are drawn from
    the 8.3 units outside that top m, every m of the grid up to the most units an example holds is tried
    (each example capped at its own), and once all of them. Planted: each example's memorized digit sits in
    its own neuron (``PLANTED``), the largest |z| of the layer. Before (every neuron of the layer ranked),
    top-1 reverts all of M whatever the 8.3 units are; before 8.6, an m needed 2m units at every j*."""
    model, M = _model(), _memorized()
    hmap = H.classify_neurons(model, grid[:600], H.ClassifySettings(0.8, top_k=20))
    jstar = O.first_differing(M)
    others = [40, 41, 42]  # silent neurons: patching them changes nothing
    with model.hooks(_plant(model, M, "jstar")):
        stats = O.neighbour_stats(model, M, hmap)
        every = _jstar_dose(model, M, stats, jstar, NP.DoseSettings([1, 2, 5], n_controls=5, seed=0))  # before 8.5
        # the planted neuron is an 8.3 unit at its example's j*, with 3 others: 4 units at every j*
        with_planted = _units_at_jstar({JSTAR[k]: [n] + others for k, (n, _) in PLANTED.items()})
        inside = _jstar_dose(model, M, stats, jstar, NP.DoseSettings([1, 2, 5], n_controls=5, seed=0), with_planted)
        # one example's j* holds one unit, its planted neuron; the others' none
        fewer = _jstar_dose(model, M, stats, jstar, NP.DoseSettings([1, 2]), _units_at_jstar({0: [3]}))
    assert not model.has_hooks()
    assert sorted(set(every.m)) == [1, 2, 5] and every.set_index(["m", "units"]).reverted[(1, "top")] == 1.0
    assert not every["all"].any() and (every.short == 0).all()
    t = inside.set_index(["m", "units"])
    assert sorted(set(inside.m)) == [1, 2, 4]  # 5 > the 4 units any example holds; 4: all of them
    assert t.loc[(4, "top"), "all"] and not t.loc[(2, "top"), "all"]
    assert t.reverted[(1, "top")] == 1.0 and t.reverted[(2, "top")] == 1.0 and t.reverted[(4, "top")] == 1.0
    assert t.reverted[(1, "random")] == 0.0 and t.reverted[(2, "random")] == 0.0  # never the planted neuron
    assert t.reverted[(1, "mismatched")] == 0.0  # the partner's ranking, over this example's others
    assert t.short[(1, "random")] == 0 and t.short[(2, "random")] == 0 and t.short[(4, "random")] == 4
    s = NP.jstar_summary(inside, 0, 0.5)
    assert s.m50 == 1 and s.m_tried == [1, 2, 4] and s.random_revert_m50 == 0.0
    assert s.units_max == 4 and s.short_m50 == 0 and s.n == 4
    assert NP.jstar_units(jstar, with_planted) == 4
    # one example holds a unit: the dose m = 1 is all of it (the others patch nothing), reverting that example
    f = NP.jstar_summary(fewer, 0, 0.5)
    assert f.m_tried == [1] and f.units_max == 1 and f.top_revert_max == 0.25
    assert fewer.set_index("units").short["top"] == 3  # three examples hold fewer than 1 unit
    assert NP.jstar_units(jstar, _units_at_jstar({0: [3]})) == 0


def test_no_dose_of_the_83_units_reverting_half_of_M_fails_specificity(grid):
    """8.6, planted: the memorized digits sit in neurons that are no 8.3 units, so no dose of the 8.3 units
    (not even all of them) reverts half of M, and specificity fails. Before, the m of the grid past half the
    fewest units at a j* were not tried, and the check was unresolved ("m50 cannot be reached")."""
    model, M = _model(), _memorized()
    hmap = H.classify_neurons(model, grid[:600], H.ClassifySettings(0.8, top_k=20))
    jstar = O.first_differing(M)
    without = _units_at_jstar({JSTAR[k]: [40, 41, 42, 50] for k in PLANTED})  # 4 units at every j*, none planted
    with model.hooks(_plant(model, M, "jstar")):
        stats = O.neighbour_stats(model, M, hmap)
        outside = _jstar_dose(model, M, stats, jstar, NP.DoseSettings([1, 2, 5, 10], n_controls=3, seed=0), without)
    assert not model.has_hooks()
    u = NP.jstar_summary(outside, 0, 0.5)
    assert u.m_tried == [1, 2, 4] and u.units_max == 4  # 1, 2 of the grid, then all 4 units
    assert (outside[outside.units == "top"].reverted == 0.0).all() and u.m50 is None
    from rote import verdicts
    metrics = {"jstar_n_M": 4, "jstar_n": u.n, "jstar_m_tried": u.m_tried,
               "jstar_units_min": NP.jstar_units(jstar, without), "jstar_units_max": u.units_max,
               "jstar_top_revert_max": u.top_revert_max, "jstar_m50": None,
               "jstar_random_revert_m50": u.random_revert_m50,
               "jstar_mismatched_revert_m50": u.mismatched_revert_m50}
    checks = verdicts.c5.checks(verdicts.c5.from_record(**metrics))[1]
    spec = verdicts.find(checks, "c5.specificity")
    assert spec.passed is False and spec.value == 0.0 and spec.margin == -0.5
    assert spec.method == "wilson" and spec.interval[0] == 0.0 and spec.interval[1] < 0.5  # 0 of 4 examples
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_jstar_analysis_reads_specificity_and_the_pattern_over_the_maps_83_units(grid):
    """jstar_analysis hands the map's heuristic units of the layer to the dose-response (8.5) and reads the
    pattern correlation at j* over them: a map with no heuristic unit leaves both without a value."""
    model, M = _model(), _memorized()
    hmap = H.classify_neurons(model, grid[:600], H.ClassifySettings(0.8, top_k=20))
    null = O.fresh_noisy_labels(_clean(40), "random", "msb", seed=0)
    hmap.heuristic[:] = False
    with model.hooks(_plant(model, M, "jstar")):
        stats = {name: O.neighbour_stats(model, ex, hmap) for name, ex in (("M", M), ("clean", _clean()), ("null", null))}
        out = NP.jstar_analysis(model, {"M": M, "null": null}, stats, hmap, 0,
                                NP.DoseSettings([1, 2], n_controls=2, revert_min=0.5))
    d, comp = out.summary, out.comparison
    assert d.units_min == 0 and d.m_tried == [] and d.m50 is None
    assert math.isnan(comp.jstar_pattern_corr_M) and math.isnan(comp.jstar_z_M)
    from rote import verdicts
    checks = verdicts.c5.checks(verdicts.c5.C5Metrics(4, jstar=comp, after=out.after, jdose=d, curves=out.curves))[1]
    for check_id, fragment in (("c5.specificity", "nothing to patch"),
                               ("c5.pattern.jstar", "pattern correlation at j* is undefined"),
                               ("c5.z", "no heuristic unit at the j* positions under the 8.3 cut")):
        c = verdicts.find(checks, check_id)
        assert c.passed is None and fragment in c.reason, (check_id, c)

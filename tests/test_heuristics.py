import math

import pytest
import torch

from rote.analysis import fda_features as F
from rote.analysis import heuristics as H
from rote.analysis import neuron_patching as NP
from rote.analysis import outliers as O
from rote.analysis.neurons import mlp_activations
from rote.model import HookedTransformer, ModelShape
from rote.tasks import fda
from rote.train import exact_match


@pytest.fixture(scope="module")
def grid():
    return F.operand_grid(3000, seed=1)


def test_make_examples_matches_task_encoding():
    vocab = fda.make_vocab()
    ex = F.make_examples(torch.tensor([1234, 9999]), torch.tensor([5678, 1000]), "msb")
    assert vocab.decode(ex.prompt[0]) == "1234+5678="
    assert vocab.decode(ex.true_label[0]) == "06912"
    assert vocab.decode(ex.true_label[1]) == "10999"
    lsb = F.make_examples(torch.tensor([1234]), torch.tensor([5678]), "lsb")
    assert vocab.decode(lsb.true_label[0]) == "21960"


def test_feature_table_columns_match_names():
    names = F.feature_list()
    a, b = torch.tensor([1234, 4567]), torch.tensor([5678, 5555])
    table = F.feature_table(a, b)
    assert table.shape == (2, len(names))
    assert len({n for n, _ in names}) == len(names)
    assert {k for _, k in names} == set(F.FEATURE_KINDS)
    on = {names[i][0] for i in table[0].nonzero().flatten().tolist()}
    # 1234 + 5678 = 6912: carries out of columns 0, 1 (4+8=12, 3+7+1=11), none out of 2 and 3
    for name in ["a0=4", "b3=5", "a0+b0=12", "a1+b1=10", "carry0=1", "carry1=1", "carry2=0", "carry3=0",
                 "s0=2", "s3=6", "s4=0", "sum∈[6000,6999]", "sum≡0 (mod 2)", "sum≡0 (mod 3)", "a2∈[1,3]"]:
        assert name in on, name
    for name in ["a0=3", "carry2=1", "s0=3", "sum≡1 (mod 2)", "sum∈[7000,7999]"]:
        assert name not in on, name


def _planted(grid, feature: str, noise: float = 0.1, seed: int = 0) -> torch.Tensor:
    col = [n for n, _ in F.feature_list()].index(feature)
    table = F.feature_table(grid.info["a"], grid.info["b"])
    g = torch.Generator().manual_seed(seed)
    return table[:, col].float() + noise * torch.randn(len(grid), generator=g)


@pytest.mark.parametrize("feature,kind", [("a2∈[3,5]", "operand digit range"), ("sum≡3 (mod 7)", "answer residue"),
                                          ("carry1=1", "carry"), ("s1=7", "answer digit"),
                                          ("a0+b0∈[4,6]", "column sum range")])
def test_classifier_finds_planted_feature(grid, feature, kind):
    acts = torch.stack([_planted(grid, feature, seed=s) for s in range(3)], dim=1)  # [G, 3 units]
    table = F.feature_table(grid.info["a"], grid.info["b"])
    hmap = H.classify_activations(acts, table, H.ClassifySettings(0.8, top_k=50))
    for u in range(3):
        assert hmap.feature_names[hmap.best[u]] == feature
        assert hmap.feature_kinds[hmap.best[u]] == kind
        assert hmap.coverage[u] == 1.0 and hmap.heuristic[u]


def test_classifier_rejects_noise_and_reports_partial_patterns(grid):
    table = F.feature_table(grid.info["a"], grid.info["b"])
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(len(grid), 20, generator=g)
    hmap = H.classify_activations(noise, table, H.ClassifySettings(0.8, top_k=50))
    assert hmap.heuristic.float().mean() <= 0.1  # random units are not heuristics
    # a unit that follows its feature on only half of its top inputs is not a heuristic
    half = _planted(grid, "a2∈[3,5]", noise=0.0) * 2.0
    rest = torch.nonzero(half == 0).flatten()[:25]
    half[rest] = 3.0 + torch.rand(25, generator=g)  # 25 strong activations outside the feature
    hmap = H.classify_activations(half[:, None], table, H.ClassifySettings(0.8, top_k=50))
    assert not hmap.heuristic[0] and hmap.coverage[0] < 0.8


def test_classify_neurons_shapes_and_tables(grid):
    torch.manual_seed(0)
    model = HookedTransformer(ModelShape(n_layers=2, d_model=16, n_heads=2, vocab_size=13, n_ctx=14)).eval()
    hmap = H.classify_neurons(model, grid[:500], H.ClassifySettings(0.8, top_k=20))
    assert hmap.best.shape == (2, 5, 64)
    t = hmap.table()
    assert len(t) == 2 * 5 * 64 and set(t.layer) == {0, 1}
    assert t.heuristic.mean() == pytest.approx(hmap.heuristic_fraction)
    assert len(hmap.layer_fractions()) == 2
    per = hmap.per_layer()
    assert per.fraction.sum() == pytest.approx(sum(hmap.layer_fractions()))
    assert not model.has_hooks()


def _stats_model():
    torch.manual_seed(0)
    return HookedTransformer(ModelShape(n_layers=1, d_model=16, n_heads=2, vocab_size=13, n_ctx=14)).eval()


def test_neighbour_stats_are_means_of_clean_neighbours(grid):
    model = _stats_model()
    hmap = H.classify_neurons(model, grid[:500], H.ClassifySettings(0.8, top_k=20))
    ex = F.make_examples(torch.tensor([1500, 5000, 9999]), torch.tensor([2500, 5000, 1000]))
    stats = O.neighbour_stats(model, ex, hmap, O.NeighbourSettings(min_count=3))
    assert stats.act.shape == (3, 1, 5, 64) and stats.mean.shape == stats.act.shape
    # 8.6: one operand shifted by 1..3 either way: 12 neighbours, 6 at the corner a = 9999, b = 1000
    assert (stats.count <= 12).all() and (stats.count[2] <= 6).all()
    offsets = F.neighbour_offsets(3)
    assert len(offsets) == 12 and not (offsets == 0).all(1).any()
    nb = F.make_examples(1500 + offsets[:, 0], 2500 + offsets[:, 1])
    acts = mlp_activations(model, nb, "true_label")[:, 2, 0]  # position 2, layer 0: [12, 64]
    assert stats.mean_all[0, 0, 2] == pytest.approx(acts.mean(0), rel=1e-4, abs=1e-6)
    # the feature-matched mean uses the neighbours that share the unit's best feature value
    col = hmap.feature_columns[hmap.best[0, 2, 7]]
    same = F.feature_table(nb.info["a"], nb.info["b"])[:, col] == F.feature_table(ex.info["a"][:1], ex.info["b"][:1])[0, col]
    if same.sum() >= 3:
        assert stats.mean[0, 0, 2, 7].item() == pytest.approx(acts[same, 7].mean().item(), rel=1e-4, abs=1e-6)
    else:
        assert stats.mean[0, 0, 2, 7].isnan()
    summary = O.outlier_summary(stats, hmap)
    assert {"median_abs_z", "pattern_corr", "median_abs_z_by_position"} <= set(vars(summary))
    empty = O.neighbour_stats(model, ex[:0], hmap)
    assert math.isnan(O.outlier_summary(empty, hmap).median_abs_z)
    assert NP.layer_patching(model, ex[:0], empty, hmap).empty
    assert not model.has_hooks()


@pytest.mark.parametrize("max_shift", [1, 3])
def test_every_clean_neighbour_shifts_one_operand_by_1_to_3(grid, monkeypatch, max_shift):
    """Protocol section 5 (8.6 restates it): a clean neighbour of x is x with ONE operand shifted by
    1..max_shift either way, the other unchanged. Before, both operands moved (48 neighbours at 3, among
    them (a + 1, b - 1), which has x's sum). The inputs neighbour_stats actually runs are recorded."""
    seen = []
    make = O.make_examples

    def record(a, b, order="msb", label=None):
        seen.append((torch.as_tensor(a).clone(), torch.as_tensor(b).clone()))
        return make(a, b, order, label)

    model = _stats_model()
    hmap = H.classify_neurons(model, grid[:300], H.ClassifySettings(0.8, top_k=20))
    a, b = torch.tensor([1500, 5000, 9999, 1000]), torch.tensor([2500, 5000, 1000, 9999])
    monkeypatch.setattr(O, "make_examples", record)
    stats = O.neighbour_stats(model, F.make_examples(a, b), hmap, O.NeighbourSettings(max_shift=max_shift, chunk=2))
    na, nb = torch.cat([s[0] for s in seen]).reshape(len(a), -1), torch.cat([s[1] for s in seen]).reshape(len(a), -1)
    assert na.shape[1] == 4 * max_shift
    da, db = (na - a[:, None]).abs(), (nb - b[:, None]).abs()
    inside = (a[:, None] + F.neighbour_offsets(max_shift)[:, 0] <= fda.MAX_OPERAND) & \
             (a[:, None] + F.neighbour_offsets(max_shift)[:, 0] >= fda.MIN_OPERAND) & \
             (b[:, None] + F.neighbour_offsets(max_shift)[:, 1] <= fda.MAX_OPERAND) & \
             (b[:, None] + F.neighbour_offsets(max_shift)[:, 1] >= fda.MIN_OPERAND)
    one = ((da == 0) & (db >= 1) & (db <= max_shift)) | ((db == 0) & (da >= 1) & (da <= max_shift))
    assert one[inside].all()  # every neighbour that is counted moves exactly one operand, by 1..max_shift
    assert ((na + nb) != (a + b)[:, None])[inside].all()  # so none has x's sum
    assert inside.sum(1).tolist() == [4 * max_shift, 4 * max_shift, 2 * max_shift, 2 * max_shift]  # corners
    assert stats.count.max() <= 4 * max_shift and (stats.count[2:] <= 2 * max_shift).all()


def _plant(model, example, neuron: int, size: float):
    """Hooks that add ``size`` to one neuron on exactly one input (recognised by its embeddings)."""
    key = model.embed(example.prompt[0]).detach()
    state = {}

    def find(act, hook):
        state["hit"] = (act[:, :key.shape[0]] == key).all(-1).all(-1)

    def bump(act, hook):
        act = act.clone()
        act[state["hit"], :, neuron] += size
        return act

    return [("hook_embed", find), ("blocks.0.mlp.hook_post", bump)]


def test_planted_outlier_has_large_z_and_patching_reverts_it(grid):
    """Neuron 3 is silent on clean inputs and writes token 7; one input gets it bumped, and that
    input is 'memorized' as 77777. z flags it; patching the heuristic unit to its neighbour mean
    reverts the memorization, a random unit of the layer does not."""
    model = _stats_model()
    with torch.no_grad():
        mlp = model.blocks[0].mlp
        mlp.W_in.bias[3] = -6.0
        u7 = model.unembed.weight[7]
        mlp.W_out.weight[:, 3] = 50 * u7 / u7.norm()
    ex = F.make_examples(torch.tensor([4321]), torch.tensor([1234]))
    ex = F.make_examples(ex.info["a"], ex.info["b"], label=torch.full((1, 5), 7))
    hmap = H.classify_neurons(model, grid[:500], H.ClassifySettings(0.8, top_k=20))
    hmap.heuristic[:] = False
    hmap.heuristic[0, 0, 3] = True  # treat neuron 3 at the first answer position as the only heuristic unit
    with model.hooks(_plant(model, ex, neuron=3, size=5.0)):
        assert exact_match(model, ex, "label").all()  # memorized through the planted shift
        stats = O.neighbour_stats(model, ex, hmap)
        patch = NP.layer_patching(model, ex, stats, hmap, NP.LayerPatchSettings(n_controls=4))
        direction = O.shift_direction(model, ex, stats, hmap)
    z = stats.z[0, 0, :, 3]
    assert (z > 100).all()  # every answer position: far above the clean neighbours
    assert (stats.expected[0, 0, :, 3].abs() < 1e-3).all()
    # at the first answer position the input is the clean prompt: the other units look like clean inputs
    other = stats.z[0, 0, 0, torch.arange(64) != 3]
    assert other[~other.isnan()].abs().median() < 3
    patch = patch.set_index(["units", "control"])
    for units in ("outliers", "heuristics", "all"):
        assert patch.loc[(units, False), "reverted"] == 1.0
    assert patch.loc[("outliers", False), "n_units"] == 1
    for units in ("outliers", "heuristics"):
        assert patch.loc[(units, True), "reverted"] <= 0.1 and patch.loc[(units, True), "n_units"] == 1
    assert direction.shift_toward_noisy == 1.0 and direction.n_shifts == 1
    top = O.example_outliers(stats, hmap, k=3)
    assert top.neuron.tolist() == [3] and top.position.tolist() == [0]  # the only heuristic unit
    summary = NP.patching_summary(patch.reset_index(), layer=0)
    assert summary.patch_revert_last == 1.0 and summary.control_revert_last <= 0.1
    assert math.isnan(NP.patching_summary(patch.reset_index().iloc[:0], layer=0).layer_revert_last)
    comparison = O.outlier_comparison(stats, stats, hmap)
    assert comparison.z_ratio == pytest.approx(1.0)
    assert not model.has_hooks()


def test_classification_and_neighbour_settings_are_validated():
    for bad in (dict(coverage_min=1.5), dict(coverage_min=0.8, top_k=0), dict(coverage_min=0.8, min_base=0.7)):
        with pytest.raises(ValueError):
            H.ClassifySettings(**bad)
    for bad in (dict(order="middle"), dict(max_shift=0), dict(min_count=0), dict(sd_floor=-1.0), dict(chunk=0)):
        with pytest.raises(ValueError):
            O.NeighbourSettings(**bad)

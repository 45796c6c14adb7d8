"""The overlap statistics of claim C3's amended reading (rote.analysis.attribution, amendment 1, 7.5)."""

import math

import pytest
import torch

from rote.analysis import attribution as A
from rote.config import make_config
from rote.tasks import build_task


@pytest.fixture(scope="module")
def fda_data():
    return build_task(make_config("fda", "smoke"))


def test_logit_difference_is_target_minus_best_other():
    logits = torch.tensor([[[2.0, 5.0, 1.0], [0.0, -1.0, 3.0]]])  # one example, two answer tokens
    target = torch.tensor([[1, 0]])
    # token 0: 5 - 2 = 3; token 1: 0 - 3 = -3
    assert A.target_logit_diff(logits, target).tolist() == [pytest.approx(0.0)]
    assert A.target_logit_diff(logits[:, :1], target[:, :1]).tolist() == [pytest.approx(3.0)]
    # unlike log P it keeps growing when the answer is already certain
    sure, surer = torch.tensor([[[0.0, 20.0]]]), torch.tensor([[[0.0, 30.0]]])
    t = torch.tensor([[1]])
    assert A.target_logit_diff(surer, t) - A.target_logit_diff(sure, t) == pytest.approx(10.0)
    assert float(surer.log_softmax(-1)[0, 0, 1] - sure.log_softmax(-1)[0, 0, 1]) < 1e-6


def test_spearman():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0, 10.0])
    assert A.spearman(a, a ** 3) == pytest.approx(1.0)
    assert A.spearman(a, -a) == pytest.approx(-1.0)
    assert A.spearman(torch.tensor([1.0, 1.0, 2.0]), torch.tensor([1.0, 2.0, 3.0])) == pytest.approx(math.sqrt(3) / 2)
    assert math.isnan(A.spearman(a, torch.ones(5))) and math.isnan(A.spearman(a, a.clone().fill_(math.nan)))


def test_split_half_and_bootstrap_edges():
    x = torch.rand(40, 200, generator=torch.Generator().manual_seed(0))
    assert math.isnan(A.split_half_overlap(x[:1], 0.05))
    same = x[:1].repeat(10, 1)  # no noise: both halves give the same vector
    assert A.split_half_overlap(same, 0.05) == 1.0
    lo, hi = A.bootstrap_overlap(same, same, 0.05, n_boot=20)
    assert lo == hi == 1.0
    assert all(math.isnan(v) for v in A.bootstrap_overlap(x[:0], x, 0.05))
    st = A.overlap_statistics(x[:0], x, A.OverlapSettings(0.05, n_boot=5))
    assert math.isnan(st["jaccard"]) and math.isnan(st["split_half_C"]) and st["n_M"] == 40


def test_logit_difference_attribution_and_the_circuit_statistics(tiny_model, fda_data):
    ref, C, M = fda_data.train_clean, fda_data.test[:12], fda_data.train_noisy[:12]
    lp = A.example_importance(tiny_model, C, "true_label", ref, seed=3)
    ld = A.example_importance(tiny_model, C, "true_label", ref, seed=3, metric="logit_diff")
    assert lp.shape == ld.shape == (12, sum(A.n_components(tiny_model)))
    assert not torch.allclose(lp, ld)
    torch.testing.assert_close(lp.mean(0),
                               A.mean_importance(A.example_importance(tiny_model, C, "true_label", ref, seed=3)))
    with pytest.raises(ValueError):
        A.example_importance(tiny_model, C, "true_label", ref, metric="prob")
    # first order: patching a corrupted input equal to the clean one changes nothing
    zero = A.attribution_scores(tiny_model, C, "true_label", C, metric="logit_diff")
    assert float(zero.abs().max()) == 0.0
    sets = {"mem": (M, "label"), "gen": (C, "true_label")}
    out = A.circuits(tiny_model, C, M, ref, sets, A.CircuitSettings(fraction=0.05, max_examples=12, max_fit=100,
                                                                    n_controls=1, seed=3, n_splits=2, n_boot=10))
    assert set(out["by_metric"]) == {"logprob", "logit_diff"}
    torch.testing.assert_close(out["by_metric"]["logit_diff"]["scores"]["C"], ld.mean(0))
    torch.testing.assert_close(out["by_metric"]["logprob"]["scores"]["C"], lp.mean(0))
    torch.testing.assert_close(out["scores"]["C"], lp.mean(0))  # the default reading is log P
    st = out["by_metric"]["logit_diff"]["statistics"]
    assert st["jaccard"] == A.top_jaccard(out["by_metric"]["logit_diff"]["scores"]["C"],
                                          out["by_metric"]["logit_diff"]["scores"]["M"], 0.05)
    assert 0 <= st["split_half_C"] <= 1 and -1 <= st["spearman"] <= 1 and st["ci_low"] <= st["ci_high"]
    assert not tiny_model.has_hooks()


@pytest.mark.parametrize("name, value", [("fraction", 0), ("fraction", 1.5), ("n_splits", 0), ("n_boot", -1),
                                         ("level", 1.0), ("max_examples", 0), ("max_fit", 0), ("n_controls", -1)])
def test_circuit_settings_reject_out_of_range_values(name, value):
    good = {"fraction": 0.05, "max_examples": 10, "max_fit": 100, "n_controls": 1}
    with pytest.raises(ValueError, match=f"{name} must be"):
        A.CircuitSettings(**{**good, name: value})

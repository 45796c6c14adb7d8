"""Protocol 12.4 with planted selection results (nothing trains): per X1 width other than the profile's, seed 0's
noise-free twin at the profile's lr x {2, 1, 1/2, 1/4, 1/8} chooses the width's rate (the highest final gen, a tie
to the larger rate); every seed's runs at that width train with it; the plan is staged (a width waits for its
selection); the page says the rate, whether it is at the grid's edge, and which widths amendment 3 leaves
unresolved."""

import math

import pytest

from rote.build import timings
from rote import plan
from rote.chapters import x1
from rote.config import ConfigError
from test_x1 import _curve, _twin

RATES = (0.004, 0.002, 0.001, 0.0005, 0.00025)  # smoke's lr 2e-3 x 2 .. 1/8


def test_the_rate_with_the_highest_final_gen_is_chosen_a_tie_going_to_the_larger_rate():
    choice = plan.RateChoice(16, RATES, (0.5, 0.6, 0.9, 0.9, 0.2))
    assert choice.chosen == 0.001 and not choice.at_edge and not choice.waiting
    assert plan.RateChoice(16, RATES, (0.5, 0.6, 0.7, 0.8, 0.95)).chosen == 0.00025  # the smallest: an edge
    assert plan.RateChoice(16, RATES, (0.5, 0.6, 0.7, 0.8, 0.95)).at_edge
    assert plan.RateChoice(16, RATES, (0.99, 0.99, 0.99, 0.99, 0.99)).chosen == 0.004  # all tie: the largest
    assert plan.RateChoice(16, RATES, (0.3, math.nan, 0.2, 0.1, 0.0)).chosen == 0.004  # a missing gen never wins
    assert plan.RateChoice(16, RATES, (math.nan,) * 5).chosen is None  # none measured: unresolved
    waiting = plan.RateChoice(16, RATES, (0.99, None, 0.5, 0.5, 0.5))
    assert waiting.waiting and waiting.chosen is None and not waiting.at_edge
    with pytest.raises(ValueError, match="one final gen per rate"):
        plan.RateChoice(16, RATES, (0.5,))
    with pytest.raises(ValueError, match="decreasing"):
        plan.RateChoice(16, tuple(reversed(RATES)), (0.5,) * 5)


def test_the_selection_is_seed_0s_twin_at_each_rate_and_refuses_a_bad_grid():
    selection = plan.x1_selection("smoke", widths=[16, 32, 64])
    assert sorted(selection) == [16, 64]  # 32 is smoke's own width: it keeps the profile's rate
    assert [c.train.lr for c in selection[64]] == list(RATES)
    assert all(c.data.noise_ratio == 0.0 and c.seeds == {"data_seed": 0, "noise_seed": 0, "model_seed": 0}
               for c in selection[64])
    with pytest.raises(ConfigError, match="not divisible by n_heads"):  # before anything trains
        plan.x1_selection("smoke", widths=[15, 32])


def _planted(gens_by_width: dict[int, tuple], seeds=(0, 1), widths=(16, 32, 64), twin_gen=None):
    """A study whose selection twins end at ``gens_by_width[w]`` (one per rate); each width's runs at the chosen
    rate: noisy runs with a cost of 0.05, twins at gen 1.0 (or ``twin_gen[w]``)."""
    g = x1.grid("smoke", seeds=list(seeds), widths=list(widths))
    metrics = {c.key: _twin(gens_by_width[c.model.d_model][RATES.index(c.train.lr)]) for c in g.selection_configs
               if c.model.d_model in gens_by_width}
    g = x1.resolved(g, metrics)
    for u in g.width_units + g.ratio_units:
        w = u.noisy.model.d_model
        metrics[u.noisy.key] = _curve(0.95, 0.97)
        metrics.setdefault(u.clean.key, _twin((twin_gen or {}).get(w, 1.0)))
    return g, x1.study(g, metrics, timings)


def test_every_seeds_runs_at_a_width_train_at_the_chosen_rate_and_the_page_says_it():
    g, s = _planted({16: (0.5, 0.6, 0.7, 0.99, 0.2), 64: (0.99, 0.9, 0.8, 0.7, 0.6)})
    lrs = {(u.noisy.model.d_model, u.seed): (u.noisy.train.lr, u.clean.train.lr) for u in g.width_units}
    assert lrs == {(16, 0): (0.0005, 0.0005), (16, 1): (0.0005, 0.0005), (32, 0): (0.002, 0.002),
                   (32, 1): (0.002, 0.002), (64, 0): (0.004, 0.004), (64, 1): (0.004, 0.004)}
    assert s.grid.rates[16].chosen == 0.0005 and s.grid.rates[64].at_edge
    text = s.rates_text()
    assert "width 32 keeps the profile's lr 0.002" in text
    line16 = next(line for line in text.splitlines() if line.startswith("- **width 16**"))
    assert "lr 0.0005 (0.25 x the profile's)" in line16 and "edge" not in line16
    line64 = next(line for line in text.splitlines() if line.startswith("- **width 64**"))
    assert "lr 0.004 (2 x the profile's)" in line64 and "at the edge of the grid" in line64
    (rec,) = s.records()
    assert {c.key for c in g.selection_configs} <= set(rec.run_keys)
    assert rec.verdict_registered == rec.verdict_amended == "holds"
    assert plan.x1_stage_notes("smoke", widths=[16, 32, 64], final_gen=lambda c: (
        {16: (0.5, 0.6, 0.7, 0.99, 0.2), 64: (0.99, 0.9, 0.8, 0.7, 0.6)}[c.model.d_model][RATES.index(c.train.lr)])) \
        == ["X1 width 16: lr 0.0005 chosen (12.4)", "X1 width 64: lr 0.004 chosen, at the edge of the grid (12.4)"]


def test_a_width_waiting_for_its_selection_is_not_trained_and_unresolved():
    g, s = _planted({16: (0.5, 0.6, 0.7, 0.99, 0.2)})  # width 64's selection is not trained
    assert g.waiting == [64] and not any(u.noisy.model.d_model == 64 for u in g.width_units)
    assert "- **width 64**: waits for its learning-rate selection (5 of 5 runs" in s.rates_text()
    (rec,) = s.records()
    assert rec.verdict_registered == rec.verdict_amended == "unresolved"
    assert {c.model.d_model for c in s.missing} == {64}


def test_a_width_whose_twin_did_not_train_is_marked_unresolved_on_the_page():
    g, s = _planted({16: (0.5, 0.6, 0.7, 0.99, 0.2), 64: (0.07,) * 5}, twin_gen={64: 0.07})
    assert g.rates[64].chosen == 0.004  # every rate failed alike: a tie, to the larger rate
    text = s.rates_text()
    assert "- **width 64, seed 0**: the noise-free twin at width 64 did not train: its final gen is 0.070" in text
    assert "- **width 64, seed 1**" in text and "width 16, seed" not in text
    (rec,) = s.records()
    assert rec.verdict_amended == "unresolved" and rec.verdict_registered == "holds"
    assert "In the amended reading (protocol 12) X1 is **unresolved**" in s.verdict_sentence(rec)

"""FDA's noise kinds are declared once (rote/noise.py, issue 45): a kind planted in the table by a test, with no
other file edited, draws the labels, passes the configuration's check and shares the noise-free twin, is a
condition of the plan and of every claim that does not opt in to fewer, can be opted in to by a spec, and is a
valid value on the parameter reference page; an unknown kind is an error everywhere."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rote import claims, noise, plan
from rote.build import reference
from rote.config import ConfigError, FDAConfig, make_config
from rote.spec import ClaimSpec
from rote.specs import register, unregister
from rote.tasks import build_task, fda

PLANTED = "off_by_one"


def _off_by_one(answers: noise.Answers, rng: np.random.Generator) -> np.ndarray:
    """The next sum (the lowest after the highest): a wrong label that draws nothing."""
    return answers.digits(np.where(answers.sums < answers.high, answers.sums + 1, answers.low))


@pytest.fixture
def planted(monkeypatch):
    """The kind ``off_by_one`` in the table (removed again afterwards)."""
    kind = noise.NoiseKind(PLANTED, _off_by_one, primary=False, description="the next sum")
    monkeypatch.setitem(noise.NOISE_KINDS, PLANTED, kind)
    return kind


def test_the_table_lists_the_protocols_kinds_primary_first():
    assert noise.kind_names() == ("random", "digit") and noise.primary_kind() == "random"
    assert plan.task_conditions("fda") == ("random", "digit") and plan.task_conditions("thr") == ("-",)
    assert noise.kinds_text() == "'random' or 'digit'"


def test_a_planted_kind_draws_the_labels(planted):
    data = build_task(make_config("fda", "smoke", noise_kind=PLANTED, noise_ratio=0.2))
    noisy = data.train_noisy
    assert len(noisy) == round(0.2 * len(data.train))
    given, true = (fda.digits_to_int(t, "msb") for t in (noisy.label, noisy.true_label))
    assert torch.equal(given, true + 1)


def test_a_planted_kind_passes_the_configuration_and_shares_the_twin(planted):
    assert FDAConfig(noise_kind=PLANTED).noise_kind == PLANTED
    assert FDAConfig(noise_kind=PLANTED, noise_ratio=0.0).noise_kind == "random"
    twin = make_config("fda", "smoke", noise_kind=PLANTED, noise_ratio=0.0)
    assert twin.key == make_config("fda", "smoke", noise_ratio=0.0).key
    with pytest.raises(ConfigError, match="noise_kind must be 'random', 'digit' or 'off_by_one', got 'nope'"):
        FDAConfig(noise_kind="nope")


def test_a_planted_kind_is_a_condition_of_the_plan_and_of_the_claims(planted):
    assert plan.task_conditions("fda") == ("random", "digit", PLANTED)
    units = plan.units("smoke", ["fda"], [0])
    assert [u.condition for u in units] == ["random", "digit", PLANTED]
    assert units[2].noisy.data.noise_kind == PLANTED and units[2].clean.key == units[0].clean.key
    assert PLANTED in {c.data.noise_kind for c in plan.plan("smoke", [0], tasks=["fda"])}
    assert claims.claim_conditions("C1", "fda") == ("random", "digit", PLANTED)  # no spec opts in to fewer
    assert claims.claim_conditions("X1", "fda") == ("random",)  # X1's spec opts in to random only


def test_a_spec_opts_in_to_a_planted_kind(planted):
    spec = register(ClaimSpec(id="P8", title="A planted claim", tasks=("fda",), notebook="98_planted", runs=("noisy",),
                              parts=("effect",), thresholds={"t": 0.5}, conditions=(PLANTED,)))
    try:
        assert claims.claim_conditions("P8", "fda") == (PLANTED,)
        assert [(p.condition, p.status) for p in claims.expected("smoke") if p.claim == "P8"] == [(PLANTED, "not run")]
    finally:
        unregister(spec.id)


def test_a_planted_kind_is_a_valid_value_on_the_reference_page(planted):
    ranges, together = reference.declared_ranges(FDAConfig)
    assert ranges["noise_kind"] == [f"'random' (a different sum, uniform over the possible sums), 'digit' (one answer "
                                    f"digit changed) or '{PLANTED}' (the next sum)"]
    assert not any("kind" in t for t in together)
    assert reference._choices(ranges["noise_kind"][0]) == ["random", "digit", PLANTED]


def test_an_unknown_kind_is_an_error_everywhere():
    with pytest.raises(ValueError, match="unknown noise kind 'nope'; choose one of 'random' or 'digit'"):
        fda.noisy_sums(np.array([3000]), "nope", "msb", np.random.default_rng(0))
    with pytest.raises(ConfigError, match="noise_kind must be 'random' or 'digit', got 'nope'"):
        make_config("fda", "smoke", noise_kind="nope")
    with pytest.raises(ConfigError, match="unknown condition 'nope' for fda"):
        plan.units("smoke", ["fda"], [0], conditions={"fda": ["nope"]})
    with pytest.raises(ValueError, match=r"conditions must be noise conditions of its tasks \(random, digit\)"):
        ClaimSpec(id="P8", title="t", tasks=("fda",), notebook="98_planted", runs=("noisy",), parts=("effect",),
                  thresholds={"t": 0.5}, conditions=("nope",))


@pytest.mark.parametrize("table, problem", [
    ({}, "exactly one primary kind, has []"),
    ({"a": ("a", True), "b": ("b", True)}, "exactly one primary kind, has ['a', 'b']"),
])
def test_the_table_needs_exactly_one_primary_kind(monkeypatch, table, problem):
    kinds = {name: noise.NoiseKind(n, noise.other_sum, primary=p, description="d") for name, (n, p) in table.items()}
    monkeypatch.setattr(noise, "NOISE_KINDS", kinds)
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        noise.kind_names()


@pytest.mark.parametrize("changes, problem", [
    (dict(name="Two words"), "lower-case word"), (dict(name="-"), "lower-case word"),
    (dict(draw="other_sum"), "draw must be a function"), (dict(primary=1), "primary must be True or False"),
    (dict(description=" "), "description is missing"),
])
def test_a_bad_kind_fails_naming_its_field(changes, problem):
    fields = dict(name="fine", draw=noise.other_sum, primary=False, description="d")
    with pytest.raises(ValueError, match=problem):
        noise.NoiseKind(**{**fields, **changes})

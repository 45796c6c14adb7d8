"""Every declared chapter parameter's range, tried at its edges (issue 45 part 3): the declaration's edge
values (the lowest valid value and the one just outside, the upper end where there is one, ...) are accepted
or refused as declared, by the chapter's parameters and through ``-p`` text; each ``at_most`` bound is
tried at the bound and one past it; and the notebook rebuilds its parameters from its own namespace."""

import json
import math

import pytest

from rote.build import driver
from rote.chapters.params import ChapterParams, chapter_params, param, parse_seeds, whole
from rote.config import ConfigError

CHAPTERS = list(driver.chapters())
DECLARED = [(name, d) for name in CHAPTERS for d in chapter_params(name).declared().values()]
EDGES = [(name, d.name, value, valid) for name, d in DECLARED for value, valid in d.rule.edges]


def test_every_declared_parameter_has_edges_valid_and_not():
    for name, d in DECLARED:
        valid = {ok for _, ok in d.rule.edges}
        assert valid == {True, False}, f"{name}.{d.name}: edges {d.rule.edges}"


def test_every_range_says_what_the_analysis_needs():
    """A count or size with a lower end says why the chapter needs it (a seed needs no reason)."""
    silent = [f"{name}.{d.name}" for name, d in DECLARED
              if d.type == "int" and not d.name.endswith("seed") and not d.needs]
    assert not silent, silent


def _bounded(name: str, field: str, value) -> dict:
    """The fields bounded by ``field`` (``at_most``), lowered to a whole ``value`` where they exceed it."""
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return {}
    return {d.name: value for d in chapter_params(name).declared().values() if d.at_most == field and d.default > value}


def _params(name: str, field: str, value):
    if field == "profile":
        return chapter_params(name)(profile=value)
    return chapter_params(name)(**{"profile": "smoke", field: value, **_bounded(name, field, value)})


@pytest.mark.parametrize("name, field, value, valid", EDGES,
                         ids=[f"{n}-{f}-{v!r}-{'ok' if ok else 'no'}" for n, f, v, ok in EDGES])
def test_an_edge_is_accepted_or_refused_as_declared(name, field, value, valid):
    if valid:
        assert getattr(_params(name, field, value), field) == value
    else:
        with pytest.raises(ConfigError, match=field):
            _params(name, field, value)


def _text(value) -> str:
    """``value`` as written after ``-p NAME`` (JSON; a float exactly, a string as itself)."""
    return value if isinstance(value, str) else repr(value) if isinstance(value, float) else json.dumps(value)


# profile and settings are the build's (--profile, --seeds, the folders), never given with -p
TEXT_EDGES = [e for e in EDGES if e[1] not in ("profile", "settings") and not (isinstance(e[2], float) and not math.isfinite(e[2]))]


@pytest.mark.parametrize("name, field, value, valid", TEXT_EDGES,
                         ids=[f"{n}-{f}-{v!r}-{'ok' if ok else 'no'}" for n, f, v, ok in TEXT_EDGES])
def test_an_edge_given_with_p_is_read_and_judged_alike(name, field, value, valid):
    given = {field: _text(value), **{k: _text(v) for k, v in _bounded(name, field, value).items()}}
    if valid:
        assert driver.resolve_parameters(name, "smoke", given)[field] == value
    else:
        with pytest.raises(ConfigError, match=field):
            driver.resolve_parameters(name, "smoke", given)


BOUNDS = [(name, d.name, d.at_most) for name, d in DECLARED if d.at_most]


@pytest.mark.parametrize("name, field, bound", BOUNDS)
def test_a_bound_across_fields_is_tried_at_the_bound_and_past_it(name, field, bound):
    limit = chapter_params(name).defaults()[bound]
    assert getattr(_params(name, field, limit), field) == limit
    with pytest.raises(ConfigError, match=f"{field} must be a whole number in \\[1, {bound}={limit}\\]"):
        _params(name, field, limit + 1)


def test_the_bounds_are_declared():
    assert BOUNDS == [("outlier_heuristics", "top_k", "grid_size"), ("outlier_heuristics", "n_null", "n_clean")]


def test_a_planted_parameter_gets_its_parsing_check_and_edges_from_its_declaration():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Planted(ChapterParams):
        n_draws: int = param(4, whole(2), "a spread needs two draws")

    assert Planted.parse("n_draws", "2") == 2
    with pytest.raises(ConfigError, match=r"n_draws must be a whole number >= 2, got 1 \(a spread needs two draws\)"):
        Planted.parse("n_draws", "1")
    assert Planted.declared()["n_draws"].valid == "a whole number >= 2 (a spread needs two draws)"
    edges = Planted.declared()["n_draws"].rule.edges
    assert (2, True) in edges and (1, False) in edges


def test_from_namespace_rebuilds_the_parameters_from_a_notebook_namespace():
    cls = chapter_params("interventions")
    namespace = {**cls.defaults(), "profile": "smoke", "n_boot": 7, "build": object(), "os": math}
    params = cls.from_namespace(namespace)
    assert params == cls(profile="smoke", n_boot=7)
    with pytest.raises(ConfigError, match="n_boot"):
        cls.from_namespace({**namespace, "n_boot": 0})


def test_seeds_text():
    assert parse_seeds("1") == [1] and parse_seeds("0,2") == [0, 2] and parse_seeds("[0, 2]") == [0, 2]
    with pytest.raises(ConfigError, match="seeds must be whole numbers"):
        parse_seeds("a,b")

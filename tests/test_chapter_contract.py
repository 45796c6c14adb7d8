"""Every claim's chapter module satisfies the chapter contract (rote/chapters/contract.py, issue 45): it is a
ChapterModule and follows exactly one of the two flows, with the protocol's parameters and return types; and a
module that departs from the contract is told where."""

from __future__ import annotations

import importlib
import types

import pytest

from rote import chapters
from rote.chapters import c1, contract, x1
from rote.chapters.params import ChapterParams, chapter_params
from rote.specs import specs

FLOWS = (contract.ClaimChapterModule, contract.GridChapterModule)


@pytest.mark.parametrize("spec", specs(), ids=lambda s: s.module)
def test_every_chapter_module_satisfies_the_contract(spec):
    module = importlib.import_module(f"rote.chapters.{spec.module}")
    assert isinstance(module, contract.ChapterModule) and not contract.problems(module, contract.ChapterModule)
    flows = [flow for flow in FLOWS if isinstance(module, flow)]
    assert len(flows) == 1, f"{spec.module} follows {[f.__name__ for f in flows]}, not exactly one flow"
    assert contract.problems(module, flows[0]) == []
    assert module.SPEC is spec and issubclass(module.Params, ChapterParams)
    assert chapter_params(spec.chapter) is module.Params


def test_the_flows_are_the_paper_claims_and_x1():
    assert [s.id for s in specs() if isinstance(importlib.import_module(f"rote.chapters.{s.module}"),
                                                contract.ClaimChapterModule)] == ["C1", "C2", "C3", "C4", "C5"]
    assert isinstance(x1, contract.GridChapterModule) and not isinstance(x1, contract.ClaimChapterModule)


def _like_c1(**changes) -> types.ModuleType:
    module = types.ModuleType("rote.chapters.planted")
    for name in contract._members(contract.ClaimChapterModule):
        setattr(module, name, getattr(c1, name))
    for name, value in changes.items():
        if value is None:
            delattr(module, name)
        else:
            setattr(module, name, value)
    return module


def _results_by_name(unit_build: chapters.Build, result: chapters.ClaimResult) -> list[dict]:
    return []


def _load_asking_more(profile: str, tasks, seeds, overrides, seed: int) -> chapters.Build:
    return chapters.Build(profile, [], {})


def _load_renamed(profile: str, task_list, seeds, overrides) -> chapters.Build:
    return chapters.Build(profile, [], {})


def _evaluate_returning_a_dict(build: chapters.Build, sections) -> dict:
    return {}


def _results_asking_more(build: chapters.Build, result: chapters.ClaimResult, figure: str) -> list[dict]:
    return []


def test_a_copy_of_c1_satisfies_the_contract_and_a_free_name_may_differ():
    assert contract.problems(_like_c1(), contract.ClaimChapterModule) == []
    assert contract.problems(_like_c1(results=_results_by_name), contract.ClaimChapterModule) == []
    assert contract.problems(_like_c1(load=_load_asking_more), contract.ClaimChapterModule) == []  # *more


@pytest.mark.parametrize("changes, problem", [
    (dict(results=None), "results: missing"),
    (dict(T=None), "T: missing"),
    (dict(load=_load_renamed), "load: takes (profile, task_list, seeds, overrides), not (profile, tasks, seeds, "
                               "overrides, ...)"),
    (dict(evaluate=_evaluate_returning_a_dict),
     "evaluate: returns <class 'dict'>, not <class 'rote.chapters.ClaimResult'>"),
    (dict(results=_results_asking_more), "results: takes (build, result, figure), not (build, result)"),
])
def test_a_module_that_departs_from_the_contract_is_told_where(changes, problem):
    module = _like_c1(**changes)
    assert contract.problems(module, contract.ClaimChapterModule) == [problem]
    missing = any(value is None for value in changes.values())
    assert isinstance(module, contract.ClaimChapterModule) is not missing

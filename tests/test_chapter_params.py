"""Every chapter's parameters are declared (a frozen dataclass whose defaults are the notebook's
``parameters`` cell) and checked before any work: a bad value is one ConfigError line that names it,
from ``driver.resolve_parameters`` and from the CLI, before anything trains or executes."""

import ast
import dataclasses
import os
import subprocess
import sys

import nbformat
import pytest

from rote.build import driver
from rote.chapters.params import CHAPTER_PARAMS, chapter_params
from rote.config import ConfigError


def cell_values(name: str) -> dict[str, object]:
    """Name -> value of each assignment of the chapter's ``parameters`` cell, in the cell's order. The two
    values that are not literals read as their fallbacks: ``profile = os.environ.get("ROTE_PROFILE", "quick")``
    as "quick", ``settings = environment_parameter(os.environ)`` (the book's seeds and folders) as {}."""
    nb = nbformat.read(driver.chapter_path(name), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    values = {}
    for node in ast.parse(cell.source).body:
        assert isinstance(node, ast.Assign) and len(node.targets) == 1, ast.unparse(node)
        target = node.targets[0].id
        if target == "profile":
            call = node.value
            assert ast.unparse(call.func) == "os.environ.get" and ast.literal_eval(call.args[0]) == "ROTE_PROFILE"
            values[target] = ast.literal_eval(call.args[1])
        elif target == "settings":
            assert ast.unparse(node.value) == "environment_parameter(os.environ)"
            values[target] = {}
        else:
            values[target] = ast.literal_eval(node.value)
    return values


CHAPTERS = list(driver.chapters())
PARAMETERS = [(name, param) for name in CHAPTERS for param in cell_values(name)]

# One bad value per parameter, as given with -p (a chapter's own bad value first).
BAD = {"tasks": "[]", "seeds": "-1", "overrides": "[1, 2]", "seed": "-1", "n_show": "1",
       "sweep_ratios": "[0, 1.5]", "max_probe_train": "0", "probe_seed": "-1", "extra_positions": '{"thr": [3]}',
       "mask_seed": "-1", "erasure_rank": "0", "sweep_ranks": "4,2", "n_controls": "0", "n_matched": "0",
       "n_splits": "0", "n_boot": "0", "max_examples": "0", "max_fit": "0", "check_patching": "-1", "n_samples": "0",
       "n_keys": "0", "max_lookup": "0", "grid_size": "-5", "grid_seed": "-1", "top_k": "0", "max_shift": "0",
       "z_outlier": "0", "n_clean": "0", "n_null": "0", "null_seed": "-1", "n_dose": "0", "n_heatmaps": "0",
       "widths": "16,16", "noise_ratios": "1.5", "train_grid": "maybe", "settings": "{\"seeds\": 0}"}
BAD_IN = {("outlier_heuristics", "tasks"): "thr", ("benign_memorization", "tasks"): "thr"}


def test_every_chapter_has_a_parameter_dataclass():
    assert set(CHAPTERS) == set(CHAPTER_PARAMS)
    for name in CHAPTERS:
        cls = chapter_params(name)
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, name
    assert chapter_params("outlier_heuristics").__module__ == "rote.chapters.c5"
    with pytest.raises(ConfigError, match="nope"):
        chapter_params("nope")


@pytest.mark.parametrize("name", CHAPTERS)
def test_dataclass_defaults_are_the_notebook_cell(name):
    cell, declared = cell_values(name), chapter_params(name).defaults()
    assert list(declared.items()) == list(cell.items())  # names, order and values
    assert [type(v) for v in declared.values()] == [type(v) for v in cell.values()]  # 2.0 stays a float
    assert driver.notebook_parameters(driver.chapter_path(name)).keys() == declared.keys()


@pytest.mark.parametrize("name", CHAPTERS)
def test_defaults_resolve_to_the_profile_alone(name):
    assert driver.resolve_parameters(name, "smoke", {}) == {"profile": "smoke"}


def test_every_parameter_has_a_bad_value():
    assert {p for _, p in PARAMETERS} - {"profile", "settings"} <= set(BAD)


@pytest.mark.parametrize("name, param", PARAMETERS, ids=[f"{n}-{p}" for n, p in PARAMETERS])
def test_a_bad_value_is_refused_naming_the_parameter(name, param):
    with pytest.raises(ConfigError) as err:
        if param == "profile":  # given with --profile, not -p
            driver.resolve_parameters(name, "nightly", {})
        else:
            driver.resolve_parameters(name, "smoke", {param: BAD_IN.get((name, param), BAD[param])})
    message = str(err.value)
    assert param in message and "\n" not in message, message


@pytest.mark.parametrize("name, params, message", [
    ("outlier_heuristics", {"top_k": "5000"}, "top_k must be a whole number in [1, grid_size=4096], got 5000"),
    ("outlier_heuristics", {"n_null": "600"}, "n_null must be a whole number in [1, n_clean=500], got 600"),
    ("outlier_heuristics", {"grid_size": "81000001"}, "grid_size must be a whole number in [1, 81000000]"),
    ("outlier_heuristics", {"top_k": "2.5"}, "top_k must be a whole number >= 1, got 2.5"),
    ("outlier_heuristics", {"top_k": "true"}, "top_k must be a whole number >= 1, got True"),
    ("outlier_heuristics", {"z_outlier": "abc"}, "z_outlier must be a number > 0, got 'abc'"),
    ("learning_dynamics", {"seeds": "0,0"}, "seeds must be None or a non-empty list of distinct whole numbers"),
    ("learning_dynamics", {"tasks": "fda,fda"}, "tasks must be a non-empty list of distinct tasks from fda, thr"),
    ("learning_dynamics", {"sweep_ratios": "0.2"}, "sweep_ratios must be None or a non-empty list of noise ratios"),
    ("intermediate_results", {"extra_positions": '{"add": [1]}'}, "extra_positions must be a dict of task"),
    ("intermediate_results", {"extra_positions": '{"fda": [10]}'}, "(fda: 0 .. 9, thr: 0 .. 2)"),
    ("interventions", {"sweep_ranks": "[2, 2]"}, "sweep_ranks must be a non-empty, strictly increasing list"),
    ("tasks", {"seed": "1.5"}, "seed must be a whole number >= 0, got 1.5"),
])
def test_what_each_refusal_says(name, params, message):
    with pytest.raises(ConfigError) as err:
        driver.resolve_parameters(name, "smoke", params)
    assert message in str(err.value)


def test_valid_values_pass_through_as_given():
    assert driver.resolve_parameters("outlier_heuristics", "smoke", {"z_outlier": "3", "top_k": "4096"}) == \
        {"profile": "smoke", "z_outlier": 3, "top_k": 4096}
    assert driver.resolve_parameters("interventions", "smoke", {"sweep_ranks": "2,4", "check_patching": "0"}) == \
        {"profile": "smoke", "sweep_ranks": [2, 4], "check_patching": 0}
    assert driver.resolve_parameters("intermediate_results", "smoke", {"extra_positions": '{"fda": [9]}'}) == \
        {"profile": "smoke", "extra_positions": {"fda": [9]}}


def _cli(tmp_path, *args):
    env = {**os.environ, "ROTE_RUNS": str(tmp_path / "runs"), "ROTE_RESULTS": str(tmp_path / "results")}
    result = subprocess.run([sys.executable, "-m", "rote", *args], capture_output=True, text=True, env=env)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()  # nothing trained or written
    return result


def test_cli_refuses_a_bad_chapter_parameter_before_any_work(tmp_path):
    result = _cli(tmp_path, "run", "outlier_heuristics", "--profile", "smoke", "-p", "top_k", "0")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == ("error: top_k must be a whole number >= 1, got 0 (a feature must cover at least "
                                     "one top input, drawn from the grid)")


def test_book_refuses_a_bad_chapter_parameter_before_training(tmp_path):
    result = _cli(tmp_path, "book", "--chapter", "outlier_heuristics", "--profile", "smoke", "--seeds", "1",
                  "-p", "grid_size", "-5", "--no-render")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith("error: grid_size must be a whole number in [1, 81000000], got -5 (")


def test_distributed_encoding_refuses_a_run_without_noise_before_any_work(tmp_path):
    """Issue 45: C4 with noise_ratio 0 ran on noise-free runs (nothing memorized, the noisy run its own twin) and
    wrote three records, the one degenerate value of a new user's tries that was not refused; its overrides'
    declaration refuses it, given either way, with exit 2."""
    for given in (["-p", "noise_ratio", "0"], ["-p", "overrides", '{"noise_ratio": 0.0}']):
        result = _cli(tmp_path, "run", "distributed_encoding", "--profile", "smoke", *given)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().startswith("error: overrides must be a dict (a JSON object) whose noise_ratio, "
                                                "where given, is > 0, got {'noise_ratio': 0"), result.stderr
    assert driver.resolve_parameters("distributed_encoding", "smoke", {"noise_ratio": "0.2"})["overrides"] == \
        {"noise_ratio": 0.2}

"""The parameter reference page (rote.build.reference): generated from the declarations, so it cannot drift.
Every declared parameter is on it, its ranges are the declarations' words, and every example command
passes the checks the command line makes before any work (nothing runs)."""

import dataclasses
import re
import shlex
from dataclasses import dataclass

import pytest

from rote.build import driver, reference
from rote.chapters.params import CHAPTER_PARAMS, chapter_params
from rote.config import TASKS, ConfigError, FDAConfig, ModelConfig, THRConfig, TrainConfig, _check, param_names


@pytest.fixture(scope="module")
def page() -> str:
    return reference.parameters_page()


def _rows(text: str) -> list[list[str]]:
    """The cells of each table row (header and rule lines aside), an escaped \\| kept inside its cell."""
    rows = []
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith(("| parameter ", "|:--")):
            rows.append([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def _sections(page: str) -> tuple[str, str]:
    chapter_part, run_part = page.split("## Run parameters", 1)
    return chapter_part, run_part


def test_every_chapter_parameter_is_on_the_page_with_its_chapters(page):
    chapter_part, _ = _sections(page)
    rows = _rows(chapter_part)
    for chapter in CHAPTER_PARAMS:
        stem = driver.chapters()[chapter].stem
        for d in chapter_params(chapter).declared().values():
            mine = [r for r in rows if r[0] == f"`{d.name}` (`{d.type}`)" and f"<{stem}>`" in r[3]]
            assert len(mine) == 1, f"{chapter}.{d.name}: {len(mine)} rows"
            assert mine[0][1] == d.valid  # the declaration's own words, with what the analysis needs


def test_every_run_parameter_is_on_the_page(page):
    _, run_part = _sections(page)
    sections = dict(re.findall(r"### (.+?) \(`\w+`\)\n(.*?)(?=\n### |\Z)", run_part, flags=re.S))
    assert set(sections) == {"FDA data", "THR data", "Model", "Training"}
    for task in TASKS:
        shown = {_name(r) for title in (f"{task.upper()} data", "Model", "Training") for r in _rows(sections[title])}
        assert set(param_names(task)) <= shown, set(param_names(task)) - shown
    for title, cls in (("FDA data", FDAConfig), ("THR data", THRConfig), ("Model", ModelConfig),
                       ("Training", TrainConfig)):
        assert [r[0] for r in _rows(sections[title])] == [f"`{f.name}` (`{f.type}`)" for f in dataclasses.fields(cls)]


def _name(row) -> str:
    return re.match(r"`(\w+)`", row[0]).group(1)


def test_every_example_is_a_valid_command_that_sets_its_parameter(page):
    chapter_part, run_part = _sections(page)
    parts = [(chapter_part, None)] + [(text, re.search(r"Chapters that take these parameters: (.*)", text).group(1))
                                      for text in run_part.split("\n### ")[1:]]
    for part, takers in parts:
        for row in _rows(part):
            name, example = _name(row), row[-1].strip("`")
            assert example, f"{name}: no example"
            args = reference.check_example(example)  # raises on a bad value, as the command line would
            words = shlex.split(example)
            assert ["-p", name] == words[-3:-1] or (name == "profile" and "--profile" in words) or (
                name == "settings" and "--seeds" in words), example  # the build's settings: --seeds, $ROTE_*
            if args.command == "run":  # a chapter that takes the parameter
                assert f"<{driver.chapters()[args.chapter].stem}>`" in (takers or row[3]), example
            else:  # no chapter takes it (a seed): a run of its own
                assert "no chapter takes it" in row[1], example


def test_most_examples_change_the_default(page):
    """An example shows a value other than the default where one is valid: the default is the fallback."""
    chapter_part, _ = _sections(page)
    same = [r[0] for r in _rows(chapter_part) if r[-1].strip("`")
            and shlex.split(r[-1].strip("`"))[-1] == r[2].strip("`").strip('"')]
    assert len(same) <= 2, same


def test_check_example_refuses_what_the_command_line_refuses():
    with pytest.raises(ConfigError, match="top_k must be a whole number >= 1"):
        reference.check_example("python -m rote run outlier_heuristics -p top_k 0")
    with pytest.raises(ConfigError, match="out_degree must be in"):
        reference.check_example("python -m rote train --task thr -p out_degree 99")
    with pytest.raises(ConfigError):
        reference.check_example("python -m rote run nope -p top_k 1")
    assert reference.check_example("python -m rote run tasks -p seed 1").chapter == "tasks"


def test_ranges_are_read_from_the_configuration_checks():
    fda, fda_together = reference.declared_ranges(FDAConfig)
    assert fda["n_train"] == [">= 1"] and fda["noise_ratio"] == ["in [0, 1)"]
    assert fda["noise_kind"] == ["'random' (a different sum, uniform over the possible sums) or 'digit' (one answer "
                                 "digit changed)"] and "data_seed" not in fda
    assert fda_together == ["n_train + n_test <= 9000 * 9000 // 2"]
    thr, thr_together = reference.declared_ranges(THRConfig)
    assert thr["out_degree"] == ["in [1, n_relations]"] and thr["phi"] == ["> 0"]
    assert thr_together == ["round(phi * (n_entities * out_degree)) + n_test <= n_entities * out_degree ** 2"]
    model, _ = reference.declared_ranges(ModelConfig)
    assert model["d_model"] == [">= 1", "divisible by n_heads"] and model["n_heads"] == [">= 1"]
    train, _ = reference.declared_ranges(TrainConfig)
    assert train["warmup_steps"] == ["in [0, steps)"] and train["precision"] == ["'fp32', 'bf16' or 'auto'"]


@dataclass(frozen=True)
class _Planted:
    width: int = 8
    depth: int = 2

    def __post_init__(self):
        _check(self.width >= 4, f"width must be >= 4, got {self.width}")
        _check(self.depth <= self.width, f"the depth {self.depth} exceeds the width")


def test_a_new_check_shows_up_without_editing_the_page_code():
    ranges, together = reference.declared_ranges(_Planted)
    assert ranges == {"width": [">= 4"]} and together == ["depth <= width"]


def test_chapter_checks_across_fields():
    checks = dict(reference.chapter_checks())
    assert checks["outlier_heuristics"] == ["`top_k <= grid_size`", "`n_null <= n_clean`"]
    assert "divisible by the runs' n_heads" in checks["benign_memorization"][0]


def test_a_default_of_none_shows_what_it_stands_for_per_profile(page):
    from rote import plan

    chapter_part, _ = _sections(page)
    widths = next(r for r in _rows(chapter_part) if r[0].startswith("`widths`"))
    assert widths[2] == "`None: " + "; ".join(f"{p} {list(w)}" for p, w in plan.X1_WIDTHS.items()) + "`"
    ratios = next(r for r in _rows(chapter_part) if r[0].startswith("`noise_ratios`"))
    assert ratios[2] == f"`None: {list(plan.X1_NOISE_RATIOS)}`"  # alike on every profile: once
    seeds = [r for r in _rows(chapter_part) if r[0].startswith("`seeds`")]
    assert [r[2] for r in seeds] == ["`None`"]  # no per-profile value declared

"""The shape rules of ``rote/`` as tests (issue 45, part 4): no dataclass has more than 25 fields, no function
more than 60 lines, and the library's science (model, training, tasks, config, scoring, analysis) is its
largest part, by the code lines ``benchmarks/budget.py`` counts per part (it also prints each part's growth
since a revision, for an issue's note)."""

import pytest

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _budget():
    spec = importlib.util.spec_from_file_location("budget", ROOT / "benchmarks" / "budget.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any((d.func if isinstance(d, ast.Call) else d).__dict__.get("id") == "dataclass" for d in node.decorator_list)


def test_no_dataclass_has_more_than_25_fields():
    wide = []
    for path in (ROOT / "rote").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and _is_dataclass(node):
                n = sum(isinstance(b, ast.AnnAssign) for b in node.body)
                if n > 25:
                    wide.append(f"{path.relative_to(ROOT)}:{node.name} ({n} fields)")
    assert not wide, wide


def test_no_function_is_longer_than_60_lines():
    budget = _budget()
    long = [f"{p.relative_to(ROOT)}:{name} ({n})" for p in (ROOT / "rote").rglob("*.py")
            for name, n in budget.measure(p)[2]]
    assert not long, long


def test_the_budget_script_counts_code_lines_without_docstrings_or_comments(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('"""Doc\nstring."""\n\n# a comment\nx = 1  # trailing\n\n\ndef f():\n    """Doc."""\n    return (x +\n            1)\n')
    lines, code, long = _budget().measure(source)
    assert (lines, code, long) == (11, 4, [])


def test_the_librarys_science_is_its_largest_part():
    budget = _budget()
    parts = budget.by_part(budget.sources())
    assert budget.science_is_largest(parts), parts


def test_every_module_is_counted_in_a_part_and_a_new_one_is_refused_until_placed():
    budget = _budget()
    assert {budget.part(name) for name in budget.sources()} == {title for title, _ in budget.PARTS}
    assert budget.part("rote/analysis/lens.py") == "science" and budget.part("rote/build/cli.py") == "build tool"
    with pytest.raises(ValueError, match="in no part"):
        budget.part("rote/new_module.py")


def test_science_smaller_than_another_library_part_breaks_the_rule():
    budget = _budget()
    assert not budget.science_is_largest({"science": 10, "judging": 10, "chapters": 1, "orchestration": 1,
                                          "build tool": 0})
    assert budget.science_is_largest({"science": 11, "judging": 10, "chapters": 1, "orchestration": 1,
                                      "build tool": 50})

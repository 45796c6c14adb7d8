"""Issue 35's shape rules that hold today, as tests: no dataclass of ``rote/`` has more than 25 fields and no
function more than 60 lines, and ``rote/`` stays under the ratchet ``benchmarks/budget.py`` sets until the line
budget itself holds (the script reports it)."""

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


def test_rote_stays_under_the_ratchet_until_the_budget_holds():
    budget = _budget()
    lines, code = budget.totals()
    assert lines <= budget.CEILING_LINES and code <= budget.CEILING_CODE_LINES, (
        f"rote/ grew to {lines:,} lines, {code:,} code lines, above the ratchet of {budget.CEILING_LINES:,} and "
        f"{budget.CEILING_CODE_LINES:,} (benchmarks/budget.py): shrink it, or raise the ratchet saying why")

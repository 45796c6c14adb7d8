"""Every claim the same shape (issue 29): a claim's verdict module (rote.verdicts.c1 ... c5, x1) is
called only from its own chapter module's ``evaluate`` (rote/chapters/<claim>.py), however it was
imported, in the library and in the notebooks' code cells alike. The walk is a function of a file
tree, so that it is also tested on planted trees that break the rule."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from rote.specs import specs

ROOT = Path(__file__).resolve().parents[1]
CLAIM_MODULES = tuple(s.module for s in specs())  # every claim's verdict module


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _aliases(tree: ast.AST, module: str, is_package: bool) -> dict[str, str]:
    """Local name -> the dotted name it stands for, from every import in ``tree`` (function-local
    imports too; the last binding wins, which is enough for a module that binds a name once)."""
    names: dict[str, str] = {}
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for a in node.names:
                names[a.asname or a.name] = f"{base}.{a.name}"
    return names


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _claim_calls(tree: ast.AST, aliases: dict[str, str]) -> list[tuple[str, int, str | None]]:
    """(claim module, line, enclosing top-level function or None) of every call into a claim's verdict
    module."""
    found = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and function is None:
                inner = child.name
            if isinstance(child, ast.Call):
                parts = _dotted(child.func)
                if parts and parts[0] in aliases:
                    full = ".".join([aliases[parts[0]], *parts[1:]]).split(".")
                    if full[:2] == ["rote", "verdicts"] and len(full) > 3 and full[2] in CLAIM_MODULES:
                        found.append((full[2], child.lineno, inner))
            visit(child, inner)

    visit(tree, None)
    return found


def _sources(root: Path):
    """(label, module name, is package, syntax tree) of every module under root/rote and every
    notebook code cell under root/book (a notebook's cells are one module, magics dropped)."""
    for path in sorted((root / "rote").rglob("*.py")):
        yield str(path.relative_to(root)), _module_name(path, root), path.name == "__init__.py", \
            ast.parse(path.read_text())
    for path in sorted((root / "book").glob("*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        code = "\n".join("".join(line for line in "".join(c["source"]).splitlines(keepends=True)
                                 if not line.lstrip().startswith(("%", "!"))) for c in cells)
        yield str(path.relative_to(root)), "__notebook__", False, ast.parse(code)


def violations(root: Path) -> list[str]:
    out = []
    for label, module, is_package, tree in _sources(root):
        if module.startswith("rote.verdicts"):
            continue  # the verdict layer itself
        for claim, line, function in _claim_calls(tree, _aliases(tree, module, is_package)):
            if module != f"rote.chapters.{claim}" or function != "evaluate":
                out.append(f"{label}:{line}: calls rote.verdicts.{claim} from "
                           f"{function or 'module level'} (only rote/chapters/{claim}.py evaluate may)")
    return out


def _plant(tmp_path: Path, files: dict[str, str], cells: list[str] = ()) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "book").mkdir(exist_ok=True)
    nb = {"cells": [{"cell_type": "code", "source": c, "metadata": {}} for c in cells]}
    (tmp_path / "book" / "ch.ipynb").write_text(json.dumps(nb))
    return tmp_path


def test_claim_verdicts_are_called_only_by_their_chapters_evaluate():
    assert violations(ROOT) == []


def test_the_walk_finds_calls_however_imported(tmp_path):
    root = _plant(tmp_path, {
        "rote/__init__.py": "",
        "rote/chapters/__init__.py": "",
        "rote/chapters/c5.py": "from ..verdicts import c5 as judge\n\ndef evaluate(m):\n    return judge.checks(m)\n"
                               "\ndef text(m):\n    return judge.checks(m)\n",
        "rote/chapters/c2.py": "from .. import verdicts\n\ndef evaluate(m):\n    return verdicts.c2.checks(m)\n",
        "rote/report.py": "import rote.verdicts.c3\nfrom rote.verdicts.c4 import checks as c4_checks\n"
                          "x = rote.verdicts.c3.checks(1)\n\ndef f():\n    return c4_checks(2)\n",
    }, cells=["from rote import verdicts\n", "%matplotlib inline\nevaluations = verdicts.c5.checks({})\n"])
    found = violations(root)
    assert len(found) == 4, found
    assert any(v.startswith("rote/chapters/c5.py:7") and "from text" in v for v in found)
    assert any(v.startswith("rote/report.py:3") and "module level" in v for v in found)
    assert any(v.startswith("rote/report.py:6") and "rote.verdicts.c4" in v for v in found)
    assert any(v.startswith("book/ch.ipynb") and "rote.verdicts.c5" in v for v in found)
    assert not any("c2.py" in v for v in found)  # its own evaluate


@pytest.mark.parametrize("module", ["rote.chapters.c1", "rote.chapters.x1", "rote.verdicts.core"])
def test_a_claims_verdict_module_is_not_called_from_another_claims_evaluate(tmp_path, module):
    path = "rote/" + module.split(".", 1)[1].replace(".", "/") + ".py"
    root = _plant(tmp_path, {"rote/__init__.py": "", "rote/chapters/__init__.py": "",
                             path: "from rote.verdicts import c2\n\ndef evaluate(m):\n    return c2.checks(m)\n"})
    assert len(violations(root)) == (0 if module.startswith("rote.verdicts") else 1)

"""The layout of rote.analysis: no two analysis modules import each other (however indirectly), no
module of rote/ passes on another module's names (a re-export), and every analysis module imports alone.

Each check is a function over a source tree, run on the real package and on planted trees that break it.
"""

import ast
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "rote.analysis"
INIT = "__init__"


# -- the checks -----------------------------------------------------------------------------------
def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_module) -> list[str]:
    """The dotted modules an import statement of module ``importer`` loads: for ``from m import
    name``, ``m.name`` where that is a module (``is_module``), else ``m``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = importer.split(".")[:-1]  # the package the importer is in
        base = parts[:len(parts) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [f"{target}.{alias.name}" if is_module(f"{target}.{alias.name}") else target for alias in node.names]


def import_graph(package_dir: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports, from every import statement of its file: at
    the top, under ``if TYPE_CHECKING:``, inside functions; relative and absolute. ``__init__`` is the
    package itself (what ``from rote.analysis import name`` loads when ``name`` is no module)."""
    modules = {p.stem for p in package_dir.glob("*.py")}

    def is_module(dotted: str) -> bool:
        return dotted.startswith(package + ".") and dotted[len(package) + 1:] in modules - {INIT}

    graph: dict[str, set[str]] = {}
    for name in sorted(modules):
        importer = f"{package}.{name}"  # __init__ too: its relative imports resolve against the package
        edges = set()
        for node in ast.walk(ast.parse((package_dir / f"{name}.py").read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for dotted in _targets(node, importer, is_module):
                    if dotted == package:
                        edges.add(INIT)
                    elif dotted.startswith(package + "."):
                        head = dotted[len(package) + 1:].split(".")[0]
                        edges.add(head if head in modules else INIT)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]`` (a module importing itself counts), or None."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once explored

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [node, nxt] if nxt in path else [node, nxt]
            if nxt not in state:
                found = visit(nxt, path + [node])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [])
            if found:
                return found
    return None


def _module_level_imports(tree: ast.Module):
    """Import statements that bind module attributes: at the top of the module, also under ``if``,
    ``try`` and ``with`` there (a function's or a class's imports bind local names, passed on to no one)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(node, field, []))
        elif isinstance(node, ast.ExceptHandler):
            todo.extend(node.body)


def _silences_f401(comment: str) -> bool:
    """``# noqa: F401`` (with any other codes), or a bare ``# noqa``, which silences F401 too."""
    text = comment.split("noqa", 1)[1] if "noqa" in comment else None
    if text is None:
        return False
    if not text.lstrip().startswith(":"):
        return True
    return "F401" in text


def reexports(tree_dir: Path) -> list[str]:
    """``path:line`` of every module-level import of a ``*.py`` under ``tree_dir`` whose lines carry a
    comment that silences F401 ("imported but unused"): an import kept only to pass names on."""
    found = []
    for path in sorted(tree_dir.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        for node in _module_level_imports(ast.parse(source)):
            for lineno in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                line = lines[lineno - 1]
                if "#" in line and _silences_f401(line[line.index("#"):]):
                    found.append(f"{path.relative_to(tree_dir)}:{lineno}")
    return found


def failing_alone(root: Path, package: str, modules: list[str], workers: int = 8) -> dict[str, str]:
    """Module -> the end of its error, for each module of ``package`` (under ``root``) that fails
    ``python -c "import <package>.<module>"`` in a fresh interpreter of its own."""
    path = [str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}

    def run(module: str) -> tuple[str, subprocess.CompletedProcess]:
        return module, subprocess.run([sys.executable, "-c", f"import {package}.{module}"], cwd=root, env=env,
                                      capture_output=True, text=True)

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(modules)))) as pool:
        results = list(pool.map(run, modules))
    return {m: r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
            for m, r in results if r.returncode != 0}


# -- on the real package --------------------------------------------------------------------------
ANALYSIS_MODULES = sorted(p.stem for p in (ROOT / "rote" / "analysis").glob("*.py") if p.stem != INIT)


def test_no_two_analysis_modules_import_each_other():
    graph = import_graph(ROOT / "rote" / "analysis")
    assert set(ANALYSIS_MODULES) <= set(graph)
    assert find_cycle(graph) is None, f"an import cycle among the analysis modules: {find_cycle(graph)}"


def test_the_c5_layers_import_downwards_only():
    graph = import_graph(ROOT / "rote" / "analysis")
    assert graph["units"] <= {INIT}  # the shared data types depend on no analysis
    for low in ("units", "outliers", "heuristics", "patching"):
        assert "neuron_patching" not in graph[low]
    assert {"patching", "units", "outliers"} <= graph["neuron_patching"]


def test_no_module_of_rote_reexports_names():
    assert reexports(ROOT / "rote") == []


def test_every_analysis_module_imports_alone():
    assert len(ANALYSIS_MODULES) > 10
    assert failing_alone(ROOT, PACKAGE, ANALYSIS_MODULES) == {}


# -- the checks catch what they are for (planted trees) -------------------------------------------
def _tree(base: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return base


@pytest.mark.parametrize("a_imports, b_imports", [
    ("from . import b\n", "from .a import x\n"),  # plain, relative
    ("import pkg.analysis.b\n", "from pkg.analysis import a\n"),  # absolute
    ("from ..analysis.b import y\n", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n"),
    ("def f():\n    from .b import y\n", "def g():\n    from . import a\n"),  # inside functions
], ids=["relative", "absolute", "type-checking", "function-local"])
def test_a_planted_cycle_is_found(tmp_path, a_imports, b_imports):
    package = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/analysis/__init__.py": "",
                               "pkg/analysis/a.py": a_imports + "x = 1\n", "pkg/analysis/b.py": b_imports + "y = 2\n",
                               "pkg/analysis/c.py": "from .a import x\nfrom .b import y\n"}) / "pkg" / "analysis"
    cycle = find_cycle(import_graph(package, "pkg.analysis"))
    assert cycle is not None and set(cycle) == {"a", "b"} and cycle[0] == cycle[-1]


def test_a_longer_cycle_and_a_clean_graph(tmp_path):
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None  # a diamond is no cycle
    package = _tree(tmp_path, {"pkg/analysis/__init__.py": "", "pkg/analysis/a.py": "from .b import y\n",
                               "pkg/analysis/b.py": "import math\nfrom ..other import z\n"}) / "pkg" / "analysis"
    graph = import_graph(package, "pkg.analysis")
    assert graph == {"__init__": set(), "a": {"b"}, "b": set()} and find_cycle(graph) is None


def test_a_planted_reexport_is_found(tmp_path):
    tree = _tree(tmp_path, {
        "rote/ok.py": "import math\n\n\ndef f():\n    import json  # noqa: F401  (only checks it is there)\n",
        "rote/one.py": "from .ok import math  # noqa: F401\n",
        "rote/sub/many.py": "from ..ok import (f,  # noqa: E501,F401\n                  math)\n",
        "rote/sub/bare.py": "from ..ok import f  # noqa\n",
        "rote/sub/guarded.py": "try:\n    import numpy  # noqa: F401\nexcept ImportError:\n    pass\n",
        "rote/sub/other_code.py": "import math  # noqa: E402\n",
    })
    assert reexports(tree / "rote") == ["one.py:1", "sub/bare.py:1", "sub/guarded.py:2", "sub/many.py:1"]


def test_a_module_that_imports_only_after_another_is_found(tmp_path):
    root = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/first.py": "VALUE = 1\n",
        "pkg/second.py": "import sys\nassert 'pkg.first' in sys.modules, 'needs pkg.first imported before'\n",
        "pkg/broken.py": "from .first import MISSING\n",
    })
    failed = failing_alone(root, "pkg", ["first", "second", "broken"], workers=2)
    assert set(failed) == {"second", "broken"}
    assert "needs pkg.first" in failed["second"] and "MISSING" in failed["broken"]

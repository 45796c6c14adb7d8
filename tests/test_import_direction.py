"""The direction of imports (../shared/replication/architecture.md): every module under ``rote/``, found
on disk, by package. The library (``rote``) never imports the book tool (``rote.build``); no module
takes part in an import circle; a library module imports only from its own layer or the layers above
it. Lazy imports (inside a function) count like module-level ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROTE = Path(__file__).resolve().parents[1] / "rote"
TOOL = "rote.build"
ENTRY_POINT = "rote.__main__"  # ``python -m rote``: delegates to the tool's command line; nothing imports it
# The library's layers, top first (architecture.md): a module imports from its own layer or one above.
# A module of a package takes its package's layer; a new top-level module has none until placed here.
LAYERS = [
    {"rote.fmt"},
    {"rote", "rote.config", "rote.noise"},
    {"rote.tasks"},
    {"rote.model"},
    {"rote.scoring", "rote.train", "rote.runs", "rote.stack"},
    {"rote.analysis", "rote.analysis_cache", "rote.plan", "rote.settings"},
    {"rote.spec", "rote.specs", "rote.claims", "rote.verdicts", "rote.report", "rote.display", "rote.stability"},
    {"rote.plots"},
    {"rote.chapters"},
]


def module_name(path: Path, root: Path = ROTE) -> str:
    """``rote/analysis/lens.py`` -> ``rote.analysis.lens``; a package's ``__init__.py`` -> the package."""
    parts = ["rote", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = ROTE) -> dict[str, Path]:
    """Every module under ``root`` (the ``rote`` package), by its dotted name."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _base(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (``from ..analysis import x`` in ``rote.chapters.c1``)."""
    if not node.level:
        return node.module or ""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    parts = package.split(".")
    parts = parts[:len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The ``rote`` modules that module ``name`` imports anywhere in it: ``from X import y`` is ``X.y``
    where that is a module, else ``X``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _base(name, path, node)
            out.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
    return {m for m in out if m in known and m != name}


def unresolved(name: str, path: Path, known: set[str]) -> set[str]:
    """The ``rote`` modules a module imports from that do not exist (``from .chapters import x`` left in a
    module moved into ``rote/build/``): such an import fails when it runs, and no edge would show it."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = _base(name, path, node)
            if (base == "rote" or base.startswith("rote.")) and base not in known:
                out.add(base)
    return out


def graph(root: Path = ROTE) -> dict[str, set[str]]:
    found = modules(root)
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1 or v in edges.get(v, ()):
                out.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def in_tool(name: str) -> bool:
    return name == TOOL or name.startswith(TOOL + ".")


def layer(name: str) -> int | None:
    """The layer of a library module: that of the longest listed name it is, or is inside of (``rote``
    itself, the package's ``__init__``, holds only itself)."""
    best = None
    for rank, names in enumerate(LAYERS):
        for listed in names:
            inside = listed != "rote" and name.startswith(listed + ".")
            if (name == listed or inside) and (best is None or len(listed) > len(best[1])):
                best = (rank, listed)
    return best[0] if best else None


EDGES = graph()
LIBRARY = sorted(n for n in EDGES if not in_tool(n) and n != ENTRY_POINT)


def test_no_import_circle_anywhere():
    assert circles(EDGES) == []


def test_every_import_names_a_module_that_exists():
    found = modules()
    missing = {n: sorted(unresolved(n, p, set(found))) for n, p in found.items()}
    assert {n: m for n, m in missing.items() if m} == {}


def test_the_library_never_imports_the_book_tool():
    upward = {n: sorted(m for m in EDGES[n] if in_tool(m)) for n in LIBRARY}
    assert {n: ms for n, ms in upward.items() if ms} == {}


@pytest.mark.parametrize("name", LIBRARY)
def test_a_library_module_imports_only_its_layer_or_those_above(name):
    rank = layer(name)
    assert rank is not None, f"{name} has no layer: place it in LAYERS (architecture.md's order)"
    below = sorted(m for m in EDGES[name] if not in_tool(m) and (layer(m) is None or layer(m) > rank))
    assert not below, f"{name} (layer {rank}) imports {below}, from a layer below it"


def test_the_checks_see_every_module_lazy_imports_and_planted_faults(tmp_path):
    """Discovery finds modules in nested packages; lazy and relative imports are edges; a planted circle
    (through a function-level import), a library module importing the tool and a module without a layer
    are each found."""
    assert {"rote.build.cli", "rote.analysis.lens", "rote.chapters.c1", "rote.specs.c1"} <= set(EDGES)
    assert "rote.runs" in EDGES["rote.build.engine"]  # imported inside functions only
    assert {"rote.analysis.curves", "rote.verdicts", "rote.plan"} <= EDGES["rote.chapters.c1"]
    (tmp_path / "build").mkdir()
    for rel, text in {"__init__.py": "", "a.py": "from . import b\n", "b.py": "def f():\n    from .build import c\n",
                      "build/__init__.py": "", "build/c.py": "from ..a import x\n", "new.py": ""}.items():
        (tmp_path / rel).write_text(text)
    planted = graph(tmp_path)
    assert circles(planted) == [["rote.a", "rote.b", "rote.build.c"]]
    assert any(in_tool(m) for m in planted["rote.b"])
    assert layer("rote.new") is None and layer("rote.analysis.lens") == layer("rote.analysis")
    (tmp_path / "build" / "d.py").write_text("from .config import x\n")  # a library module's name, one dot short
    assert unresolved("rote.build.d", tmp_path / "build" / "d.py", set(modules(tmp_path))) == {"rote.build.config"}

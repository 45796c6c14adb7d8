"""The direction of imports (the layers of ../shared/replication/architecture.md): the orchestration
modules (the book build, the papermill driver, the site staging, the engine, the CLI) import from the
layers below them, never the reverse, lazy imports included; plan and timings do not import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROTE = Path(__file__).resolve().parents[1] / "rote"
ORCHESTRATION = {"book", "driver", "staging", "engine", "cli", "__main__"}
# Below the orchestration: training, analysis, verdicts, the record display, the chapters.
LOWER = ["config", "model", "train", "runs", "scoring", "analysis_cache", "claims", "report", "fmt",
         "plots", "site", "stability", "tasks", "analysis", "verdicts", "chapters"]


def imported(path: Path) -> set[str]:
    """The ``rote`` modules and packages a file imports anywhere in it, by their first name under ``rote``
    (``from ..analysis import curves`` -> ``analysis``; ``from . import claims, plan`` -> both)."""
    here = path.parent.relative_to(ROTE).parts
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(here[:len(here) - (node.level - 1)])
            if node.module:
                out.add((base + node.module.split("."))[0])
            else:
                out.update(base[:1] or [a.name for a in node.names])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rote."):
            out.add(node.module.split(".")[1])
    return out


def _files(name: str) -> list[Path]:
    folder = ROTE / name
    return sorted(folder.glob("*.py")) if folder.is_dir() else [ROTE / f"{name}.py"]


@pytest.mark.parametrize("name", LOWER)
def test_no_lower_module_imports_the_orchestration(name):
    for path in _files(name):
        assert path.exists(), path
        upward = imported(path) & ORCHESTRATION
        assert not upward, f"{path.relative_to(ROTE)} imports {sorted(upward)}, a layer above it"


def test_plan_and_timings_do_not_import_each_other():
    assert "timings" not in imported(ROTE / "plan.py")
    assert "plan" not in imported(ROTE / "timings.py")


def test_the_import_reader_sees_lazy_and_relative_imports():
    assert {"site", "claims", "plan"} <= imported(ROTE / "staging.py")
    assert "runs" in imported(ROTE / "engine.py")  # imported inside functions only
    assert {"analysis", "specs", "verdicts"} <= imported(ROTE / "chapters" / "c1.py")


def test_the_run_cache_does_not_import_the_estimates():
    """``runs`` (training's layer) sits below ``timings`` (the orchestration's estimates): they share the run's
    name from ``fmt``."""
    assert not {"timings", "plan", "engine"} & imported(ROTE / "runs.py")

"""Chapter 07's central measure on the page (issue 29): the notebook cell tagged ``central-measure``
computes one gen cost by hand from the twin's and the noisy run's metric tables. Here it runs on planted
tables (X1's measure is read off learning curves: no model is needed) and must give exactly the cost
that x1.study measured, the number its figure plots and its checks read."""

import ast
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rote.build import timings
from rote.analysis import curves
from rote.chapters import x1

NOTEBOOK = Path(__file__).resolve().parents[1] / "book" / "07_benign_memorization.ipynb"


def _central_cell() -> str:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    (cell,) = [c for c in cells if "central-measure" in c["metadata"].get("tags", [])]
    return "".join(cell["source"])


def _table(rng, gen_end: float, noisy: bool, n: int = 12) -> pd.DataFrame:
    """A metric table as a run writes it: one row per evaluation; gen ends noisily near ``gen_end``."""
    gen = np.clip(np.linspace(0.0, gen_end, n) + rng.normal(0, 0.01, n), 0, 1)
    mem = np.linspace(0.0, 0.97, n) if noisy else np.full(n, math.nan)
    return pd.DataFrame({"step": np.arange(n) * 10, "gen": gen, "fit": 1.0, "mem": mem, "rec": mem * 0.5})


@pytest.mark.parametrize("have", ["whole grid", "one width's runs", "nothing"])
def test_the_central_cell_computes_the_studys_gen_cost(have, capsys):
    grid = x1.grid("smoke", seeds=[1, 2])
    rng = np.random.default_rng(0)
    units = {"whole grid": grid.width_units, "one width's runs": grid.width_units[-1:], "nothing": ()}[have]
    metrics = {}
    for u in units:
        metrics[u.clean.key] = _table(rng, 0.99, noisy=False)
        metrics[u.noisy.key] = _table(rng, 0.80, noisy=True)
    study = x1.study(grid, metrics, timings)
    namespace = {"study": study, "grid": grid, "metrics": metrics, "curves": curves}  # what the chapter defined
    exec(_central_cell(), namespace)
    printed = capsys.readouterr().out
    if not units:
        assert "cost_by_hand" not in namespace and printed == ""
        return
    first = study.widths.iloc[0]
    assert namespace["cost_by_hand"] == first.cost  # exactly the study's number for that width and seed
    assert (first.seed, first.width) == (min(u.seed for u in units), min(u.noisy.model.d_model for u in units))
    assert 0.1 < first.cost < 0.3 and f"{first.cost:.4f} by hand, {first.cost:.4f} in the study" in printed


def test_the_central_cell_stays_short_plain_code():
    source = _central_cell()
    assert len(source.splitlines()) <= 15
    tree = ast.parse(source)
    assert not any(isinstance(n, (ast.FunctionDef, ast.Lambda)) for n in ast.walk(tree))
    assert "plot" not in source and "plt" not in source and "measure(" not in source

"""Chapter 02's central measure on the page (issue 29): the notebook cell tagged ``central-measure``
reads t_gen and t_mem of the first unit off its noisy run's metric table with pandas. Here it runs on
planted metric tables (C1's measure is read off a run's learning curves: no model is needed) and must
give exactly what rote.analysis.curves.crossing gives, which is what c1.evaluate records."""

import ast
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from rote import plan, report
from rote.analysis import curves
from rote.chapters import c1

NOTEBOOK = Path(__file__).resolve().parents[1] / "book" / "02_learning_dynamics.ipynb"
NAN = math.nan


def _central_cell() -> str:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    (cell,) = [c for c in cells if "central-measure" in c["metadata"].get("tags", [])]
    return "".join(cell["source"])


def _table(gen, mem, every=10):
    """A metric table as a run writes it: one row per evaluation (mem and rec NaN on a noise-free twin)."""
    n = len(gen)
    return pd.DataFrame({"step": [i * every for i in range(n)], "gen": gen, "fit": [1.0] * n, "mem": mem,
                         "rec": [NAN if math.isnan(m) else 0.5 for m in mem]})


# noisy run's (gen, mem), every case of a crossing the cell has to read as the library does
CURVES = {
    "both interpolated": ([0.0, 0.5, 0.95, 0.97, 0.96, 0.96, 0.96, 0.96],
                          [0.0, 0.0, 0.1, 0.3, 0.7, 0.9, 0.95, 0.95]),
    "gen at the first evaluation": ([0.92, 0.95, 0.95, 0.95, 0.95, 0.95],
                                    [0.0, 0.2, 0.45, 0.9, 0.95, 0.95]),
    "after a missing evaluation": ([0.0, NAN, 0.95, 0.95, 0.95, 0.95, 0.95],
                                   [NAN, NAN, 0.2, 0.6, 0.95, 0.95, 0.95]),
    "mem never reaches its level": ([0.0, 0.95, 0.97, 0.97, 0.97, 0.97],
                                    [0.0, 0.1, 0.2, 0.3, 0.3, 0.3]),
}


@pytest.mark.parametrize("case", CURVES)
def test_the_central_cell_reads_the_librarys_crossings_off_the_metric_table(case, capsys):
    gen, mem = CURVES[case]
    (unit,) = plan.units("smoke", ["thr"], [0], {})
    noisy = _table(gen, mem)
    twin = _table([0.0] + [0.99] * (len(gen) - 1), [NAN] * len(gen))
    build = c1.Build("smoke", [unit], {unit: SimpleNamespace(metrics=noisy)}, twins={unit: SimpleNamespace(metrics=twin)})
    result = c1.evaluate(build, c1.learning_curves(build))
    namespace = {"build": build, "c1": c1, "report": report, "curves": curves}  # what the chapter's cells defined
    exec(_central_cell(), namespace)
    by_hand, metrics = namespace["t_by_hand"], result.metrics[unit]
    same = lambda a, b: a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))  # noqa: E731
    library = {"gen": curves.crossing(noisy, "gen", c1.T["t_gen_level"]),
               "mem": curves.crossing(noisy, "mem", c1.T["t_mem_level"])}
    recorded = {"gen": metrics.t_gen_interpolated, "mem": metrics.t_mem_interpolated}  # what the record holds
    assert all(same(by_hand[k], library[k]) and same(by_hand[k], recorded[k]) for k in by_hand), (by_hand, library)
    if case == "both interpolated":  # between evaluations, not on one
        assert by_hand["gen"] % 10 and by_hand["mem"] % 10
    elif case == "mem never reaches its level":
        assert by_hand["mem"] is None
    elif case == "after a missing evaluation":  # issue 43: missing (NaN), never placed past the gap
        assert math.isnan(by_hand["gen"]) and math.isnan(by_hand["mem"])
    printed = capsys.readouterr().out
    assert printed.count(f"{report.label(unit)}: t_") == 2 and "rote.analysis.curves.crossing" in printed


def test_the_central_cell_stays_short_plain_code():
    source = _central_cell()
    assert len(source.splitlines()) <= 15
    tree = ast.parse(source)
    assert not any(isinstance(n, (ast.FunctionDef, ast.Lambda)) for n in ast.walk(tree))
    assert "plot" not in source and "plt" not in source

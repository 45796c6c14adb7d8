"""Chapter 06's central measure by hand (the notebook cell tagged ``central-measure``): one unit's z at
j* against its clean neighbours, recomputed with the model's hooks, equals the library's z
(rote.analysis.outliers.neighbour_stats) for the same example, position and neuron."""

import json
import math
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rote.analysis import fda_features, heuristics, outliers
from rote.model import HookedTransformer, ModelShape
from rote.tasks import fda

NOTEBOOK = Path(__file__).resolve().parents[1] / "book" / "06_outlier_heuristics.ipynb"
Unit = namedtuple("Unit", "task condition seed")


def _central_cell() -> str:
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"]
             if c["cell_type"] == "code" and "central-measure" in c["metadata"].get("tags", [])]
    assert len(cells) == 1, "chapter 06 has one cell tagged central-measure"
    return "".join(cells[0]["source"])


@pytest.fixture(scope="module")
def tiny_run():
    """A 2-layer FDA model with random weights, its units classified on a small grid."""
    torch.manual_seed(0)
    model = HookedTransformer(ModelShape(n_layers=2, d_model=16, n_heads=2, vocab_size=13, n_ctx=14)).eval()
    hmap = heuristics.classify_neurons(model, fda_features.operand_grid(200, seed=0),
                                       heuristics.ClassifySettings(0.8, top_k=20))
    return model, hmap


@pytest.mark.parametrize("memorized", [True, False], ids=["M", "no M: the null"])
def test_the_central_cell_recomputes_the_librarys_z(tiny_run, memorized, capsys):
    model, hmap = tiny_run
    clean = fda_features.operand_grid(10, seed=1)
    noisy = outliers.fresh_noisy_labels(clean, "random", "msb", seed=0)
    noisy.label[0] = noisy.true_label[0]  # the first example has no differing digit (no j*): the cell takes the second
    sets = {"M": noisy if memorized else clean[:0], "null": noisy}
    settings = outliers.NeighbourSettings(max_shift=3)
    stats = {name: outliers.neighbour_stats(model, ex, hmap, settings) for name, ex in sets.items()}
    u = Unit("fda", "random", 0)
    build = SimpleNamespace(shown=[u], sets={u: sets},
                            runs={u: SimpleNamespace(model=model, data=SimpleNamespace(meta={"answer_order": "msb"}))})
    ns = dict(build=build, hmaps={u: hmap}, outliers=SimpleNamespace(stats={u: stats}, sets={u: sets}), max_shift=3,
              feature_table=fda_features.feature_table, make_examples=fda_features.make_examples,
              neighbour_offsets=fda_features.neighbour_offsets, MIN_OPERAND=fda.MIN_OPERAND,
              MAX_OPERAND=fda.MAX_OPERAND)  # what the chapter's first cells bind
    exec(compile(_central_cell(), str(NOTEBOOK), "exec"), ns)

    name = "M" if memorized else "null"
    jstar = outliers.first_differing(sets[name])
    assert ns["name"] == name and ns["i"] == 1 and ns["j"] == int(jstar[1])  # the first example with a j*, at j*
    library = stats[name].z[ns["i"], -1, ns["j"], ns["n"]]
    assert not math.isnan(library) and float(ns["z"]) == pytest.approx(float(library), rel=1e-4, abs=1e-4)
    assert float(ns["acts"].mean()) == pytest.approx(float(stats[name].mean[1, -1, ns["j"], ns["n"]]), rel=1e-4, abs=1e-6)
    assert "the library's z" in capsys.readouterr().out

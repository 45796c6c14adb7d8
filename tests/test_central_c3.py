"""Chapter 04's central-measure cell (book/04_interventions.ipynb, tag ``central-measure``): one INLP
erasure on one memorized example, written out from the model's hook points and blocks, gives the
probability of the label that the library's erasure (rote.analysis.patching) gives for the same
example and layer. The cell's source is run as it stands in the notebook, on a tiny model with random
weights and a planted erasure."""

import contextlib
import io
import json
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rote import report, scoring
from rote.analysis import lens, patching
from rote.analysis.inlp import Erasure, random_basis
from rote.config import make_config
from rote.model import HookedTransformer, ModelShape
from rote.tasks import build_task

NOTEBOOK = Path(__file__).resolve().parents[1] / "book" / "04_interventions.ipynb"
Unit = namedtuple("Unit", "task condition seed")  # hashable, like rote.plan.Unit


def _central_cell() -> str:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    tagged = [c for c in cells if "central-measure" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "chapter 04 has one central-measure cell"
    return "".join(tagged[0]["source"])


@pytest.fixture(scope="module")
def data():
    return build_task(make_config("fda", "smoke"))


@pytest.fixture(scope="module")
def model(data):
    torch.manual_seed(0)
    n_ctx = data.train.sequences("label").shape[1]
    return HookedTransformer(ModelShape(n_layers=2, d_model=16, n_heads=2, vocab_size=len(data.vocab), n_ctx=n_ctx)).eval()


def _planted(layers, positions, rank=4) -> Erasure:
    """An erasure of rank ``rank`` at every (layer, position): random orthonormal bases and means."""
    g = torch.Generator().manual_seed(1)
    sites = [(l, p) for l in layers for p in positions]
    return Erasure({s: random_basis(16, rank, seed=i) for i, s in enumerate(sites)},
                   {s: torch.randn(16, generator=g) for s in sites})


def _run(model, examples, layers, positions=(9, 10, 11, 12), rank=3):
    """The cell in a namespace like the notebook's: the first seed's unit, its run, sets, sites and erasure."""
    u = Unit("fda", "random", 0)
    inlp = _planted(layers, list(positions))
    namespace = {"build": SimpleNamespace(shown=[u], runs={u: SimpleNamespace(model=model)},
                                          sets={u: {"mem": (examples, "label")}}),
                 "sites": {u: {"layers": list(layers), "positions": list(positions)}},
                 "erasure": SimpleNamespace(inlp={u: inlp}), "erasure_rank": rank,
                 "report": report, "scoring": scoring, "lens": lens, "patching": patching}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_central_cell(), str(NOTEBOOK), "exec"), namespace)
    return namespace, inlp.truncate(rank) if inlp.bases else inlp, out.getvalue()


@pytest.mark.parametrize("layers", [[1], [1, 2], [2]])
def test_the_cell_erases_like_the_library(model, data, layers):
    example = data.test[:1]
    ns, inlp, printed = _run(model, data.test[:3], layers)
    first = [(lens.layer_hook_name(layers[0]), patching.project_out(
        {p: (Q, inlp.means[site]) for site, Q in inlp.bases.items() for p in [site[1]] if site[0] == layers[0]}))]
    library = patching.label_probability(model, example, "label", first).item()
    assert ns["library"] == library  # the cell's library value is the erasure of its layer and example
    assert ns["after"] == pytest.approx(library, rel=1e-5, abs=1e-7)
    assert ns["before"] == pytest.approx(patching.label_probability(model, example, "label").item(), rel=1e-6)
    assert ns["after"] != pytest.approx(ns["before"], rel=1e-3)  # the planted erasure moves the probability
    assert printed.startswith(f"FDA random s0, layer {layers[0]}: P(noisy label) ")
    assert not model.has_hooks()


def test_without_a_site_or_a_memorized_example_the_cell_says_so(model, data):
    for layers, examples in (([], data.test[:3]), ([1], data.test[:0])):
        ns, _, printed = _run(model, examples, layers)
        assert "nothing to erase here" in printed and "after" not in ns


def test_the_cell_fits_the_reading_budget():
    source = _central_cell()
    assert len(source.splitlines()) <= 17
    assert "def " not in source and "lambda" not in source and "plt." not in source

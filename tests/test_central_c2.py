"""The central measure of chapter 03 (claim C2) on the page: the notebook's ``central-measure`` cell
fits one probe by hand (the model's hook points, the task's examples, the logistic probe of
rote.analysis.probes) and must read the same accuracy on M and on C as the library's sweep for that
element. Run on a tiny model with random weights."""

import json
import math
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rote.analysis.lens import layer_hook_name
from rote.analysis.probes import ProbeSettings, ProbeTargets, fit_probes, probe_sweep, probe_training_set
from rote.analysis.targets import intermediate_targets
from rote.chapters import Build, c2
from rote.config import make_config
from rote.model import HookedTransformer, ModelShape
from rote.scoring import model_inputs
from rote.tasks import build_task

NOTEBOOK = Path(__file__).resolve().parents[1] / "book" / "03_intermediate_results.ipynb"
Unit = namedtuple("Unit", "task condition seed")  # hashable, like rote.plan.Unit


def central_cell() -> str:
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"]
             if c["cell_type"] == "code" and "central-measure" in c["metadata"].get("tags", [])]
    assert len(cells) == 1, "one cell tagged central-measure"
    return "".join(cells[0]["source"])


def test_the_central_cell_is_short_and_defines_nothing():
    source = central_cell()
    assert len(source.splitlines()) <= 15 and "def " not in source and "plt." not in source


@pytest.fixture(scope="module")
def namespace():
    """The notebook's names at the cell, on a tiny FDA model with random weights: its build (one
    unit, with made-up M and C sets) and the library's probes."""
    data = build_task(make_config("fda", "smoke"))
    torch.manual_seed(0)
    model = HookedTransformer(ModelShape(n_layers=2, d_model=16, n_heads=2, vocab_size=13, n_ctx=14)).eval()
    unit = Unit("fda", "random", 0)
    build = Build("smoke", [unit], {unit: SimpleNamespace(model=model, data=data)},
                  {unit: {"M": data.train_noisy[:30], "C": data.test[:40]}})
    params = {"max_probe_train": 200, "probe_seed": 3}
    # the library's sweep of the one target the cell reads: fitted alone in both (the only 16-class FDA
    # target, probed at its own position only), so the same numbers as in the chapter's full sweep
    # (c2.probes), at a fraction of its time
    sweep = probe_sweep(model, data, data.train_clean, build.sets[unit], ProbeTargets(["carry_pattern"]),
                        ProbeSettings(max_train=params["max_probe_train"], seed=params["probe_seed"]))
    return {"build": build, "probes": c2.Probes({unit: sweep}, {}, {}), **params, "torch": torch,
            "layer_hook_name": layer_hook_name,
            "fit_probes": fit_probes, "probe_training_set": probe_training_set,
            "intermediate_targets": intermediate_targets, "model_inputs": model_inputs}


def test_the_central_cell_reads_the_librarys_probe_accuracy(namespace, capsys):
    ns = dict(namespace)
    exec(compile(central_cell(), str(NOTEBOOK), "exec"), ns)
    sweep = namespace["probes"].sweeps[ns["u"]]
    for s in ("M", "C"):
        row = sweep[(sweep.target == "carry_pattern") & (sweep.layer == ns["layer"]) & (sweep.set == s)]
        assert len(row) == 1 and not math.isnan(ns["by_hand"][s])
        assert ns["by_hand"][s] == row.accuracy.iloc[0], (s, ns["by_hand"], row)
    assert "by hand" in capsys.readouterr().out


def test_the_central_cell_shows_nothing_for_a_build_without_fda(namespace, capsys):
    unit = Unit("thr", "-", 0)
    ns = dict(namespace, build=SimpleNamespace(shown=[unit]))
    exec(compile(central_cell(), str(NOTEBOOK), "exec"), ns)
    assert "by_hand" not in ns and capsys.readouterr().out == ""

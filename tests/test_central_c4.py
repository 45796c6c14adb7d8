"""Chapter C4's central measure on the page (book/05_distributed_encoding.ipynb, the cell tagged
``central-measure``): one k50 computed by hand from the model's hook points must be the library's
k50 (:func:`rote.chapters.c4.k50s`, i.e. :func:`rote.analysis.neurons.k50_table`) of the same digit.
The cell runs here as the notebook runs it, on a tiny model with random weights."""

import ast
import json
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace

import torch

from rote import report
from rote.chapters import c4
from rote.model import HookedTransformer, ModelShape
from rote.tasks import Examples

NOTEBOOK = Path(__file__).resolve().parents[1] / "book" / "05_distributed_encoding.ipynb"
Unit = namedtuple("Unit", "task condition seed")  # hashable, like rote.plan.Unit


def central_cell() -> str:
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"]
             if "central-measure" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1 and cells[0]["cell_type"] == "code"
    return "".join(cells[0]["source"])


def tiny_build(n_memorized: int = 6):
    """A random 2-layer model on FDA-shaped examples (10 prompt tokens, 5 answer digits): a first unit
    without memorized examples, then one whose M has one or two answer digits changed."""
    torch.manual_seed(0)
    model = HookedTransformer(ModelShape(n_layers=2, d_model=32, n_heads=2, vocab_size=13, n_ctx=15)).eval()
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 10, (n_memorized + 8, 10), generator=g)
    true = torch.randint(0, 10, (n_memorized + 8, 5), generator=g)
    noisy = true.clone()
    noisy[:, 2] = (noisy[:, 2] + 1) % 10  # every example of M: digit 2 changed, and digit 4 on every other one
    noisy[::2, 4] = (noisy[::2, 4] + 3) % 10
    memorized, clean = Examples(prompt, noisy, true)[:n_memorized], Examples(prompt, true, true.clone())[n_memorized:]
    first, second = Unit("fda", "random", 0), Unit("fda", "digit", 0)
    run = SimpleNamespace(model=model)
    build = SimpleNamespace(shown=[first, second], runs={first: run, second: run},
                            sets={first: {"M": memorized[:0], "C": clean}, second: {"M": memorized, "C": clean}})
    return build


def run_cell(namespace: dict, capsys) -> str:
    exec(compile(central_cell(), str(NOTEBOOK), "exec"), namespace)
    return capsys.readouterr().out


def test_the_central_cell_is_short_and_defines_nothing():
    source = central_cell()
    assert len(source.splitlines()) <= 17
    tree = ast.parse(source)
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda, ast.ClassDef))]


def test_the_k50_by_hand_is_the_librarys(capsys):
    build = tiny_build()
    u = build.shown[1]
    k50s = c4.k50s(SimpleNamespace(runs={u: build.runs[u]}, sets={u: build.sets[u]}))  # the library, on that unit
    namespace = {"build": build, "k50s": k50s, "report": report, "torch": torch}
    out = run_cell(namespace, capsys)
    assert namespace["u"] == u  # the first unit of the first seed that has a memorized example
    assert (namespace["n"], namespace["j"]) == (0, 2)  # its first memorized digit
    table = k50s[u]
    expected = table[(table.set == "M") & (table.example == 0) & (table.position == 2)].k50.item()
    assert namespace["k50"] == namespace["library"] == expected
    assert expected > 1  # random weights: the attribution is spread, the count is not trivially 1
    assert f"k50 = {namespace['k50']} by hand, {expected:g} by c4.k50s" in out


def test_without_a_memorized_example_the_cell_says_so(capsys):
    build = tiny_build()
    build.shown = build.shown[:1]
    out = run_cell({"build": build, "k50s": {}, "report": report, "torch": torch}, capsys)
    assert "no memorized digit to attribute here" in out

"""Every figure in the book's notebooks has a numbered caption that says what it shows and alt text in words
(issue 46, part 3): a figure cell carries myst-nb's ``mystnb.figure`` (caption, name) and ``mystnb.image``
(alt) metadata and shows figures only; the Verdict section's figure is glued and placed by ``{glue:figure}``."""

import json
import re
from pathlib import Path
from types import SimpleNamespace as NS

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

BOOK = Path(__file__).resolve().parents[1] / "book"
DRAWS = re.compile(r"save_and_show\(|save_figure\(|plt\.show\(")
VERDICT = re.compile(r'verdict\("(C\d)", .*"(c\d_checks)"(?:, book)?\)')  # book: the page's settings


def cells():
    for path in sorted(BOOK.glob("*.ipynb")):
        notebook = json.loads(path.read_text())["cells"]
        for i, cell in enumerate(notebook):
            yield path.name, i, cell, notebook


def in_words(text: str, at_least: int) -> bool:
    """A sentence, not a file name or path: enough words, no '/' and no image suffix."""
    return len(text.split()) >= at_least and "/" not in text and not re.search(r"\.(png|svg|jpe?g)\b", text)


FIGURE_CELLS = [(name, i, cell) for name, i, cell, _ in cells() if cell["cell_type"] == "code"
                and DRAWS.search("".join(cell["source"]))]


def test_the_book_has_its_figure_cells():
    assert len(FIGURE_CELLS) >= 30


@pytest.mark.parametrize("name, i, cell", FIGURE_CELLS, ids=[f"{n}:{i}" for n, i, _ in FIGURE_CELLS])
def test_a_figure_cell_has_a_caption_and_alt_text_in_words_and_shows_figures_only(name, i, cell):
    options = cell["metadata"].get("mystnb", {})
    assert in_words(options.get("figure", {}).get("caption", ""), 8), "caption"
    assert in_words(options.get("image", {}).get("alt", ""), 6), "alt text"
    source = "".join(cell["source"])
    assert "display(" not in source and "verdict(" not in source  # its caption would wrap those outputs too
    if not source.startswith("for "):  # a loop's figures share the caption and go unnamed (names are unique)
        assert options["figure"]["name"].startswith("fig-")


def test_figure_names_are_unique_across_the_book():
    names = [cell["metadata"]["mystnb"]["figure"].get("name") for _, _, cell in FIGURE_CELLS]
    named = [n for n in names if n]
    assert len(named) == len(set(named))


VERDICT_CELLS = [(name, i, notebook) for name, i, cell, notebook in cells()
                 if cell["cell_type"] == "code" and VERDICT.search("".join(cell["source"]))]


@pytest.mark.parametrize("name, i, notebook", VERDICT_CELLS, ids=[n for n, _, _ in VERDICT_CELLS])
def test_the_verdict_figure_is_placed_with_a_caption_and_alt_text(name, i, notebook):
    claim, key = VERDICT.search("".join(notebook[i]["source"])).groups()
    # placed once, in the finding under the chapter's title (issue 46, part 2)
    block = re.compile(rf"^```{{glue:figure}} {key}\n.*?^```$", re.S | re.M)
    [placed] = [m.group(0) for c in notebook if c["cell_type"] == "markdown"
                for m in block.finditer("".join(c["source"]))]
    head, *options, _, caption, end = placed.splitlines()
    assert head == f"```{{glue:figure}} {key}" and end == "```"
    alt = dict(o[1:].split(": ", 1) for o in options)
    assert alt["name"] == f"fig-{key.replace('_', '-')}" and in_words(alt["alt"], 6) and claim in alt["alt"]
    assert in_words(caption, 8) and claim in caption


def test_verdict_saves_and_glues_its_figure_without_showing_it(monkeypatch, tmp_path):
    import myst_nb

    from rote import chapters, claims, display, verdicts
    from rote.settings import Settings

    check = {"id": "c1.x", "name": "x", "value": 2.0, "threshold": 1.0, "kind": "amended", "passed": True}
    records = [NS(task="fda", condition="random", per_seed=[{"seed": 0, "checks": [check]}])]
    glued, shown = {}, []
    monkeypatch.setattr(verdicts, "records", lambda claim, profile, results: records)
    monkeypatch.setattr(claims, "stamped", lambda rec, runs=None: rec)
    monkeypatch.setattr(claims, "save", lambda rec, root=None: None)
    monkeypatch.setattr(display, "show_record", lambda rec: None)
    monkeypatch.setattr(myst_nb, "glue", lambda key, value, display=True: glued.update({key: (value, display)}))
    monkeypatch.setattr(chapters.plots.plt, "show", lambda *a, **k: shown.append(1))
    assert chapters.verdict("C1", "smoke", [], "c1_checks", Settings(figures=tmp_path)) == records
    figure, display = glued["c1_checks"]
    assert isinstance(figure, matplotlib.figure.Figure) and display is False and not shown
    assert (tmp_path / "c1_checks.png").exists()
    assert "c1_finding" in glued  # the sentences the chapter opens with (rote.chapters.glue_finding)

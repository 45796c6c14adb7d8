"""The bibliography: every {cite} key in the book is an entry of book/references.bib, every entry is
cited, the site's config finds the file from the staged root, and a key that is not in the file
fails the site build (warnings are errors there, rote.build.staging.render_site)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
BIB = BOOK / "references.bib"
CITE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]*)`")


def _pages() -> dict[str, str]:
    """Page name -> its markdown: the .md pages and the markdown cells of the chapter notebooks."""
    pages = {p.name: p.read_text() for p in BOOK.glob("*.md")}
    for path in BOOK.glob("*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        pages[path.name] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return pages


def _cited() -> dict[str, set[str]]:
    """Cited key -> the pages that cite it."""
    out: dict[str, set[str]] = {}
    for name, text in _pages().items():
        for keys in CITE.findall(text):
            for key in keys.split(","):
                out.setdefault(key.strip(), set()).add(name)
    return out


def _entries():
    from pybtex.database import parse_file

    return parse_file(str(BIB)).entries


def test_every_cited_key_is_in_the_bibliography():
    cited, entries = _cited(), _entries()
    missing = {key: sorted(pages) for key, pages in cited.items() if key not in entries}
    assert not missing, f"cited but not in {BIB.name}: {missing}"


def test_every_entry_is_cited_or_the_bibliography_lists_all():
    references = (BOOK / "references.md").read_text()
    assert "```{bibliography}" in references
    if ":all:" in references:
        return
    uncited = sorted(set(_entries()) - set(_cited()))
    assert not uncited, f"entries no page cites (cite them, or drop them): {uncited}"


def test_every_chapter_cites_the_paper():
    pages = _pages()
    chapters = [p.name for p in BOOK.glob("*.ipynb")] + ["intro.md", "calibration.md"]
    without = [name for name in chapters if "du2025reason" not in {k.strip() for ks in CITE.findall(pages[name])
                                                                    for k in ks.split(",")}]
    assert not without, f"pages that do not cite the paper: {without}"


# Entries without a link: no DOI or URL could be confirmed against a public record (a book needs none).
NO_LINK = {"newcombe1998interval"}


def test_entries_have_a_year_and_a_link_and_the_paper_its_arxiv_id():
    entries = _entries()
    for key, entry in entries.items():
        assert entry.fields.get("year", "").isdigit(), key
        linked = bool({"url", "doi", "eprint"} & {f.lower() for f in entry.fields})
        assert linked != (key in NO_LINK or entry.type == "book"), key
    paper = entries["du2025reason"]
    assert paper.fields["eprint"] == "2507.04782" and "2025.emnlp-main.437" in paper.fields["url"]
    assert [str(p) for p in paper.persons["author"]] == ["Du, Yupei", "Mondorf, Philipp", "Casola, Silvia",
                                                         "Yao, Yuekun", "Litschko, Robert", "Plank, Barbara"]
    assert "mainlp/memorized_reasonings" in entries["du2025code"].fields["url"]


def test_config_finds_the_bibliography_from_the_book_root_and_the_toc_lists_the_page():
    """stage_site copies _config.yml to the staged root and book/*.bib to its book/, so the path in the
    config, relative to the root, holds in the project and in the staged site alike."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["bibtex_bibfiles"] == ["book/references.bib"] and (ROOT / "book/references.bib").exists()
    assert config["sphinx"]["config"]["bibtex_reference_style"] == "rote"  # author-year (rote.build.site)
    assert config["sphinx"]["config"]["html_show_copyright"] is True
    assert "MIT" in config["copyright"] and "CC BY 4.0" in config["copyright"]
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    assert toc["parts"][-1]["chapters"][-1] == {"file": "book/references"}


def test_the_staged_site_carries_the_bibliography(tmp_path, monkeypatch):
    from rote.build import site, staging

    monkeypatch.setenv("ROTE_SITE", str(tmp_path / "site"))
    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    staged = staging.stage_site("smoke")
    config = yaml.safe_load((staged / "_config.yml").read_text())
    assert all((staged / path).read_text() == (ROOT / path).read_text() for path in config["bibtex_bibfiles"])
    assert "{bibliography}" in (staged / "book" / "references.md").read_text()


def test_the_code_is_cited_only_where_a_paragraph_names_the_code():
    cites = [(name, paragraph) for name, text in _pages().items() for paragraph in text.split("\n\n")
             if "du2025code" in paragraph]
    assert cites and all("code" in p.replace("du2025code", "") for _, p in cites)
    assert "du2025reason" in _cited() and "references.md" in _cited()["du2025code"]


def test_citations_read_author_year_in_round_brackets_and_tell_the_paper_from_its_code(tmp_path):
    """rote.build.site's referencing style ``rote`` (the one _config.yml names), in a Sphinx build of one page."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    shutil.copy(BIB, tmp_path / "references.bib")
    (tmp_path / "conf.py").write_text(f"extensions = ['sphinxcontrib.bibtex', 'rote.build.site']\nbibtex_bibfiles = "
                                      f"['references.bib']\nbibtex_default_style = {config['bibtex_default_style']!r}\n"
                                      f"bibtex_reference_style = {config['bibtex_reference_style']!r}\n")
    (tmp_path / "index.rst").write_text("Test\n====\n\nA :cite:p:`du2025reason`, :cite:t:`du2025code`, "
                                        ":cite:t:`wang2024grokked`.\n\n.. bibliography::\n")
    cmd = [sys.executable, "-m", "sphinx", "-q", "-W", "-b", "html", str(tmp_path), str(tmp_path / "out")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = re.sub(r"<[^>]+>", "", (tmp_path / "out" / "index.html").read_text())
    assert "A (Du et al., 2025a), Du et al. (2025b), Wang et al. (2024)." in text


# -- a bad key fails the build ------------------------------------------------------------------
def _tiny_book(root: Path, text: str) -> Path:
    """A book with the project's _config.yml and references.bib and one page that says ``text``."""
    (root / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", root / "_config.yml")
    shutil.copytree(BOOK / "_static", root / "_static")  # as stage_site: the config names the favicon there
    shutil.copy(BIB, root / "book" / "references.bib")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/references\n")
    (root / "book" / "intro.md").write_text(f"# Intro\n\n{text}\n")
    (root / "book" / "references.md").write_text("# References\n\n```{bibliography}\n```\n")
    return root


def _build(root: Path) -> subprocess.CompletedProcess:
    """Jupyter Book as rote.build.staging.render_site runs it: warnings are errors."""
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(root), "--all", "-W", "--keep-going"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_known_key_builds_and_an_unknown_key_fails_the_build(tmp_path):
    good = _build(_tiny_book(tmp_path / "good", "The paper {cite:p}`du2025reason`; {cite:t}`wang2024grokked`."))
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-3000:]
    page = (tmp_path / "good" / "_build" / "html" / "book" / "intro.html").read_text()
    assert "Du" in page and "2025" in page and "references.html#" in page
    # the list labels read as the citations do (rote.build.site's "rote" style), not alphabetic "[DMC+25a]"
    listing = (tmp_path / "good" / "_build" / "html" / "book" / "references.html").read_text()
    assert "Du et al., 2025" in listing and "Wang et al., 2024" in listing and "DMC+25" not in listing

    bad = _build(_tiny_book(tmp_path / "bad", "A key that is not there {cite:p}`nosuchwork2099`."))
    assert bad.returncode != 0
    assert 'could not find bibtex key "nosuchwork2099"' in bad.stdout + bad.stderr

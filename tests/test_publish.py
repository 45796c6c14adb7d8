"""The repository URL, one setting (rote.build.publish): the staged _config.yml and the site's buttons follow it,
and every chapter's Colab install cell names it and does nothing outside Colab."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest
import yaml

from rote import claims
from rote.build import driver, publish, site, staging

ROOT = Path(__file__).resolve().parents[1]
URL = "https://github.com/example-org/rote"


def colab_repository(source: str) -> str | None:
    """The repository a Colab cell clones."""
    found = re.search(r'"git", "clone",[^\]]*?"(https://[^"]+)"', source)
    return found.group(1) if found else None


@pytest.fixture
def stage(tmp_path, monkeypatch):
    """stage_site into tmp_path, no chapter executed, no record; the URL from the environment, if given."""
    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    monkeypatch.setattr(claims, "results_root", lambda: tmp_path / "results")
    monkeypatch.delenv(publish.ENV, raising=False)

    def stage_into(name: str, url: str | None = None) -> Path:
        monkeypatch.setenv("ROTE_SITE", str(tmp_path / name))
        if url is None:
            monkeypatch.delenv(publish.ENV, raising=False)
        else:
            monkeypatch.setenv(publish.ENV, url)
        return staging.stage_site("smoke")

    return stage_into


# -- the setting ---------------------------------------------------------------------------------
def test_the_url_is_normalized_and_must_be_a_github_repository():
    assert publish.normalize(" https://github.com/a/b.git/ ") == "https://github.com/a/b"
    assert publish.normalize("") == publish.normalize(None) == ""
    for bad in ("github.com/a/b", "https://gitlab.com/a/b", "https://github.com/a", "https://github.com/a/b/tree/x"):
        with pytest.raises(ValueError, match="GitHub repository"):
            publish.normalize(bad)


def test_the_environment_wins_over_the_config(tmp_path, monkeypatch):
    config = tmp_path / "_config.yml"
    config.write_text(yaml.safe_dump({"repository": {"url": "https://github.com/from/file"}}))
    monkeypatch.delenv(publish.ENV, raising=False)
    assert publish.repository_url(config) == "https://github.com/from/file"
    monkeypatch.setenv(publish.ENV, "  ")  # set but empty: the file's
    assert publish.repository_url(config) == "https://github.com/from/file"
    monkeypatch.setenv(publish.ENV, "https://github.com/from/env")
    assert publish.repository_url(config) == "https://github.com/from/env"
    config.write_text("title: x\n")
    monkeypatch.delenv(publish.ENV)
    assert publish.repository_url(config) == ""


def test_the_committed_config_uses_jupyter_books_key():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert set(config["repository"]) == {"url", "branch", "path_to_book"}
    assert config["repository"]["branch"] == "main"


def test_staged_config_without_a_url_has_no_button(stage):
    config = yaml.safe_load((stage("off") / "_config.yml").read_text())
    assert config["repository"]["url"] == ""  # not Jupyter Book's default, its own repository
    assert not any(config["html"].get(k) for k in ("use_repository_button", "use_issues_button", "use_edit_page_button"))
    assert not any(v for k, v in config["launch_buttons"].items() if k != "notebook_interface")
    assert config["title"] == yaml.safe_load((ROOT / "_config.yml").read_text())["title"]  # the rest as committed


def test_staged_config_with_a_url_has_the_buttons(stage):
    config = yaml.safe_load((stage("on", URL + "/") / "_config.yml").read_text())
    assert config["repository"] == {"url": URL, "branch": "main", "path_to_book": ""}
    assert config["html"]["use_repository_button"] is config["html"]["use_issues_button"] is True
    assert config["launch_buttons"]["colab_url"] == publish.COLAB_URL
    assert not config["launch_buttons"]["binderhub_url"] and config["launch_buttons"]["thebe"] is False


# -- the Colab cell ------------------------------------------------------------------------------
def _colab_cell(nb):
    cells = publish.colab_cells(nb)
    assert len(cells) == 1, f"{len(cells)} Colab install cells"
    return cells[0]


@pytest.mark.parametrize("name", sorted(driver.chapters()))
def test_every_chapter_has_one_colab_cell_naming_the_configured_url(name):
    path = driver.chapters()[name]
    nb = nbformat.read(path, as_version=4)
    cell = _colab_cell(nb)
    assert cell.cell_type == "code" and "remove-cell" in cell.metadata.tags and not cell.outputs
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0] is cell, f"{name}: the Colab cell is not the first code cell"
    assert len(cell.source.splitlines()) <= 6
    url = publish.configured_url()
    assert colab_repository(cell.source) == (url or publish.PLACEHOLDER), (
        f"{name}: the Colab cell clones {colab_repository(cell.source)}, the configured URL is {url!r}; "
        'run .venv/bin/python -c "from rote.build import publish; publish.write_colab_cells()"')
    assert cell.source == publish.colab_cell_source(url)


def _run_cell(source: str, monkeypatch, colab: bool, cloned: bool = False) -> list[list[str]]:
    """Execute a Colab cell with subprocess.run recorded; in (a stand-in for) Colab or not."""
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: calls.append(list(args)))
    monkeypatch.setattr(sys, "path", list(sys.path))
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
        real_isdir = os.path.isdir
        monkeypatch.setattr(os.path, "isdir", lambda p: cloned if p == publish.CLONE_DIR else real_isdir(p))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(compile(source, "colab-cell", "exec"), {})
    return calls


def test_the_colab_cell_does_nothing_outside_colab(monkeypatch):
    before = list(sys.path)
    source = _colab_cell(nbformat.read(driver.chapters()["learning_dynamics"], as_version=4)).source
    assert _run_cell(source, monkeypatch, colab=False) == []
    assert sys.path == before


def test_in_colab_the_cell_clones_the_repository_and_installs_rote(monkeypatch):
    source = publish.colab_cell_source(URL)
    calls = _run_cell(source, monkeypatch, colab=True)
    assert calls[0][:2] == ["git", "clone"] and calls[0][-2:] == [URL, publish.CLONE_DIR]
    assert calls[1][:4] == [sys.executable, "-m", "pip", "install"] and "-e" in calls[1]
    assert calls[1][calls[1].index("-e") + 1] == publish.CLONE_DIR and "myst-nb" in calls[1]
    assert sys.path[0] == publish.CLONE_DIR
    assert _run_cell(source, monkeypatch, colab=True, cloned=True) == []  # run again: already installed


def test_write_colab_cells_changes_only_those_cells(tmp_path):
    originals = {p.name: p.read_text() for p in driver.chapters().values()}
    for name, text in originals.items():
        (tmp_path / name).write_text(text)
    assert len(publish.write_colab_cells(URL, tmp_path)) == len(originals)
    for name, text in originals.items():
        before, after = json.loads(text), json.loads((tmp_path / name).read_text())
        changed = [i for i, (a, b) in enumerate(zip(before["cells"], after["cells"])) if a != b]
        assert len(before["cells"]) == len(after["cells"]) and len(changed) == 1
        assert colab_repository("".join(after["cells"][changed[0]]["source"])) == URL
    publish.write_colab_cells(publish.configured_url(), tmp_path)  # and back, byte for byte
    assert {name: (tmp_path / name).read_text() for name in originals} == originals


def test_the_site_never_shows_the_colab_cell():
    """remove-cell: Jupyter Book drops it; hide_boilerplate neither merges it with the imports nor
    hides it twice, and the title stays the page's first cell."""
    from rote.build import site

    nb = nbformat.read(driver.chapters()["learning_dynamics"], as_version=4)
    site.hide_boilerplate(nb)
    cell = _colab_cell(nb)
    assert cell.metadata.tags == ["remove-cell", publish.COLAB_TAG] and cell.source == publish.colab_cell_source(
        publish.configured_url())
    assert site.title_index(nb) == 0


# -- the rendered site, both ways ----------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_site_shows_the_repository_buttons_exactly_when_the_url_is_set(stage, tmp_path):
    """Two small sites rendered by Jupyter Book from the staged sources (one chapter, unexecuted): the
    repository, issue and Colab buttons with the URL, none without it, and Jupyter Book's own
    repository on no page either way."""
    jupyter_book = str(Path(sys.executable).with_name("jupyter-book"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the Sphinx extension rote.build.site of this checkout
    builds = {}
    for name, url in (("off", None), ("on", URL)):
        source = stage(name, url)
        # the chapter and the references page: a {cite} resolves only where a {bibliography} is built
        (source / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "book/01_tasks",
                                                       "chapters": [{"file": "book/references"}]}))
        builds[name] = subprocess.Popen([jupyter_book, "build", str(source), "--path-output", str(tmp_path / name),
                                         "--all", "-W"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
    for name, proc in builds.items():  # both at once: each is mostly Sphinx's start
        out, _ = proc.communicate(timeout=540)
        assert proc.returncode == 0, f"{name}: {out[-3000:]}"
    page = {name: (tmp_path / name / "_build" / "html" / "book" / "01_tasks.html").read_text() for name in builds}
    buttons = {"repository": f'href="{URL}"', "issues": f'href="{URL}/issues/new',
               "colab": f'href="{publish.COLAB_URL}/github/example-org/rote/blob/main/book/01_tasks.ipynb"'}
    for what, link in buttons.items():
        assert link in page["on"], f"no {what} button with the URL set"
    assert "Source repository" in page["on"] and "Open an issue" in page["on"] and "Launch on Colab" in page["on"]
    for marker in ("Source repository", "Open an issue", "Launch on", "colab.research.google.com", "issues/new",
                   "github.com/"):
        assert marker not in page["off"], f"{marker!r} on the page without a repository URL"
    for name in builds:
        html = tmp_path / name / "_build" / "html"
        for path in html.rglob("*"):
            if path.is_file() and path.suffix in (".html", ".js", ".json", ".txt"):
                text = path.read_text(errors="replace")
                assert "executablebooks/jupyter-book" not in text, f"{name}: {path.relative_to(html)}"
                assert path.suffix != ".html" or "executablebooks" not in text, f"{name}: {path.relative_to(html)}"

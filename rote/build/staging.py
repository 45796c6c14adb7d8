"""The site staging: :func:`stage_site` copies the book's text and executed chapters into
``<site root>/_build/site_src`` with what :mod:`rote.build.site` makes of the records; :func:`render_site`
renders it with Jupyter Book into ``<site root>/_build/html``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from .. import claims, display, plan
from . import frontpage, site as web
from ..claims import ClaimRecord
from ..config import PROJECT_ROOT
from ..settings import Settings
from .driver import STAMP_TAG, chapters, output_dir, source_hash


def site_root() -> Path:
    """The folder whose ``_build/`` receives the staged sources and the site: ``$ROTE_SITE``, or the
    project (``make test`` renders the smoke site elsewhere)."""
    return Path(os.environ["ROTE_SITE"]).expanduser().resolve() if os.environ.get("ROTE_SITE") else PROJECT_ROOT


def stage_site(profile: str, settings: Settings | None = None) -> Path:
    """Stage the book's text and executed chapters for Jupyter Book, made for readers (:mod:`rote.build.site`:
    stamps with the rerun command, verdict boxes, collapsed boilerplate, the records for download), from the records
    of the book's ``settings`` (seeds, records folder)."""
    from . import publish

    site = site_root() / "_build" / "site_src"
    if site.exists():
        shutil.rmtree(site)
    (site / "book").mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(PROJECT_ROOT / name, site / name)
    url = publish.stage_config(site / "_config.yml")  # the repository URL: its buttons where set, none where not
    links = (url, repository_branch(site / "_config.yml"))  # source files named on a page link there
    if profile in BANNERS:  # on every page, above its title
        announce(site / "_config.yml", BANNERS[profile])
    if (web.BOOK_DIR / "_static").is_dir():  # Jupyter Book takes CSS from the book root's _static
        shutil.copytree(web.BOOK_DIR / "_static", site / "_static")
    settings = settings or Settings(profile=profile)
    records = claims.load_shown(profile, settings.results, settings.seed_list)  # a stale record as stale
    _stage_text_pages(site / "book", profile, records, settings, links)
    for name, source in chapters().items():
        nb, notes = _chapter(name, source, profile)  # notes: the cells for under the page's title
        box = web.verdict_box(web.records_for_page(records, source.stem), claims.CLAIMS, settings.results)
        if box:  # in full once, folded, where the Verdict section begins (the chapter opens with its finding)
            _place_verdict_box(nb, notes, _note(box))
        if name == "scorecard":
            notes.insert(0, _note(web.downloads_markdown(*web.write_downloads(records, site / "book", profile),
                                                         len(records))))
        web.link_notebook_sources(nb, *links)
        web.hide_boilerplate(nb)
        web.widen_tables(nb)
        _insert_notes(nb, notes)
        nbformat.write(nb, site / "book" / source.name)
    return site


FINDING_HEADING = "## What this build found"  # a claim chapter's first section, in its title cell (issue 46, part 2)


def _insert_notes(nb, notes: list) -> None:
    """The notes under the page's title; in a chapter that opens with its finding, the build stamp after the finding
    (its warnings stay under the title)."""
    at = web.title_index(nb)
    if nb.cells and FINDING_HEADING in nb.cells[at].source:
        stamps = [n for n in notes if STAMP_TAG in web.tags(n)]
        nb.cells[at + 1:at + 1] = stamps
        notes = [n for n in notes if STAMP_TAG not in web.tags(n)]
    web.insert_after_title(nb, notes)


def _place_verdict_box(nb, notes: list, box) -> None:
    """Put the verdict box under the chapter's ``## Verdict`` heading, else first among the notes under its title."""
    heading = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                    and c.source.startswith(f"## {claims.VERDICT_ANCHOR.capitalize()}")), None)
    if heading is None:
        notes.insert(0, box)
    else:
        nb.cells.insert(heading + 1, box)


BANNERS = {"smoke": ("A <strong>smoke</strong> build: every chapter ran end to end on tiny models in seconds, to test "
                     "the plumbing. Its verdicts mean nothing about the paper's claims.")}  # profile -> banner


def announce(config_path: Path, banner: str) -> None:
    """Set the staged ``_config.yml``'s announcement (the theme's banner at the top of every page)."""
    import yaml

    config = yaml.safe_load(config_path.read_text()) or {}
    config.setdefault("html", {})["announcement"] = banner
    config_path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))


def _note(text: str, tag: str | None = web.SITE_NOTE_TAG):
    """A markdown cell for under a page's title (tagged as this module's, unless ``tag`` is None)."""
    return nbformat.v4.new_markdown_cell(text, **({"metadata": {"tags": [tag]}} if tag else {}))


def _chapter(name: str, source: Path, profile: str) -> tuple:
    """A chapter's executed notebook (else its source) and the notes for under its title: the build
    stamp (for the stamp cell) and a warning where it was not executed or its source changed since."""
    executed = output_dir(name, profile, {"profile": profile}) / f"{name}.ipynb"
    if not executed.exists():
        return nbformat.read(source, as_version=4), [_note(
            f"```{{warning}}\nThis chapter has not been executed for profile `{profile}` yet.\n```", None)]
    nb, notes = nbformat.read(executed, as_version=4), []
    meta = nb.metadata.get("rote", {})
    if nb.cells and "papermill-error-cell-tag" in web.tags(nb.cells[0]):
        del nb.cells[0]  # papermill's banner above the title: the stamp says the same, under it
    web.readable_settings(nb)  # the folders papermill injected, without the build machine's paths
    for cell in [c for c in nb.cells if STAMP_TAG in web.tags(c)]:
        nb.cells.remove(cell)
        if meta:
            cell.source = web.stamp_markdown(meta, web.effective_parameters(nb))
        notes.append(cell)
    if meta.get("source_sha") != source_hash(source):
        notes.append(_note("```{warning}\nThe chapter's source changed after this page was executed; rebuild it.\n```",
                           None))
    return nb, notes


def front_page(text: str, profile: str, records: list[ClaimRecord], glance: str = "",
               settings: Settings | None = None) -> str:
    """``book/intro.md`` filled from this build's records and timings (:func:`rote.build.frontpage.stage_intro`),
    with ``glance``, the image of its "At a glance" figure, where drawn; ``settings``: the book's seeds and records."""
    times, settings = display.build_times(profile, web.BUILD_DIR), settings or Settings(profile=profile)
    return frontpage.stage_intro(text, frontpage.Build(
        profile, tuple(settings.seed_list), tuple(plan.protocol_seeds(profile)), tuple(records),
        float(times.seconds.sum()) if len(times) else None, settings.results), glance=glance)


GLANCE_IMAGE = "at_a_glance"  # the front page's figure, book/at_a_glance.png in the staged site


def draw_glance(folder: Path, profile: str, records: list[ClaimRecord]) -> str:
    """The scorecard's "At a glance" heat map of ``records`` drawn into ``folder``; its file name ("" without
    records)."""
    if not records:
        return ""
    import matplotlib.pyplot as plt

    from .. import plots

    fig = plots.verdict_heatmap(display.claims_table(records), f"Amended verdicts, {profile} profile", compact=True)
    plots.save_figure(fig, GLANCE_IMAGE, folder)
    plt.close(fig)
    return f"{GLANCE_IMAGE}.png"


def repository_branch(config_path: Path) -> str:
    """The branch the staged ``_config.yml`` names for the repository's files (``repository.branch``)."""
    import yaml

    return str(((yaml.safe_load(config_path.read_text()) or {}).get("repository") or {}).get("branch") or "main")


def _stage_text_pages(folder: Path, profile: str, records: list[ClaimRecord], settings: Settings,
                      links: tuple[str, str] = ("", "")) -> None:
    """The text pages into ``folder``: figures and bibliography as they are, each ``.md`` with its rebuild
    note (the intro filled, the protocol's sections targets) and its source files linked (``links``: the
    repository URL and branch; none where the URL is empty), and the generated pages."""
    glance = draw_glance(folder, profile, records)
    for path in web.BOOK_DIR.iterdir():
        if path.suffix in (".png", ".bib"):
            shutil.copy(path, folder / path.name)
        elif path.suffix == ".md":
            text = (front_page(path.read_text(), profile, records, glance, settings) if path.stem == "intro"
                    else path.read_text())
            if path.stem == frontpage.PROTOCOL_PAGE:  # a target per section, for the pages that cite it
                text = frontpage.protocol_markdown(text)
            (folder / path.name).write_text(web.link_sources(text, *links) + web.static_page_note(profile))
    fill_generated_pages(folder)  # the Build environment and parameter reference pages


def fill_generated_pages(folder: Path) -> list[str]:
    """Replace each generated page's marker in ``folder``'s ``*.md`` with its text (the Build environment
    and parameter reference pages); the names of the pages filled."""
    from . import provenance, reference

    makers = {provenance.MARKER: provenance.environment_page, reference.MARKER: reference.parameters_page}
    filled = []
    for path in sorted(folder.glob("*.md")):
        text = path.read_text()
        found = [marker for marker in makers if marker in text]
        if found:
            for marker in found:
                text = text.replace(marker, makers[marker]())
            path.write_text(text)
            filled.append(path.name)
    return filled


def render_site(profile: str, settings: Settings | None = None) -> int:
    """Stage the site (from the book's ``settings``) and render it with Jupyter Book into ``<site root>/_build/html``
    (warnings are errors)."""
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(stage_site(profile, settings)),
           "--path-output", str(site_root()), "--all", "-W", "--keep-going"]
    return subprocess.run(cmd, cwd=PROJECT_ROOT).returncode


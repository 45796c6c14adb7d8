"""Where the book's source lives: one setting, the repository URL, and what the site does with it.

The URL is ``repository: url:`` in ``_config.yml`` (Jupyter Book 1.x's own key), or ``$ROTE_REPOSITORY_URL``,
which wins. :func:`rote.staging.stage_site` writes the staged ``_config.yml`` through :func:`stage_config`:

- URL set: the theme's repository and issue buttons on every page, and a Colab launch button on every
  chapter (a notebook page), which opens the chapter's notebook from ``repository.branch`` in Colab;
- URL unset (empty): none of these buttons, and ``repository.url`` stays empty, so that Jupyter Book's
  default (its own repository, which the theme would otherwise link) appears nowhere on the site.

Colab opens the committed notebook, not the site's copy. So every chapter has one code cell (tagged
``remove-cell``, so that the site never shows it, and ``colab-install``) that, run in Colab, clones the
repository named in it and installs rote from the clone; anywhere else it does nothing. While no URL is
configured the cells name :data:`PLACEHOLDER`. After setting the URL, :func:`write_colab_cells` writes it
into every chapter's cell (``tests/test_publish.py`` checks that the cells name the configured URL).
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

from .config import PROJECT_ROOT

ENV = "ROTE_REPOSITORY_URL"
COLAB_URL = "https://colab.research.google.com"
COLAB_TAG = "colab-install"
PLACEHOLDER = "https://github.com/OWNER/REPOSITORY"  # in the Colab cells while no URL is configured
CLONE_DIR = "/content/rote"  # where the Colab cell clones the repository (Colab's working folder is /content)
GITHUB_URL = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def normalize(url: str | None) -> str:
    """The URL as the site uses it (no trailing slash or ``.git``), "" when unset; a URL that is not a
    GitHub repository's (``https://github.com/OWNER/REPO``) is refused: the Colab button needs GitHub."""
    url = (url or "").strip().rstrip("/")
    url = url[:-4] if url.endswith(".git") else url
    if url and not GITHUB_URL.fullmatch(url):
        raise ValueError(f"the repository URL must be a GitHub repository's, https://github.com/OWNER/REPO; got {url!r}")
    return url


def configured_url(config_path: Path | None = None) -> str:
    """``repository.url`` of ``_config.yml`` (the committed setting), "" when unset."""
    import yaml

    config = yaml.safe_load(Path(config_path or PROJECT_ROOT / "_config.yml").read_text()) or {}
    return normalize((config.get("repository") or {}).get("url"))


def repository_url(config_path: Path | None = None) -> str:
    """The repository URL of the site: ``$ROTE_REPOSITORY_URL`` where set (non-empty), else ``_config.yml``'s."""
    return normalize(os.environ[ENV]) if os.environ.get(ENV, "").strip() else configured_url(config_path)


def site_config(config: dict, url: str) -> dict:
    """A copy of the book's configuration with the repository settings that follow from ``url``."""
    config = copy.deepcopy(config)
    repository = config.setdefault("repository", {})
    repository["url"] = url  # "": never Jupyter Book's default, its own repository
    repository.setdefault("branch", "main")
    repository.setdefault("path_to_book", "")  # the staged site keeps the repository's layout (book/...)
    shown = bool(url)
    html = config.setdefault("html", {})
    html.update(use_repository_button=shown, use_issues_button=shown, use_edit_page_button=False)
    config["launch_buttons"] = {**(config.get("launch_buttons") or {}), "colab_url": COLAB_URL if shown else "",
                                "binderhub_url": "", "jupyterhub_url": "", "thebe": False}
    return config


def stage_config(path: Path) -> str:
    """Rewrite the staged ``_config.yml`` at ``path`` (a copy of the project's) for the repository URL,
    :func:`repository_url` (the environment's, else the file's); returns the URL ("" when unset)."""
    import yaml

    url = repository_url(path)
    config = site_config(yaml.safe_load(path.read_text()) or {}, url)
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return url


# -- the Colab install cell of each chapter --------------------------------------------------------
def colab_cell_source(url: str | None = None) -> str:
    """The chapter's Colab cell: in Colab, clone ``url`` (else :data:`PLACEHOLDER`) and install rote from
    the clone (pyproject.toml's packages; myst-nb for the chapters' ``glue``); elsewhere nothing."""
    repo = url or PLACEHOLDER
    return "\n".join([
        "import os, subprocess, sys  # in Colab only (the site's launch button): fetch and install rote; elsewhere nothing",
        f'if "google.colab" in sys.modules and not os.path.isdir("{CLONE_DIR}"):',
        f'    subprocess.run(["git", "clone", "-q", "--depth=1", "{repo}", "{CLONE_DIR}"], check=True)',
        f'    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--ignore-requires-python", "-e", "{CLONE_DIR}",',
        '                    "myst-nb"], check=True)',
        f'    sys.path.insert(0, "{CLONE_DIR}")  # this kernel started before the install',
    ])


def colab_cells(nb: dict) -> list[dict]:
    """The cells of a notebook (nbformat or its JSON) tagged :data:`COLAB_TAG`."""
    return [c for c in nb["cells"] if COLAB_TAG in (c.get("metadata") or {}).get("tags", [])]


def colab_repository(source: str) -> str | None:
    """The repository a Colab cell clones."""
    found = re.search(r'"git", "clone",[^\]]*?"(https://[^"]+)"', source)
    return found.group(1) if found else None


def write_colab_cells(url: str | None = None, book_dir: Path | None = None) -> list[Path]:
    """Write the Colab cell for ``url`` (default: the configured one, :func:`configured_url`) into every
    chapter notebook that has one, touching nothing else in the file; returns the notebooks changed."""
    url = normalize(url) if url is not None else configured_url()
    changed = []
    for path in sorted(Path(book_dir or PROJECT_ROOT / "book").glob("*.ipynb")):
        raw = path.read_text()
        nb = json.loads(raw)
        for cell in colab_cells(nb):
            cell["source"] = colab_cell_source(url).splitlines(keepends=True)
        text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        if text != raw:
            path.write_text(text)
            changed.append(path)
    return changed

"""Where the book's source lives: the repository URL (``repository: url:`` in ``_config.yml``, or
``$ROTE_REPOSITORY_URL``, which wins) and what the site does with it. Set: the repository and issue
buttons and a Colab launch button on every chapter; unset: none of them, and no default URL anywhere.
Colab opens the committed notebook, so each chapter has a hidden ``colab-install`` cell that, in Colab
only, clones the repository it names and installs rote (:func:`write_colab_cells` writes the URL in).
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

from ..config import PROJECT_ROOT

ENV = "ROTE_REPOSITORY_URL"
COLAB_URL = "https://colab.research.google.com"
COLAB_TAG = "colab-install"
PLACEHOLDER = "https://github.com/OWNER/REPOSITORY"  # in the Colab cells while no URL is configured
CLONE_DIR = "/content/rote"  # where the Colab cell clones the repository (Colab's working folder is /content)
GITHUB_URL = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def normalize(url: str | None) -> str:
    """The URL without trailing slash or ``.git`` ("" when unset); only a GitHub repository's (Colab)."""
    url = (url or "").strip().rstrip("/").removesuffix(".git")
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
    config.setdefault("html", {}).update(use_repository_button=shown, use_issues_button=shown,
                                         use_edit_page_button=False)
    config["launch_buttons"] = {**(config.get("launch_buttons") or {}), "colab_url": COLAB_URL if shown else "",
                                "binderhub_url": "", "jupyterhub_url": "", "thebe": False}
    return config


def stage_config(path: Path) -> str:
    """Rewrite the staged ``_config.yml`` at ``path`` for :func:`repository_url`; returns the URL."""
    import yaml

    url = repository_url(path)
    config = site_config(yaml.safe_load(path.read_text()) or {}, url)
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return url


# -- the Colab install cell of each chapter --------------------------------------------------------
def colab_cell_source(url: str | None = None) -> str:
    """The chapter's Colab cell: in Colab, clone ``url`` (else :data:`PLACEHOLDER`) and install rote."""
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


def write_colab_cells(url: str | None = None, book_dir: Path | None = None) -> list[Path]:
    """Write the Colab cell for ``url`` (default: :func:`configured_url`) into every chapter that has
    one, nothing else; returns the notebooks changed."""
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

"""Analysis results that several chapters share, computed once per run and stored beside the runs.

The analyses themselves (:mod:`rote.analysis`) never touch files; this thin layer between them and
the chapters does, for results that more than one chapter needs. Layout under the root
(``$ROTE_ANALYSIS``, else ``_build/analysis`` in the project folder)::

    <task>-<run key>/erasure_sites-<parameters hash>.json

A file is written to a temporary name and renamed into place, so a reader never sees half of one;
two processes computing the same entry write the same content. The hash covers the parameters and
:data:`VERSION`: change the version when the computation changes, and old entries are ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .analysis.erasure import erasure_sites
from .analysis.sets import correct
from .config import PROJECT_ROOT

VERSION = 1


def analysis_root() -> Path:
    if os.environ.get("ROTE_ANALYSIS"):
        return Path(os.environ["ROTE_ANALYSIS"]).expanduser()
    return PROJECT_ROOT / "_build" / "analysis"


def _entry(run, name: str, params: dict, root: Path | None) -> Path:
    digest = hashlib.sha256(json.dumps({"version": VERSION, **params}, sort_keys=True).encode()).hexdigest()[:16]
    return (root or analysis_root()) / f"{run.config.task}-{run.config.key}" / f"{name}-{digest}.json"


def _write_atomically(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True))
    os.replace(tmp, path)


def erasure_sites_cached(run, *, min_over_chance: float, max_train: int = 2000, seed: int = 0,
                         root: Path | None = None) -> dict:
    """:func:`rote.analysis.erasure.erasure_sites` of a run (probes trained on its clean training
    examples, read on the test examples it answers correctly), computed once and stored.

    Chapters 04 (erasure, C3) and 05 (the intermediate result's share of P(noisy label), C4) erase
    at the same sites; this is where both get them. Returns {"group", "targets", "layers", "positions"}.
    """
    params = {"min_over_chance": float(min_over_chance), "max_train": int(max_train), "seed": int(seed)}
    path = _entry(run, "erasure_sites", params, root)
    if path.exists():
        return json.loads(path.read_text())["sites"]
    clean = correct(run.model, run.data.test)
    sites = erasure_sites(run.model, run.data, run.data.train_clean, clean, run.config.task, min_over_chance,
                          max_train=max_train, seed=seed)
    _write_atomically(path, {"params": params, "version": VERSION, "sites": sites})
    return sites

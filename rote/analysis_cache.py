"""Analysis results that several chapters share, computed once per run and stored beside the runs
(the ``root`` a caller passes, else ``_build/analysis``): ``<task>-<run key>/<name>-<hash>.json``, keyed by the
parameters and a fingerprint of the computing code (:data:`PROBE_SWEEP_SOURCES` and their imports,
docstrings aside). An entry that fails verification is moved to ``.corrupt/`` and recomputed; files are
written atomically. Stored: C2's probe sweep of a run, from which chapters 04 and 05 derive their erasure
sites (protocol 8.6: the sites are C2's probe results), and beside it the parameters chapter 03 last swept the
run with (:func:`record_probe_choice`), so that those chapters read the same sweep, ``-p`` overrides included.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from .analysis.erasure import sites_from_sweep
from .analysis.probes import ProbeSettings, ProbeSweep, ProbeTargets, sweep_probes
from .analysis.sets import correct, memorized
from .analysis.targets import probe_positions
from .config import PROJECT_ROOT, fingerprint_sources
from .runs import quarantine

# The stored layout of an entry (what the file holds, not the computation: that is the fingerprint).
FORMAT = 2
_PACKAGE_DIR = Path(__file__).resolve().parent
# The code behind probe_sweep_cached: this module (which chooses the examples) and the analysis it
# calls; their imports (targets, lens, intervals, erasure, scoring, model, tasks, ...) are followed.
PROBE_SWEEP_SOURCES = ("analysis_cache.py", "analysis/probes.py", "analysis/sets.py")


class AnalysisCacheError(RuntimeError):
    """A stored analysis entry failed verification."""


def analysis_root() -> Path:
    """The project's default analysis folder (a caller with an analysis folder setting passes it as ``root``)."""
    return PROJECT_ROOT / "_build" / "analysis"


def sources_fingerprint(roots: tuple[str, ...], package_dir: Path = _PACKAGE_DIR) -> str:
    """Hash of the normalized sources of ``roots`` (paths in the package) and everything they import."""
    h = hashlib.sha256()
    for rel, source in fingerprint_sources(package_dir, roots=roots).items():
        h.update(rel.encode() + b"\0" + source.encode() + b"\0")
    return h.hexdigest()[:12]


@functools.lru_cache(maxsize=None)
def code_fingerprint(roots: tuple[str, ...] = PROBE_SWEEP_SOURCES) -> str:
    """The code fingerprint of an analysis (computed once per process). Tests may patch this."""
    return sources_fingerprint(tuple(roots))


def _value_digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _entry(run, name: str, params: dict, code: str, root: Path | None) -> Path:
    blob = json.dumps({"format": FORMAT, "name": name, "code": code, **params}, sort_keys=True).encode()
    digest = hashlib.sha256(blob).hexdigest()[:16]
    return (root or analysis_root()) / f"{run.config.task}-{run.config.key}" / f"{name}-{digest}.json"


def _write_atomically(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(json.dumps(obj, indent=2, sort_keys=True))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _read_verified(path: Path, params: dict, code: str):
    """The stored value, if the entry is whole and is the one asked for; else AnalysisCacheError."""
    try:
        stored = json.loads(path.read_text())
        checks = [(stored["format"] == FORMAT, f"format {stored['format']} != {FORMAT}"),
                  (stored["params"] == params, "stored parameters differ from the requested ones"),
                  (stored["code"] == code, "stored code fingerprint differs from the current one"),
                  (_value_digest(stored["value"]) == stored["sha256"], "the value does not match its checksum")]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise AnalysisCacheError(f"unreadable ({type(err).__name__}: {err})") from None
    for ok, reason in checks:
        if not ok:
            raise AnalysisCacheError(reason)
    return stored["value"]


def cached(run, name: str, params: dict, compute, *, sources: tuple[str, ...], root: Path | None = None):
    """``compute()`` for ``run``, stored under (run, name, params, code of ``sources``) and read back."""
    root = root or analysis_root()
    code = code_fingerprint(sources)
    path = _entry(run, name, params, code, root)
    if path.exists():
        try:
            return _read_verified(path, params, code)
        except AnalysisCacheError as err:
            quarantine(root, path, str(err), "analysis", "recomputing")
    value = compute()
    _write_atomically(path, {"format": FORMAT, "name": name, "params": params, "code": code,
                             "sha256": _value_digest(value), "value": value})
    return value


def probe_sweep_cached(run, *, positions=None, settings: ProbeSettings = ProbeSettings(),
                       root: Path | None = None) -> ProbeSweep:
    """C2's probe sweep of a run (:func:`rote.analysis.probes.sweep_probes`), stored: every target at
    every layer and ``positions`` (default C2's), fitted on clean training examples, read on M
    (memorized) and C (correct on test)."""
    positions = probe_positions(run.config.task) if positions is None else tuple(sorted(set(positions)))
    params = {"positions": [int(p) for p in positions], "max_train": settings.max_train, "seed": settings.seed,
              "weight_decay": float(settings.weight_decay), "max_iter": settings.max_iter, "chunk": settings.chunk,
              "sets": {"M": "memorized", "C": "correct on test"}}

    def compute():
        sets = {"M": memorized(run.model, run.data), "C": correct(run.model, run.data.test)}
        return sweep_probes(run.model, run.data, run.data.train_clean, sets, ProbeTargets(positions=positions),
                            settings).to_json()

    return ProbeSweep.from_json(cached(run, "probe_sweep", params, compute, sources=PROBE_SWEEP_SOURCES, root=root))


def erasure_sites_cached(run, *, min_over_chance: float, positions=None, settings: ProbeSettings | None = None,
                         root: Path | None = None) -> dict:
    """Where chapters 04 and 05 erase (8.6): from C2's probe sweep entry, the layers after the embedding
    where the probe reads the result on C at least ``min_over_chance`` times chance
    (:func:`rote.analysis.erasure.sites_from_sweep`). With neither ``positions`` nor ``settings`` given, the
    sweep chapter 03 last computed for the run (:func:`chapter_probe_choice`: its ``-p`` parameters too)."""
    if positions is None and settings is None:
        positions, settings = chapter_probe_choice(run, root)
    sweep = probe_sweep_cached(run, positions=positions, settings=settings or ProbeSettings(), root=root)
    return sites_from_sweep(sweep.table, run.config.task, float(min_over_chance))


CHOICE_NAME = "chapter03_probe_sweep.json"  # beside a run's entries: the sweep parameters chapter 03 last used
_CHOSEN = ("max_train", "seed", "weight_decay", "max_iter", "chunk")


def record_probe_choice(run, *, positions, settings: ProbeSettings, root: Path | None = None) -> None:
    """Store the parameters of the probe sweep chapter 03 read for ``run`` (8.6: C3 and C4 act where C2's probes
    of the same seed, the same fit, examples and layers, find the result; a ``-p`` of chapter 03 moves them too)."""
    path = (root or analysis_root()) / f"{run.config.task}-{run.config.key}" / CHOICE_NAME
    _write_atomically(path, {"format": FORMAT, "positions": sorted(int(p) for p in set(positions)),
                             **{k: getattr(settings, k) for k in _CHOSEN}})


def chapter_probe_choice(run, root: Path | None = None) -> tuple[tuple[int, ...] | None, ProbeSettings]:
    """The positions and settings of chapter 03's last probe sweep of ``run`` (:func:`record_probe_choice`);
    chapter 03's defaults (None: C2's positions, :class:`ProbeSettings`) where it has not run. A damaged record
    is moved aside and the defaults used."""
    root = root or analysis_root()
    path = root / f"{run.config.task}-{run.config.key}" / CHOICE_NAME
    if not path.exists():
        return None, ProbeSettings()
    try:
        stored = json.loads(path.read_text())
        if stored["format"] != FORMAT:
            raise ValueError(f"format {stored['format']} != {FORMAT}")
        return tuple(int(p) for p in stored["positions"]), ProbeSettings(**{k: stored[k] for k in _CHOSEN})
    except (OSError, ValueError, KeyError, TypeError) as err:
        quarantine(root, path, f"{type(err).__name__}: {err}", "analysis", "using chapter 03's default probes")
        return None, ProbeSettings()

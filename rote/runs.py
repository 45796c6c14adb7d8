"""The run cache: a trained run stored under a key derived from its full configuration.

Under the root (the ``root`` a caller passes: the settings' runs folder, :mod:`rote.settings`; else
``_build/runs``): ``<task>-<key>/`` a finished run (config.json, metrics.csv, final.pt, checkpoints/, manifest.json
with every file's SHA-256 and how the run trained: device, precision, stacked with how many runs, :mod:`rote.stack`),
never modified;
``.partial/<task>-<key>/`` a run in training (resumes from ``resume.pt``); ``.corrupt/`` entries that
failed verification, moved aside and retrained; ``.progress/<task>-<key>.json`` the step a run reached.
A run appears by one atomic ``os.rename``. The key hashes the configuration, the schema version and the
code fingerprint (:func:`rote.config.code_fingerprint`: editing training code retrains every run).
Each entry is built under an exclusive ``flock`` (``.locks/``), so any number of processes, on one
machine or, on a filesystem with atomic rename and cross-node flock (NFSv4, Lustre ``-o flock``,
GPFS, BeeGFS), on many, may train into one root.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd
import torch

from .config import PROJECT_ROOT, RunConfig, code_fingerprint
from .model import HookedTransformer, ModelShape, pick_device
from .tasks import TaskData, build_task
from .fmt import entry_name, run_name, say as _say
from .train import TRAIN_THREADS, train


class CacheError(RuntimeError):
    """A stored run failed verification."""


def runs_root() -> Path:
    """The project's default runs folder (a caller with a runs folder setting passes it as ``root``)."""
    if (PROJECT_ROOT / "pyproject.toml").exists():
        return PROJECT_ROOT / "_build" / "runs"
    return Path.home() / ".cache" / "rote" / "runs"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _atomic_save(obj, path: Path) -> None:
    """``obj`` into ``path`` by a rename: text as text, anything else by ``torch.save``."""
    tmp = path.with_name(path.name + ".tmp")
    if isinstance(obj, str):
        tmp.write_text(obj)
    else:
        torch.save(obj, tmp)
    os.replace(tmp, path)


def _model_dict(model: HookedTransformer) -> dict:
    shape = model.shape
    return {"shape": {"n_layers": shape.n_layers, "d_model": shape.d_model, "n_heads": shape.n_heads,
                      "vocab_size": shape.vocab_size, "n_ctx": shape.n_ctx},
            "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}}


@dataclass
class Run:
    """A finished run: its configuration, learning curves, and models along the way."""

    config: RunConfig
    path: Path
    cached: bool
    metrics: pd.DataFrame = field(repr=False)

    @cached_property
    def data(self) -> TaskData:
        return build_task(self.config)

    @property
    def checkpoint_steps(self) -> list[int]:
        return sorted(int(p.stem.split("_")[1]) for p in (self.path / "checkpoints").glob("step_*.pt"))

    def load_model(self, step: int | None = None, device=None) -> HookedTransformer:
        """The final model, or the checkpoint at ``step``."""
        path = self.path / "final.pt" if step is None else self.path / "checkpoints" / f"step_{step:06d}.pt"
        if not path.exists():
            raise FileNotFoundError(f"no checkpoint at step {step}; have {self.checkpoint_steps}")
        stored = torch.load(path, map_location="cpu", weights_only=True)
        model = HookedTransformer(ModelShape(**stored["shape"]))
        model.load_state_dict(stored["state_dict"])
        return model.to(pick_device(device)).eval()

    @cached_property
    def model(self) -> HookedTransformer:
        return self.load_model()

    @property
    def final(self) -> dict:
        return self.metrics.iloc[-1].to_dict()

    @property
    def train_seconds(self) -> float:
        return float(self.metrics["seconds"].iloc[-1])


def verify(path: Path, config: RunConfig) -> pd.DataFrame:
    """Check a stored entry against its manifest and configuration; return its metrics."""
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
        raise CacheError("manifest.json is missing")
    try:
        manifest = json.loads(manifest_path.read_text())
        stored = RunConfig.from_dict(json.loads((path / "config.json").read_text()))
    except (ValueError, KeyError, TypeError, OSError) as err:
        raise CacheError(f"unreadable manifest or config ({err})") from None
    if stored != config:
        raise CacheError("stored configuration differs from the requested one")
    for name, digest in manifest["files"].items():
        file = path / name
        if not file.exists():
            raise CacheError(f"{name} is missing")
        if _sha256(file) != digest:
            raise CacheError(f"{name} does not match its checksum")
    try:
        return pd.read_csv(path / "metrics.csv")
    except (ValueError, OSError) as err:
        raise CacheError(f"metrics.csv is unreadable ({err})") from None


@contextlib.contextmanager
def _lock(root: Path, name: str):
    (root / ".locks").mkdir(parents=True, exist_ok=True)
    with open(root / ".locks" / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # closing the file releases it
        yield


def quarantine(root: Path, path: Path, reason: str, kind: str = "run", then: str = "retraining") -> None:
    """Move a damaged cache entry aside to ``root/.corrupt/`` (in its folder there), saying so."""
    name = path.relative_to(root)
    target = root / ".corrupt" / name.parent / f"{path.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    _say(f"cached {kind} {name} is damaged ({reason}); moved to {target} and {then}")


def lookup(config: RunConfig, root: Path | None = None) -> Run | None:
    """The stored run for ``config`` if a verified one exists (a damaged one is moved aside)."""
    root = root or runs_root()
    path = root / entry_name(config)
    if not path.exists():
        return None
    try:
        metrics = verify(path, config)
    except CacheError as err:
        quarantine(root, path, str(err))
        return None
    return Run(config, path, cached=True, metrics=metrics)


TRAINED_HOW = ("device", "precision", "stacked", "host")  # what a manifest says of how its run trained


def how_trained(task: str, key: str, root: Path | None = None) -> dict | None:
    """How the stored run of ``task`` with run key ``key`` trained, from its manifest (:data:`TRAINED_HOW`: device,
    precision, stacked with how many runs, 1 for solo, and host; a field its manifest lacks, written before that
    field was, is left out); None where no run of that key is stored under ``root`` (None: the project's)."""
    path = (root or runs_root()) / run_name(task, key) / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return {k: manifest[k] for k in TRAINED_HOW if k in manifest}


def status(config: RunConfig, root: Path | None = None) -> str:
    """"cached", "partial <step>" (an interrupted run that will resume) or "missing"; no verification."""
    root = root or runs_root()
    name = entry_name(config)
    if (root / name / "manifest.json").exists():
        return "cached"
    checkpoints = sorted((root / ".partial" / name / "checkpoints").glob("step_*.pt"))
    if (root / ".partial" / name / "resume.pt").exists() and checkpoints:
        return f"partial {int(checkpoints[-1].stem.split('_')[1])}"
    return "missing"


def _write_progress(root: Path, name: str, config: RunConfig, row: dict) -> None:
    (root / ".progress").mkdir(parents=True, exist_ok=True)
    info = {"step": int(row["step"]), "steps": config.train.steps, "seconds": float(row["seconds"]),
            "gen": float(row["gen"]), "mem": float(row["mem"]), "time": time.time(), "host": os.uname().nodename,
            "pid": os.getpid()}
    tmp = root / ".progress" / f"{name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(info))
    os.replace(tmp, root / ".progress" / f"{name}.json")


def read_progress(config: RunConfig, root: Path | None = None) -> dict | None:
    try:
        return json.loads(((root or runs_root()) / ".progress" / f"{entry_name(config)}.json").read_text())
    except (OSError, ValueError):
        return None


def get_or_train(config: RunConfig, *, device=None, progress: bool | str = True, root: Path | None = None,
                 on_checkpoint=None) -> Run:
    """Load the cached run for ``config``, or train it (resuming an interrupted attempt) and store it;
    ``progress`` as :func:`rote.train.train` takes it (True, False or "plain")."""
    root = root or runs_root()
    root.mkdir(parents=True, exist_ok=True)
    name = entry_name(config)
    with _lock(root, name):
        run = lookup(config, root)
        if run is not None:
            return run
        partial, resume = _begin(root, name, config)
        data = build_task(config)
        model, metrics = train(config, data, device=device, resume=resume,
                               on_checkpoint=_checkpointer(partial, on_checkpoint), progress=progress,
                               on_eval=lambda row: _write_progress(root, name, config, row))
        return _store(root, name, config, data, model, metrics, {"device": pick_device(device).type, "stacked": 1})


def _begin(root: Path, name: str, config: RunConfig) -> tuple[Path, dict | None]:
    """The run's ``.partial`` folder (made, with its config.json) and its resume state (None: from scratch)."""
    partial = root / ".partial" / name
    (partial / "checkpoints").mkdir(parents=True, exist_ok=True)
    _atomic_save(json.dumps(config.to_dict(), indent=2, sort_keys=True), partial / "config.json")
    resume = None
    if (partial / "resume.pt").exists():
        try:
            resume = torch.load(partial / "resume.pt", map_location="cpu", weights_only=True)
            _say(f"resuming {name} from step {resume['step']}")
        except Exception as err:  # a damaged resume file: start over rather than fail
            _say(f"resume state of {name} is unreadable ({err}); training from scratch")
            resume = None
    return partial, resume


def _checkpointer(partial: Path, on_checkpoint=None):
    """The ``on_checkpoint`` of :func:`rote.train.train` that stores a checkpoint and the resume state."""
    def checkpoint(step, model, optimizer, metrics, loss_window):
        _atomic_save(_model_dict(model), partial / "checkpoints" / f"step_{step:06d}.pt")
        _atomic_save({"model": _model_dict(model)["state_dict"], "optimizer": optimizer.state_dict(),
                      "step": step, "metrics": metrics, "loss_window": list(loss_window)},
                     partial / "resume.pt")
        if on_checkpoint is not None:
            on_checkpoint(step)

    return checkpoint


def _store(root: Path, name: str, config: RunConfig, data: TaskData, model: HookedTransformer, metrics: list,
           how: dict) -> Run:
    """Store a trained run: final model, metrics, manifest (its files' checksums and ``how`` it trained:
    device, stacked with how many runs, precision), then one rename from ``.partial`` to its key."""
    partial = root / ".partial" / name
    _atomic_save(_model_dict(model), partial / "final.pt")
    pd.DataFrame(metrics).to_csv(partial / "metrics.csv", index=False)
    (partial / "resume.pt").unlink()
    files = sorted(str(p.relative_to(partial)) for p in partial.rglob("*") if p.is_file())
    manifest = {"files": {f: _sha256(partial / f) for f in files}, "created": time.time(),
                "code": code_fingerprint(), "host": os.uname().nodename, "threads": TRAIN_THREADS,
                "precision": config.train.precision, **how}
    _atomic_save(json.dumps(manifest, indent=2), partial / "manifest.json")
    os.rename(partial, root / name)
    with contextlib.suppress(OSError):
        (root / ".progress" / f"{name}.json").unlink()
    run = Run(config, root / name, cached=False, metrics=pd.read_csv(root / name / "metrics.csv"))
    run.data = data  # reuse the generated data (cached_property slot)
    return run

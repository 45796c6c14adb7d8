"""The pre-registered thresholds of protocol section 5, in one place, and the claim record format.

A chapter computes a claim's metrics, calls :func:`record` and :func:`save`; the scorecard reads
every record with :func:`load_all`. A claim that was never computed shows as ``not run``.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .config import PROJECT_ROOT, RunConfig, make_config

CLAIMS = {
    "C1": "Generalize first, then memorize; the memorization is benign",
    "C2": "Intermediate results are still computed on memorized examples",
    "C3": "Intervening on the reasoning hurts memorization; the circuits overlap",
    "C4": "Distributed encoding, not a look-up",
    "C5": "FDA outlier heuristics",
}
CLAIM_TASKS = {"C1": ("fda", "thr"), "C2": ("fda", "thr"), "C3": ("fda", "thr"), "C4": ("fda", "thr"),
               "C5": ("fda",)}

# -- thresholds (protocol section 5); never moved after seeing a result -------------------------
THRESHOLDS: dict[str, dict[str, float]] = {
    "C1": {
        "t_gen_level": 0.9,  # t_gen = first evaluated step with gen >= 0.9
        "t_mem_level": 0.5,  # t_mem = first evaluated step with mem >= 0.5
        "final_mem_min": 0.9,
        "final_gen_min": 0.9,
        "benign_gen_drop_max": 0.05,  # gen(noisy run) >= gen(noise-free run) - 0.05
    },
    "C2": {
        "probe_ratio_min": 0.8,  # probe accuracy on M >= 0.8 x accuracy on C
        "probe_over_chance_min": 5.0,  # ... and >= 5 x chance
    },
    "C3": {
        "erasure_mem_drop_over_control_min": 0.3,
        "overlap_min": 0.5,
        "overlap_over_random_min": 3.0,
        "top_fraction": 0.05,
    },
    "C4": {
        "k50_ratio_min": 0.5,  # median k50 on M >= 0.5 x median k50 on C
        "activity_fraction_min": 0.05,
        "activity_quantile": 0.9,
        "top_neurons": 10,
        "drop_min": 0.2,  # an input position / the intermediate result removes >= 20% of P(noisy label)
        "positions_min": 2,
    },
    "C5": {
        "heuristic_coverage_min": 0.8,
        "heuristic_fraction_min": 0.2,
        "z_ratio_min": 2.0,
        "pattern_corr_min": 0.5,
        "patch_revert_min": 0.5,
        "control_revert_max": 0.1,
    },
}

STATUSES = ("pass", "fail", "not run")


@dataclass(frozen=True)
class ClaimRecord:
    claim: str
    task: str
    profile: str
    status: str
    metrics: dict[str, Any]
    threshold: dict[str, Any]
    seeds: dict[str, int]
    checks: dict[str, bool] = field(default_factory=dict)  # each sub-condition of the claim
    created: float = 0.0
    run_keys: list[str] = field(default_factory=list)  # cache keys of the runs the numbers come from

    def __post_init__(self):
        if self.claim not in CLAIMS:
            raise ValueError(f"unknown claim {self.claim!r}")
        if self.task not in CLAIM_TASKS[self.claim]:
            raise ValueError(f"claim {self.claim} does not apply to task {self.task!r}")
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")


def record(claim: str, task: str, profile: str, metrics: dict, checks: dict[str, bool],
           configs: list[RunConfig]) -> ClaimRecord:
    """A record whose status is ``pass`` exactly when every check holds.

    ``configs`` are the runs the numbers come from (first the noisy run); the record keeps the
    noisy run's seeds and every run's cache key, so a record can be traced to its runs and a stale
    one recognized (:func:`runs_are_profile_defaults`)."""
    checks = {k: bool(v) for k, v in checks.items()}
    status = "pass" if checks and all(checks.values()) else "fail"
    return ClaimRecord(claim, task, profile, status, _plain(metrics), dict(THRESHOLDS[claim]), dict(configs[0].seeds),
                       checks, time.time(), [c.key for c in configs])


def runs_are_profile_defaults(rec: ClaimRecord) -> bool | None:
    """Whether the record comes from the profile's own runs (the default noisy run and its noise-free
    twin). False for runs with overrides and for records left from an older profile or code version;
    None when the record names no runs (not run)."""
    if not rec.run_keys:
        return None
    default = make_config(rec.task, rec.profile)
    return set(rec.run_keys) <= {default.key, default.replace(noise_ratio=0.0).key}


def _plain(value):
    """JSON-safe copy: numpy and torch scalars to Python numbers, NaN to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def results_root() -> Path:
    if os.environ.get("ROTE_RESULTS"):
        return Path(os.environ["ROTE_RESULTS"]).expanduser()
    return PROJECT_ROOT / "_build" / "results"


def save(rec: ClaimRecord, root: Path | None = None) -> Path:
    root = (root or results_root()) / rec.profile
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{rec.claim}-{rec.task}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(asdict(rec), indent=2))
    os.replace(tmp, path)
    return path


def load_all(profile: str | None = None, root: Path | None = None) -> list[ClaimRecord]:
    """Every (claim, task) pair for the profile(s): the stored record, or a ``not run`` placeholder."""
    root = root or results_root()
    if profile:
        profiles = [profile]
    else:  # every profile with stored records, and always the default one
        stored = {p.name for p in root.iterdir() if p.is_dir()} if root.exists() else set()
        profiles = sorted(stored | {"quick"})
    out = []
    for prof in profiles:
        for claim, tasks in CLAIM_TASKS.items():
            for task in tasks:
                path = root / prof / f"{claim}-{task}.json"
                if path.exists():
                    out.append(ClaimRecord(**json.loads(path.read_text())))
                else:
                    out.append(ClaimRecord(claim, task, prof, "not run", {}, dict(THRESHOLDS[claim]), {}))
    return out

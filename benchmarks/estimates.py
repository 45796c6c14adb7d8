"""How good are the run-time estimates? Each cached run's recorded time against what the estimator
(rote/build/timings.py) would have predicted for it without its own record.

Usage:
  .venv/bin/python benchmarks/estimates.py [--root _build/runs] [--probe] [--workers W] [--json]

For every finished run in the run cache (``<root>/<task>-<key>/``, read only):

- recorded: the worker's wall seconds for the run (its record in ``<root>/.timings.jsonl``; for a run
  trained before the store existed, the training seconds of its metrics.csv), its CPU seconds (record
  only), their ratio (``cpu/wall``: 1.0 on a machine running only the build, less when other work shared
  the cores) and whether other runs trained beside it (``pool``: sampled by the worker);
- leave-one-out: the estimator's prediction from every other record (other runs of the shape on this
  machine, else a stored probe, else other machines' runs, else the static formula), never probing;
- probe: the prediction from the stored probe of its shape alone (``--probe``: time shapes that have no
  stored probe now, in this process, storing nothing).

A prediction is a solo time; for a run that trained in a pool it is multiplied by
``rote.build.timings.SHARED_CORE_SLOWDOWN``, as ``rote plan`` does for a pool. Errors are (predicted - recorded)
/ recorded, against the wall time, and against the CPU time (what the wall time would have been had
the run's core been its own: the figure to read on a machine that other work shared). ``--workers W``:
runs without a record count as pooled when W > 1 (default 1).

Nothing is written: not to the cache, not to the store.
"""

from __future__ import annotations

import argparse
import csv
import os
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rote.build import timings as TM  # noqa: E402
from rote.config import ConfigError, RunConfig  # noqa: E402
from rote.build.timings import SHARED_CORE_SLOWDOWN, fmt_seconds  # noqa: E402

TARGET = 0.25


def cached_runs(root: Path) -> list[tuple[RunConfig, Path]]:
    out = []
    for path in sorted(root.iterdir()):
        if path.name.startswith(".") or not (path / "manifest.json").exists():
            continue
        try:
            config = RunConfig.from_dict(json.loads((path / "config.json").read_text()))
        except (OSError, ValueError, KeyError, TypeError, ConfigError):
            continue
        out.append((config, path))
    return out


def metric_seconds(path: Path) -> list[float]:
    try:
        with open(path / "metrics.csv") as f:
            return [float(row["seconds"]) for row in csv.DictReader(f)]
    except (OSError, ValueError, KeyError):
        return []


def label(config: RunConfig) -> str:
    d, m = config.data, config.model
    noise = f"{getattr(d, 'noise_kind', 'noise')} {d.noise_ratio:g}" if d.noise_ratio else "clean"
    return f"{config.task} s{m.model_seed} d{m.d_model} {noise} {config.train.precision}"


def pct(pred: float | None, truth: float | None) -> float | None:
    if pred is None or not truth:
        return None
    return 100.0 * (pred - truth) / truth


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=None, help="the run cache (default: $ROTE_RUNS, else _build/runs)")
    p.add_argument("--probe", action="store_true", help="time shapes without a stored probe now (nothing is stored)")
    p.add_argument("--workers", type=int, default=1, help="runs without a record count as pooled when > 1")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.root is None:  # a command line: the book's runs folder from the environment (rote.settings)
        from rote.runs import runs_root
        from rote.settings import read_environment

        root = read_environment(os.environ).runs or runs_root()
    else:
        root = Path(args.root)
    records = TM.read(root)
    by_key = {r["key"]: r for r in records if r["kind"] == "run"}
    probes = [r for r in records if r["kind"] == "probe"]
    probe_est = TM.Estimator(records=probes, probe=args.probe)  # probes only; new ones stay in memory
    rows = []
    for config, path in cached_runs(root):
        rec = by_key.get(config.key)
        seconds = metric_seconds(path)
        if rec is not None:
            wall, cpu = rec["wall_s"], rec["cpu_s"]
            pooled = float(rec.get("concurrent") or 0) >= 0.5
        elif seconds:
            wall, cpu, pooled = seconds[-1], None, args.workers > 1
        else:
            continue
        factor = SHARED_CORE_SLOWDOWN if pooled else 1.0
        loo = TM.Estimator(root, probe=False, exclude={config.key}, records=records).estimate(config)
        pr = probe_est.estimate(config)
        probe_s = pr.seconds * factor if pr.source in ("probe", "probe_now") else None
        cpu_truth = None if cpu is None else cpu
        rows.append({"run": path.name[:20], "what": label(config), "wall_s": round(wall, 1),
                     "cpu_s": None if cpu is None else round(cpu, 1),
                     "cpu/wall": None if cpu is None else round(cpu / wall, 2), "pool": pooled,
                     "recorded": "store" if rec is not None else "metrics",
                     "loo_s": round(loo.seconds * factor, 1), "loo_source": loo.source,
                     "loo_err_wall_%": pct(loo.seconds * factor, wall), "loo_err_cpu_%": pct(loo.seconds * factor, cpu_truth),
                     "probe_s": None if probe_s is None else round(probe_s, 1),
                     "probe_err_wall_%": pct(probe_s, wall), "probe_err_cpu_%": pct(probe_s, cpu_truth)})
    if args.json:
        print(json.dumps({"root": str(root), "machine": TM.machine(), "runs": rows}, indent=2))
        return 0
    if not rows:
        print(f"no cached runs in {root}")
        return 0
    import pandas as pd

    table = pd.DataFrame(rows)
    for col in [c for c in table.columns if c.endswith("_%")]:
        table[col] = table[col].map(lambda v: "-" if v is None or v != v else f"{v:+.0f}%")
    print(table.fillna("-").to_string(index=False))
    print(f"\nmachine: {TM.describe(TM.machine())}; {len(rows)} runs in {root}")
    for name in ("loo_err_wall_%", "loo_err_cpu_%", "probe_err_wall_%", "probe_err_cpu_%"):
        errs = [abs(r[name]) for r in rows if r[name] is not None]
        if errs:
            within = sum(e <= 100 * TARGET for e in errs)
            print(f"{name[:-2]:>15}: {within}/{len(errs)} within {TARGET:.0%}, median |error| "
                  f"{statistics.median(errs):.0f}%, worst {max(errs):.0f}%")
    total_wall = sum(r["wall_s"] for r in rows)
    print(f"recorded wall time of these runs: {fmt_seconds(total_wall)} (sum of runs, not the build's makespan)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One FDA calibration screen: train the quick FDA run with overrides, outside the run cache.

Usage: .venv/bin/python benchmarks/fda_screen.py NAME '{"steps": 4400, "weight_decay": 0.0}' [--threads 1]

Prints gen/fit/mem/rec every ``checkpoint_every`` steps (250 unless overridden) and writes the full
metric table to ``_build/screens/NAME.csv``. Two screens at ``--threads 1`` share the 2-core machine;
a run's numbers depend on the thread count, so screens rank configurations and the chosen profile is
re-measured with the pinned 2 threads (``python -m rote train``). Results: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import time

import pandas as pd

import rote.train as train_module
from rote import make_config
from rote.config import PROJECT_ROOT
from rote.tasks import build_task


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("overrides", help="JSON object of flat run parameters")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    overrides = {"eval_every": 250, "checkpoint_every": 250, **json.loads(args.overrides)}
    config = make_config("fda", "quick", **overrides)  # validated before any work
    train_module.TRAIN_THREADS = args.threads
    data = build_task(config)
    start = time.perf_counter()
    print(args.name, overrides, flush=True)
    print(" step   gen   fit   mem   rec  seconds", flush=True)

    def report(step, model, optimizer, metrics):
        row = metrics[-1]
        print(f"{row['step']:5d} {row['gen']:.3f} {row['fit']:.3f} {row['mem']:.3f} {row['rec']:.3f} "
              f"{time.perf_counter() - start:6.0f}", flush=True)

    _, metrics = train_module.train(config, data, progress=False, on_checkpoint=report)
    out = PROJECT_ROOT / "_build" / "screens" / f"{args.name}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(metrics).to_csv(out, index=False)


if __name__ == "__main__":
    main()

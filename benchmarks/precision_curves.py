"""The learning curves of the same quick runs trained in fp32 and in bf16, side by side: the figure
of book/calibration.md's precision section (issue 21, item 2).

Usage:
  .venv/bin/python benchmarks/precision_curves.py [--runs _build/runs] [--seeds 0 1] [--out book/precision_curves.png]

It reads the stored metrics (metrics.csv) of every run in the cache whose configuration is the quick
profile's noisy run of a task (FDA `random`, THR) at one of the seeds, in either precision, whatever
code version trained it (the manifest's code fingerprint is printed), and draws gen, mem and rec
against the step: one panel per task and seed, solid fp32, dashed bf16. Nothing is trained.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rote.config import RunConfig, make_config  # noqa: E402
from rote.plan import with_seed  # noqa: E402

METRICS = ("gen", "mem", "rec")


def find_runs(root: Path, seeds: list[int]) -> pd.DataFrame:
    """Metrics of the stored quick noisy runs (task, seed, precision), one row per evaluation."""
    rows = []
    for entry in sorted(root.glob("*-*")):
        try:
            config = RunConfig.from_dict(json.loads((entry / "config.json").read_text()))
            code = json.loads((entry / "manifest.json").read_text())["code"]
        except (OSError, ValueError, KeyError):
            continue  # partial or foreign entries
        seed = config.data.data_seed
        reference = with_seed(make_config(config.task, "quick", precision=config.train.precision), seed)
        if seed not in seeds or config != reference:
            continue
        metrics = pd.read_csv(entry / "metrics.csv")
        print(f"{entry.name}: {config.task} seed {seed} {config.train.precision} (code {code})", file=sys.stderr)
        for metric in METRICS:
            rows.append(pd.DataFrame({"task": config.task.upper(), "seed": seed, "precision": config.train.precision,
                                      "metric": metric, "step": metrics["step"], "value": metrics[metric]}))
    return pd.concat(rows, ignore_index=True).drop_duplicates() if rows else pd.DataFrame()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=Path, default=Path("_build/runs"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=Path("book/precision_curves.png"))
    args = parser.parse_args()
    data = find_runs(args.runs, args.seeds)
    if data.empty or data["precision"].nunique() < 2:
        sys.exit("no pair of fp32 and bf16 quick runs found in " + str(args.runs))
    sns.set_theme(style="whitegrid", context="paper")
    grid = sns.relplot(data=data, x="step", y="value", hue="metric", style="precision", row="task", col="seed",
                       kind="line", height=2.4, aspect=1.5, style_order=["fp32", "bf16"], hue_order=list(METRICS))
    grid.set_axis_labels("training step", "accuracy")
    grid.set_titles("{row_name}, seed {col_name}")
    grid.figure.suptitle("The same quick runs in fp32 (solid) and bf16 (dashed)", y=1.02)
    grid.figure.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

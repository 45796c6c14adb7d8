"""Calibration curves (protocol 12.3, issue 43 part 3): learning curves only, never a verdict.

Reads every run under a runs root (its ``config.json`` and ``metrics.csv``), and prints one row per run:
task, condition, steps, lr, seed, final mem and gen, and 12.3's plateau measure of mem (the mean of the
last 5 evaluations minus the mean of the 5 ending at 90% of the steps; at most 0.05 passes). A twin
(noise ratio 0) shows its final gen (12.2: at least 0.9; the calibration aims at 0.98). With ``--figure``
it draws one figure per task and recipe: mem and gen against the step, a line per seed.

    python benchmarks/calibration_curves.py /work/calib/runs [--figure book/calibration_fda.png]
    python benchmarks/calibration_curves.py STACKED_RUNS --against SOLO_RUNS

With ``--against`` it prints, for each run stored in both roots under one key (the same configuration and code,
trained two ways: stacked and solo, on two devices), both runs' final mem and gen, mem's rise and the differences.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from rote.analysis.curves import final, plateau

PLATEAU_MAX_RISE = 0.05  # protocol 12.3
TWIN_AIM = 0.98  # issue 43 part 3: every twin ends at gen >= 0.98


def read_runs(root: Path) -> pd.DataFrame:
    """One row per finished run under ``root`` with its recipe, seed and 12.3's numbers."""
    rows = []
    for config_path in sorted(root.glob("*/config.json")):
        metrics_path = config_path.parent / "metrics.csv"
        if not metrics_path.exists():
            continue
        flat = json.loads(config_path.read_text())
        flat = {**flat.get("data", {}), **flat.get("model", {}), **flat.get("train", {}), "task": flat.get("task")}
        metrics = pd.read_csv(metrics_path)
        measure = plateau(metrics, "mem")
        twin = float(flat.get("noise_ratio", 0)) == 0
        rows.append(dict(
            task=flat["task"], condition="twin" if twin else flat.get("noise_kind", "noisy"),
            steps=int(flat["steps"]), lr=float(flat["lr"]), d_model=int(flat["d_model"]), seed=int(flat["data_seed"]),
            last_step=int(metrics["step"].iloc[-1]), final_gen=final(metrics, "gen"),
            final_mem=float("nan") if twin else measure.final, mem_rise=float("nan") if twin else measure.rise,
            run=config_path.parent.name))
    return pd.DataFrame(rows)


def verdict_free_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Adds whether each run meets the calibration's aims (finished, plateaued / trained twin)."""
    finished = runs["last_step"] >= runs["steps"]
    plateaued = runs["mem_rise"] <= PLATEAU_MAX_RISE
    twin_ok = runs["final_gen"] >= TWIN_AIM
    aim = plateaued.where(runs["condition"] != "twin", twin_ok) & finished
    return runs.assign(meets_aim=aim.map({True: "yes", False: "no"}))


def draw(root: Path, runs: pd.DataFrame, figure: Path) -> None:
    """mem (noisy runs) and gen (every run) against the step, a panel per task, condition and recipe."""
    import matplotlib.pyplot as plt

    groups = list(runs.groupby(["task", "condition", "steps", "lr"]))
    fig, axes = plt.subplots(1, len(groups), figsize=(4 * len(groups), 3.2), squeeze=False)
    for ax, ((task, condition, steps, lr), group) in zip(axes[0], groups):
        for _, run in group.sort_values("seed").iterrows():
            metrics = pd.read_csv(root / run["run"] / "metrics.csv")
            color = f"C{run['seed'] % 10}"  # one colour per seed in every panel
            ax.plot(metrics["step"], metrics["gen"], lw=1, color=color, label=f"seed {run['seed']} gen")
            if condition != "twin":
                ax.plot(metrics["step"], metrics["mem"], lw=1, ls="--", color=color, label=f"seed {run['seed']} mem")
        ax.axvline(0.9 * steps, color="grey", lw=0.5)
        ax.set(title=f"{task} {condition}, {steps} steps, lr {lr:g}", xlabel="step", ylim=(0, 1.02))
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(figure, dpi=110)


def side_by_side(runs: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """The runs of one key in both tables: each one's final mem, gen and mem's rise, and ``runs`` minus ``other``."""
    numbers = ["final_mem", "final_gen", "mem_rise"]
    both = runs.merge(other[["run", *numbers]], on="run", suffixes=("", "_against"))
    for n in numbers:
        both[f"{n}_diff"] = both[n] - both[f"{n}_against"]
    return both[["task", "condition", "seed", *[f"{n}{s}" for n in numbers for s in ("", "_against", "_diff")]]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--figure", type=Path)
    parser.add_argument("--against", type=Path, help="another runs root: the runs of the same keys side by side")
    args = parser.parse_args()
    runs = read_runs(args.root)
    if runs.empty:
        raise SystemExit(f"no finished run under {args.root}")
    if args.against:
        table = side_by_side(runs, read_runs(args.against)).sort_values(["task", "condition", "seed"])
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        return
    table = verdict_free_summary(runs).drop(columns="run").sort_values(["task", "condition", "steps", "lr", "seed"])
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.figure:
        draw(args.root, runs, args.figure)


if __name__ == "__main__":
    main()

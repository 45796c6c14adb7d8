"""Stacked against solo training: the per-step training loss of the same runs trained as one stack
(:func:`rote.stack.train_stack`) and one by one (:func:`rote.train.train`), over the first steps.

Usage: PYTHONPATH=. .venv/bin/python benchmarks/stack_vs_solo.py [--profile quick] [--steps 200]
       [--runs random,digit,twin] [--device cpu] [--json out.json]

Each run trains with ``eval_every=1`` so that every step's loss is logged (the loss of that one step), and the
evaluation itself is replaced by a stub: evaluating draws no random numbers and changes no weight, so the
training trajectory is the run's own. ``steps`` stays the profile's (the cosine schedule is the run's), the
loop stops after ``--steps``. Prints, per step, the largest and the mean absolute difference over the runs,
and a summary (max and mean over all steps); numbers measured are in benchmarks/RESULTS.md ("Stop 43").
"""

from __future__ import annotations

import argparse
import json
import math
import time

import rote.stack as stack_module
import rote.train as train_module
from rote.config import make_config
from rote.tasks import build_task

RUNS = {  # name -> overrides of the profile's FDA configuration (seed 0)
    "random": {}, "digit": {"noise_kind": "digit"}, "twin": {"noise_ratio": 0.0},
    "seed1": {"data_seed": 1, "noise_seed": 1, "model_seed": 1}, "seed2": {"data_seed": 2, "noise_seed": 2,
                                                                            "model_seed": 2},
}


class Stop(Exception):
    pass


def _no_evaluation(*args, **kwargs) -> dict:
    return {"test_loss": math.nan, "gen": math.nan, "fit": math.nan, "mem": math.nan, "rec": math.nan}


def losses(profile: str, names: list[str], steps: int, device: str, stacked: bool) -> list[list[float]]:
    """Per run, the training loss at steps 1 .. ``steps`` (solo one after another, or as one stack)."""
    configs = [make_config("fda", profile, eval_every=1, **RUNS[name]) for name in names]
    datas = [build_task(c) for c in configs]
    rows: list[list[float]] = [[] for _ in configs]

    def log(index: int, row: dict) -> None:
        if row["step"] > 0:
            rows[index].append(row["train_loss"])
        if row["step"] >= steps and (not stacked or index == len(configs) - 1):
            raise Stop

    train_module.evaluate = stack_module.evaluate = _no_evaluation
    if stacked:
        try:
            stack_module.train_stack(configs, datas, device=device, hooks=stack_module.StackHooks(on_eval=log))
        except Stop:
            pass
        return rows
    for index, (config, data) in enumerate(zip(configs, datas)):
        try:
            train_module.train(config, data, device=device, progress=False, on_eval=lambda row: log(index, row))
        except Stop:
            pass
    return rows


def compare(solo: list[list[float]], stacked: list[list[float]]) -> list[dict]:
    out = []
    for step, pairs in enumerate(zip(*[zip(a, b) for a, b in zip(solo, stacked)]), 1):
        diffs = [abs(a - b) for a, b in pairs]
        out.append({"step": step, "max": max(diffs), "mean": sum(diffs) / len(diffs)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", default="random,digit,twin")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", default=None, help="write the per-step differences here")
    args = parser.parse_args()
    names = args.runs.split(",")
    clock = time.perf_counter()
    solo = losses(args.profile, names, args.steps, args.device, stacked=False)
    solo_s, clock = time.perf_counter() - clock, time.perf_counter()
    stacked = losses(args.profile, names, args.steps, args.device, stacked=True)
    stacked_s = time.perf_counter() - clock
    per_step = compare(solo, stacked)
    for row in per_step[:5] + per_step[9::10]:
        print(f"step {row['step']:4d}: max {row['max']:.3e}  mean {row['mean']:.3e}")
    summary = {"profile": args.profile, "runs": names, "steps": len(per_step), "device": args.device,
               "max_abs": max(r["max"] for r in per_step), "mean_abs": sum(r["mean"] for r in per_step) / len(per_step),
               "first_step_max": per_step[0]["max"], "last_step_max": per_step[-1]["max"],
               "solo_s": round(solo_s, 1), "stacked_s": round(stacked_s, 1)}
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "per_step": per_step}, f)


if __name__ == "__main__":
    main()

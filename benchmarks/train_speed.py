"""Training and evaluation speed of the quick profiles (no cache involved).

Usage: .venv/bin/python benchmarks/train_speed.py [--steps 200]
Prints steps/s of plain training and seconds per full evaluation for each task; the numbers
measured on the 2-core machine are kept in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from rote import make_config
from rote.tasks import IGNORE, build_task
from rote.train import build_model, evaluate, make_optimizer


def measure(task: str, steps: int) -> dict:
    config = make_config(task, "quick")
    data = build_task(config)
    model = build_model(config, data)
    optimizer = make_optimizer(model, config)
    inputs, targets = data.training_sequences()
    generator = torch.Generator().manual_seed(0)

    def step():
        batch = torch.randint(len(inputs), (config.train.batch_size,), generator=generator)
        loss = F.cross_entropy(model(inputs[batch]).flatten(0, 1), targets[batch].flatten(), ignore_index=IGNORE)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(10):  # warm up
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    per_step = (time.perf_counter() - start) / steps
    start = time.perf_counter()
    for _ in range(3):
        evaluate(model, data, config.train.fit_eval_size)
    per_eval = (time.perf_counter() - start) / 3
    n_evals = config.train.steps // config.train.eval_every + 1
    return {"task": task, "steps/s": 1 / per_step, "eval s": per_eval,
            "projected run s": config.train.steps * per_step + n_evals * per_eval,
            "eval share": n_evals * per_eval / (config.train.steps * per_step + n_evals * per_eval)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    for task in ("fda", "thr"):
        r = measure(task, args.steps)
        print(f"{r['task']}: {r['steps/s']:.2f} steps/s, {r['eval s']:.3f} s per evaluation, "
              f"projected quick run {r['projected run s']:.0f} s (evaluation {100 * r['eval share']:.0f}%)")

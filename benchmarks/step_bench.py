"""The training step and the evaluation per shape, solo and stacked, against the device's matmul rate.

Usage: PYTHONPATH=. python3 benchmarks/step_bench.py [--shapes quick-fda,quick-thr] [--stacks 1,3,15,45]
       [--steps 50] [--warmup 5] [--device cpu|cuda] [--fused] [--compile] [--json out.json]

For each shape (a profile's FDA or THR configuration) it times
- solo: the step of :func:`rote.train.train` (batch, forward, loss, backward, AdamW, ``loss.item()``) of one run,
  and one evaluation (:func:`rote.train.evaluate`);
- stacked at each size R of ``--stacks``: the step of R runs as one stack (:meth:`rote.stack.Stack.train_step`,
  no host synchronization inside the timed steps: the losses stay on the device) and one evaluation of the R
  runs;
and the FLOPs of one run's step (forward and backward, counted by ``torch.utils.flop_counter``), so that each
line shows the model FLOP/s and its share of the device's measured matmul rate (fp32 and bf16, square
matmuls; on the CPU on the training's one thread). ``--fused``: the solo step with fused AdamW (CUDA).
``--compile``: the stack's forward pass under ``torch.compile(mode="reduce-overhead")`` (CUDA graphs; CUDA).
Runs on the CPU (use ``--stacks 1,3`` and few steps) and on CUDA. Numbers measured are in
benchmarks/RESULTS.md ("Stop 43").
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

import rote.train as train_module
from rote.config import make_config
from rote.stack import Member, Stack, StackedAdamW, _evaluate
from rote.tasks import build_task
from rote.train import TRAIN_THREADS, build_model, evaluate

SHAPES = {"smoke-fda": ("fda", "smoke"), "smoke-thr": ("thr", "smoke"), "quick-fda": ("fda", "quick"),
          "quick-thr": ("thr", "quick"), "paper-fda": ("fda", "paper"),
          "paper-thr": ("thr", "paper")}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_rate(device: torch.device, dtype: torch.dtype, seconds: float = 1.0) -> float:
    """FLOP/s of square matmuls on ``device`` (the best of a few sizes)."""
    best = 0.0
    for n in ((4096, 8192) if device.type == "cuda" else (256, 512, 1024)):
        a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
        for _ in range(3):
            a @ b
        _sync(device)
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            a @ b
            count += 1
            if count % 8 == 0:
                _sync(device)
        _sync(device)
        best = max(best, 2 * n ** 3 * count / (time.perf_counter() - start))
    return best


def configs_for(shape: str, runs: int) -> list:
    """``runs`` configurations of one shape: seed triples 0 .. runs-1."""
    task, profile = SHAPES[shape]
    return [make_config(task, profile, data_seed=s, noise_seed=s, model_seed=s) for s in range(runs)]


def _fused(make):
    """``make_optimizer`` whose AdamW runs fused (one kernel for all parameters, CUDA)."""
    def fused_optimizer(model, config):
        optimizer = make(model, config)
        for group in optimizer.param_groups:
            group["fused"], group["foreach"] = True, False
        return optimizer

    return fused_optimizer


def time_solo(config, data, device, steps: int, warmup: int, fused: bool) -> dict:
    """The step of :func:`rote.train.train` itself (its evaluations stubbed out while timing), then one
    evaluation of the trained model."""
    times: dict[int, float] = {}

    def clock(step, *state):
        _sync(device)
        times[step] = time.perf_counter()

    timed = config.replace(steps=warmup + steps, warmup_steps=0, eval_every=warmup + steps, checkpoint_every=warmup)
    real = train_module.evaluate, train_module.make_optimizer
    train_module.evaluate = lambda *args, **kwargs: {k: 0.0 for k in ("test_loss", "gen", "fit", "mem", "rec")}
    train_module.make_optimizer = _fused(real[1]) if fused else real[1]
    try:
        model, _ = train_module.train(timed, data, device=device, progress=False, on_checkpoint=clock)
    finally:
        train_module.evaluate, train_module.make_optimizer = real
    step_s = (times[warmup + steps] - times[warmup]) / steps
    start = time.perf_counter()
    evaluate(model, data, config.train.fit_eval_size)
    _sync(device)
    return {"step_ms": step_s * 1e3, "eval_ms": (time.perf_counter() - start) * 1e3}


def time_stacked(configs, datas, device, steps: int, warmup: int, compiled: bool) -> dict:
    members = [Member.start(c, d, device, None) for c, d in zip(configs, datas)]
    stack = Stack(members, device)
    if compiled:
        stack.forward = torch.compile(stack.forward, mode="reduce-overhead")
    optimizer = StackedAdamW(stack, members, 0)
    for step in range(warmup + steps):
        if step == warmup:
            _sync(device)
            start = time.perf_counter()
        stack.train_step(optimizer, step)
    _sync(device)
    step_s = (time.perf_counter() - start) / steps
    start = time.perf_counter()
    _evaluate(stack, optimizer, members, warmup + steps, [float("nan")] * len(members), None)
    _sync(device)
    return {"step_ms": step_s * 1e3, "eval_ms": (time.perf_counter() - start) * 1e3}


def step_flops(config, data, device) -> float:
    """FLOPs of one run's training step: forward and backward (the optimizer's few are left out)."""
    model = build_model(config, data).to(device)
    inputs, _ = data.training_sequences()
    batch = inputs[:config.train.batch_size].to(device)
    with FlopCounterMode(display=False) as counter:
        model(batch).float().sum().backward()
    return float(counter.get_total_flops())


def bench_shape(shape: str, stacks: list[int], device, args, rates: dict) -> list[dict]:
    """The solo line and a stacked line per stack size of one shape."""
    configs = configs_for(shape, max(stacks))
    datas = [build_task(c) for c in configs]
    flops = step_flops(configs[0], datas[0], device)
    precision = configs[0].train.precision
    rate = rates["bf16" if precision == "bf16" else "fp32"]
    solo = time_solo(configs[0], datas[0], device, args.steps, args.warmup, args.fused)
    lines = [{"shape": shape, "precision": precision, "mode": "solo", "runs": 1, **solo}]
    for size in stacks:
        timed = time_stacked(configs[:size], datas[:size], device, args.steps, args.warmup, args.compile)
        lines.append({"shape": shape, "precision": precision, "mode": "stacked", "runs": size, **timed})
    for line in lines:
        line["step_ms_per_run"] = line["step_ms"] / line["runs"]
        line["vs_solo"] = solo["step_ms"] * line["runs"] / line["step_ms"]  # R solo steps / one stacked step
        line["tflops"] = flops * line["runs"] / (line["step_ms"] / 1e3) / 1e12
        line["share"] = line["tflops"] * 1e12 / rate
        line["gflop_per_run_step"] = flops / 1e9
    return lines


def print_table(lines: list[dict], rates: dict, device) -> None:
    print(f"device {device}; matmul rate fp32 {rates['fp32'] / 1e12:.3f} TFLOP/s, bf16 {rates['bf16'] / 1e12:.3f}")
    print("| shape | precision | mode | runs | GFLOP a run-step | ms per step | ms per run-step | x solo | "
          "ms per evaluation | TFLOP/s | share of matmul rate |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for ln in lines:
        print(f"| {ln['shape']} | {ln['precision']} | {ln['mode']} | {ln['runs']} | {ln['gflop_per_run_step']:.2f} "
              f"| {ln['step_ms']:.1f} | {ln['step_ms_per_run']:.1f} | {ln['vs_solo']:.2f} | {ln['eval_ms']:.0f} "
              f"| {ln['tflops']:.3f} | {ln['share']:.1%} |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="quick-fda,quick-thr")
    parser.add_argument("--stacks", default="1,3,15,45")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--device", default=None)
    parser.add_argument("--fused", action="store_true", help="solo step with fused AdamW (CUDA)")
    parser.add_argument("--compile", action="store_true", help='stack forward under torch.compile("reduce-overhead")')
    parser.add_argument("--rate-seconds", type=float, default=1.0, help="time of each matmul size measured")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cpu":
        torch.set_num_threads(TRAIN_THREADS)  # training's one thread: the rate it can reach
    rates = {name: matmul_rate(device, dtype, args.rate_seconds)
             for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))}
    stacks = [int(s) for s in args.stacks.split(",")]
    lines = [line for shape in args.shapes.split(",") for line in bench_shape(shape, stacks, device, args, rates)]
    print_table(lines, rates, device)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(device), "torch": torch.__version__, "rates": rates, "lines": lines}, f, indent=2)


if __name__ == "__main__":
    main()

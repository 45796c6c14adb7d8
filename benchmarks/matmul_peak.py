"""This CPU's measured fp32 (and bf16) matmul peak, per thread count: the denominator of the model
FLOP/s share that benchmarks/engine_speed.py reports.

Usage: .venv/bin/python benchmarks/matmul_peak.py [--size 1024] [--seconds 3] [--threads 1 2]
Prints GFLOP/s of square matmuls (the best of several sizes); numbers measured here are in
benchmarks/RESULTS.md. Run it on an idle machine: anything else on a core lowers the result.
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def gflops(n: int, dtype: torch.dtype, threads: int, seconds: float) -> float:
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(3):
        a @ b
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
    return 2 * n ** 3 * count / (time.perf_counter() - start) / 1e9


def peak(threads: int, seconds: float, sizes=(256, 512, 1024), dtype=torch.float32) -> dict:
    results = {n: gflops(n, dtype, threads, seconds) for n in sizes}
    best = max(results, key=results.get)
    return {"threads": threads, "dtype": str(dtype).removeprefix("torch."), "gflops": round(results[best], 1),
            "size": best, "all": {n: round(v, 1) for n, v in results.items()}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--bf16", action="store_true", help="also measure bfloat16 matmuls")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}")
    for t in args.threads:
        print(json.dumps(peak(t, args.seconds)))
        if args.bf16:
            print(json.dumps(peak(t, args.seconds, dtype=torch.bfloat16)))

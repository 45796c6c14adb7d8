"""Speed of the run engine: per-run throughput at 1 thread, evaluation share, model FLOP/s against
the matmul peak, and the speed-up of W workers over 1 on the same plan.

Usage:
  .venv/bin/python benchmarks/engine_speed.py measure [--steps 150]
      1-thread training steps/s and seconds per evaluation of the smoke and quick shapes (the table
      rote/build/timings.py's MEASURED uses), the evaluation share of a whole run, and achieved model FLOP/s
      as a share of this CPU's measured 1-thread fp32 matmul peak (benchmarks/matmul_peak.py).
  .venv/bin/python benchmarks/engine_speed.py eval [--task fda thr] [--repeat 5]
      seconds per evaluation of the quick shapes, the evaluation before issue 21 (every position
      through every block, mem and rec in two passes: reimplemented here as the reference) and
      rote.train.evaluate side by side in one process, after a short training so that the metrics
      are not all zero; asserts identical metric values.
  .venv/bin/python benchmarks/engine_speed.py pool [--runs 4] [--steps 300] [--workers 1 2]
      trains the same plan (quick FDA unless --task/--profile, --steps steps, seeds 0..runs-1) into a fresh cache with each
      worker count, through rote.build.engine.train_plan, and prints wall times and the speed-up.

Speed numbers need an idle machine: anything else on a core slows a run. Results: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rote import make_config  # noqa: E402
from rote.tasks import IGNORE, build_task  # noqa: E402
from rote.train import TRAIN_THREADS, build_model, evaluate, make_optimizer  # noqa: E402


def step_flops(config, data) -> float:
    """Matmul FLOPs of one training step (forward x 3: forward, and backward's two products)."""
    m, t = config.model, config.train
    T, d, V = data.n_ctx, m.d_model, len(data.vocab)
    per_seq = m.n_layers * (24 * T * d * d + 4 * T * T * d) + 2 * T * d * V
    return 3 * t.batch_size * per_seq


def measure(task: str, profile: str, steps: int, precision: str = "fp32", **overrides) -> dict:
    torch.set_num_threads(TRAIN_THREADS)
    config = make_config(task, profile, precision=precision, **overrides)
    data = build_task(config)
    model = build_model(config, data)
    optimizer = make_optimizer(model, config)
    inputs, targets = data.training_sequences()
    generator = torch.Generator().manual_seed(0)
    autocast = precision == "bf16"

    def step():
        batch = torch.randint(len(inputs), (config.train.batch_size,), generator=generator)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(inputs[batch])
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets[batch].flatten(), ignore_index=IGNORE)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(10):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    per_step = (time.perf_counter() - start) / steps
    start = time.perf_counter()
    n_eval = 3
    for _ in range(n_eval):
        evaluate(model, data, config.train.fit_eval_size)
    per_eval = (time.perf_counter() - start) / n_eval
    tc = config.train
    n_evals = tc.steps // tc.eval_every + 1
    train_s = tc.steps * per_step
    return {"task": task, "profile": profile, "precision": precision,
            "shape": [config.model.n_layers, config.model.d_model, config.train.batch_size, data.n_ctx],
            "steps_per_s": round(1 / per_step, 2), "eval_s": round(per_eval, 3),
            "eval_share_of_training": round(n_evals * per_eval / train_s, 3),
            "projected_run_s": round(train_s + n_evals * per_eval),
            "model_gflops": round(step_flops(config, data) / per_step / 1e9, 2)}


def cmd_measure(args) -> None:
    from matmul_peak import peak

    p = peak(1, 2.0)
    print(json.dumps({"matmul_peak_1thread_gflops": p["gflops"], "at": p["size"]}))
    for profile in ("smoke", "quick"):
        for task in ("fda", "thr"):
            r = measure(task, profile, args.steps if profile == "quick" else 10 * args.steps)
            r["share_of_matmul_peak"] = round(r["model_gflops"] / p["gflops"], 3)
            print(json.dumps(r))
    if args.bf16:
        print(json.dumps(measure("fda", "quick", args.steps, "bf16")))
    for width in args.fda_widths:  # other model widths of quick FDA (X1's grid), fp32
        print(json.dumps(measure("fda", "quick", args.steps, "fp32", d_model=width)))


@torch.no_grad()
def reference_evaluate(model, data, fit_eval_size: int) -> dict[str, float]:
    """The evaluation as it was before issue 21: full forward passes indexed at the answer
    positions, one pass per (example set, answer)."""
    from rote.scoring import BATCH, model_inputs

    def logits(examples, which):
        tokens, pos = model_inputs(examples, which), examples.answer_positions
        return torch.cat([model(tokens[s:s + BATCH])[:, pos] for s in range(0, len(tokens), BATCH)])

    def share(examples, which):
        return (logits(examples, which).argmax(-1) == getattr(examples, which)).all(1).sum().item() / len(examples)

    model.eval()
    test_logits = logits(data.test, "true_label")
    out = {"test_loss": F.cross_entropy(test_logits.flatten(0, 1), data.test.true_label.flatten()).item(),
           "gen": share(data.test, "true_label"), "fit": share(data.train_clean[:fit_eval_size], "label"),
           "mem": share(data.train_noisy, "label"), "rec": share(data.train_noisy, "true_label")}
    if data.atomic is not None:
        out["atomic"] = share(data.atomic, "label")
    return out


def cmd_eval(args) -> None:
    torch.set_num_threads(TRAIN_THREADS)
    for task in args.task:
        config = make_config(task, "quick", precision="fp32")
        data = build_task(config)
        model = build_model(config, data)
        optimizer = make_optimizer(model, config)
        inputs, targets = data.training_sequences()
        generator = torch.Generator().manual_seed(0)
        for _ in range(args.train_steps):  # enough that gen, mem, fit are not all zero
            batch = torch.randint(len(inputs), (config.train.batch_size,), generator=generator)
            loss = F.cross_entropy(model(inputs[batch]).flatten(0, 1), targets[batch].flatten(), ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        times = {"before": [], "after": []}
        results = {}
        for _ in range(args.repeat):  # interleaved, so that a load change hits both alike
            for name, fn in (("before", reference_evaluate), ("after", evaluate)):
                start = time.perf_counter()
                results[name] = fn(model, data, config.train.fit_eval_size)
                times[name].append(time.perf_counter() - start)
        assert results["before"] == results["after"], results
        best = {k: min(v) for k, v in times.items()}
        print(json.dumps({"task": task, "metrics": {k: round(v, 4) for k, v in results["after"].items()},
                          "eval_s_before": round(best["before"], 3), "eval_s_after": round(best["after"], 3),
                          "speedup": round(best["before"] / best["after"], 2), "identical_metrics": True}), flush=True)


def cmd_pool(args) -> None:
    from rote.build.engine import EngineSettings, train_plan
    from rote.plan import with_seed

    base = make_config(args.task, args.profile, steps=args.steps, warmup_steps=min(100, args.steps - 1),
                       checkpoint_every=args.steps)
    configs = [with_seed(base, s) for s in range(args.runs)]
    times = {}
    for workers in args.workers:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            settings = EngineSettings(workers=workers, progress=False, device="cpu")
            outcomes = train_plan(configs, settings, root=Path(tmp))
            times[workers] = time.perf_counter() - start
            assert all(o.ok for o in outcomes), [o.error for o in outcomes if not o.ok]
        print(json.dumps({"workers": workers, "runs": args.runs, "task": args.task, "profile": args.profile,
                          "steps": args.steps,
                          "wall_s": round(times[workers], 1)}), flush=True)
    first = args.workers[0]
    for w in args.workers[1:]:
        print(json.dumps({"speedup": f"{w} workers over {first}", "value": round(times[first] / times[w], 2)}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--steps", type=int, default=150)
    m.add_argument("--bf16", action="store_true", help="also the quick FDA step under bf16 autocast")
    m.add_argument("--fda-widths", type=int, nargs="*", default=[], help="also quick FDA at these d_model (fp32)")
    e = sub.add_parser("eval")
    e.add_argument("--task", nargs="+", default=["fda", "thr"])
    e.add_argument("--repeat", type=int, default=5)
    e.add_argument("--train-steps", type=int, default=300)
    p = sub.add_parser("pool")
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--task", default="fda")
    p.add_argument("--profile", default="quick")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    {"measure": cmd_measure, "eval": cmd_eval, "pool": cmd_pool}[args.command](args)

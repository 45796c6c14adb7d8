"""Command line: ``python -m rote plan|train|run|book|claims``.

Bad arguments are reported on one line with exit code 2 before anything trains or is written; failed
runs are named on stderr (exit 1); Ctrl-C stops every worker (exit 130).
"""

from __future__ import annotations

import json
import math
import sys

from ..config import PROFILES, TASKS, ConfigError, make_config
from .arguments import UsageError, at_least_one, parser, pairs



def _summary(run) -> dict:
    from ..analysis.curves import first_evaluated as first_step
    from ..claims import THRESHOLDS

    c1 = THRESHOLDS["C1"]
    final = run.final
    out = {k: (None if isinstance(final.get(k), float) and math.isnan(final[k]) else final.get(k))
           for k in ("gen", "fit", "mem", "rec", "test_loss")}
    out.update(t_gen=first_step(run.metrics, "gen", c1["t_gen_level"]),
               t_mem=first_step(run.metrics, "mem", c1["t_mem_level"]),
               steps=int(final["step"]), train_seconds=round(run.train_seconds, 1), cached=run.cached,
               run_dir=str(run.path), task=run.config.task, key=run.config.key)
    return out


def _engine_options(args):
    """Validate --workers / --executor (and the Slurm options) before anything runs."""
    from .engine import SlurmOptions, check_executor

    at_least_one(args, "workers", "seeds")
    check_executor(args.executor)
    return SlurmOptions(partition=args.partition, time_min=args.time_min, mem_gb=args.mem_gb, gpus=args.gpus)


def _requested_runs(args) -> list:
    """The runs `rote train` asks for: the plan (--plan), else the given configuration for each seed."""
    from ..plan import SEED_NAMES, plan, seed_list, with_seed

    params = pairs(args.param)
    if args.plan:
        seeds = seed_list(args.profile, args.seeds)
        return plan(args.profile, seeds, params, tasks=[args.task] if args.task else None, x1=args.x1)
    if args.x1:
        raise UsageError("--x1 adds X1's grid to the plan: give it with --plan")
    if not args.task:
        raise UsageError("--task is required (or --plan for every run of the book's plan)")
    config = make_config(args.task, args.profile, **params)
    if args.seeds is None:
        return [config]
    named = [k for k in SEED_NAMES if k in params]
    if named:
        raise UsageError(f"give seeds with --seeds or with -p {'/'.join(named)}, not both")
    return [with_seed(config, s) for s in seed_list(args.profile, args.seeds)]


def cmd_train(args) -> int:
    slurm = _engine_options(args)
    configs = _requested_runs(args)
    from ..runs import get_or_train, runs_root

    if len(configs) == 1 and args.executor == "local" and args.workers is None:
        # one run: train it in this process, with its own progress bar, as before the engine
        print(json.dumps(_summary(get_or_train(configs[0], device=args.device, progress=not args.quiet))))
        return 0
    from .engine import EngineSettings, report_failures, train_staged

    settings = EngineSettings(workers=args.workers, executor=args.executor, device=args.device, slurm=slurm,
                              progress=not args.quiet, stack=args.stack)
    outcomes = train_staged(lambda: _requested_runs(args), settings, root=runs_root())  # X1's widths after 12.4
    configs = _requested_runs(args)
    code = report_failures(outcomes)
    failed = {o.config.key for o in outcomes if not o.ok}
    from ..runs import lookup

    for config in configs:
        run = None if config.key in failed else lookup(config)
        print(json.dumps(_summary(run) if run is not None else
                         {"task": config.task, "key": config.key, "failed": True}))
    return code


def cmd_plan(args) -> int:
    from ..plan import differs, plan, seed_list, x1_stage_notes
    from .timings import (default_estimator, default_workers, estimate_seconds, fmt_seconds, pool_seconds,
                          remaining_seconds)

    from ..runs import status

    at_least_one(args, "workers", "seeds")
    seeds, tasks = seed_list(args.profile, args.seeds), [args.task] if args.task else None
    configs = plan(args.profile, seeds, pairs(args.param), tasks=tasks, x1=args.x1)
    if args.stability:  # protocol 10: the precision twins (where bf16 is native) and seeds 3 and 4
        from .. import stability

        why_not = stability.precision_not_run()
        if why_not:
            print(f"stability: {why_not}", file=sys.stderr)
        extra = ([] if why_not else stability.precision_twins(args.profile, seeds, tasks)) + \
            stability.extra_seed_runs(args.profile, tasks)
        configs = list({c.key: c for c in configs + extra}.values())
    workers = args.workers or default_workers()
    stacks = _stack_labels([c for c in configs if status(c) != "cached"], workers) if args.stack else {}
    rows = [{"task": c.task, "key": c.key, "differs": differs(c, args.profile), "status": status(c),
             "precision": c.train.precision, "estimate_s": round(estimate_seconds(c)),
             "left_s": round(remaining_seconds(c, status(c))), **({"stack": stacks.get(c.key, "-")} if stacks else {})}
            for c in configs]
    left = [r["left_s"] for r in rows if r["status"] != "cached"]
    x1_notes = x1_stage_notes(args.profile, pairs(args.param)) if args.x1 and "fda" in (tasks or ["fda"]) else []
    if args.json:  # x1: 12.4, per width its chosen rate, or that its runs wait for the selection
        print(json.dumps({"profile": args.profile, "seeds": seeds, "runs": rows, "workers": workers, "x1": x1_notes,
                          "missing": len(left), "estimate_left_s": round(pool_seconds(left, workers)),
                          "estimates": default_estimator().summary(configs)}, indent=2))
        return 0
    import pandas as pd

    table = pd.DataFrame([{"task": r["task"], "key": r["key"],
                           "parameters (differ from profile)": ", ".join(f"{k}={v}" for k, v in r["differs"].items())
                           or "-", "precision": r["precision"], "cached": r["status"],
                           "estimate": fmt_seconds(r["estimate_s"]), **({"stack": r["stack"]} if stacks else {})}
                          for r in rows])
    print(table.to_string(index=False))
    cached = sum(r["status"] == "cached" for r in rows)
    precisions = ", ".join(sorted({r["precision"] for r in rows}))
    print(f"{len(rows)} runs ({args.profile}, seeds {seeds}, training precision {precisions}), {cached} cached; "
          f"training the rest on {workers} worker(s): ~{fmt_seconds(pool_seconds(left, workers))} "
          f"(1 thread a run; {default_estimator().summary(configs)})")
    print("\n".join(x1_notes))
    if stacks:
        print(f"stacked training: the {len(stacks)} missing runs in {len(set(stacks.values()))} stack(s) "
              "(runs of one shape, one process a stack)")
    return 0


def _stack_labels(configs: list, workers: int) -> dict[str, str]:
    """Run key -> its stack ("s2 (6 runs)") when the runs ``configs`` train stacked (``--stack``), grouped as
    the engine groups them here (on the CPU split so that each of ``workers`` has one)."""
    from .engine import EngineSettings, _units

    units = _units(configs, EngineSettings(workers=workers, stack=True), workers)
    return {c.key: f"s{i} ({len(unit)} run{'s' if len(unit) > 1 else ''})" for i, unit in enumerate(units, 1)
            for c in unit}


def cmd_claims(args) -> int:
    from ..display import claims_table, other_records_table
    from ..claims import load_shown, other_records, shown
    from ..plan import seed_list

    at_least_one(args, "seeds")
    seeds = None if args.seeds is None else seed_list(args.profile or "quick", args.seeds)
    records = load_shown(args.profile, seeds=seeds)  # a stale record as stale, with its rebuild command
    if args.json:
        from dataclasses import asdict

        print(json.dumps([asdict(r) for r in records], indent=2))
    else:
        print(claims_table(records).to_string(index=False))
        others = shown(other_records(args.profile, seeds=seeds))
        if others:
            print("\nRecords of other seeds (not in the table above):")
            print(other_records_table(others).to_string(index=False))
    return 0


def cmd_book(args) -> int:
    slurm = _engine_options(args)
    from .book import BookOptions, build_book
    from .engine import EngineSettings

    engine = EngineSettings(workers=args.workers, executor=args.executor, slurm=slurm)
    options = BookOptions(render=not args.no_render, seeds=args.seeds, engine=engine, x1=args.x1,
                          stability=args.stability)
    return build_book(args.profile, args.chapter or None, pairs(args.param), options)


def cmd_run(args) -> int:
    at_least_one(args, "seeds")
    from .driver import run_chapter_cli

    return run_chapter_cli(args.chapter, args.profile, pairs(args.param), seeds=args.seeds)



COMMANDS = {"plan": cmd_plan, "train": cmd_train, "book": cmd_book, "run": cmd_run, "claims": cmd_claims}


def main(argv: list[str] | None = None) -> int:
    from .engine import sigterm_as_interrupt

    sigterm_as_interrupt()
    try:
        args = parser().parse_args(argv)
        if getattr(args, "precision", None):  # --precision X is -p precision X
            args.param = (getattr(args, "param", None) or []) + [["precision", args.precision]]
        if getattr(args, "profile", None) is not None and args.profile not in PROFILES:
            raise UsageError(f"unknown profile {args.profile!r}; choose one of {', '.join(PROFILES)}")
        if getattr(args, "task", None) is not None and args.task not in TASKS:
            raise UsageError(f"unknown task {args.task!r}; choose one of {', '.join(TASKS)}")
        return COMMANDS[args.command](args)
    except (UsageError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; an unfinished run resumes from its last checkpoint next time", file=sys.stderr)
        return 130

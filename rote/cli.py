"""Command line: ``python -m rote plan|train|run|book|claims``.

Bad arguments are reported on one line with exit code 2 before anything trains or is written; failed
runs are named on stderr (exit 1); Ctrl-C stops every worker (exit 130).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from .config import PROFILES, TASKS, ConfigError, make_config


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2, no usage dump
        raise UsageError(message)


def _params(pairs: list[list[str]] | None) -> dict[str, str]:
    out = {}
    for name, value in pairs or []:
        if name in out:
            raise UsageError(f"parameter {name} given twice")
        out[name] = value
    return out


def _at_least_one(args, *names: str) -> None:
    for name in names:
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise UsageError(f"--{name} must be >= 1, got {getattr(args, name)}")


def _summary(run) -> dict:
    from .analysis.curves import first_evaluated as first_step
    from .claims import THRESHOLDS

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

    _at_least_one(args, "workers", "seeds")
    check_executor(args.executor)
    return SlurmOptions(partition=args.partition, time_min=args.time_min, mem_gb=args.mem_gb, gpus=args.gpus)


def _requested_runs(args) -> list:
    """The runs `rote train` asks for: the plan (--plan), else the given configuration for each seed."""
    from .plan import SEED_NAMES, plan, seed_list, with_seed

    params = _params(args.param)
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
    from .runs import get_or_train, runs_root

    if len(configs) == 1 and args.executor == "local" and args.workers is None:
        # one run: train it in this process, with its own progress bar, as before the engine
        print(json.dumps(_summary(get_or_train(configs[0], device=args.device, progress=not args.quiet))))
        return 0
    from .engine import EngineSettings, report_failures, train_plan

    settings = EngineSettings(workers=args.workers, executor=args.executor, device=args.device, slurm=slurm,
                              progress=not args.quiet)
    outcomes = train_plan(configs, settings, root=runs_root())
    code = report_failures(outcomes)
    failed = {o.config.key for o in outcomes if not o.ok}
    from .runs import lookup

    for config in configs:
        run = None if config.key in failed else lookup(config)
        print(json.dumps(_summary(run) if run is not None else
                         {"task": config.task, "key": config.key, "failed": True}))
    return code


def cmd_plan(args) -> int:
    from .plan import differs, plan, seed_list
    from .timings import (default_estimator, default_workers, estimate_seconds, fmt_seconds, pool_seconds,
                          remaining_seconds)

    from .runs import status

    _at_least_one(args, "workers", "seeds")
    seeds, tasks = seed_list(args.profile, args.seeds), [args.task] if args.task else None
    configs = plan(args.profile, seeds, _params(args.param), tasks=tasks, x1=args.x1)
    if args.stability:  # protocol 10: the precision twins (where bf16 is native) and seeds 3 and 4
        from . import stability

        why_not = stability.precision_not_run()
        if why_not:
            print(f"stability: {why_not}", file=sys.stderr)
        extra = ([] if why_not else stability.precision_twins(args.profile, seeds, tasks)) + \
            stability.extra_seed_runs(args.profile, tasks)
        configs = list({c.key: c for c in configs + extra}.values())
    rows = [{"task": c.task, "key": c.key, "differs": differs(c, args.profile), "status": status(c),
             "precision": c.train.precision, "estimate_s": round(estimate_seconds(c)),
             "left_s": round(remaining_seconds(c, status(c)))} for c in configs]
    workers = args.workers or default_workers()
    left = [r["left_s"] for r in rows if r["status"] != "cached"]
    if args.json:
        print(json.dumps({"profile": args.profile, "seeds": seeds, "runs": rows, "workers": workers,
                          "missing": len(left), "estimate_left_s": round(pool_seconds(left, workers)),
                          "estimates": default_estimator().summary(configs)}, indent=2))
        return 0
    import pandas as pd

    table = pd.DataFrame([{"task": r["task"], "key": r["key"],
                           "parameters (differ from profile)": ", ".join(f"{k}={v}" for k, v in r["differs"].items())
                           or "-", "precision": r["precision"], "cached": r["status"],
                           "estimate": fmt_seconds(r["estimate_s"])} for r in rows])
    print(table.to_string(index=False))
    cached = sum(r["status"] == "cached" for r in rows)
    precisions = ", ".join(sorted({r["precision"] for r in rows}))
    print(f"{len(rows)} runs ({args.profile}, seeds {seeds}, training precision {precisions}), {cached} cached; "
          f"training the rest on {workers} worker(s): ~{fmt_seconds(pool_seconds(left, workers))} "
          f"(1 thread a run; {default_estimator().summary(configs)})")
    return 0


def cmd_claims(args) -> int:
    from .site import claims_table, other_records_table
    from .claims import load_shown, other_records, shown
    from .plan import seed_list

    _at_least_one(args, "seeds")
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
    return build_book(args.profile, args.chapter or None, _params(args.param), options)


def cmd_run(args) -> int:
    _at_least_one(args, "seeds")
    from .driver import run_chapter_cli

    return run_chapter_cli(args.chapter, args.profile, _params(args.param), seeds=args.seeds)


_ARGS = {  # option groups shared by the subcommands: name -> [(flags, keywords)]
    "common": [(("--profile",), dict(default="quick", help=f"one of {', '.join(PROFILES)} (default quick)")),
               (("-p", "--param"), dict(nargs=2, action="append", metavar=("NAME", "VALUE"),
                                        help="override a parameter (repeatable)")),
               (("--precision",), dict(choices=("auto", "fp32", "bf16"), default=None,
                                       help="training precision (default auto: bf16 where the device computes it "
                                            "natively, else fp32); the same as -p precision VALUE"))],
    "seeds": [(("--seeds",), dict(type=int, default=None,
                                  help="number of seed triples, s = 0 .. N-1 (default: $ROTE_SEEDS, else 3, the "
                                       "protocol's; 1 is the quick look)"))],
    "x1": [(("--x1",), dict(action="store_true", help="also X1's grid (chapter benign_memorization: other widths "
                                                     "and noise ratios; left out by default)"))],
    "stability": [(("--stability",), dict(action="store_true",
                                          help="also the stability build of protocol 10: every C1-C5 run in the "
                                               "other precision and seeds 3 and 4, their chapters, and each row's "
                                               "stable / fragile entry"))],
    "engine": [(("--workers",), dict(type=int, default=None, help="runs trained at once (default: the cores)")),
               (("--executor",), dict(default="local", help="local (default), slurm, or submitit-local")),
               (("--partition",), dict(default=None, help="Slurm partition")),
               (("--time-min",), dict(type=int, default=120, help="Slurm time limit per run, minutes")),
               (("--mem-gb",), dict(type=float, default=8.0, help="Slurm memory per run, GB")),
               (("--gpus",), dict(type=int, default=0, help="Slurm GPUs per run"))],
}


def _add(sp, *groups: str) -> None:
    for group in groups:
        for flags, keywords in _ARGS[group]:
            sp.add_argument(*flags, **keywords)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m rote", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    pl = sub.add_parser("plan", help="list the runs the book's chapters need, cached or not, with estimated times")
    _add(pl, "common", "seeds", "x1", "stability")
    pl.add_argument("--task", default=None, help=f"only this task ({', '.join(TASKS)})")
    pl.add_argument("--workers", type=int, default=None, help="workers for the time estimate (default: the cores)")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=cmd_plan)

    t = sub.add_parser("train", help="train runs, or reuse cached ones; prints final metrics as JSON (one line a run)")
    t.add_argument("--task", default=None, help=f"one of {', '.join(TASKS)}")
    _add(t, "common", "seeds")
    t.add_argument("--plan", action="store_true",
                   help="train every run of the book's plan (conditions, noise-free twins, sweep; X1's grid "
                        "with --x1), not only the given configuration")
    _add(t, "x1", "engine")
    t.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda if available)")
    t.add_argument("--quiet", action="store_true", help="no progress display")
    t.set_defaults(func=cmd_train)

    b = sub.add_parser("book", help="train the plan's missing runs, execute the chapters, render the site")
    _add(b, "common", "seeds", "engine", "x1", "stability")
    b.add_argument("--chapter", action="append",
                   help="only this chapter (repeatable); trains only the runs the named chapters need")
    b.add_argument("--no-render", action="store_true", help="execute only, do not run jupyter-book")
    b.set_defaults(func=cmd_book)

    r = sub.add_parser("run", help="rerun one chapter with new parameters, reusing cached runs")
    r.add_argument("chapter")
    _add(r, "common", "seeds")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("claims", help="print the claim scorecard")
    c.add_argument("--profile", default=None)
    _add(c, "seeds")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_claims)
    return p


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
        return args.func(args)
    except (UsageError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; an unfinished run resumes from its last checkpoint next time", file=sys.stderr)
        return 130

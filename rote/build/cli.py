"""Command line: ``python -m rote plan|train|run|book|claims``.

Bad arguments are reported on one line with exit code 2 before anything trains or is written; failed
runs are named on stderr (exit 1); Ctrl-C stops every worker (exit 130). The book's settings
(:class:`rote.settings.Settings`: seeds, folders) are read here, once, from the options and the environment
(:func:`settings_of`), and passed on as arguments.
"""

from __future__ import annotations

import json
import math
import os
import sys

from ..config import PROFILES, TASKS, ConfigError, make_config
from ..settings import Settings, read_environment
from .arguments import UsageError, at_least_one, parser, pairs


def settings_of(args) -> Settings:
    """The book's settings: ``--profile`` and ``--seeds`` where given, else ``$ROTE_*`` (:mod:`rote.settings`), else
    the defaults. The one place the command line reads the environment for them."""
    return read_environment(os.environ, profile=getattr(args, "profile", None), seeds=getattr(args, "seeds", None))



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
    from ..plan import SEED_NAMES, PlanGrid, plan, with_seed

    params, settings = pairs(args.param), settings_of(args)
    if args.plan:
        return plan(args.profile, settings.seed_list, params, tasks=[args.task] if args.task else None,
                    grid=PlanGrid(runs=settings.runs), x1=args.x1)
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
    return [with_seed(config, s) for s in settings.seed_list]


def cmd_train(args) -> int:
    slurm = _engine_options(args)
    configs, root = _requested_runs(args), settings_of(args).runs
    from ..runs import get_or_train, runs_root

    if len(configs) == 1 and args.executor == "local" and args.workers is None:
        # one run: train it in this process, with its own progress bar, as before the engine
        print(json.dumps(_summary(get_or_train(configs[0], device=args.device, progress=not args.quiet, root=root))))
        return 0
    from .engine import EngineSettings, report_failures, train_staged

    settings = EngineSettings(workers=args.workers, executor=args.executor, device=args.device, slurm=slurm,
                              progress=not args.quiet, plain_progress=settings_of(args).plain_progress,
                              stack=args.stack)
    outcomes = train_staged(lambda: _requested_runs(args), settings, root=root or runs_root())  # X1: 12.4
    configs = _requested_runs(args)
    code = report_failures(outcomes)
    failed = {o.config.key for o in outcomes if not o.ok}
    from ..runs import lookup

    for config in configs:
        run = None if config.key in failed else lookup(config, root)
        print(json.dumps(_summary(run) if run is not None else
                         {"task": config.task, "key": config.key, "failed": True}))
    return code


def cmd_plan(args) -> int:
    from ..plan import PlanGrid, differs, plan, x1_stage_notes
    from .timings import (default_estimator, default_workers, estimate_seconds, fmt_seconds, pool_seconds,
                          remaining_seconds)

    from ..runs import status

    at_least_one(args, "workers", "seeds")
    settings, tasks = settings_of(args), [args.task] if args.task else None
    seeds, grid, estimator = settings.seed_list, PlanGrid(runs=settings.runs), default_estimator(settings.runs)
    configs = plan(args.profile, seeds, pairs(args.param), tasks=tasks, grid=grid, x1=args.x1)
    if args.stability:  # protocol 10: the precision twins (where bf16 is native) and seeds 3 and 4
        from .. import stability

        why_not = stability.precision_not_run()
        if why_not:
            print(f"stability: {why_not}", file=sys.stderr)
        extra = ([] if why_not else stability.precision_twins(args.profile, seeds, tasks)) + \
            stability.extra_seed_runs(args.profile, tasks)
        configs = list({c.key: c for c in configs + extra}.values())
    workers = args.workers or default_workers()
    missing = [c for c in configs if status(c, settings.runs) != "cached"]
    stacks = _stack_labels(missing, workers, settings.runs, estimator) if args.stack else {}
    rows = [{"task": c.task, "key": c.key, "differs": differs(c, args.profile), "status": status(c, settings.runs),
             "precision": c.train.precision, "estimate_s": round(estimate_seconds(c, estimator)),
             "left_s": round(remaining_seconds(c, status(c, settings.runs), estimator)),
             **({"stack": stacks.get(c.key, "-")} if stacks else {})} for c in configs]
    left = [r["left_s"] for r in rows if r["status"] != "cached"]
    with_x1 = args.x1 and "fda" in (tasks or ["fda"])
    x1_notes = x1_stage_notes(args.profile, pairs(args.param), final_gen=grid.final_gen) if with_x1 else []
    if args.json:  # x1: 12.4, per width its chosen rate, or that its runs wait for the selection
        print(json.dumps({"profile": args.profile, "seeds": seeds, "runs": rows, "workers": workers, "x1": x1_notes,
                          "missing": len(left), "estimate_left_s": round(pool_seconds(left, workers)),
                          "estimates": estimator.summary(configs)}, indent=2))
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
          f"(1 thread a run; {estimator.summary(configs)})")
    print("\n".join(x1_notes))
    if stacks:
        print(f"stacked training: the {len(stacks)} missing runs in {len(set(stacks.values()))} stack(s) "
              "(runs of one shape, one process a stack)")
    return 0


def _stack_labels(configs: list, workers: int, root, estimator) -> dict[str, str]:
    """Run key -> its stack ("s2 (6 runs)") when the runs ``configs`` (not cached in ``root``) train stacked
    (``--stack``), grouped as the engine groups them here: in its training order by ``estimator``'s times, on
    the CPU split so that each of ``workers`` has one."""
    from .engine import EngineSettings, _units, training_order

    units = _units(training_order(configs, root, estimator), EngineSettings(workers=workers, stack=True), workers)
    return {c.key: f"s{i} ({len(unit)} run{'s' if len(unit) > 1 else ''})" for i, unit in enumerate(units, 1)
            for c in unit}


def cmd_claims(args) -> int:
    from ..display import claims_table, other_records_table
    from ..claims import load_shown, other_records, shown

    at_least_one(args, "seeds")
    settings = read_environment(os.environ, seeds=args.seeds)  # --profile None: every profile's records
    seeds, root = settings.seed_list, settings.results
    records = load_shown(args.profile, root, seeds)  # a stale record as stale, with its rebuild command
    if args.json:
        from dataclasses import asdict

        print(json.dumps([asdict(r) for r in records], indent=2))
    else:
        print(claims_table(records, root).to_string(index=False))
        others = shown(other_records(args.profile, root, seeds))
        if others:
            print("\nRecords of other seeds (not in the table above):")
            print(other_records_table(others).to_string(index=False))
    return 0


def cmd_book(args) -> int:
    slurm = _engine_options(args)
    from .book import BookOptions, build_book
    from .engine import EngineSettings

    settings = settings_of(args)
    engine = EngineSettings(workers=args.workers, executor=args.executor, slurm=slurm,
                            plain_progress=settings.plain_progress)
    options = BookOptions(render=not args.no_render, seeds=args.seeds, engine=engine, x1=args.x1,
                          stability=args.stability)
    return build_book(args.profile, args.chapter or None, pairs(args.param), options, settings)


def cmd_run(args) -> int:
    at_least_one(args, "seeds")
    from .driver import run_chapter_cli

    return run_chapter_cli(args.chapter, args.profile, pairs(args.param), seeds=args.seeds, settings=settings_of(args))



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

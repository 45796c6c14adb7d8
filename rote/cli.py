"""Command line: ``python -m rote train|run|book|claims``.

Errors in the arguments (unknown task, profile or parameter, wrong type, value out of range) are
reported on one line with exit code 2, before anything is trained or written.
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


def _summary(run) -> dict:
    from .claims import THRESHOLDS
    from .train import first_step

    c1 = THRESHOLDS["C1"]
    final = run.final
    out = {k: (None if isinstance(final.get(k), float) and math.isnan(final[k]) else final.get(k))
           for k in ("gen", "fit", "mem", "rec", "test_loss")}
    out.update(t_gen=first_step(run.metrics, "gen", c1["t_gen_level"]),
               t_mem=first_step(run.metrics, "mem", c1["t_mem_level"]),
               steps=int(final["step"]), train_seconds=round(run.train_seconds, 1), cached=run.cached,
               run_dir=str(run.path), task=run.config.task, key=run.config.key)
    return out


def cmd_train(args) -> int:
    config = make_config(args.task, args.profile, **_params(args.param))
    from .runs import get_or_train

    run = get_or_train(config, device=args.device, progress=not args.quiet)
    print(json.dumps(_summary(run)))
    return 0


def cmd_claims(args) -> int:
    from .book import claims_table
    from .claims import load_all

    records = load_all(args.profile)
    if args.json:
        from dataclasses import asdict

        print(json.dumps([asdict(r) for r in records], indent=2))
    else:
        print(claims_table(records).to_string(index=False))
    return 0


def cmd_book(args) -> int:
    from .book import build_book

    return build_book(args.profile, args.chapter or None, _params(args.param), render=not args.no_render)


def cmd_run(args) -> int:
    from .book import run_chapter_cli

    return run_chapter_cli(args.chapter, args.profile, _params(args.param))


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m rote", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(sp):
        sp.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default quick)")
        sp.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"),
                        help="override a parameter (repeatable)")

    t = sub.add_parser("train", help="train a run, or reuse the cached one; prints final metrics as JSON")
    t.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}")
    common(t)
    t.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda if available)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=cmd_train)

    b = sub.add_parser("book", help="execute the chapters with papermill and render the site")
    common(b)
    b.add_argument("--chapter", action="append", help="only this chapter (repeatable)")
    b.add_argument("--no-render", action="store_true", help="execute only, do not run jupyter-book")
    b.set_defaults(func=cmd_book)

    r = sub.add_parser("run", help="rerun one chapter with new parameters, reusing cached runs")
    r.add_argument("chapter")
    common(r)
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("claims", help="print the claim scorecard")
    c.add_argument("--profile", default=None)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_claims)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        if getattr(args, "profile", None) is not None and args.profile not in PROFILES:
            raise UsageError(f"unknown profile {args.profile!r}; choose one of {', '.join(PROFILES)}")
        return args.func(args)
    except (UsageError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; an unfinished run resumes from its last checkpoint next time", file=sys.stderr)
        return 130

"""The command line's arguments: :func:`parser` (``python -m rote plan|train|run|book|claims``, each
subcommand's options), checked before any work; a bad argument is a :class:`UsageError`. Apart from the
commands (:mod:`rote.build.cli`), so that a page's example command is checked without importing them
(:func:`rote.build.reference.check_example`)."""

from __future__ import annotations

import argparse

from ..config import PROFILES, TASKS

DESCRIPTION = "Command line: ``python -m rote plan|train|run|book|claims``."


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2, no usage dump
        raise UsageError(message)


def pairs(given: list[list[str]] | None) -> dict[str, str]:
    """``-p NAME VALUE`` pairs as a dict; a name given twice is a :class:`UsageError`."""
    out = {}
    for name, value in given or []:
        if name in out:
            raise UsageError(f"parameter {name} given twice")
        out[name] = value
    return out


def at_least_one(args, *names: str) -> None:
    for name in names:
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise UsageError(f"--{name} must be >= 1, got {getattr(args, name)}")


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
    "stack": [(("--stack",), dict(action=argparse.BooleanOptionalAction, default=None,
                                  help="train the runs of one shape as one stacked model, a process a stack "
                                       "(default: on CUDA yes, on the CPU no)"))],
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
    p = Parser(prog="python -m rote", description=DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    pl = sub.add_parser("plan", help="list the runs the book's chapters need, cached or not, with estimated times")
    _add(pl, "common", "seeds", "x1", "stability")
    pl.add_argument("--task", default=None, help=f"only this task ({', '.join(TASKS)})")
    pl.add_argument("--workers", type=int, default=None, help="workers for the time estimate (default: the cores)")
    pl.add_argument("--json", action="store_true")
    _add(pl, "stack")

    t = sub.add_parser("train", help="train runs, or reuse cached ones; prints final metrics as JSON (one line a run)")
    t.add_argument("--task", default=None, help=f"one of {', '.join(TASKS)}")
    _add(t, "common", "seeds")
    t.add_argument("--plan", action="store_true",
                   help="train every run of the book's plan (conditions, noise-free twins, sweep; X1's grid "
                        "with --x1), not only the given configuration")
    _add(t, "x1", "engine", "stack")
    t.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda if available)")
    t.add_argument("--quiet", action="store_true", help="no progress display")

    b = sub.add_parser("book", help="train the plan's missing runs, execute the chapters, render the site")
    _add(b, "common", "seeds", "engine", "x1", "stability")
    b.add_argument("--chapter", action="append",
                   help="only this chapter (repeatable); trains only the runs the named chapters need")
    b.add_argument("--no-render", action="store_true", help="execute only, do not run jupyter-book")

    r = sub.add_parser("run", help="rerun one chapter with new parameters, reusing cached runs")
    r.add_argument("chapter")
    _add(r, "common", "seeds")

    c = sub.add_parser("claims", help="print the claim scorecard")
    c.add_argument("--profile", default=None)
    _add(c, "seeds")
    c.add_argument("--json", action="store_true")
    return p


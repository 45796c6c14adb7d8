"""What each chapter costs on this machine: CPU seconds (user + system, the chapter's own process) and wall
seconds, one chapter at a time, its code cells executed as :mod:`chapter_profile` executes them (in one
namespace, the parameters cell as papermill would inject it) but without the profiler.

Usage:
  .venv/bin/python benchmarks/chapter_cost.py CHAPTER [CHAPTER ...] [--profile quick] [--seeds 1]
      [--analysis DIR] [-p NAME VALUE ...]

The runs must be trained. The chapters share one analysis folder (``--analysis``; default a fresh temporary
one), in the order given: the first to need C2's probe sweep computes it (``interventions`` before
``distributed_encoding``: C3 cold, C4 reading the sweep C3 stored), so name the order and say it with the
numbers. Records go to ``$ROTE_RESULTS`` as usual; figures to a throwaway folder unless ``$ROTE_FIGURES`` is
set. CPU seconds are the comparable number where other work shares the cores (wall time then stretches).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _chapter_profile():
    spec = importlib.util.spec_from_file_location("chapter_profile", HERE / "chapter_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_child(chapter: str, params: dict) -> None:
    """In the child process: execute ``chapter``'s code cells, unprofiled."""
    profiler = _chapter_profile()
    from rote.build.driver import chapter_path

    path = Path(chapter) if chapter.endswith(".ipynb") else chapter_path(chapter)
    profiler.run_chapter(path.resolve(), params)


def cost(chapter: str, params: dict) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one chapter in its own process."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child", chapter, "--params", json.dumps(params)], check=True)
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - start
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapters", nargs="+")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--analysis", default=None, help="the analysis folder the chapters share (default: a fresh one)")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--params", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_child(args.chapters[0], json.loads(args.params))
        return
    os.environ.update(ROTE_PROFILE=args.profile, ROTE_SEEDS=str(args.seeds), ROTE_PLAIN_PROGRESS="1",
                      ROTE_ANALYSIS=args.analysis or tempfile.mkdtemp(prefix="rote-cost-analysis-"))
    os.environ.setdefault("ROTE_FIGURES", tempfile.mkdtemp(prefix="rote-cost-figures-"))
    params = _chapter_profile().chapter_params(args.profile, args.p)
    print(f"{args.profile}, {args.seeds} seed(s), analysis folder {os.environ['ROTE_ANALYSIS']}")
    print(f"{'chapter':<24} {'CPU s':>8} {'wall s':>8}")
    for chapter in args.chapters:
        cpu, wall = cost(chapter, params)
        print(f"{chapter:<24} {cpu:8.1f} {wall:8.1f}", flush=True)


if __name__ == "__main__":
    main()

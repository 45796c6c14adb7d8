"""Where a chapter's time goes: execute a chapter's code cells in this process under cProfile and print
the wall time of each cell and the library functions with the most cumulative time.

Usage:
  .venv/bin/python benchmarks/chapter_profile.py CHAPTER [CHAPTER ...] [--profile quick] [--seeds 3]
      [--top 25] [-p NAME VALUE ...]

CHAPTER is a chapter name (``interventions``) or a notebook path. The runs must be trained (the chapter
would otherwise train them, and the profile would measure training). Figures go to a throwaway folder;
records go to ``$ROTE_RESULTS`` as usual, so point that somewhere else to keep the book's records.
Cells run in order in one namespace, with the parameters cell followed by the given ``-p`` values, as
papermill would inject them; the kernel's display calls print nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def code_cells(path: Path) -> list[tuple[bool, str]]:
    nb = json.loads(path.read_text())
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            out.append(("parameters" in cell["metadata"].get("tags", []), "".join(cell["source"])))
    return out


def run_chapter(path: Path, params: dict[str, object]) -> list[tuple[int, float, str]]:
    """Execute the code cells of ``path`` in one namespace; return (cell index, seconds, first line)."""
    import matplotlib

    matplotlib.use("Agg")
    import IPython.display

    IPython.display.display = lambda *a, **k: None  # the notebooks' tables and markdown: not timed output
    namespace: dict[str, object] = {"__name__": "__chapter__"}
    times = []
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        for i, (is_params, source) in enumerate(code_cells(path)):
            source = source.replace("%matplotlib inline", "")
            if is_params:
                source += "".join(f"\n{k} = {v!r}" for k, v in params.items())
            start = time.perf_counter()
            exec(compile(source, f"{path.name}:cell{i}", "exec"), namespace)
            times.append((i, time.perf_counter() - start, source.strip().splitlines()[0][:70] if source.strip() else ""))
            import matplotlib.pyplot as plt

            plt.close("all")
    finally:
        os.chdir(cwd)
    return times


def chapter_params(profile: str, pairs: list) -> dict:
    """The papermill parameters of ``-p NAME VALUE`` pairs (JSON values where they parse, else text)."""
    params = {"profile": profile}
    for name, value in pairs:
        try:
            params[name] = json.loads(value)
        except json.JSONDecodeError:
            params[name] = value
    return params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapters", nargs="+")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    args = ap.parse_args()
    os.environ.update(ROTE_PROFILE=args.profile, ROTE_SEEDS=str(args.seeds), ROTE_PLAIN_PROGRESS="1")
    os.environ.setdefault("ROTE_FIGURES", tempfile.mkdtemp(prefix="rote-profile-figures-"))
    from rote.build.driver import chapter_path

    params = chapter_params(args.profile, args.p)
    for chapter in args.chapters:
        path = Path(chapter) if chapter.endswith(".ipynb") else chapter_path(chapter)
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        times = run_chapter(path.resolve(), params)
        profiler.disable()
        total = time.perf_counter() - start
        print(f"\n=== {path.name}: {total:.1f} s ({args.profile}, {args.seeds} seeds)")
        for i, seconds, first in sorted(times, key=lambda t: -t[1])[:8]:
            print(f"  cell {i:2d} {seconds:7.1f} s  {first}")
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text).sort_stats("cumulative")
        stats.print_stats(r"rote/(analysis|chapters|verdicts|report|runs|analysis_cache|plots)", args.top)
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()

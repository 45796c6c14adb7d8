"""The size of ``rote/`` by part (issue 45, part 4, replacing issue 35's line budget): code lines (lines
that hold a token other than a comment or a docstring) of the library's science, judging, chapters and
orchestration and of the book tool (``rote/build/``), and every function longer than 60 lines.

    python benchmarks/budget.py [--files] [--base REV]

Prints the code lines of each part and of ``rote/`` as a whole; with ``--base REV`` (a git revision, such
as the commit an issue started from) each part's growth since then, which an issue's note states; with
``--files``, one row per module, largest first. Exits 1 when a function is over 60 lines or the
library's science is not its largest part (tests/test_budget.py checks both).
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "rote"
MAX_FUNCTION_LINES = 60
# The book tool's modules at their paths before issue 45 moved them into rote/build/ (for --base).
BEFORE_THE_SPLIT = tuple(f"rote/{m}.py" for m in ("engine", "timings", "driver", "staging", "site", "frontpage",
                                                  "provenance", "reference", "publish", "cli", "book"))
# Each module's part, by the first rule whose path prefix (relative to the repository) it starts with.
PARTS = [
    ("build tool", ("rote/build/", "rote/__main__.py", *BEFORE_THE_SPLIT)),
    ("science", ("rote/config.py", "rote/noise.py", "rote/tasks/", "rote/model.py", "rote/train.py", "rote/stack.py",
                 "rote/scoring.py", "rote/analysis/")),
    ("judging", ("rote/spec.py", "rote/specs/", "rote/verdicts/", "rote/claims.py", "rote/report.py",
                 "rote/display.py", "rote/stability.py")),
    ("chapters", ("rote/chapters/", "rote/plots.py")),
    ("orchestration", ("rote/__init__.py", "rote/runs.py", "rote/analysis_cache.py", "rote/plan.py", "rote/fmt.py",
                       "rote/settings.py")),
]
LIBRARY_PARTS = ("science", "judging", "chapters", "orchestration")
_SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def measure_source(source: str) -> tuple[int, int, list[tuple[str, int]]]:
    """(lines, code lines, [(function, lines) for every function over the limit]) of one module's text."""
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = {line for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type not in _SKIPPED
            for line in range(tok.start[0], tok.end[0] + 1) if line not in docstrings}
    long = [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    return len(source.splitlines()), len(code), long


def measure(path: Path) -> tuple[int, int, list[tuple[str, int]]]:
    return measure_source(path.read_text())


def part(name: str) -> str:
    """The part of a module (``rote/analysis/lens.py`` -> ``science``); a module no rule names is an error,
    so that a new one is counted in a part, never left out."""
    for title, prefixes in PARTS:
        if name.startswith(prefixes):
            return title
    raise ValueError(f"{name} is in no part of benchmarks/budget.py's PARTS: add it to one")


def sources(base: str | None = None) -> dict[str, str]:
    """Module path (``rote/...py``) -> text: the working tree's, or those of git revision ``base``."""
    if base is None:
        return {p.relative_to(ROOT.parent).as_posix(): p.read_text() for p in sorted(ROOT.rglob("*.py"))}
    git = ["git", "-C", str(ROOT.parent)]
    names = subprocess.run(git + ["ls-tree", "-r", "--name-only", base, "rote"], capture_output=True, text=True,
                           check=True).stdout.split()
    return {n: subprocess.run(git + ["show", f"{base}:{n}"], capture_output=True, text=True, check=True).stdout
            for n in names if n.endswith(".py")}


def by_part(texts: dict[str, str]) -> dict[str, int]:
    """Code lines per part, in the order of :data:`PARTS`."""
    out = {title: 0 for title, _ in PARTS}
    for name, text in texts.items():
        out[part(name)] += measure_source(text)[1]
    return out


def science_is_largest(parts: dict[str, int]) -> bool:
    """Whether the library's science has more code lines than each other part of the library."""
    return all(parts["science"] > parts[p] for p in LIBRARY_PARTS if p != "science")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", action="store_true", help="one row per module")
    parser.add_argument("--base", default=None, help="a git revision: each part's growth since then")
    args = parser.parse_args(argv)
    texts = sources()
    rows = sorted(((*measure_source(text), name) for name, text in texts.items()), reverse=True)
    if args.files:
        print(f"{'lines':>6} {'code':>6}  {'part':<13} module")
        for lines, code, _, name in rows:
            print(f"{lines:6d} {code:6d}  {part(name):<13} {name}")
    parts, before = by_part(texts), by_part(sources(args.base)) if args.base else None
    for title, code in parts.items():
        growth = f" ({code - before[title]:+,} since {args.base})" if before else ""
        print(f"{title:<14} {code:6,} code lines{growth}")
    total = sum(parts.values())
    print(f"{'rote/':<14} {total:6,} code lines" + (f" ({total - sum(before.values()):+,} since {args.base})"
                                                    if before else ""))
    long = [f"{name}:{fn} ({n} lines)" for _, _, fns, name in rows for fn, n in fns]
    print(f"{len(long)} functions over {MAX_FUNCTION_LINES} lines" + "".join(f"\n  {f}" for f in long))
    largest = science_is_largest(parts)
    print("the library's science is its largest part" if largest else
          "the library's science is NOT its largest part")
    return 0 if largest and not long else 1


if __name__ == "__main__":
    sys.exit(main())

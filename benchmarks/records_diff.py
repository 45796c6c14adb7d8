"""Compare two builds' claim records, row by row and check by check: the verdicts of each row in both
readings, and every check whose kind, value, threshold or outcome differs on a seed (checks only in one
build are listed as added or removed). Used for the before-and-after of a verdict change (issue 36:
protocol 8.6 and section 11), on records computed from the same trained runs.

    python benchmarks/records_diff.py BEFORE_RESULTS AFTER_RESULTS [--profile quick] [--seeds 0]

BEFORE_RESULTS and AFTER_RESULTS are two ``$ROTE_RESULTS`` folders. ``--seeds`` picks the records of
that seed list (``0`` for a ``--seeds 1`` build, whose records are ``...seeds-0.json``; default: the
protocol's seeds 0, 1, 2). Prints Markdown. Margins, intervals and near are new fields, not differences.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

IGNORED = ("margin", "interval", "method", "near", "reason", "name", "section5", "was", "part")


def load(folder: Path, profile: str, seeds: list[int] | None) -> dict[str, dict]:
    """Record file stem (``C1-fda-random``) -> record, for the seed list asked for."""
    suffix = "" if seeds is None else f".seeds-{'-'.join(map(str, seeds))}"
    out = {}
    for path in sorted((folder / profile).glob("*.json")):
        stem = path.name[:-len(".json")]
        if stem.endswith(suffix) and (suffix or ".seeds-" not in stem):
            out[stem[:len(stem) - len(suffix)] if suffix else stem] = json.loads(path.read_text())
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _short(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value)[:40]


def check_changes(before: dict, after: dict) -> list[str]:
    """One line per (seed, check) that differs between two records of one row."""
    lines = []
    for b_seed, a_seed in zip(before.get("per_seed", []), after.get("per_seed", [])):
        old = {c["id"]: c for c in b_seed["checks"]}
        new = {c["id"]: c for c in a_seed["checks"]}
        for cid in sorted(set(old) | set(new)):
            b, a = old.get(cid), new.get(cid)
            if b is None or a is None:
                c = a or b
                lines.append(f"seed {a_seed['seed']} `{cid}` {'added' if b is None else 'removed'}: {c['kind']}, "
                             f"{_short(c['value'])} vs {_short(c['threshold'])} -> {c['passed']}")
                continue
            keys = [k for k in ("kind", "value", "threshold", "passed") if not _same(b.get(k), a.get(k))]
            if keys:
                lines.append(f"seed {a_seed['seed']} `{cid}`: " + "; ".join(
                    f"{k} {_short(b.get(k))} -> {_short(a.get(k))}" for k in keys))
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--seeds", default=None, help="comma-separated seed list of the records (default 0,1,2)")
    args = ap.parse_args(argv)
    seeds = None if args.seeds is None else [int(s) for s in args.seeds.split(",")]
    before, after = load(args.before, args.profile, seeds), load(args.after, args.profile, seeds)
    print("| row | registered before -> after | amended before -> after |\n|:--|:--|:--|")
    for stem in sorted(set(before) | set(after)):
        b, a = before.get(stem, {}), after.get(stem, {})
        moved = "" if (b.get("verdict_amended") == a.get("verdict_amended")
                       and b.get("verdict_registered") == a.get("verdict_registered")) else " **moved**"
        print(f"| {stem}{moved} | {b.get('verdict_registered')} -> {a.get('verdict_registered')} "
              f"| {b.get('verdict_amended')} -> {a.get('verdict_amended')} |")
    for stem in sorted(set(before) & set(after)):
        lines = check_changes(before[stem], after[stem])
        if lines:
            print(f"\n### {stem}\n" + "\n".join(f"- {line}" for line in lines))


if __name__ == "__main__":
    main()

"""Section 11 on one build's records, as Markdown: each row's verdicts (registered, amended), its
stability entry where one was computed, its near seeds, and every near check with its value, threshold,
interval and method; for each fragile row, whether the check that decided it was near.

    python benchmarks/near_report.py RESULTS [--profile quick]

RESULTS is a ``$ROTE_RESULTS`` folder; the records read are those of the protocol's seeds (0, 1, 2)
unless ``--seeds`` names others (``--seeds 0`` for a ``--seeds 1`` build).
Used for issue 36's table in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--seeds", type=int, nargs="+", help="the records of these seeds (default: 0 1 2)")
    args = parser.parse_args(argv)
    from rote import claims, display, verdicts

    records = claims.load_all(args.profile, args.results, seeds=args.seeds)
    print("| row | registered | amended | stability | near seeds | near predicted fragile |")
    print("|---|---|---|---|---|---|")
    for rec in records:
        entry = claims.load_stability(rec, args.results) if rec.per_seed else None
        stability = entry["status"] if entry else "-"
        near = verdicts.near_seeds(rec) if rec.per_seed else "-"
        predicted = display.near_predicted(rec, entry) if entry else "-"
        print(f"| {rec.claim} {rec.task} {rec.condition if rec.condition not in (None, '-') else ''} | {rec.verdict_registered} | {rec.verdict_amended} "
              f"| {stability} | {near} | {predicted} |")
    print("\n| row | seed | check | kind | value | threshold | 95% interval (method) | passed |")
    print("|---|---|---|---|---|---|---|---|")
    for rec in records:
        for s in rec.per_seed or []:
            near = set(verdicts.near_checks(s["checks"]))
            for c in s["checks"]:
                if c["id"] in near:
                    lo, hi = (c.get("interval") or [None, None])[:2]
                    print(f"| {rec.claim} {rec.task} {rec.condition if rec.condition not in (None, '-') else ''} | {s['seed']} | `{c['id']}` | {c['kind']} "
                          f"| {_fmt(c.get('value'))} | {_fmt(c.get('threshold'))} | [{_fmt(lo)}, {_fmt(hi)}] "
                          f"({c.get('method') or '-'}) | {'yes' if c.get('passed') else 'no'} |")


if __name__ == "__main__":
    main()

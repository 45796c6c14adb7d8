"""The quick stability table of protocol 10 (issue 30), as Markdown for benchmarks/RESULTS.md: each
row's 3-seed amended verdict, its verdict in the other precision, its 5-seed verdict, stable or
fragile, and for a fragile row the checks that moved (seed, id, value before -> after, outcome).

Reads the records and the stability entries a stability build wrote (``rote book --stability``,
or its parts); computes nothing new.

    python benchmarks/stability_table.py [--profile quick]
"""

from __future__ import annotations

import argparse

from rote import claims
from rote.stability import label


def _value(x) -> str:
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def _moved(change: dict) -> str:
    return "; ".join(f"s{m['seed']} {m['check'] or 'verdict'} {_value(m['before'])} -> {_value(m['after'])}"
                     f" ({m['outcome_before'] or 'absent'} -> {m['outcome_after'] or 'absent'})" for m in change.get("moved", []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick")
    args = parser.parse_args()
    rows, details = [], []
    for rec in claims.load_all(args.profile, seeds=[0, 1, 2]):
        if rec.claim == "X1" or not rec.per_seed:
            continue
        entry = claims.load_stability(rec) or {}
        changes = entry.get("changes", {})
        precision, seeds = changes.get("precision", {}), changes.get("seeds", {})
        row = f"{rec.claim} {rec.task}{' ' + rec.condition if rec.condition not in ('', '-') else ''}"
        rows.append(f"| {row} | {rec.verdict_amended} | {precision.get('verdict', 'no entry')} | "
                    f"{seeds.get('verdict', 'no entry')} | {label(entry) or 'no entry'} |")
        for name, change in changes.items():
            if change.get("moved"):
                details.append(f"- **{row}, {name}** ({'verdict moved' if change.get('moved_verdict') else 'verdict word kept'}): "
                               + _moved(change))
    print("| row | 3 seeds (default) | other precision | 5 seeds | stability |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    if details:
        print("\nChecks whose outcome moved (seed, check, value default -> changed, outcome):\n")
        print("\n".join(details))


if __name__ == "__main__":
    main()

"""The book: chapter discovery, helpers that chapters call, the papermill build driver."""

from __future__ import annotations

import pandas as pd

from .claims import ClaimRecord


def claims_table(records: list[ClaimRecord]) -> pd.DataFrame:
    """One row per (claim, task, profile): status, the checks, and the key numbers."""
    rows = []
    for r in records:
        failed = [k for k, ok in r.checks.items() if not ok]
        rows.append({"claim": r.claim, "task": r.task, "profile": r.profile, "status": r.status,
                     "failed checks": ", ".join(failed) if r.status == "fail" else "",
                     "metrics": ", ".join(f"{k}={_fmt(v)}" for k, v in r.metrics.items() if not isinstance(v, (list, dict)))})
    return pd.DataFrame(rows)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def record_table(rec: ClaimRecord) -> pd.DataFrame:
    """A claim record as a two-column table of its metrics and checks."""
    rows = [{"item": k, "value": _fmt(v)} for k, v in rec.metrics.items() if not isinstance(v, (list, dict))]
    rows += [{"item": f"check: {k}", "value": "pass" if ok else "FAIL"} for k, ok in rec.checks.items()]
    return pd.DataFrame(rows)


def show_record(rec: ClaimRecord) -> None:
    """Display a claim's verdict in a notebook: a headline and the table of numbers and checks."""
    from IPython.display import Markdown, display

    mark = {"pass": "PASS", "fail": "FAIL", "not run": "NOT RUN"}[rec.status]
    display(Markdown(f"**{rec.claim} / {rec.task.upper()} / {rec.profile}: {mark}**"))
    display(record_table(rec))

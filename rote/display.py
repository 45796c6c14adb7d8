"""How the book shows its records: a record's checks (:func:`show_record`, in every chapter), the
scorecard's tables (:func:`claims_table`, :func:`other_records_table`, :func:`fragile_rows`,
:func:`build_times`), also printed by ``rote claims``. The site's pages (verdict box, stamp, downloads)
are the book tool's (:mod:`rote.build.site`)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from . import claims, fmt
from .claims import UNAMENDED, ClaimRecord
from .config import PROJECT_ROOT
from .fmt import get as _get
from .report import seeds_head
from .stability import FRAGILE, STABLE, label
from .verdicts import OUTCOME_WORDS as OUTCOME, check_ranges, deciding, near_seeds

BUILD_DIR = PROJECT_ROOT / "_build"  # the book build's folder: executed chapters and build.json (rote.build.driver)


def checks_by_id(rec, keep=lambda check: True) -> dict[str, list[tuple[int, dict]]]:
    """A record's checks that ``keep`` keeps, by check id (or name) in first-seen order: [(seed, check)]."""
    out: dict[str, list[tuple[int, dict]]] = {}
    for seed in _get(rec, "per_seed") or []:
        for check in seed.get("checks", []):
            if keep(check):
                out.setdefault(check.get("id") or check.get("name"), []).append((seed.get("seed"), check))
    return out


# -- record tables (chapters, the scorecard, `rote claims`) --------------------------------------
SEED_MARKS = {"pass": "✓", "fail": "✗", "unresolved": "?"}


def claims_table(records: list[ClaimRecord], root: Path | None = None) -> pd.DataFrame:
    """One row per record: both verdicts, a mark per seed (amended: ✓ ? ✗), precision, deciding checks,
    whether its runs are the profile's own, section, group, near seeds (section 11) and, where a stability
    build ran, stability (protocol 10)."""
    origin = {True: "profile default", False: "other runs", None: ""}
    entries = [stability_entry(r, root) for r in records]  # root: the records' folder
    rows = []
    for r, entry in zip(records, entries):
        rows.append({"claim": r.claim, "task": r.task, "condition": r.condition,
                     "registered": r.verdict_registered, "amended": r.verdict_amended,
                     "seeds": " ".join(f"{s['seed']}{SEED_MARKS[s['amended']]}" for s in r.per_seed),
                     "precision": ", ".join(sorted({str(s["precision"]) for s in r.per_seed if s.get("precision")})),
                     "deciding checks": deciding(r) or (f"{r.status}: {r.reason}" if r.reason else ""),
                     "runs": origin[claims.runs_are_profile_defaults(r)] if r.per_seed else "",
                     "section": f"{r.page}#{r.anchor}", "profile": r.profile, "group": claims.group(r.claim),
                     "near seeds": f"{near_seeds(r)}/{len(r.per_seed)}" if r.per_seed else ""})
        if any(entries):  # protocol 10: the columns only where a stability build computed it
            rows[-1]["stability"] = label(entry) if entry else ("not run" if rows[-1]["runs"] else "")
            rows[-1]["near predicted fragile"] = near_predicted(r, entry)
    return pd.DataFrame(rows)


def stability_entry(rec, root: Path | None = None) -> dict | None:
    """A record's stability entry (protocol 10) where a stability build computed one (beside the records of
    ``root``, None: the project's)."""
    return claims.load_stability(rec, root) if _get(rec, "per_seed") and not isinstance(rec, dict) else None


def near_predicted(rec: ClaimRecord, entry: dict | None) -> str:
    """Whether "a seed has a near deciding check" (section 11) predicted the row's stability (protocol
    10): "yes (...)" where they agree, "no: ..." where not, "" where stability was not computed."""
    if not entry or entry.get("status") not in (FRAGILE, STABLE):
        return ""
    near, fragile = near_seeds(rec) > 0, entry["status"] == FRAGILE
    if near == fragile:
        return "yes (near, fragile)" if near else "yes (none near, stable)"
    return "no: near but stable" if near else "no: fragile, none near"


def fragile_rows(records: list[ClaimRecord], root: Path | None = None) -> pd.DataFrame:
    """One line per change that moved a row's verdict word (protocol 10): the verdicts before and under
    it, and the seeds and checks that moved."""
    rows = []
    for r in records:
        entry = stability_entry(r, root) or {}
        for change, c in entry.get("changes", {}).items() if entry.get("status") == FRAGILE else []:
            if not c.get("moved_verdict"):
                continue
            moved = "; ".join(f"seed {m['seed']} {m['check'] or 'verdict'}: "
                              + (f"{fmt.cell(m['before'])} ({m['outcome_before']}) -> " if m["outcome_before"] else "")
                              + f"{fmt.cell(m['after'])} ({m['outcome_after']})" for m in c["moved"])
            rows.append({"claim": r.claim, "task": r.task, "condition": r.condition, "change": change,
                         "verdict": r.verdict_amended, "under the change": c["verdict"], "what moved": moved})
    return pd.DataFrame(rows, columns=["claim", "task", "condition", "change", "verdict", "under the change",
                                       "what moved"])


def other_records_table(records: list[ClaimRecord]) -> pd.DataFrame:
    """The records of other seeds than the book's (:func:`rote.claims.other_records`)."""
    return pd.DataFrame([{"claim": r.claim, "task": r.task, "condition": r.condition,
                          "seeds": ", ".join(str(s) for s in r.seeds) or "-", "amended": r.verdict_amended}
                         for r in records], columns=["claim", "task", "condition", "seeds", "amended"])


def record_table(rec: ClaimRecord) -> pd.DataFrame:
    """A record's checks, one row per check id, one column per seed ("value [interval] vs threshold,
    margin: result"), the range across seeds, the kind, and why superseded or unresolved."""
    result, ranges = {**OUTCOME, False: "FAIL"}, check_ranges(rec)
    rows = []
    for key, found in checks_by_id(rec).items():
        first = found[0][1]
        row = {"id": key, "check": first["name"], "kind": first["kind"],
               "reason": next((c.get("reason") for _, c in found if c.get("reason")), "")}
        for seed, c in found:
            interval = f" {fmt.interval(c)}" if c.get("interval") else ""
            margin = f", margin {fmt.margin(c['margin'])}" if c.get("margin") is not None else ""
            numbers = (f"{fmt.cell(c['value'])}{interval} vs {fmt.cell(c['threshold'])}{margin}: "
                       if c["value"] is not None else "")
            row[f"seed {seed}"] = numbers + result[c["passed"]] + (" (near)" if c.get("near") else "")
        low, high = ranges.get(key) if len(rec.per_seed) > 1 and key in ranges else (None, None)
        rows.append({**row, "range": "" if low is None else f"{fmt.cell(low)} .. {fmt.cell(high)}"})
    return pd.DataFrame(rows)


# The glossary (book/glossary.md) from a cell's Markdown output, which is rendered as CommonMark: the built page.
OUTPUT_GLOSSARY_LINK = "[words](glossary.html)"


def show_record(rec: ClaimRecord) -> None:
    """Display a claim's verdicts in a notebook: a headline and the table of its checks."""
    from IPython.display import Markdown, display

    condition = "" if rec.condition == "-" else f" / {rec.condition} noise"
    seeds = seeds_head(rec.seeds, sep=", ", plural=True) if rec.seeds else "no seed"  # "seed 0", "seeds 0, 1"
    readings = (f" ({seeds}; {rec.claim} has no amendment)" if rec.claim in UNAMENDED  # registered only
                else f", amended **{rec.verdict_amended}** ({seeds})")
    display(Markdown(f"**{rec.claim} / {rec.task.upper()}{condition} / {rec.profile}**: registered "
                     f"**{rec.verdict_registered}**{readings}" + (f": {rec.reason}" if rec.reason else "")
                     + (f" ({OUTPUT_GLOSSARY_LINK} of the table below)" if rec.per_seed else "")))
    if rec.per_seed:
        display(record_table(rec))


def build_times(profile: str, build_dir: Path = BUILD_DIR) -> pd.DataFrame:
    """Runtime and status of each chapter in the latest book build of ``profile`` (under ``build_dir``)."""
    path = build_dir / "executed" / profile / "build.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    return pd.DataFrame([{"chapter": k, "seconds": v["seconds"], "status": "ok" if v["ok"] else "FAILED",
                          "executed": v["executed"]} for k, v in data.items()],
                        columns=["chapter", "seconds", "status", "executed"])  # the columns also before any build

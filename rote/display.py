"""How the book shows its records: a record's checks (:func:`show_record`, in every chapter), the
scorecard's tables (:func:`claims_table`, :func:`other_records_table`, :func:`fragile_rows`,
:func:`build_times`), also printed by ``rote claims``. The site's pages (verdict box, stamp, downloads)
are the book tool's (:mod:`rote.build.site`)."""

from __future__ import annotations

import json
import re
from collections import Counter
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


# -- check labels: a check's id always beside its name in words (its CheckLabel's, rote.verdicts.core) ----------
def labelled(check_id: str, name: str | None, code: bool = False) -> str:
    """A check as a reader reads it: its name in words, its id beside it ("final gen (registered)
    [c1.gen.registered]"; ``code``: Markdown, "final gen (registered) (`c1.gen.registered`)")."""
    shown = f"(`{check_id}`)" if code else f"[{check_id}]"
    return f"{name} {shown}" if name and name != check_id else shown


def check_names(rec) -> dict[str, str]:
    """A record's check ids and their names (the labels its checks were built with)."""
    return {check_id: found[0][1].get("name") for check_id, found in checks_by_id(rec).items()}


def with_labels(text: str, names: dict[str, str], code: bool = False) -> str:
    """``text`` with every check id of ``names`` it names (a whole word) shown :func:`labelled`."""
    if not names or not text:
        return text
    ids = sorted(names, key=len, reverse=True)  # c1.gen.registered before c1.gen
    found = re.compile(r"(?<![\w.`])(" + "|".join(map(re.escape, ids)) + r")(?![\w`]|\.\w)")
    return found.sub(lambda m: labelled(m.group(1), names[m.group(1)], code), text)


def amendment_moves(rec) -> list[dict]:
    """:func:`rote.verdicts.amendment_moves` with each check its ``why`` names shown beside its label."""
    from .verdicts import amendment_moves as moves

    names = check_names(rec)
    return [{**move, "why": with_labels(move["why"], names)} for move in moves(rec)]


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
                     "deciding checks": deciding(r, lambda c: labelled(c["id"], c.get("name")), reader_value)
                     or (f"{r.status}: {r.reason}" if r.reason else ""),
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
            moved = "; ".join(_moved(m, check_names(r)) for m in c["moved"])
            rows.append({"claim": r.claim, "task": r.task, "condition": r.condition, "change": change,
                         "verdict": r.verdict_amended, "under the change": c["verdict"], "what moved": moved})
    return pd.DataFrame(rows, columns=["claim", "task", "condition", "change", "verdict", "under the change",
                                       "what moved"])


def _moved(move: dict, names: dict[str, str]) -> str:
    """What a change moved on one seed: the check (labelled) or the verdict, its value before and after."""
    what = labelled(move["check"], names.get(move["check"])) if move["check"] else "verdict"
    before = f"{reader_value(move['before'])} ({move['outcome_before']}) -> " if move["outcome_before"] else ""
    return f"seed {move['seed']} {what}: {before}{reader_value(move['after'])} ({move['outcome_after']})"


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
        row = {"check": first["name"], "id": key, "kind": first["kind"],
               "reason": next((c.get("reason") for _, c in found if c.get("reason")), "")}
        for seed, c in found:
            interval = f" {fmt.interval(c)}" if c.get("interval") else ""
            margin = f", margin {fmt.margin(c['margin'])}" if c.get("margin") is not None else ""
            numbers = (f"{reader_value(c['value'])}{interval} vs {reader_value(c['threshold'])}{margin}: "
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
        if rec.ran:
            display(Markdown(ran_sentence(rec)))
        display(record_table(rec))


def _how(how: dict | None) -> str:
    """How one run trained, in words (a manifest's fields, :func:`rote.runs.how_trained`)."""
    if how is None:
        return "not in the runs folder it was read from"
    if "device" not in how:
        return f"in {how.get('precision', 'a precision not recorded')}, where and whether stacked not recorded"
    stacked = how.get("stacked", 1)
    return f"on {how['device']} in {how.get('precision', '?')}, " + ("solo" if stacked == 1 else f"stacked by {stacked}")


def ran_sentence(rec: ClaimRecord) -> str:
    """Where a record was computed and how its runs trained (its ``ran``, :func:`rote.claims.how_computed`), one
    sentence: "" for a record that does not say."""
    ran = rec.ran
    if not ran:
        return ""
    hows = Counter(_how(how) for how in ran.get("runs", {}).values())
    runs, n = "; ".join(f"{k} trained {words}" for words, k in hows.items()), hows.total()
    return (f"Computed on {ran.get('device', '?')} ({ran.get('host', '?')}, torch {ran.get('torch', '?')}) from "
            f"{n} run{'s' if n != 1 else ''}" + (f": {runs}." if runs else "."))


def build_times(profile: str, build_dir: Path = BUILD_DIR) -> pd.DataFrame:
    """Runtime and status of each chapter in the latest book build of ``profile`` (under ``build_dir``)."""
    path = build_dir / "executed" / profile / "build.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    return pd.DataFrame([{"chapter": k, "seconds": v["seconds"], "status": "ok" if v["ok"] else "FAILED",
                          "executed": v["executed"]} for k, v in data.items()],
                        columns=["chapter", "seconds", "status", "executed"])  # the columns also before any build


# -- tables as a reader reads them (every DataFrame a chapter shows: rote.fmt.install_reader_tables) -----------
MISSING = "—"  # a cell without a value; the note under its table says why
NOT_MEASURED = "not measured in this build"  # why, where the table does not say (``frame.attrs["missing"]``)
MAX_ROWS = 60  # a longer table shows its first rows and says how many it leaves out


def reader_value(value) -> str:
    """A table cell as a reader reads it: missing (None, NaN, NaT) as :data:`MISSING`, booleans yes/no, a
    whole number without ".0", other floats ``.3g`` (whole above 1000), lists and tuples joined with commas
    ("none" when empty), and whole-cell "None", "nan", "True", "False" strings alike."""
    import numpy as np

    if isinstance(value, (list, tuple, np.ndarray)):
        return ", ".join(reader_value(v) for v in value) or "none"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {reader_value(v)}" for k, v in value.items()) or "none"
    if isinstance(value, str):
        return {"None": MISSING, "nan": MISSING, "NaN": MISSING, "True": "yes", "False": "no"}.get(value.strip(), value)
    if value is None or (not isinstance(value, (bool, np.bool_)) and pd.isna(value)):
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        whole = float(value).is_integer() or abs(value) >= 1000
        return f"{value:.0f}" if whole else f"{value:.3g}"
    return str(value)


def _column_name(column) -> str:
    return " ".join(str(c) for c in column if str(c)) if isinstance(column, tuple) else str(column)


# a count of a table, a column or (a table of one column per run) a row (``n``, ``n_M``, ``jstar_n_M``, ``size``,
# "look-up examples"): where it is 0, the missing values beside it had nothing to measure
COUNT = re.compile(r"(?:\w+_)?n(?:_\w+)?|size|.*\bexamples\b.*")


def _counts(frame: pd.DataFrame, column, row) -> list[str]:
    """The counts that are 0 beside the cell (``row``, ``column``): in its row, and in its column where the
    table's first column names its rows."""
    in_row = [f"{c} = 0" for c in frame.columns if isinstance(c, str) and COUNT.fullmatch(c)
              and reader_value(frame.at[row, c]) == "0"]
    names = frame.iloc[:, 0] if len(frame.columns) and frame.columns[0] != column else pd.Series(dtype=object)
    in_column = [f"{name} = 0" for r, name in names.items() if isinstance(name, str) and COUNT.fullmatch(name)
                 and reader_value(frame.at[r, column]) == "0"]
    return in_row + in_column


def _why_missing(frame: pd.DataFrame, column, rows) -> list[str]:
    """Why ``column`` of ``frame`` lacks a value in ``rows`` (index labels), one reason per row:
    ``frame.attrs["missing"]`` (one reason, or one per column), else an empty set beside it (a count that is
    0: "no example to measure on (n_M = 0)", :func:`_counts`), else :data:`NOT_MEASURED`."""
    given = frame.attrs.get("missing")
    given = given.get(column) if isinstance(given, dict) else given
    out = []
    for row in rows:
        empty = [] if given else _counts(frame, column, row)
        out.append(given or (f"no example to measure on ({', '.join(empty)})" if empty else NOT_MEASURED))
    return out


def _reasons(frame: pd.DataFrame, missing: pd.DataFrame) -> str:
    """The reasons for the cells ``missing`` marks (a boolean frame like ``frame``), each with its columns."""
    by_reason: dict[str, list[str]] = {}
    for column in missing.columns:
        for reason in dict.fromkeys(_why_missing(frame, column, missing.index[missing[column]])):
            by_reason.setdefault(reason, []).append(_column_name(column))
    return "; ".join(f"{reason} ({', '.join(names)})" for reason, names in by_reason.items())


def _unique_columns(columns) -> list:
    """Column names, a repeated one numbered from its second use ("x", "x (2)")."""
    seen: dict = {}
    out = []
    for column in columns:
        seen[column] = seen.get(column, 0) + 1
        out.append(column if seen[column] == 1 else f"{_column_name(column)} ({seen[column]})")
    return out


def reader_frame(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` as text for a reader, and the notes that go under it: a named or non-numeric index becomes
    columns (row numbers are dropped), a column without any value is left out and named in a note, every
    cell is :func:`reader_value`, a missing one :data:`MISSING` with the note saying why (:func:`_why_missing`),
    and a table longer than :data:`MAX_ROWS` says how many rows it leaves out."""
    index = frame.index
    named = any(n is not None for n in index.names) or not pd.api.types.is_integer_dtype(index.dtype)
    frame = (frame.reset_index(allow_duplicates=True).rename(columns={"index": ""}) if named and len(frame)
             else frame.reset_index(drop=True))
    if frame.columns.has_duplicates:
        frame.columns = _unique_columns(frame.columns)
    notes = []
    missing = frame.map(lambda v: reader_value(v) == MISSING) if len(frame.columns) else frame.astype(bool)
    empty = [c for c in frame.columns if len(frame) and missing[c].all()]
    if empty:
        notes.append(f"Columns without any value, not shown: {_reasons(frame, missing[empty])}.")
        frame, missing = frame.drop(columns=empty), missing.drop(columns=empty)
    if len(frame) > MAX_ROWS:
        notes.append(f"The first {MAX_ROWS} of {len(frame)} rows.")
        frame, missing = frame.head(MAX_ROWS), missing.head(MAX_ROWS)
    gaps = [c for c in frame.columns if missing[c].any()]
    if gaps:
        notes.append(f"{MISSING}: {_reasons(frame, missing[gaps])}.")
    return (frame.map(reader_value) if len(frame.columns) else frame), notes


def reader_html(frame: pd.DataFrame, caption: str | None = None) -> str:
    """The HTML of :func:`reader_frame`: no index column, every cell whole, the notes under the table."""
    import html

    text, notes = reader_frame(frame)
    table = text.to_html(index=False, border=0, classes="rote-table", escape=True) if len(text.columns) \
        else "<p>No column of this table has a value.</p>"
    if caption:
        table = table.replace(">", f"><caption>{html.escape(str(caption))}</caption>", 1)
    return table + "".join(f'<p class="rote-table-note">{html.escape(n)}</p>' for n in notes)


def reader_styler_html(styler) -> str:
    """A pandas ``Styler`` (a table with a caption) as :func:`reader_html` of its data."""
    return reader_html(styler.data, getattr(styler, "caption", None))


def install_reader_tables() -> bool:
    """In a Jupyter kernel, show every pandas table (a DataFrame, a Styler) as a reader reads it
    (:func:`reader_html`: no index column, no NaN, None, True/False or "130.0", no cell cut off). Whether a
    kernel was found (elsewhere nothing changes). Every chapter's kernel runs it: :mod:`rote.plots` calls it."""
    import sys

    from pandas.io.formats.style import Styler

    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    if shell is None or not hasattr(shell, "kernel"):
        return False
    html = shell.display_formatter.formatters["text/html"]
    html.for_type(pd.DataFrame, reader_html)
    html.for_type(Styler, reader_styler_html)
    return True

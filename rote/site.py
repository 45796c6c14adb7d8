"""How the book shows its records (tables for the chapters, the scorecard and ``rote claims``), and what
the staged site adds to each executed chapter (:func:`rote.staging.stage_site`; sources are never edited):
a build stamp with the command that reruns it, a verdict box from the page's records, the boilerplate
cells collapsed, and the records for download as JSON and CSV.
"""

from __future__ import annotations

import ast
import csv
import json
import shlex
from dataclasses import asdict, is_dataclass
from pathlib import Path

import pandas as pd

from . import claims, fmt
from .claims import UNAMENDED, ClaimRecord
from .config import PROJECT_ROOT
from .fmt import get as _get, md_cell

BOOK_DIR = PROJECT_ROOT / "book"  # the chapters' sources and the book's text pages
BUILD_DIR = PROJECT_ROOT / "_build"  # executed chapters (rote.driver), staged sources and the site
HIDE_TAG = "hide-input"  # myst-nb: the code collapses behind a "Show code cell source" toggle
BOILERPLATE_TAGS = ("parameters", "injected-parameters")
SITE_NOTE_TAG = "rote-site"  # cells this module inserts (replaced, never stacked, on restaging)


# -- records -------------------------------------------------------------------------------------
def record_dict(rec) -> dict:
    return asdict(rec) if is_dataclass(rec) else dict(rec)


def records_for_page(records, page: str) -> list:
    """The records a chapter computed: those whose ``page`` is the chapter's notebook stem."""
    return [r for r in records if _get(r, "page") == page]


def _verdict_class(verdicts: list[str]) -> str:
    """The box's colour: all hold / pass, any fails, none run, or mixed."""
    words = [str(v).split()[0].rstrip(":") if v else "not" for v in verdicts]
    if words and all(w in ("holds", "pass") for w in words):
        return "rote-verdict-holds"
    if any(w in ("fails", "fail") for w in words):
        return "rote-verdict-fails"
    if words and all(w == "not" for w in words):
        return "rote-verdict-notrun"
    return "rote-verdict-mixed"


from .verdicts import OUTCOME_WORDS as OUTCOME  # noqa: E402  (one spelling of the three outcomes)


def deciding_rows(rec, reading: str) -> list[dict]:
    """The checks that decide ``reading``'s verdict, one row per check id over the seeds: those failing
    on some seed, else those unresolved on some seed, else all that count (:func:`rote.verdicts.counts_in`)."""
    from .verdicts import counts_in

    by_id: dict[str, list[dict]] = {}
    for seed in _get(rec, "per_seed") or []:
        for check in seed.get("checks", []):
            if counts_in(check, reading):
                by_id.setdefault(check.get("id") or check.get("name"), []).append(check)
    failed = {k: v for k, v in by_id.items() if any(c.get("passed") is False for c in v)}
    unresolved = {k: v for k, v in by_id.items() if any(c.get("passed") is None for c in v)}
    rows = []
    for check_id, checks in (failed or unresolved or by_id).items():
        passed = sum(c.get("passed") is True for c in checks)
        thresholds = [fmt.page(c.get("threshold")) for c in checks]
        numbers = [v for v in (c.get("value") for c in checks) if isinstance(v, (int, float)) and not isinstance(v, bool)]
        rows.append({"id": check_id, "name": checks[0].get("name"),
                     "value": " / ".join(fmt.page(c.get("value")) for c in checks),
                     "margin": " / ".join(fmt.margin(c.get("margin")) or "n/a" for c in checks)
                     if any(c.get("margin") is not None for c in checks) else "",
                     "interval": " / ".join(fmt.interval(c) or "n/a" for c in checks)
                     if any(c.get("interval") for c in checks) else "",
                     "near": sum(c.get("near") is True for c in checks),
                     "range": f"{fmt.page(min(numbers))} .. {fmt.page(max(numbers))}" if len(checks) > 1 and numbers else "",
                     "threshold": " / ".join(thresholds) if len(set(thresholds)) > 1 else thresholds[0],
                     "outcome": (f"{passed}/{len(checks)} seeds pass" if len(checks) > 1
                                 else OUTCOME[checks[0].get("passed")]),
                     "reason": next((c.get("reason") for c in checks if c.get("passed") is None and c.get("reason")), "")})
    return rows


def not_counted(rec) -> list[str]:
    """One line per check shown but not counted (``superseded``), with its reason."""
    seen: dict[str, str] = {}
    for seed in _get(rec, "per_seed") or []:
        for c in seed.get("checks", []):
            if c.get("kind") == "superseded" and c.get("reason") and c.get("id") not in seen:
                seen[c.get("id")] = f"`{c.get('id')}`: {c.get('reason')}"
    return list(seen.values())


def verdict_table(rows: list[dict]) -> list[str]:
    """A markdown table of :func:`deciding_rows`: check, value (range), margin, 95% interval (section 11;
    "near", never deciding), threshold, outcome."""
    lines = ["| check | value (range) | margin | 95% interval | threshold | outcome |", "|:--|:--|:--|:--|:--|:--|"]
    for r in rows:
        outcome = r["outcome"] + (f" ({r['reason']})" if r["reason"] else "")
        value = r["value"] + (f" (range {r['range']})" if r.get("range") else "")
        near = f"; near on {r['near']} seed{'s' if r['near'] != 1 else ''}" if r.get("near") else ""
        lines.append(f"| `{md_cell(r['id'])}` {md_cell(r['name'])} | {md_cell(value)} | {md_cell(r.get('margin', ''))} "
                     f"| {md_cell(r.get('interval', '') + near)} | {md_cell(r['threshold'])} | {md_cell(outcome)} |")
    return lines


def _stability_entry(rec) -> dict | None:
    """The record's stability entry (protocol 10), where a stability build computed one."""
    if isinstance(rec, dict) or not _get(rec, "per_seed"):
        return None
    return claims.load_stability(rec)


def verdict_box(records, claim_titles: dict[str, str] | None = None) -> str | None:
    """MyST markdown of a chapter's verdict box (None without records): per record both verdicts, the
    amended reading's deciding checks as a table, the registered one's in a line, and what is not counted."""
    if not records:
        return None
    claim_titles = claim_titles or {}
    claims = sorted({_get(r, "claim") for r in records})
    title = "; ".join(f"{c}: {claim_titles[c]}" if c in claim_titles else c for c in claims)
    verdicts = [_get(r, "verdict_amended", _get(r, "status")) for r in records]
    lines = [f":::{{admonition}} Verdict. {title}", f":class: rote-verdict {_verdict_class(verdicts)}", ""]
    for r in records:  # in the records' order: claim, task, then the primary condition first
        condition = _get(r, "condition", "-")
        what = f"{_get(r, 'claim')} · {str(_get(r, 'task')).upper()}" + (
            f" · {condition} noise" if condition not in (None, "", "-") else "")
        registered = _get(r, "verdict_registered", _get(r, "status"))
        amended = _get(r, "verdict_amended", _get(r, "status"))
        seeds = _get(r, "seeds") or []
        seeds_text = ", ".join(str(s) for s in (seeds.values() if isinstance(seeds, dict) else seeds)) or "none"
        unamended = _get(r, "claim") in UNAMENDED  # one reading: the registered one
        lines += [f"**{what}**: registered **{registered}**" + (
            f" ({_get(r, 'claim')} has no amendment; seeds {seeds_text})" if unamended
            else f", amended **{amended}** (seeds {seeds_text})"), ""]
        if _get(r, "reason") and not _get(r, "per_seed"):  # a chapter that ran but could not judge it says why
            lines += [f"- not run: {_get(r, 'reason')}", ""]
        amended_rows = deciding_rows(r, "amended")
        if amended_rows:
            lines += [("Deciding checks:" if unamended else "Amended reading, deciding checks:"), "",
                      *verdict_table(amended_rows), ""]
        registered_rows = deciding_rows(r, "registered") if not unamended else []
        if registered_rows:
            lines.append("- registered reading, deciding checks: " + "; ".join(
                f"`{x['id']}` = {x['value']}" + (f", threshold {x['threshold']}" if x["threshold"] else "")
                + f": {x['outcome']}" for x in registered_rows))
        missing = sorted({p for seed in _get(r, "per_seed") or [] for p in seed.get("missing_parts", [])})
        if missing:
            lines.append(f"- unresolved: no deciding check left for {', '.join(missing)}")
        if not_counted(r):
            lines.append("- superseded (shown, not counted): " + "; ".join(not_counted(r)))
        entry = _stability_entry(r)
        if entry:  # protocol 10, only where a stability build computed it
            lines.append(f"- stability (protocol 10): **{entry['status']}**, {entry['reason']}")
        lines.append("")
    lines.append("Read from the claim records this page wrote; the section *Verdict* below has every check.")
    lines.append(":::")
    return "\n".join(lines)


# -- downloads -----------------------------------------------------------------------------------
CSV_COLUMNS = ("claim", "task", "condition", "profile", "verdict_registered", "verdict_amended", "status",
               "seed", "seed_registered", "seed_amended", "check_id", "check", "kind", "value", "threshold", "passed",
               "reason", "margin", "interval_low", "interval_high", "interval_method", "near",
               "page", "anchor")


def csv_rows(records) -> list[dict]:
    """One row per (record, seed, check); a record without checks (not run) is one row."""
    rows = []
    for r in records:
        base = {k: _get(r, k, "") for k in ("claim", "task", "condition", "profile", "verdict_registered",
                                             "verdict_amended", "status", "page", "anchor")}
        emitted = False
        for seed in _get(r, "per_seed") or []:
            for check in seed.get("checks", []):
                low, high = check.get("interval") or (None, None)
                rows.append({**base, "seed": seed.get("seed"), "seed_registered": seed.get("registered", ""),
                             "seed_amended": seed.get("amended", ""), "check_id": check.get("id"),
                             "check": check.get("name"), "kind": check.get("kind"), "reason": check.get("reason"),
                             **{k: json.dumps(v) if isinstance(v, (list, dict)) else v
                                for k, v in (("value", check.get("value")), ("threshold", check.get("threshold")))},
                             "passed": check.get("passed"), "margin": check.get("margin"), "interval_low": low,
                             "interval_high": high, "interval_method": check.get("method") or "",
                             "near": check.get("near")})
                emitted = True
        if not emitted:
            rows.append({**base, "reason": _get(r, "reason", "") or ""})
    return rows


def write_downloads(records, folder: Path, profile: str) -> tuple[str, str]:
    """Write ``records-<profile>.json`` (the records as stored) and ``.csv`` (long form) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    json_name, csv_name = f"records-{profile}.json", f"records-{profile}.csv"
    (folder / json_name).write_text(json.dumps([record_dict(r) for r in records], indent=2))
    with open(folder / csv_name, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(csv_rows(records))
    return json_name, csv_name


def downloads_markdown(json_name: str, csv_name: str, n_records: int) -> str:
    return (f"**Download the records** ({n_records} claim records of this profile): "
            f"{{download}}`JSON <{json_name}>` (as the chapters stored them) · "
            f"{{download}}`CSV <{csv_name}>` (one row per record, seed and check).")


# -- the build stamp and the rerun command -------------------------------------------------------
def rerun_command(chapter: str, params: dict) -> str:
    """The ``python -m rote run`` command that reruns a chapter with its parameters."""
    params = dict(params or {})
    profile = params.pop("profile", "quick")
    parts = ["python", "-m", "rote", "run", chapter, "--profile", str(profile)]
    for key, value in params.items():
        if key == "overrides" and isinstance(value, dict):
            for name, v in value.items():
                parts += ["-p", name, v if isinstance(v, str) else json.dumps(v)]
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            parts += ["-p", key, ",".join(value)]
        else:
            parts += ["-p", key, value if isinstance(value, str) else json.dumps(value)]
    return shlex.join(parts)


def effective_parameters(nb) -> dict[str, str]:
    """Name -> source text of every parameter the notebook ran with (defaults, then papermill's)."""
    out: dict[str, str] = {}
    for tag in BOILERPLATE_TAGS:  # parameters first, then the injected values replace them
        for cell in nb.cells:
            if cell.cell_type == "code" and tag in cell.get("metadata", {}).get("tags", []):
                try:
                    tree = ast.parse(cell.source)
                except SyntaxError:
                    continue
                for node in tree.body:
                    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                        out[node.targets[0].id] = ast.get_source_segment(cell.source, node.value)
    return out


def stamp_markdown(meta: dict, parameters: dict[str, str] | None = None) -> str:
    """The note under a chapter's title: when it ran, how long, whether it failed, and how to rerun it."""
    chapter, params = meta.get("chapter", "?"), meta.get("parameters") or {}
    profile = params.get("profile", meta.get("profile", "quick"))
    when, seconds = meta.get("executed", "?"), meta.get("seconds")
    took = f" in {seconds:.0f} s" if isinstance(seconds, (int, float)) else ""
    kind, head = ("error", f"This chapter FAILED in the build of {when} (profile `{profile}`): "
                           f"{meta.get('error', '')}. The outputs below stop at the failing cell.") \
        if meta.get("ok") is False else ("note", f"Executed {when} with profile `{profile}`{took}." + (
            f" Its runs trained in `{meta['precision']}` (evaluation in fp32)." if meta.get("precision") else ""))
    shown = ", ".join(f"`{k} = {v}`" for k, v in (parameters or {}).items())
    lines = [f"::::{{{kind}}}", head, "", "Rerun this page with the parameters it ran with:", "",
             "```bash", rerun_command(chapter, params), "```"]
    if shown:
        lines += ["", f"Parameters: {shown}."]
    from .provenance import stamp_dropdown  # what produced the page, as run_chapter recorded it

    lines += ["", stamp_dropdown(meta.get("environment")), "::::"]
    return "\n".join(lines)


def static_page_note(profile: str) -> str:
    """The rebuild note for a page that is text, not an executed chapter."""
    return ("\n\n```{note}\nThis page is text. The site was built with "
            f"`python -m rote book --profile {profile}`, which reruns every chapter.\n```\n")


# -- record tables (chapters, the scorecard, `rote claims`) --------------------------------------
SEED_MARKS = {"pass": "✓", "fail": "✗", "unresolved": "?"}


def claims_table(records: list[ClaimRecord]) -> pd.DataFrame:
    """One row per record: both verdicts, a mark per seed (amended: ✓ ? ✗), precision, deciding checks,
    whether its runs are the profile's own, its section and scorecard group; near seeds (section 11)
    and, where a stability build ran, stability (protocol 10)."""
    from .verdicts import deciding, near_seeds

    origin = {True: "profile default", False: "other runs", None: ""}
    rows = []
    for r in records:
        rows.append({"claim": r.claim, "task": r.task, "condition": r.condition,
                     "registered": r.verdict_registered, "amended": r.verdict_amended,
                     "seeds": " ".join(f"{s['seed']}{SEED_MARKS[s['amended']]}" for s in r.per_seed),
                     "precision": ", ".join(sorted({str(s.get("precision")) for s in r.per_seed if s.get("precision")})),
                     "deciding checks": deciding(r) or (f"not run: {r.reason}" if r.reason else ""),
                     "runs": origin[claims.runs_are_profile_defaults(r)] if r.per_seed else "",
                     "section": f"{r.page}#{r.anchor}", "profile": r.profile, "group": claims.group(r.claim)})
    for row, r in zip(rows, records):  # section 11: seeds with a deciding check whose interval holds its threshold
        row["near seeds"] = f"{near_seeds(r)}/{len(r.per_seed)}" if r.per_seed else ""
    entries = [claims.load_stability(r) if r.per_seed else None for r in records]
    if any(entries):  # protocol 10: a column only where a stability build computed it
        from .stability import label

        for row, entry, r in zip(rows, entries, records):
            row["stability"] = label(entry) if entry else ("not run" if row["runs"] else "")
            row["near predicted fragile"] = near_predicted(r, entry)
    return pd.DataFrame(rows)


def near_predicted(rec: ClaimRecord, entry: dict | None) -> str:
    """Whether "a seed has a near deciding check" (section 11) predicted the row's stability (protocol
    10): "yes (...)" where they agree, "no: ..." where not, "" where stability was not computed."""
    from .stability import FRAGILE, STABLE
    from .verdicts import near_seeds

    if not entry or entry.get("status") not in (FRAGILE, STABLE):
        return ""
    near, fragile = near_seeds(rec) > 0, entry["status"] == FRAGILE
    if near == fragile:
        return "yes (near, fragile)" if near else "yes (none near, stable)"
    return "no: near but stable" if near else "no: fragile, none near"


def fragile_rows(records: list[ClaimRecord]) -> pd.DataFrame:
    """One line per change that moved a row's verdict word (protocol 10): the verdicts before and under
    it, and the seeds and checks that moved."""
    from .stability import FRAGILE

    rows = []
    for r in records:
        entry = claims.load_stability(r) if r.per_seed else None
        if not entry or entry["status"] != FRAGILE:
            continue
        for change, c in entry["changes"].items():
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
    from .verdicts import check_ranges

    result = {True: "pass", False: "FAIL", None: "unresolved"}
    ranges = check_ranges(rec)
    rows: dict[str, dict] = {}
    for s in rec.per_seed:
        for c in s["checks"]:
            key = c.get("id") or c["name"]
            row = rows.setdefault(key, {"id": key, "check": c["name"], "kind": c["kind"], "reason": ""})
            interval = f" {fmt.interval(c)}" if c.get("interval") else ""
            margin = f", margin {fmt.margin(c['margin'])}" if c.get("margin") is not None else ""
            numbers = (f"{fmt.cell(c['value'])}{interval} vs {fmt.cell(c['threshold'])}{margin}: "
                       if c["value"] is not None else "")
            row[f"seed {s['seed']}"] = numbers + result[c["passed"]] + (" (near)" if c.get("near") else "")
            row["reason"] = row["reason"] or c.get("reason") or ""
    for key, row in rows.items():
        low_high = ranges.get(key)
        row["range"] = f"{fmt.cell(low_high[0])} .. {fmt.cell(low_high[1])}" if low_high and len(rec.per_seed) > 1 else ""
    return pd.DataFrame(list(rows.values()))


def show_record(rec: ClaimRecord) -> None:
    """Display a claim's verdicts in a notebook: a headline and the table of its checks."""
    from IPython.display import Markdown, display

    condition = "" if rec.condition == "-" else f" / {rec.condition} noise"
    unamended = rec.claim in UNAMENDED  # one reading: the registered one
    display(Markdown(f"**{rec.claim} / {rec.task.upper()}{condition} / {rec.profile}**: registered "
                     f"**{rec.verdict_registered}**" + (f" (seeds {rec.seeds}; {rec.claim} has no amendment)" if unamended
                                                       else f", amended **{rec.verdict_amended}** (seeds {rec.seeds})")
                     + (f": {rec.reason}" if rec.reason else "")))
    if rec.per_seed:
        display(record_table(rec))


def build_times(profile: str) -> pd.DataFrame:
    """Runtime and status of each chapter in the latest book build of ``profile``."""
    path = BUILD_DIR / "executed" / profile / "build.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    return pd.DataFrame([{"chapter": k, "seconds": v["seconds"], "status": "ok" if v["ok"] else "FAILED",
                          "executed": v["executed"]} for k, v in data.items()],
                        columns=["chapter", "seconds", "status", "executed"])  # the columns also before any build


# -- boilerplate ---------------------------------------------------------------------------------
def _visible(output) -> bool:
    """Whether an output shows on the page: not stderr, not a ``glue(..., display=False)`` value."""
    kind = output.get("output_type")
    if kind == "stream":
        return output.get("name") != "stderr"
    if kind in ("display_data", "execute_result"):
        return any(not k.startswith("application/papermill.record") for k in output.get("data", {}))
    return True  # errors


BOILERPLATE_HEADERS = {"parameters": "# Parameters (the chapter's defaults)",
                       "injected-parameters": "# Parameters papermill injected for this build"}


def _imports(source: str) -> tuple[bool, bool]:
    """Whether a cell's code opens with an import (a setup cell), and whether it only imports."""
    try:
        found = [isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.parse(source).body]
    except SyntaxError:
        return False, False
    return bool(found) and found[0], bool(found) and all(found)


def hide_boilerplate(nb) -> int:
    """Collapse behind a "show code" toggle (``hide-input``) the parameter cells, import-only cells, the
    setup before the first output (and its cell when it opens with imports), merging consecutive such
    cells without output into one. Returns how many cells were hidden."""
    marked = []
    seen_output = False
    for cell in nb.cells:
        if cell.cell_type != "code":
            marked.append(False)
            continue
        tags = cell.get("metadata", {}).get("tags", [])
        visible = any(_visible(o) for o in cell.get("outputs", []))
        opens, only = _imports(cell.source)
        boiler = any(t in tags for t in BOILERPLATE_TAGS) or only or (not seen_output and (not visible or opens))
        seen_output = seen_output or visible
        already = any(t in tags for t in (HIDE_TAG, "hide-cell", "remove-input", "remove-cell"))
        marked.append(boiler and not already)
    cells, hidden = [], 0
    for cell, boiler in zip(nb.cells, marked):
        if not boiler:
            cells.append(cell)
            continue
        hidden += 1
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        header = next((BOILERPLATE_HEADERS[t] for t in BOILERPLATE_TAGS if t in tags), None)
        source = f"{header}\n{cell.source}" if header else cell.source
        mergeable = not any(_visible(o) for o in cell.get("outputs", []))
        if mergeable and cells and cells[-1].get("metadata", {}).get("rote_merged"):
            previous = cells[-1]
            previous.source += "\n\n" + source
            previous.outputs += cell.get("outputs", [])  # stderr only: dropped on the page
            previous.execution_count = cell.get("execution_count")
            continue
        cell.source = source
        tags.append(HIDE_TAG)
        if mergeable:
            cell.metadata["rote_merged"] = True
        cells.append(cell)
    for cell in cells:
        cell.get("metadata", {}).pop("rote_merged", None)
    nb.cells = cells
    return hidden


WIDE_TABLE_COLUMNS = 7


def _table_columns(html: str) -> int:
    """How many columns the first table of an HTML output has (header cells of its first row)."""
    import re

    head = re.search(r"<thead.*?</thead>|<tr.*?</tr>", html, flags=re.S | re.I)
    return len(re.findall(r"<t[hd][\s>]", head.group(0), flags=re.I)) if head else 0


def widen_tables(nb, min_columns: int = WIDE_TABLE_COLUMNS) -> int:
    """Tag ``full-width`` (the page's right margin) the cells whose output is a table of ``min_columns``
    or more columns; returns how many."""
    tagged = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        html = "".join(o.get("data", {}).get("text/html", "") if isinstance(o.get("data", {}).get("text/html", ""), str)
                       else "".join(o["data"]["text/html"]) for o in cell.get("outputs", []))
        if "<table" in html and _table_columns(html) >= min_columns:
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            if "full-width" not in tags:
                tags.append("full-width")
                tagged += 1
    return tagged


def title_index(nb) -> int:
    """The index of the page's title cell (the first markdown cell with a ``# `` heading), else 0."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and any(line.startswith("# ") for line in cell.source.splitlines()):
            return i
    return 0


def insert_after_title(nb, cells) -> None:
    """Put ``cells`` right under the page's ``# `` title (a title cell that goes on is split)."""
    import nbformat

    at = title_index(nb)
    title = nb.cells[at] if nb.cells else None
    if title is not None and title.cell_type == "markdown":
        lines = title.source.splitlines()
        head = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
        rest = "\n".join(lines[head + 1:]).strip("\n") if head is not None else ""
        if rest:
            title.source = "\n".join(lines[:head + 1])
            nb.cells.insert(at + 1, nbformat.v4.new_markdown_cell(rest))
    nb.cells[at + 1:at + 1] = list(cells)


# -- Sphinx extension (listed in _config.yml) ----------------------------------------------------
def _unique_scripts(app, pagename, templatename, context, doctree):
    """Drop repeated script tags (sphinx-thebe adds its config twice; the second one throws)."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        filename = getattr(js, "filename", js) or ""  # one copy names no file with None, the other with ""
        key = (str(filename), json.dumps(getattr(js, "attributes", {}), sort_keys=True, default=str))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


# -- the references page's labels ---------------------------------------------------------------
def _author_year_style():
    """A pybtex style ``rote`` whose labels read like the text's citations ("Du et al., 2025", then a/b)."""
    from pybtex.style.formatting.unsrt import Style
    from pybtex.style.labels import BaseLabelStyle

    class AuthorYearLabels(BaseLabelStyle):
        def format_labels(self, sorted_entries):
            entries = list(sorted_entries)
            labels = [_author_year(e) for e in entries]
            for entry, label in zip(entries, labels):
                same = [e for e, other in zip(entries, labels) if other == label]
                yield label + ("abcdefghijklmnopqrstuvwxyz"[same.index(entry)] if len(same) > 1 else "")

    class AuthorYear(Style):
        default_label_style = AuthorYearLabels
        default_sorting_style = "author_year_title"

    return AuthorYear


def _author_year(entry) -> str:
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [" ".join(p.last_names) or " ".join(p.first_names) for p in people]
    who = (names[0] if len(names) == 1 else f"{names[0]} and {names[1]}" if len(names) == 2
           else f"{names[0]} et al." if names else entry.fields.get("title", entry.key))
    return f"{who}, {entry.fields.get('year', 'n.d.')}".replace("{", "").replace("}", "")


def setup(app):
    from pybtex.plugin import register_plugin

    register_plugin("pybtex.style.formatting", "rote", _author_year_style(), force=True)
    app.connect("html-page-context", _unique_scripts, priority=900)  # after every other extension
    return {"parallel_read_safe": True, "parallel_write_safe": True}

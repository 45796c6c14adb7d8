"""What the staged site adds to each executed chapter (:func:`rote.build.staging.stage_site`; sources are never edited):
a build stamp with the command that reruns it, a verdict box from the page's records, the boilerplate
cells collapsed, and the records for download as JSON and CSV.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import shlex
from dataclasses import asdict, is_dataclass
from pathlib import Path

from .. import fmt
from ..claims import UNAMENDED
from ..config import PROJECT_ROOT
from ..display import checks_by_id, labelled, stability_entry
from ..fmt import get as _get, md_cell
from ..report import seeds_head
from ..verdicts import OUTCOME_WORDS as OUTCOME, counts_in
from .provenance import stamp_dropdown

BOOK_DIR = PROJECT_ROOT / "book"  # the chapters' sources and the book's text pages
BUILD_DIR = PROJECT_ROOT / "_build"  # executed chapters (rote.build.driver), staged sources and the site
HIDE_TAG = "hide-input"  # myst-nb: the code collapses behind a "Show code cell source" toggle
BOILERPLATE_TAGS = ("parameters", "injected-parameters")
SITE_NOTE_TAG = "rote-site"  # cells this module inserts (replaced, never stacked, on restaging)


def tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


# -- records -------------------------------------------------------------------------------------
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
    return "rote-verdict-notrun" if words and all(w == "not" for w in words) else "rote-verdict-mixed"


def _per_seed(checks, text, shown=True) -> str:
    """The seeds' ``text(check)`` joined with " / " ("" where not ``shown``)."""
    return " / ".join(text(c) for c in checks) if shown else ""


def deciding_rows(rec, reading: str) -> list[dict]:
    """The checks that decide ``reading``'s verdict, one row per check id over the seeds: those failing
    on some seed, else those unresolved on some seed, else all that count."""
    by_id = {k: [c for _, c in found] for k, found in checks_by_id(rec, lambda c: counts_in(c, reading)).items()}
    failed = {k: v for k, v in by_id.items() if any(c.get("passed") is False for c in v)}
    unresolved = {k: v for k, v in by_id.items() if any(c.get("passed") is None for c in v)}
    rows = []
    for check_id, checks in (failed or unresolved or by_id).items():
        several = len(checks) > 1
        thresholds = [fmt.page(c.get("threshold")) for c in checks]
        numbers = [c.get("value") for c in checks
                   if isinstance(c.get("value"), (int, float)) and not isinstance(c.get("value"), bool)]
        rows.append({
            "id": check_id, "name": checks[0].get("name"),
            "value": _per_seed(checks, lambda c: fmt.page(c.get("value"))),
            "margin": _per_seed(checks, lambda c: fmt.margin(c.get("margin")) or "n/a",
                                any(c.get("margin") is not None for c in checks)),
            "interval": _per_seed(checks, lambda c: fmt.interval(c) or "n/a", any(c.get("interval") for c in checks)),
            "near": sum(c.get("near") is True for c in checks),
            "range": f"{fmt.page(min(numbers))} .. {fmt.page(max(numbers))}" if several and numbers else "",
            "threshold": " / ".join(thresholds) if len(set(thresholds)) > 1 else thresholds[0],
            "outcome": (f"{sum(c.get('passed') is True for c in checks)}/{len(checks)} seeds pass" if several
                        else OUTCOME[checks[0].get("passed")]),
            "reason": next((c.get("reason") for c in checks if c.get("passed") is None and c.get("reason")), "")})
    return rows


def not_counted(rec) -> list[str]:
    """One line per check shown but not counted (``superseded``), with its reason."""
    superseded = checks_by_id(rec, lambda c: c.get("kind") == "superseded" and c.get("reason"))
    return [f"{labelled(check_id, found[0][1].get('name'), code=True)}: {found[0][1].get('reason')}"
            for check_id, found in superseded.items()]


# A check table's header links the glossary (book/glossary.md): in a page's markdown MyST resolves the page
# (a cell's Markdown output links the built page: rote.display.OUTPUT_GLOSSARY_LINK).
GLOSSARY_LINK = "[words](glossary.md)"


def verdict_table(rows: list[dict]) -> list[str]:
    """A markdown table of :func:`deciding_rows` (section 11's interval and "near" shown, never deciding)."""
    lines = [f"| check ({GLOSSARY_LINK}) | value (range) | margin | 95% interval | threshold | outcome |",
             "|:--|:--|:--|:--|:--|:--|"]
    for r in rows:
        near = f"; near on {r['near']} seed{'s' if r['near'] != 1 else ''}" if r["near"] else ""
        cells = [r["value"] + (f" (range {r['range']})" if r["range"] else ""), r["margin"], r["interval"] + near,
                 r["threshold"], r["outcome"] + (f" ({r['reason']})" if r["reason"] else "")]
        check = md_cell(labelled(r["id"], r["name"], code=True))
        lines.append(f"| {check} | " + " | ".join(map(md_cell, cells)) + " |")
    return lines


def verdict_box(records, claim_titles: dict[str, str] | None = None, results: Path | None = None) -> str | None:
    """MyST markdown of a chapter's verdict box (None without records): per record both verdicts, the
    amended reading's deciding checks as a table, the registered one's in a line, and what is not counted."""
    if not records:
        return None
    claim_titles = claim_titles or {}
    title = "; ".join(f"{c}: {claim_titles[c]}" if c in claim_titles else c
                      for c in sorted({_get(r, "claim") for r in records}))
    verdicts = [_get(r, "verdict_amended", _get(r, "status")) for r in records]
    lines = [f":::{{admonition}} Verdict. {title}", f":class: rote-verdict dropdown {_verdict_class(verdicts)}", ""]
    for r, amended in zip(records, verdicts):  # in the records' order: claim, task, primary condition first
        claim, condition, per_seed = _get(r, "claim"), _get(r, "condition", "-"), _get(r, "per_seed") or []
        what = f"{claim} · {str(_get(r, 'task')).upper()}" + (
            f" · {condition} noise" if condition not in (None, "", "-") else "")
        seeds = _get(r, "seeds") or []
        seeds = list(seeds.values() if isinstance(seeds, dict) else seeds)
        seeds_text = seeds_head(seeds, sep=", ", plural=True) if seeds else "no seed"  # "seed 0", "seeds 0, 1"
        unamended = claim in UNAMENDED  # one reading: the registered one
        lines += [f"**{what}**: registered **{_get(r, 'verdict_registered', _get(r, 'status'))}**" + (
            f" ({claim} has no amendment; {seeds_text})" if unamended
            else f", amended **{amended}** ({seeds_text})"), ""]
        if _get(r, "reason") and not per_seed:  # a chapter that ran but could not judge it says why
            lines += [f"- not run: {_get(r, 'reason')}", ""]
        amended_rows = deciding_rows(r, "amended")
        if amended_rows:
            lines += [("Deciding checks:" if unamended else "Amended reading, deciding checks:"), "",
                      *verdict_table(amended_rows), ""]
        registered_rows = [] if unamended else deciding_rows(r, "registered")
        if registered_rows:
            lines.append("- registered reading, deciding checks: " + "; ".join(
                f"{labelled(x['id'], x['name'], code=True)} = {x['value']}"
                + (f", threshold {x['threshold']}" if x["threshold"] else "")
                + f": {x['outcome']}" for x in registered_rows))
        missing = sorted({p for seed in per_seed for p in seed.get("missing_parts", [])})
        if missing:
            lines.append(f"- unresolved: no deciding check left for {', '.join(missing)}")
        if not_counted(r):
            lines.append("- superseded (shown, not counted): " + "; ".join(not_counted(r)))
        entry = stability_entry(r, results)
        if entry:  # protocol 10, only where a stability build computed it
            lines.append(f"- stability (protocol 10): **{entry['status']}**, {entry['reason']}")
        lines.append("")
    lines += ["Read from the claim records this page wrote; the section *Verdict* below has every check.", ":::"]
    return "\n".join(lines)


# -- downloads -----------------------------------------------------------------------------------
CSV_COLUMNS = ("claim", "task", "condition", "profile", "verdict_registered", "verdict_amended", "status", "seed",
               "seed_registered", "seed_amended", "check_id", "check", "kind", "value", "threshold", "passed", "reason",
               "margin", "interval_low", "interval_high", "interval_method", "near", "page", "anchor")


def csv_rows(records) -> list[dict]:
    """One row per (record, seed, check); a record without checks (not run) is one row."""
    rows = []
    for r in records:
        base = {k: _get(r, k, "") for k in ("claim", "task", "condition", "profile", "verdict_registered",
                                             "verdict_amended", "status", "page", "anchor")}
        before = len(rows)
        for seed in _get(r, "per_seed") or []:
            for c in seed.get("checks", []):
                low, high = c.get("interval") or (None, None)
                rows.append({**base, **{k: c.get(k) for k in ("kind", "reason", "passed", "margin", "near")},
                             **{k: json.dumps(c[k]) if isinstance(c.get(k), (list, dict)) else c.get(k)
                                for k in ("value", "threshold")},
                             "seed": seed.get("seed"), "seed_registered": seed.get("registered", ""),
                             "seed_amended": seed.get("amended", ""), "check_id": c.get("id"), "check": c.get("name"),
                             "interval_low": low, "interval_high": high, "interval_method": c.get("method") or ""})
        if len(rows) == before:
            rows.append({**base, "reason": _get(r, "reason", "") or ""})
    return rows


def write_downloads(records, folder: Path, profile: str) -> tuple[str, str]:
    """Write ``records-<profile>.json`` (the records as stored) and ``.csv`` (long form) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    json_name, csv_name = f"records-{profile}.json", f"records-{profile}.csv"
    (folder / json_name).write_text(json.dumps([asdict(r) if is_dataclass(r) else dict(r) for r in records], indent=2))
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
    parts = ["python", "-m", "rote", "run", chapter, "--profile", str(params.pop("profile", "quick"))]
    for key, value in params.items():
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        for name, v in value.items() if key == "overrides" and isinstance(value, dict) else [(key, value)]:
            parts += ["-p", name, v if isinstance(v, str) else json.dumps(v)]
    return shlex.join(parts)


def effective_parameters(nb) -> dict[str, str]:
    """Name -> source text of every parameter the notebook ran with (defaults, then papermill's)."""
    out: dict[str, str] = {}
    for tag in BOILERPLATE_TAGS:  # parameters first, then the injected values replace them
        for cell in [c for c in nb.cells if c.cell_type == "code" and tag in tags(c)]:
            try:
                body = ast.parse(cell.source).body
            except SyntaxError:
                continue
            out.update({n.targets[0].id: ast.get_source_segment(cell.source, n.value) for n in body
                        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)})
    return out


def stamp_markdown(meta: dict, parameters: dict[str, str] | None = None) -> str:
    """The note under a chapter's title: when it ran, how long, whether it failed, and how to rerun it."""
    chapter, params = meta.get("chapter", "?"), meta.get("parameters") or {}
    profile = params.get("profile", meta.get("profile", "quick"))
    when, seconds = meta.get("executed", "?"), meta.get("seconds")
    took = f" in {seconds:.0f} s" if isinstance(seconds, (int, float)) else ""
    if meta.get("ok") is False:
        kind, head = "error", (f"This chapter FAILED in the build of {when} (profile `{profile}`): "
                               f"{meta.get('error', '')}. The outputs below stop at the failing cell.")
    else:
        kind, head = "note", f"Executed {when} with profile `{profile}`{took}." + (
            f" Its runs trained in `{meta['precision']}` (evaluation in fp32)." if meta.get("precision") else "")
    shown = ", ".join(f"`{k} = {v}`" for k, v in (parameters or {}).items())
    lines = [f"::::{{{kind}}}", head, "", "Rerun this page with the parameters it ran with:", "",
             "```bash", rerun_command(chapter, params), "```", *(["", f"Parameters: {shown}."] if shown else []),
             "", stamp_dropdown(meta.get("environment")), "::::"]  # what produced the page (run_chapter's record)
    return "\n".join(lines)


def static_page_note(profile: str) -> str:
    """The rebuild note for a page that is text, not an executed chapter."""
    return ("\n\n```{note}\nThis page is text. The site was built with "
            f"`python -m rote book --profile {profile}`, which reruns every chapter.\n```\n")


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
        found = []
    return bool(found) and found[0], bool(found) and all(found)


def hide_boilerplate(nb) -> int:
    """Collapse behind a "show code" toggle (``hide-input``) the parameter cells, import-only cells, the
    setup before the first output (and its cell when it opens with imports), merging consecutive such
    cells without output into one. Returns how many cells were hidden."""
    cells, hidden, seen_output, merging = [], 0, False, False
    for cell in nb.cells:
        visible = cell.cell_type == "code" and any(_visible(o) for o in cell.get("outputs", []))
        opens, only = _imports(cell.source) if cell.cell_type == "code" else (False, False)
        boiler = cell.cell_type == "code" and not any(
            t in tags(cell) for t in (HIDE_TAG, "hide-cell", "remove-input", "remove-cell")) and (
            any(t in tags(cell) for t in BOILERPLATE_TAGS) or only or (not seen_output and (not visible or opens)))
        seen_output = seen_output or visible
        if not boiler:
            cells.append(cell)
            merging = False
            continue
        hidden += 1
        header = next((BOILERPLATE_HEADERS[t] for t in BOILERPLATE_TAGS if t in tags(cell)), None)
        source = f"{header}\n{cell.source}" if header else cell.source
        if merging and not visible:  # a hidden cell without output joins the one before
            cells[-1].source += "\n\n" + source
            cells[-1].outputs += cell.get("outputs", [])  # stderr only: dropped on the page
            cells[-1].execution_count = cell.get("execution_count")
            continue
        cell.source = source
        cell.setdefault("metadata", {}).setdefault("tags", []).append(HIDE_TAG)
        cells.append(cell)
        merging = not visible
    nb.cells = cells
    return hidden


WIDE_TABLE_COLUMNS = 7


def _table_columns(html: str) -> int:
    """How many columns the first table of an HTML output has (header cells of its first row)."""
    head = re.search(r"<thead.*?</thead>|<tr.*?</tr>", html, flags=re.S | re.I)
    return len(re.findall(r"<t[hd][\s>]", head.group(0), flags=re.I)) if head else 0


def widen_tables(nb, min_columns: int = WIDE_TABLE_COLUMNS) -> int:
    """Tag ``full-width`` (the page's right margin) the cells whose output is a table of ``min_columns``
    or more columns; returns how many."""
    tagged = 0
    for cell in [c for c in nb.cells if c.cell_type == "code"]:
        html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in cell.get("outputs", []))
        if "<table" in html and _table_columns(html) >= min_columns and "full-width" not in tags(cell):
            cell.setdefault("metadata", {}).setdefault("tags", []).append("full-width")
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
    if nb.cells and nb.cells[at].cell_type == "markdown":
        lines = nb.cells[at].source.splitlines()
        head = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
        rest = "\n".join(lines[head + 1:]).strip("\n") if head is not None else ""
        if rest:
            nb.cells[at].source = "\n".join(lines[:head + 1])
            nb.cells.insert(at + 1, nbformat.v4.new_markdown_cell(rest))
    nb.cells[at + 1:at + 1] = list(cells)


# -- source files named on a page, linked to the repository (rote.build.publish: the one setting) ---------------
CODE_SPAN = re.compile(r"(?<![}\[`])`([A-Za-z0-9_][A-Za-z0-9_./-]*)`(?![`\]])")  # `rote/x.py`, `rote.verdicts`
README_WORD = re.compile(r"(?<![\w`/\[.])README(?:\.md)?(?![\w`\]])")
FENCE = re.compile(r"^\s*(```|~~~)")


def source_path(name: str, root: Path = PROJECT_ROOT) -> str | None:
    """The repository path a code span names: a file or folder (``rote/specs/``, ``CITATION.cff``) or a
    module of rote (``rote.analysis.curves.crossing`` -> ``rote/analysis/curves.py``); None for anything else."""
    if "/" in name or "." in name.strip(".") and not name.startswith("rote."):
        return name if (root / name).exists() and (root / name).resolve().is_relative_to(root.resolve()) else None
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        path = "/".join(parts[:end])
        for found in (f"{path}.py", f"{path}/"):
            if parts[0] == "rote" and (root / found).exists():
                return found
    return None


def source_url(url: str, path: str, branch: str = "main") -> str:
    """The repository page of ``path``: a folder's tree, a file's blob."""
    return f"{url}/{'tree' if path.endswith('/') else 'blob'}/{branch}/{path.rstrip('/')}"


def link_sources(text: str, url: str, branch: str = "main", root: Path = PROJECT_ROOT) -> str:
    """Markdown ``text`` with each source file, folder or rote module it names in code (``rote/config.py``)
    and the word README made links to the repository at ``url``; unchanged where ``url`` is empty (the
    names stay code) and inside code blocks and links."""
    if not url:
        return text
    lines, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            line = CODE_SPAN.sub(lambda m: (f"[`{m.group(1)}`]({source_url(url, path, branch)})"
                                            if (path := source_path(m.group(1), root)) else m.group(0)), line)
            line = README_WORD.sub(lambda m: f"[{m.group(0)}]({source_url(url, 'README.md', branch)})", line)
        lines.append(line)
    return "\n".join(lines)


def link_notebook_sources(nb, url: str, branch: str = "main") -> None:
    """:func:`link_sources` on a notebook's markdown cells and Markdown outputs."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = link_sources(cell.source, url, branch)
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/markdown" in data:
                data["text/markdown"] = link_sources("".join(data["text/markdown"]), url, branch)


# -- Sphinx extension (listed in _config.yml) ----------------------------------------------------
def _unique_scripts(app, pagename, templatename, context, doctree):
    """Drop repeated script tags (sphinx-thebe adds its config twice; the second one throws)."""
    unique = {}
    for js in context.get("script_files") or []:
        filename = getattr(js, "filename", js) or ""  # one copy names no file with None, the other with ""
        attributes = json.dumps(getattr(js, "attributes", {}), sort_keys=True, default=str)
        unique.setdefault((str(filename), attributes), js)
    if unique:
        context["script_files"] = list(unique.values())


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


def _reference_style():
    """A sphinxcontrib-bibtex referencing style ``rote``: author-year in round brackets, ``(Du et al.,
    2025a)`` and ``Du et al. (2025b)``, whose year is the references page's label's (:func:`_author_year_style`:
    a/b where one author list has two works in a year; the package's own author-year style says "2025" twice,
    in square brackets)."""
    from dataclasses import dataclass, field, fields

    from pybtex.richtext import Text
    from sphinxcontrib.bibtex.style.referencing import BracketStyle, basic_author_year as basic
    from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
    from sphinxcontrib.bibtex.style.template import join, join2, node, post_text, pre_text, reference

    @node
    def labelled_year(children, data):
        return Text(data["formatted_entry"].label.rpartition(", ")[2])

    def cited(style, who):  # pre-text, the reference (``who`` and its labelled year), post-text
        return join2(sep1=style.pre_text_sep, sep2=style.post_text_sep)[pre_text, reference[who], post_text]

    class Parenthetical(basic.BasicAuthorYearParentheticalReferenceStyle):
        def inner(self, role_name):
            author = self.person.author_or_editor_or_title(full="s" in role_name)
            return cited(self, join(sep=self.author_year_sep)[author, labelled_year])

    class Textual(basic.BasicAuthorYearTextualReferenceStyle):
        def inner(self, role_name):
            author = self.person.author_or_editor_or_title(full="s" in role_name)
            year = join[self.bracket.left, cited(self, labelled_year), self.bracket.right]
            return join(sep=self.text_reference_sep)[author, year]

    def round_brackets():
        return BracketStyle(left="(", right=")")

    @dataclass
    class AuthorYear(AuthorYearReferenceStyle):
        bracket_textual: BracketStyle = field(default_factory=round_brackets)
        bracket_parenthetical: BracketStyle = field(default_factory=round_brackets)

        def __post_init__(self):
            ours = {basic.BasicAuthorYearParentheticalReferenceStyle: Parenthetical,
                    basic.BasicAuthorYearTextualReferenceStyle: Textual}
            super().__post_init__()
            self.styles = [ours[type(s)](**{f.name: getattr(s, f.name) for f in fields(s)}) if type(s) in ours else s
                           for s in self.styles]
            self.role_style.update((role, style) for style in self.styles for role in style.role_names())

    return AuthorYear


def setup(app):
    from pybtex.plugin import register_plugin
    from sphinxcontrib.bibtex.plugin import register_plugin as register_referencing

    register_plugin("pybtex.style.formatting", "rote", _author_year_style(), force=True)
    register_referencing("sphinxcontrib.bibtex.style.referencing", "rote", _reference_style(), force=True)
    app.connect("html-page-context", _unique_scripts, priority=900)  # after every other extension
    return {"parallel_read_safe": True, "parallel_write_safe": True}


OUTSIDE_FOLDER = "(a folder outside the project)"


def readable_settings(nb, root: Path = PROJECT_ROOT) -> int:
    """Rewrite the ``settings`` papermill injected (the book's seeds and folders) for readers: a folder inside the
    project as its path from the project's root, one outside it as :data:`OUTSIDE_FOLDER`, so that a page never
    shows the build machine's paths. Returns how many folders were rewritten."""
    from ..settings import FOLDERS

    rewritten = 0
    for cell in [c for c in nb.cells if c.cell_type == "code" and "injected-parameters" in tags(c)]:
        lines = cell.source.splitlines()
        for i, line in enumerate(lines):
            name, _, value = line.partition(" = ")
            settings = _literal(value) if name.strip() == "settings" else None
            if not isinstance(settings, dict):
                continue
            for key in [k for k in FOLDERS if isinstance(settings.get(k), str) and Path(settings[k]).is_absolute()]:
                path = Path(settings[key])
                settings[key] = path.relative_to(root).as_posix() if path.is_relative_to(root) else OUTSIDE_FOLDER
                rewritten += 1
            lines[i] = f"{name} = {{{', '.join(f'{json.dumps(k)}: {_python(v)}' for k, v in settings.items())}}}"
        cell.source = "\n".join(lines)
    return rewritten


def _literal(text: str):
    """A Python (or JSON) literal's value; None where ``text`` is neither."""
    for parse in (ast.literal_eval, json.loads):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            continue
    return None


def _python(value) -> str:
    """A value as Python source: strings quoted as papermill quotes them, the rest as Python writes them."""
    return json.dumps(value) if isinstance(value, str) else repr(value)

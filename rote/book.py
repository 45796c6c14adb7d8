"""The book: chapter discovery, the papermill build driver, and helpers that chapters call.

Chapters are the numbered notebooks ``book/NN_name.ipynb`` (reading order) and ``book/scorecard.ipynb``
(last). ``build_book`` executes each with papermill into ``_build/executed/<profile>/<name>/``
(notebook plus figures), stamps every executed page with its profile, parameters and runtime,
stages the executed copies with ``_config.yml``/``_toc.yml`` into ``_build/site_src`` and renders
the site into ``_build/html`` with Jupyter Book. A failing chapter is reported with its cell, its
page says it failed (never a stale page that looks current), the other chapters still build, and
the command exits non-zero.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import dataclasses
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

import pandas as pd

from . import claims, fmt, frontpage, plan, provenance
from .claims import ClaimRecord
from .config import PROJECT_ROOT, TASKS, ConfigError, make_config, param_names

BOOK_DIR = PROJECT_ROOT / "book"
BUILD_DIR = PROJECT_ROOT / "_build"
KERNEL = "python3"
STAMP_TAG = "rote-build-stamp"


# -- helpers for chapters ---------------------------------------------------------------------
SEED_MARKS = {"pass": "✓", "fail": "✗", "unresolved": "?"}


def claims_table(records: list[ClaimRecord]) -> pd.DataFrame:
    """One row per (claim, task, condition, profile): the registered and the amended verdict side by
    side, a mark per seed (amended reading: ✓ pass, ✗ fail, ? unresolved), the training precision of
    its runs, the checks that decide
    the amended verdict with their numbers, whether the record comes from the profile's own runs
    ("other runs": overrides, or left from an older profile or code), the section that computed it, and
    its scorecard group (the paper's claims, or beyond the paper: :func:`rote.claims.group`)."""
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
    """Section 11 beside protocol 10: whether "a seed has a near deciding check" predicted the row's
    stability, for a row whose stability was computed (else empty): "yes" where near and fragile agree
    (near and fragile, or nothing near and stable), "no: ..." where they disagree."""
    from .stability import FRAGILE, STABLE
    from .verdicts import near_seeds

    if not entry or entry.get("status") not in (FRAGILE, STABLE):
        return ""
    near, fragile = near_seeds(rec) > 0, entry["status"] == FRAGILE
    if near == fragile:
        return "yes (near, fragile)" if near else "yes (none near, stable)"
    return "no: near but stable" if near else "no: fragile, none near"


def fragile_rows(records: list[ClaimRecord]) -> pd.DataFrame:
    """The rows a stability build found fragile (protocol 10), one line per change that moved the
    verdict word: the default verdict, the verdict under the change, and the seeds and checks that
    moved with their values before and after."""
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
    """The records of other seeds than the book's (:func:`rote.claims.other_records`), one row each:
    claim, task, condition, seeds and the amended verdict."""
    return pd.DataFrame([{"claim": r.claim, "task": r.task, "condition": r.condition,
                          "seeds": ", ".join(str(s) for s in r.seeds) or "-", "amended": r.verdict_amended}
                         for r in records], columns=["claim", "task", "condition", "seeds", "amended"])


def record_table(rec: ClaimRecord) -> pd.DataFrame:
    """A record's checks, one row per check id, one column per seed ("value [95% interval] vs threshold,
    margin: result", section 11; "near" where the interval holds the threshold), the smallest and largest
    value across seeds, the check's kind (its role, amendment 2) and why it is superseded or unresolved."""
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
    unamended = rec.claim in claims.UNAMENDED  # one reading: the registered one
    display(Markdown(f"**{rec.claim} / {rec.task.upper()}{condition} / {rec.profile}**: registered "
                     f"**{rec.verdict_registered}**" + (f" (seeds {rec.seeds}; {rec.claim} has no amendment)" if unamended
                                                       else f", amended **{rec.verdict_amended}** (seeds {rec.seeds})")
                     + (f": {rec.reason}" if rec.reason else "")))
    if rec.per_seed:
        display(record_table(rec))


# -- chapters ---------------------------------------------------------------------------------
def chapters() -> dict[str, Path]:
    """Chapter name -> source notebook, in reading order (numbered chapters, then the scorecard)."""
    found = {p.stem.split("_", 1)[1]: p for p in sorted(BOOK_DIR.glob("[0-9][0-9]_*.ipynb"))}
    if (BOOK_DIR / "scorecard.ipynb").exists():
        found["scorecard"] = BOOK_DIR / "scorecard.ipynb"
    return found


def chapter_path(name: str) -> Path:
    known = chapters()
    if name not in known:
        raise ConfigError(f"unknown chapter {name!r}; choose one of {', '.join(known)}")
    return known[name]


def notebook_parameters(path: Path) -> dict[str, object]:
    """The names and default values (as source text) of the notebook's ``parameters`` cell."""
    import papermill

    return {name: spec["default"] for name, spec in papermill.inspect_notebook(str(path)).items()}


def _parse_value(text):
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def resolve_parameters(name: str, profile: str, params: dict[str, object]) -> dict[str, object]:
    """Papermill parameters for a chapter, validated before anything runs.

    A name the chapter's ``parameters`` cell defines is passed as is (JSON-decoded where possible;
    a comma list for a list parameter). A run parameter (``noise_ratio``, ``model_seed``, ...) goes
    into the chapter's ``overrides`` dict and is checked against every task the chapter runs.
    Anything else is an error that names the chapter's parameters.

    The chapter's parameter dataclass (:func:`rote.chapters.params.chapter_params`, whose fields are the
    cell's names and defaults) is then built from the defaults and the given values: a bad value (a
    count of 0, a share out of range, an unknown task, ...) raises a ConfigError that names it, before
    anything trains or executes. The values returned are the ones given, as parsed here.
    """
    declared, defaults = _declared_parameters(name)
    out: dict[str, object] = {"profile": profile}
    run_params: dict[str, object] = {}
    known_run = set(param_names("fda")) | set(param_names("thr"))
    for key, raw in params.items():
        value = _parse_value(raw)
        if key == "profile":
            raise ConfigError("give the profile with --profile, not -p profile")
        if key == "seeds" and key in defaults:  # "1" -> [1], "0,1,2" -> [0, 1, 2], "[0, 2]" as is
            value = [value] if isinstance(value, int) else value
            if isinstance(value, str):
                try:
                    value = [int(v) for v in value.split(",") if v.strip()]
                except ValueError:
                    raise ConfigError(f"seeds must be whole numbers, e.g. -p seeds 0,1,2; got {raw!r}") from None
            out[key] = value
        elif key in defaults:
            if isinstance(defaults[key], list) and isinstance(value, str):  # "fda,thr", "2,4" -> [2, 4]
                value = [_parse_value(v) for v in value.split(",") if v]
            if isinstance(defaults[key], bool):  # a yes/no parameter (train_grid)
                value = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(
                    str(value).strip().lower(), value)
                if not isinstance(value, bool):
                    raise ConfigError(f"{key} must be true or false, got {raw!r}")
            out[key] = value
        elif key in known_run and "overrides" in defaults:
            run_params[key] = value
        else:
            raise ConfigError(f"unknown parameter {key!r} for chapter {name!r}; chapter parameters: "
                              f"{', '.join(defaults)}; run parameters go into overrides")
    if "overrides" in out and not isinstance(out["overrides"], dict):
        raise ConfigError("overrides must be a JSON object, e.g. '{\"noise_ratio\": 0.2}'")
    if run_params:
        out["overrides"] = {**out.get("overrides", {}), **run_params}
    chosen = declared(**out) if declared else None  # every parameter checked, before anything trains or executes
    tasks = getattr(chosen, "tasks", None) or out.get("tasks") or defaults.get("tasks") or list(TASKS)
    for key in run_params:  # a run parameter that applies to none of the chapter's tasks would be ignored
        if not any(key in param_names(t) for t in tasks):
            raise ConfigError(f"parameter {key!r} applies to none of the chapter's tasks ({', '.join(tasks)})")
    if "seeds" in defaults:  # validate every run the chapter will ask for, as the chapter will build it
        plan.units(profile, tasks, out.get("seeds"), out.get("overrides"))
    elif "overrides" in out:
        for task in tasks:
            make_config(task, profile, **out["overrides"])
    return out  # X1's grid was checked with its dataclass (rote.chapters.x1.Params)


def _declared_parameters(name: str):
    """The chapter's parameter dataclass and its defaults (name -> value, in the cell's order). A
    notebook the book does not declare (a test's planted chapter) has no dataclass: its cell's names
    and literal defaults, unchecked (tests/test_chapter_params.py: every chapter of book/ is declared)."""
    from .chapters.params import CHAPTER_PARAMS, chapter_params

    path = chapter_path(name)  # an unknown chapter: the error names the chapters
    if name not in CHAPTER_PARAMS:
        return None, {key: _literal(source) for key, source in notebook_parameters(path).items()}
    declared = chapter_params(name)
    return declared, declared.defaults()


def _literal(source):
    import ast

    try:
        return ast.literal_eval(source) if source else None
    except (ValueError, SyntaxError):
        return None


# Parameters that say how a page is built, not what it computes: the book's own page either way.
BUILD_PARAMETERS = ("profile", "train_grid")


def output_dir(name: str, profile: str, params: dict[str, object]) -> Path:
    """Where a chapter's executed notebook and figures go: one folder per (chapter, profile, parameters),
    the build parameters (:data:`BUILD_PARAMETERS`) aside."""
    extra = {k: v for k, v in params.items() if k not in BUILD_PARAMETERS}
    suffix = "-" + hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8] if extra else ""
    return BUILD_DIR / "executed" / profile / f"{name}{suffix}"


@dataclass
class ChapterResult:
    name: str
    ok: bool
    seconds: float
    notebook: Path
    figures: Path
    error: str = ""


def _source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _stamp(nb_path: Path, text: str, meta: dict) -> None:
    """Insert (or replace) the build stamp after the notebook's title cell (as cell 1: above the title
    when papermill put its error banner first; the site moves it under the title, ``stage_site``)."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    nb.cells = [c for c in nb.cells if STAMP_TAG not in c.get("metadata", {}).get("tags", [])]
    cell = nbformat.v4.new_markdown_cell(text, metadata={"tags": [STAMP_TAG]})
    nb.cells.insert(1, cell)
    nb.metadata["rote"] = meta
    tmp = nb_path.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, nb_path)


def chapter_precision(params: dict[str, object]) -> str:
    """The training precision of the runs a chapter loads, per task of its ``tasks`` parameter (all
    tasks without one; "fda fp32, thr bf16"): its ``precision`` override, else what ``auto`` resolves
    to for each task on this machine
    (:func:`rote.config.precision_for`)."""
    from .config import AUTO_PRECISION, PRECISIONS, precision_for

    overrides = params.get("overrides") if isinstance(params.get("overrides"), dict) else {}
    asked = str(overrides.get("precision", AUTO_PRECISION))
    if asked in PRECISIONS:
        return asked
    tasks = params.get("tasks")
    tasks = [t for t in TASKS if t in tasks] if isinstance(tasks, (list, tuple)) else TASKS  # the chapter's own
    return ", ".join(f"{task} {precision_for(task)}" for task in tasks)


def chapter_precisions(params: dict[str, object]) -> dict[str, str]:
    """Task -> the training precision of the runs a chapter loads, for each task of its ``tasks``
    parameter (all tasks without one): :func:`chapter_precision`'s answer, one entry per task."""
    from .config import AUTO_PRECISION, PRECISIONS, precision_for

    overrides = params.get("overrides") if isinstance(params.get("overrides"), dict) else {}
    asked = str(overrides.get("precision", AUTO_PRECISION))
    tasks = params.get("tasks")
    tasks = [t for t in TASKS if t in tasks] if isinstance(tasks, (list, tuple)) else TASKS
    return {task: asked if asked in PRECISIONS else precision_for(task) for task in tasks}


def run_chapter(name: str, profile: str, params: dict[str, object] | None = None, *,
                progress: bool = False) -> ChapterResult:
    """Execute one chapter with papermill (parameters already resolved) and stamp its page."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source = chapter_path(name)
    params = dict(params or {"profile": profile})
    out_dir = output_dir(name, profile, params)
    figures = out_dir / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    notebook = out_dir / f"{name}.ipynb"
    partial = out_dir / f"{name}.partial.ipynb"
    for key in ("ROTE_RUNS", "ROTE_RESULTS"):  # the kernel runs in book/: a relative cache would land there
        if os.environ.get(key):
            os.environ[key] = str(Path(os.environ[key]).expanduser().resolve())
    env_before = {k: os.environ.get(k) for k in ("ROTE_PROFILE", "ROTE_FIGURES", "ROTE_PLAIN_PROGRESS")}
    os.environ.update(ROTE_PROFILE=profile, ROTE_FIGURES=str(figures), ROTE_PLAIN_PROGRESS="1")
    error = ""
    start = time.perf_counter()
    try:
        papermill.execute_notebook(str(source), str(partial), parameters=params, kernel_name=KERNEL,
                                   cwd=str(BOOK_DIR), progress_bar=progress)
    except PapermillExecutionError as err:
        error = f"cell {err.exec_count} raised {err.ename}: {err.evalue}"
    except Exception as err:  # kernel died, notebook unreadable, ...
        error = f"{type(err).__name__}: {err}"
    finally:
        for k, v in env_before.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    seconds = time.perf_counter() - start
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    meta = {"chapter": name, "profile": profile, "parameters": params, "seconds": round(seconds, 1),
            "executed": when, "ok": not error, "error": error, "source_sha": _source_hash(source),
            "precision": chapter_precision(params)}
    meta["environment"] = provenance.collect(chapter_precisions(params))  # the page's "Build environment"
    if partial.exists():
        if error:
            text = (f"```{{error}}\nThis chapter FAILED in the build of {when} (profile `{profile}`): {error}. "
                    f"The outputs below stop at the failing cell.\n```")
        else:
            text = (f"```{{note}}\nExecuted {when} with profile `{profile}` and parameters "
                    f"`{json.dumps(params)}` in {seconds:.0f} s; training precision `{meta['precision']}`.\n```")
        _stamp(partial, text, meta)
        os.replace(partial, notebook)
    elif notebook.exists():  # nothing new was written: never leave the old page looking current
        notebook.unlink()
    if out_dir == output_dir(name, profile, {"profile": profile}):  # a book build, not a rerun with new parameters
        _record_build(profile, name, meta)
    return ChapterResult(name, not error, seconds, notebook, figures, error)


def _record_build(profile: str, name: str, meta: dict) -> None:
    """Add a chapter's entry to the build's ``build.json``, under a lock: chapters executing at once
    (:func:`execute_jobs`) each add theirs."""
    import fcntl

    path = BUILD_DIR / "executed" / profile / "build.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        data[name] = meta
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, path)


def build_times(profile: str) -> pd.DataFrame:
    """Runtime and status of each chapter in the latest book build of ``profile``."""
    path = BUILD_DIR / "executed" / profile / "build.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    return pd.DataFrame([{"chapter": k, "seconds": v["seconds"], "status": "ok" if v["ok"] else "FAILED",
                          "executed": v["executed"]} for k, v in data.items()],
                        columns=["chapter", "seconds", "status", "executed"])  # the columns also before any build


# -- rendering --------------------------------------------------------------------------------
def site_root() -> Path:
    """The folder whose ``_build/`` receives the staged sources (``site_src``) and the site (``html``):
    ``$ROTE_SITE``, or the project (``_build/html``). ``make test`` renders the smoke site elsewhere so
    that it never replaces the book a ``make book`` built."""
    return Path(os.environ["ROTE_SITE"]).expanduser().resolve() if os.environ.get("ROTE_SITE") else PROJECT_ROOT


def stage_site(profile: str) -> Path:
    """Copy the book's text and the executed chapters into ``<site root>/_build/site_src`` for Jupyter Book.

    The staged chapters are made for readers (:mod:`rote.site`): each stamp gets the command that
    reruns the page, each claim chapter a verdict box from its records, boilerplate cells collapse
    behind a toggle, and the scorecard links the records as JSON and CSV. The sources are not touched."""
    import nbformat

    from . import publish
    from . import site as web

    site = site_root() / "_build" / "site_src"
    if site.exists():
        shutil.rmtree(site)
    (site / "book").mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(PROJECT_ROOT / name, site / name)
    publish.stage_config(site / "_config.yml")  # the repository URL: its buttons where set, none where not
    if (BOOK_DIR / "_static").is_dir():  # Jupyter Book takes CSS from the book root's _static
        shutil.copytree(BOOK_DIR / "_static", site / "_static")
    records = claims.load_all(profile)
    _stage_text_pages(site / "book", profile, records)
    for name, source in chapters().items():
        executed = output_dir(name, profile, {"profile": profile}) / f"{name}.ipynb"
        target = site / "book" / source.name
        notes = []  # cells for under the page's title: the build stamp and warnings
        if executed.exists():
            nb = nbformat.read(executed, as_version=4)
            meta = nb.metadata.get("rote", {})
            if nb.cells and "papermill-error-cell-tag" in nb.cells[0].get("metadata", {}).get("tags", []):
                del nb.cells[0]  # papermill's banner above the title: the stamp says the same, under it
            for cell in [c for c in nb.cells if STAMP_TAG in c.get("metadata", {}).get("tags", [])]:
                nb.cells.remove(cell)
                if meta:
                    cell.source = web.stamp_markdown(meta, web.effective_parameters(nb))
                notes.append(cell)
            if meta.get("source_sha") != _source_hash(source):
                notes.append(nbformat.v4.new_markdown_cell(
                    "```{warning}\nThe chapter's source changed after this page was executed; rebuild it.\n```"))
        else:
            nb = nbformat.read(source, as_version=4)
            notes.append(nbformat.v4.new_markdown_cell(
                f"```{{warning}}\nThis chapter has not been executed for profile `{profile}` yet.\n```"))
        box = web.verdict_box(web.records_for_page(records, source.stem), claims.CLAIMS)
        if box:  # the chapter opens with its verdict, then how it was built
            notes.insert(0, nbformat.v4.new_markdown_cell(box, metadata={"tags": [web.SITE_NOTE_TAG]}))
        if name == "scorecard":
            files = web.write_downloads(records, site / "book", profile)
            notes.insert(0, nbformat.v4.new_markdown_cell(web.downloads_markdown(*files, len(records)),
                                                          metadata={"tags": [web.SITE_NOTE_TAG]}))
        web.hide_boilerplate(nb)
        web.widen_tables(nb)
        web.insert_after_title(nb, notes)
        nbformat.write(nb, target)
    return site


def front_page(text: str, profile: str, records: list[ClaimRecord]) -> str:
    """The staged front page: ``book/intro.md``'s marked places filled from this build's records and
    timings (:func:`rote.frontpage.stage_intro`)."""
    times = build_times(profile)
    return frontpage.stage_intro(text, frontpage.Build(
        profile, tuple(plan.seed_list(profile)), tuple(plan.protocol_seeds(profile)), tuple(records),
        float(times.seconds.sum()) if len(times) else None))


def _stage_text_pages(folder: Path, profile: str, records: list[ClaimRecord]) -> None:
    """The book's text pages into the staged ``folder``: figures and the bibliography as they are, each
    ``.md`` page with its rebuild note (the intro with the build's results), the protocol page, and the
    generated Build environment and parameter reference pages."""
    from . import site as web

    for path in BOOK_DIR.iterdir():
        if path.suffix in (".png", ".bib"):
            shutil.copy(path, folder / path.name)
        elif path.suffix == ".md":
            text = front_page(path.read_text(), profile, records) if path.stem == "intro" else path.read_text()
            (folder / path.name).write_text(text + web.static_page_note(profile))
    frontpage.write_protocol(folder)  # the protocol, beside the code, as a page the front page links
    web.fill_generated_pages(folder)  # the Build environment and parameter reference pages


def render_site(profile: str) -> int:
    """Stage the site and render it with Jupyter Book into ``<site root>/_build/html`` (warnings are errors)."""
    site = stage_site(profile)
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(site), "--path-output", str(site_root()),
           "--all", "-W", "--keep-going"]
    result = subprocess.run(cmd, cwd=PROJECT_ROOT)
    return result.returncode


# What each chapter trains: the parts of the plan (:data:`rote.plan.PARTS`) its notebook loads, for the
# tasks of its ``tasks`` parameter. `rote book --chapter NAME` trains the union over the named chapters.
CHAPTER_RUNS = claims.CHAPTER_RUNS  # derived from the claims' specs (rote/specs/<claim>.py)
X1_CHAPTER = "benign_memorization"


def _needs_runs(name: str) -> bool:
    """Whether a chapter loads trained runs: it has a ``seeds`` parameter (the seed triples of its
    runs). Declared, not guessed from the source: a chapter that loads its runs through a library
    call names no run function."""
    return "seeds" in notebook_parameters(chapter_path(name))


def chapter_runs(name: str, x1: bool = False) -> tuple[str, ...]:
    """The parts of the plan a chapter needs (:data:`CHAPTER_RUNS`); X1's chapter needs its grid only
    when X1 is asked for (``x1``), else the runs it shares with C1. A chapter not declared there that
    loads runs gets the plan's C1-C5 parts."""
    if name not in CHAPTER_RUNS:
        return ("noisy", "twin", "sweep") if _needs_runs(name) else ()
    parts = CHAPTER_RUNS[name]
    return tuple("x1-shared" if p == "x1" and not x1 else p for p in parts)


def x1_asked(names: list[str] | None, x1: bool = False) -> bool:
    """Whether a book build trains X1's grid: asked for (``--x1``, ``make book X1=1``) or X1's chapter named."""
    return bool(x1 or (names and X1_CHAPTER in names))


def book_plan(profile: str, names: list[str], params: dict[str, object], seeds: list[int],
              x1: bool = False) -> list:
    """The runs that the selected chapters need (the union of :func:`chapter_runs`, each for the
    chapter's own tasks), with the run parameters of ``params``, in the plan's order; X1's grid only
    with ``x1``."""
    from .plan import PlanGrid, runs

    known_run = set(param_names("fda")) | set(param_names("thr"))
    given = _parse_value(params.get("overrides")) if "overrides" in params else None
    overrides = {**(given if isinstance(given, dict) else {}),
                 **{k: _parse_value(v) for k, v in params.items() if k in known_run}}

    def listed(name):
        value = _parse_value(params[name]) if name in params else None
        if isinstance(value, str):
            return [v for v in value.split(",") if v]
        return [value] if isinstance(value, (int, float)) else value

    sweep = listed("sweep_ratios")
    out: dict[str, object] = {}
    for name in names:
        parts = chapter_runs(name, x1)
        if not parts:
            continue
        defaults = notebook_parameters(chapter_path(name))
        tasks = listed("tasks") if "tasks" in params else _literal(defaults.get("tasks"))
        chapter_seeds = [int(s) for s in listed("seeds")] if "seeds" in params and "seeds" in defaults else seeds
        grid = PlanGrid(sweep=sweep, widths=listed("widths"), noise_ratios=listed("noise_ratios"))
        for config in runs(profile, parts, chapter_seeds, overrides, tasks=tasks, grid=grid):
            out.setdefault(config.key, config)
    return list(out.values())


@dataclass(frozen=True)
class ChapterJob:
    """One chapter execution of a build: the chapter, its resolved parameters, where its records go
    (``results``: a ``$ROTE_RESULTS`` of its own, e.g. a stability change's; None: the book's), a label
    for the log, whether it waits for every other job (the scorecard), and what runs first in this
    process (``before``: e.g. the stability entries the scorecard shows). ``waits``: it starts once every
    earlier job has ended, like ``last``, and later jobs follow it (a stability change's chapters, after
    the default records they are compared with); ``after``: what runs in this process with its result
    (e.g. noting a failed stability chapter)."""

    name: str
    params: dict
    results: Path | None = None
    label: str = ""
    last: bool = False
    before: Callable[[], None] | None = None
    waits: bool = False
    after: Callable[[ChapterResult], None] | None = None


def execute_job(job: ChapterJob, profile: str) -> ChapterResult:
    """Run one job's chapter in a process of its own (``python -m rote.book``), so that chapters can
    execute at once, each with its own environment (figures folder, results root); the process uses
    this module's book and build folders."""
    env = dict(os.environ, ROTE_BOOK_DIR=str(BOOK_DIR), ROTE_BUILD_DIR=str(BUILD_DIR))
    if job.results is not None:
        env["ROTE_RESULTS"] = str(Path(job.results).resolve())
    cmd = [sys.executable, "-m", "rote.book", "execute", job.name, profile, json.dumps(job.params)]
    proc = subprocess.run(cmd, env=env, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=None, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return ChapterResult(job.name, False, 0.0, Path(), Path(), f"the chapter process exited {proc.returncode}")
    out = json.loads(lines[-1])
    return ChapterResult(job.name, out["ok"], out["seconds"], Path(out["notebook"]), Path(out["figures"]), out["error"])


def execute_jobs(jobs: list[ChapterJob], profile: str, slots: Callable[[], int], stop: threading.Event,
                 capacity: int) -> list[ChapterResult]:
    """Execute the jobs in order, at most ``slots()`` at once (the cores that training leaves free; it
    grows as the plan's runs finish), ``capacity`` at the most; a ``last`` job starts once every
    earlier job has ended. Each chapter runs in its own process, on the thread count it would have
    alone (the records are those of executing one after another: chapters only load runs and
    each writes its own records). Returns the results in the jobs' order."""
    cond = threading.Condition()
    state = {"next": 0, "running": 0}
    results: dict[int, ChapterResult] = {}

    def worker() -> None:
        while True:
            with cond:
                while True:
                    if stop.is_set() or state["next"] >= len(jobs):
                        return
                    job = jobs[state["next"]]
                    waiting_on_others = (job.last or job.waits) and state["running"] > 0
                    if not waiting_on_others and state["running"] < min(capacity, slots()):
                        index = state["next"]
                        state["next"] += 1
                        state["running"] += 1
                        break
                    cond.wait(1.0)
            try:
                if job.before is not None:
                    job.before()
                what = f"{job.name}{f' ({job.label})' if job.label else ''}"
                print(f"[rote] executing {what} ({profile}) ...", file=sys.stderr, flush=True)
                result = execute_job(job, profile)
                status = "ok" if result.ok else f"FAILED: {result.error}"
                print(f"[rote] {what}: {status} in {result.seconds:.1f} s -> {result.notebook}", file=sys.stderr,
                      flush=True)
            except Exception as err:  # a job that cannot start is a failed chapter, never a silent one
                result = ChapterResult(job.name, False, 0.0, Path(), Path(), f"{type(err).__name__}: {err}")
            if job.after is not None:
                job.after(result)
            with cond:
                results[index] = result
                state["running"] -= 1
                cond.notify_all()

    threads = [threading.Thread(target=worker, name=f"rote-chapters-{i}", daemon=True) for i in range(max(1, capacity))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[i] for i in sorted(results)]


@dataclass(frozen=True)
class BookOptions:
    """The choices of a book build (:func:`build_book`; ``rote book``'s options): ``render`` the site,
    ``seeds`` (N: seeds 0 .. N-1; None: ``$ROTE_SEEDS``, else 3), ``engine``, how the missing runs train
    (:class:`rote.engine.EngineSettings`: workers, executor, Slurm options; None: the defaults), ``x1``
    (also X1's grid) and ``stability`` (also the stability build of protocol 10)."""

    render: bool = True
    seeds: int | None = None
    engine: object = None  # rote.engine.EngineSettings (not imported here: the engine loads torch)
    x1: bool = False
    stability: bool = False

    def __post_init__(self):
        if self.seeds is not None and (isinstance(self.seeds, bool) or not isinstance(self.seeds, int)
                                       or self.seeds < 1):
            raise ConfigError(f"the number of seeds must be >= 1, got {self.seeds!r}")


def build_book(profile: str, names: list[str] | None, params: dict[str, object],
               options: BookOptions | None = None) -> int:
    """Train the missing runs the chapters need (as ``options.engine`` says; :func:`book_plan`), execute
    the chapters (all, or ``names``), which then only load runs, and render the site. Returns a process
    exit code. ``options``: the build's choices (:class:`BookOptions`; None: the defaults).

    ``seeds`` (N) sets ``$ROTE_SEEDS`` for the chapters and the site, whose ``seeds = None`` parameter
    then means 0 .. N-1 (the value is not passed as a papermill parameter, so the pages stay the book's
    own pages under ``_build/executed/<profile>/<chapter>``); the scorecard shows the records of those
    seeds. X1's grid trains only when asked for (``x1``, or X1's chapter named in ``names``); else its
    chapter runs with ``train_grid = False`` and shows what is missing."""
    from .engine import EngineSettings, report_failures, train_plan
    from .plan import seed_list

    options = options or BookOptions()
    engine = options.engine or EngineSettings()
    selected = names or list(chapters())
    known_run = set(param_names("fda")) | set(param_names("thr"))

    def own(name):  # run parameters reach the chapters that run models; the scorecard only reads records
        takes_runs = "overrides" in notebook_parameters(chapter_path(name))
        return {k: v for k, v in params.items() if takes_runs or k not in known_run}

    resolved = {name: resolve_parameters(name, profile, own(name)) for name in selected}  # errors before work
    with_x1 = x1_asked(names, options.x1)
    if X1_CHAPTER in resolved and not with_x1 and "train_grid" in notebook_parameters(chapter_path(X1_CHAPTER)):
        resolved[X1_CHAPTER]["train_grid"] = False
    seed_values = seed_list(profile, options.seeds)
    configs = book_plan(profile, selected, params, seed_values, x1=with_x1)
    jobs = [ChapterJob(name, resolved[name], last=(name == "scorecard")) for name in selected]
    if options.stability:
        from . import stability as stab

        why_not = stab.precision_not_run()
        if why_not:  # said before anything trains
            print(f"[rote] stability: {why_not}", file=sys.stderr, flush=True)
        failed: dict = {}  # the stability chapters that failed: their change is not run (8.6)
        extra_configs, extra_jobs = stability_jobs(profile, selected, resolved, seed_values, precision=not why_not,
                                                   failed=failed)
        planned = {c.key for c in configs}
        configs += [c for c in extra_configs if c.key not in planned]
        params = resolved.get("scorecard") or resolve_parameters("scorecard", profile, {})
        # the scorecard last, after the entries it shows are written (also when it was not selected)
        jobs = [j for j in jobs if not j.last] + extra_jobs + [ChapterJob(
            "scorecard", params, last=True, before=lambda: write_stability(profile, seed_values, why_not, failed))]
    # The chapters execute in book order, each in a process of its own, as many at once as training
    # leaves cores free (a run a chapter loads that is still training, it waits for under that run's
    # lock), so no core idles; the scorecard last. The records and pages are the same as executing
    # one after another after all training (the chapters only load runs).
    from .engine import default_workers

    capacity = engine.workers or default_workers()
    free_slots = {"n": 0 if configs else capacity}
    stop = threading.Event()
    results: list[ChapterResult] = []

    def run_jobs() -> None:
        results.extend(execute_jobs(jobs, profile, lambda: free_slots["n"], stop, capacity))

    seeds_before = os.environ.get("ROTE_SEEDS")
    os.environ["ROTE_SEEDS"] = str(len(seed_values))
    executor_thread = threading.Thread(target=run_jobs, name="rote-chapters", daemon=True)
    try:
        executor_thread.start()
        if configs:
            print(f"[rote] plan: {len(configs)} runs ({profile}, seeds {seed_values})", file=sys.stderr, flush=True)
            outcomes = train_plan(configs, settings=engine, on_free=lambda n: free_slots.__setitem__("n", n))
            failures = report_failures(outcomes)
            if failures:
                stop.set()
                executor_thread.join()
                print(f"[rote] chapters not executed: some runs of the plan failed "
                      f"({len(results)} executed before the failure)", file=sys.stderr)
                return failures
        free_slots["n"] = capacity
        executor_thread.join()
        code = 0
        if options.render:  # still under the book's $ROTE_SEEDS: the site shows the records of its seeds
            print("[rote] rendering the site with Jupyter Book ...", file=sys.stderr, flush=True)
            if render_site(profile) != 0:
                print("[rote] Jupyter Book failed", file=sys.stderr)
                code = 1
            else:
                print(f"[rote] site: {BUILD_DIR / 'html' / 'index.html'}", file=sys.stderr)
    finally:
        stop.set()
        if seeds_before is None:
            os.environ.pop("ROTE_SEEDS", None)
        else:
            os.environ["ROTE_SEEDS"] = seeds_before
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"[rote] chapter {r.name} FAILED at {r.error}; executed copy: {r.notebook}", file=sys.stderr)
    return 1 if failed else code


# -- stability (protocol 10) --------------------------------------------------------------------------
CLAIM_CHAPTERS = claims.CLAIM_CHAPTERS  # the claims whose spec says protocol 10 reruns them (not X1)


def stability_root(change: str) -> Path:
    """Where a stability change's records go: beside the book's, never over them."""
    return claims.results_root() / "stability" / change


def stability_jobs(profile: str, names: list[str], resolved: dict, seeds: list[int], precision: bool = True,
                   failed: dict | None = None):
    """The runs and chapter executions of the two changes of protocol 10 for the selected claim chapters
    (C1-C5): each task's runs in the other precision (seeds ``seeds``; a chapter executed once per task,
    ``tasks`` that task alone, ``precision`` its other one), unless ``precision`` is False; and seeds 3
    and 4 in the default precision. Their records go to :func:`stability_root`. The first of them starts
    once every earlier job (the default chapters) has ended: a perturbed record counts only when it is
    later than the default one (8.6). Each that fails is noted in ``failed`` (:func:`stability_failure`)."""
    from . import stability as stab

    configs, jobs = [], []
    claim_of = {chapter: claim for claim, chapter in CLAIM_CHAPTERS.items()}
    for name in [n for n in names if n in CLAIM_CHAPTERS.values()]:
        params = resolved[name]
        tasks = params.get("tasks") or _literal(notebook_parameters(chapter_path(name)).get("tasks")) or list(TASKS)
        if precision:
            for task in tasks:
                other = stab.other_precision(task)
                p = {**params, "tasks": [task], "overrides": {**params.get("overrides", {}), "precision": other}}
                if "seeds" not in p:
                    p["seeds"] = list(seeds)
                jobs.append(ChapterJob(name, p, stability_root("precision"), label=f"stability: {task} in {other}",
                                       after=_note_failure(failed, ("precision", claim_of[name], task))))
                configs += book_plan(profile, [name], {"tasks": [task], "precision": other}, seeds)
        p = {**params, "seeds": list(stab.EXTRA_SEEDS)}
        jobs.append(ChapterJob(name, p, stability_root("seeds"), label="stability: seeds 3, 4",
                               after=_note_failure(failed, ("seeds", claim_of[name], None))))
        configs += book_plan(profile, [name], {}, list(stab.EXTRA_SEEDS))
    if jobs:
        jobs[0] = dataclasses.replace(jobs[0], waits=True)
    unique: dict[str, object] = {}
    for c in configs:
        unique.setdefault(c.key, c)
    return list(unique.values()), jobs


def _note_failure(failed: dict | None, key: tuple) -> Callable[[ChapterResult], None] | None:
    """A stability job's ``after``: note a failed chapter's error in ``failed`` under ``key`` (change, claim,
    task; task None for the seeds change, whose chapter runs every task at once)."""
    if failed is None:
        return None
    return lambda result: None if result.ok else failed.setdefault(key, result.error or "it failed")


def stability_failure(failed: dict | None, change: str, claim: str, task: str) -> str:
    """Why ``change`` is not run for a row of ``claim`` on ``task`` whose chapter failed in this build ("" where
    it did not)."""
    error = (failed or {}).get((change, claim, task if change == "precision" else None))
    return f"its chapter failed in this build ({error}), so no {change} record of this build exists" if error else ""


def write_stability(profile: str, seeds: list[int], precision_why_not: str = "", failed: dict | None = None) -> int:
    """Compute each default record's stability entry (:func:`rote.stability.stability`) from the records
    of the two changes and store it beside the record (:func:`rote.claims.save_stability`); the records
    themselves are not touched. X1's stability is ``not run``. A change whose chapter failed in the build
    (``failed``, :func:`stability_jobs`) is ``not run`` on its rows, whatever records its folder holds; a
    record there counts only where it compares like with like (:func:`rote.stability.refusal`, 8.6).
    Returns the number of entries written."""
    from . import stability as stab

    twins = {(r.claim, r.task, r.condition): r for r in claims.load_all(profile, stability_root("precision"), seeds)
             if r.per_seed}
    extra = {(r.claim, r.task, r.condition): r
             for r in claims.load_all(profile, stability_root("seeds"), list(stab.EXTRA_SEEDS)) if r.per_seed}
    written = 0
    for rec in claims.load_all(profile, seeds=seeds):
        if not rec.per_seed:
            continue
        key = (rec.claim, rec.task, rec.condition)
        if rec.claim == "X1":
            entry = stab.Stability(stab.NOT_RUN, "X1's grid is not part of the stability build (protocol 10 "
                                   "recomputes C1-C5's rows)", {})
        else:
            entry = stab.stability(rec, twins.get(key), extra.get(key),
                                   precision_why_not or stability_failure(failed, "precision", rec.claim, rec.task),
                                   stability_failure(failed, "seeds", rec.claim, rec.task))
        claims.save_stability(rec, entry.to_dict())
        written += 1
    print(f"[rote] stability: {written} entries written", file=sys.stderr, flush=True)
    return written


def run_chapter_cli(name: str, profile: str, params: dict[str, object], seeds: int | None = None) -> int:
    """Rerun one chapter (cached runs are reused; missing ones train in the chapter). ``seeds`` (N) is
    passed as the chapter's ``seeds`` parameter (0 .. N-1) where it has one, and as ``$ROTE_SEEDS``."""
    from .plan import seed_list

    resolved = resolve_parameters(name, profile, params)
    if seeds is not None:
        values = seed_list(profile, seeds)
        if "seeds" in notebook_parameters(chapter_path(name)):
            resolved["seeds"] = values
        os.environ["ROTE_SEEDS"] = str(len(values))
    result = run_chapter(name, profile, resolved, progress=True)
    print(json.dumps({"chapter": name, "ok": result.ok, "seconds": round(result.seconds, 1),
                      "notebook": str(result.notebook), "figures": str(result.figures), "error": result.error}))
    return 0 if result.ok else 1


def _main(argv: list[str]) -> int:
    """``python -m rote.book execute NAME PROFILE PARAMS_JSON``: one chapter of a build, executed in
    this process (:func:`execute_jobs`); its result as one JSON line on stdout."""
    if len(argv) != 4 or argv[0] != "execute":
        print("usage: python -m rote.book execute NAME PROFILE PARAMS_JSON", file=sys.stderr)
        return 2
    global BOOK_DIR, BUILD_DIR
    _, name, profile, params = argv
    BOOK_DIR = Path(os.environ.get("ROTE_BOOK_DIR") or BOOK_DIR)
    BUILD_DIR = Path(os.environ.get("ROTE_BUILD_DIR") or BUILD_DIR)
    result = run_chapter(name, profile, json.loads(params))
    print(json.dumps({"chapter": name, "ok": result.ok, "seconds": round(result.seconds, 1),
                      "notebook": str(result.notebook), "figures": str(result.figures), "error": result.error}))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

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
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import claims, plan
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
    from .verdicts import deciding

    origin = {True: "profile default", False: "other runs", None: ""}
    rows = []
    for r in records:
        rows.append({"claim": r.claim, "task": r.task, "condition": r.condition,
                     "registered": r.verdict_registered, "amended": r.verdict_amended,
                     "seeds": " ".join(f"{s['seed']}{SEED_MARKS[s['amended']]}" for s in r.per_seed),
                     "precision": ", ".join(sorted({str(s.get("precision")) for s in r.per_seed if s.get("precision")})),
                     "deciding checks": deciding(r),
                     "runs": origin[claims.runs_are_profile_defaults(r)] if r.per_seed else "",
                     "section": f"{r.page}#{r.anchor}", "profile": r.profile, "group": claims.group(r.claim)})
    return pd.DataFrame(rows)


def _fmt(value) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def record_table(rec: ClaimRecord) -> pd.DataFrame:
    """A record's checks, one row per check id, one column per seed ("value vs threshold: result"),
    with the check's kind (its role, amendment 2) and why it is superseded or unresolved."""
    result = {True: "pass", False: "FAIL", None: "unresolved"}
    rows: dict[str, dict] = {}
    for s in rec.per_seed:
        for c in s["checks"]:
            key = c.get("id") or c["name"]
            row = rows.setdefault(key, {"id": key, "check": c["name"], "kind": c["kind"], "reason": ""})
            numbers = f"{_fmt(c['value'])} vs {_fmt(c['threshold'])}: " if c["value"] is not None else ""
            row[f"seed {s['seed']}"] = numbers + result[c["passed"]]
            row["reason"] = row["reason"] or c.get("reason") or ""
    return pd.DataFrame(list(rows.values()))


def show_record(rec: ClaimRecord) -> None:
    """Display a claim's verdicts in a notebook: a headline and the table of its checks."""
    from IPython.display import Markdown, display

    condition = "" if rec.condition == "-" else f" / {rec.condition} noise"
    unamended = rec.claim in claims.UNAMENDED  # one reading: the registered one
    display(Markdown(f"**{rec.claim} / {rec.task.upper()}{condition} / {rec.profile}**: registered "
                     f"**{rec.verdict_registered}**" + (f" (seeds {rec.seeds}; {rec.claim} has no amendment)" if unamended
                                                       else f", amended **{rec.verdict_amended}** (seeds {rec.seeds})")))
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
    """
    defaults = notebook_parameters(chapter_path(name))
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
            if defaults[key].lstrip().startswith("[") and isinstance(value, str):
                value = [v for v in value.split(",") if v]
            out[key] = value
        elif key in known_run and "overrides" in defaults:
            run_params[key] = value
        else:
            raise ConfigError(f"unknown parameter {key!r} for chapter {name!r}; chapter parameters: "
                              f"{', '.join(defaults)}; run parameters go into overrides")
    if run_params:
        out["overrides"] = {**out.get("overrides", {}), **run_params}
    if "overrides" in out and not isinstance(out["overrides"], dict):
        raise ConfigError("overrides must be a JSON object, e.g. '{\"noise_ratio\": 0.2}'")
    tasks = out.get("tasks") or _literal(defaults.get("tasks")) or ["fda", "thr"]
    for key in run_params:  # a run parameter that applies to none of the chapter's tasks would be ignored
        if not any(key in param_names(t) for t in tasks):
            raise ConfigError(f"parameter {key!r} applies to none of the chapter's tasks ({', '.join(tasks)})")
    if "seeds" in defaults:  # validate every run the chapter will ask for, as the chapter will build it
        plan.units(profile, tasks, out.get("seeds"), out.get("overrides"))
    elif "overrides" in out:
        for task in tasks:
            make_config(task, profile, **out["overrides"])
    if "widths" in defaults:  # X1's grid (rote.x1.grid, which the chapter calls first)
        from . import x1

        x1.grid(profile, tasks, out.get("seeds"), out.get("overrides"), out.get("widths"), out.get("noise_ratios"))
    return out


def _literal(source):
    import ast

    try:
        return ast.literal_eval(source) if source else None
    except (ValueError, SyntaxError):
        return None


def output_dir(name: str, profile: str, params: dict[str, object]) -> Path:
    """Where a chapter's executed notebook and figures go: one folder per (chapter, profile, parameters)."""
    extra = {k: v for k, v in params.items() if k != "profile"}
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
    path = BUILD_DIR / "executed" / profile / "build.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = meta
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
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

    from . import site as web

    site = site_root() / "_build" / "site_src"
    if site.exists():
        shutil.rmtree(site)
    (site / "book").mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(PROJECT_ROOT / name, site / name)
    if (BOOK_DIR / "_static").is_dir():  # Jupyter Book takes CSS from the book root's _static
        shutil.copytree(BOOK_DIR / "_static", site / "_static")
    for path in BOOK_DIR.iterdir():
        if path.suffix in (".png", ".bib"):
            shutil.copy(path, site / "book" / path.name)
        elif path.suffix == ".md":
            (site / "book" / path.name).write_text(path.read_text() + web.static_page_note(profile))
    records = claims.load_all(profile)
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


def render_site(profile: str) -> int:
    """Stage the site and render it with Jupyter Book into ``<site root>/_build/html`` (warnings are errors)."""
    site = stage_site(profile)
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(site), "--path-output", str(site_root()),
           "--all", "-W", "--keep-going"]
    result = subprocess.run(cmd, cwd=PROJECT_ROOT)
    return result.returncode


def _needs_runs(name: str) -> bool:
    """Whether a chapter loads trained runs: it has a ``seeds`` parameter (the seed triples of its
    runs). Declared, not guessed from the source: a chapter that loads its runs through a library
    call names no run function."""
    return "seeds" in notebook_parameters(chapter_path(name))


def book_plan(profile: str, names: list[str], params: dict[str, object], seeds: list[int]) -> list:
    """The runs that the selected chapters need: the plan, with the run parameters of ``params``."""
    from .plan import plan

    if not any(_needs_runs(n) for n in names):
        return []
    known_run = set(param_names("fda")) | set(param_names("thr"))
    overrides = {k: _parse_value(v) for k, v in params.items() if k in known_run}
    def listed(name):
        value = _parse_value(params[name]) if name in params else None
        if isinstance(value, str):
            return [v for v in value.split(",") if v]
        return [value] if isinstance(value, (int, float)) else value

    sweep = listed("sweep_ratios")
    return plan(profile, seeds, overrides, tasks=listed("tasks"),
                sweep=None if sweep is None else [float(r) for r in sweep],
                widths=listed("widths"), noise_ratios=listed("noise_ratios"))


def build_book(profile: str, names: list[str] | None, params: dict[str, object], render: bool = True, *,
               seeds: int | None = None, workers: int | None = None, executor: str = "local",
               slurm=None) -> int:
    """Train the plan's missing runs (``workers`` at a time), execute the chapters (all, or ``names``),
    which then only load runs, and render the site. Returns a process exit code.

    ``seeds`` (N) sets ``$ROTE_SEEDS`` for the chapters, whose ``seeds = None`` parameter then means
    0 .. N-1 (the value is not passed as a papermill parameter, so the pages stay the book's own
    pages under ``_build/executed/<profile>/<chapter>``)."""
    from .engine import report_failures, train_plan
    from .plan import seed_list

    selected = names or list(chapters())
    known_run = set(param_names("fda")) | set(param_names("thr"))

    def own(name):  # run parameters reach the chapters that run models; the scorecard only reads records
        takes_runs = "overrides" in notebook_parameters(chapter_path(name))
        return {k: v for k, v in params.items() if takes_runs or k not in known_run}

    resolved = {name: resolve_parameters(name, profile, own(name)) for name in selected}  # errors before work
    seed_values = seed_list(profile, seeds)
    configs = book_plan(profile, selected, params, seed_values)
    # The chapters execute in book order in a thread, each once a core is free: while the plan's
    # last runs train, a worker slot without a run to start takes the next chapter (a run it loads
    # that is still training, it waits for under that run's lock), so no core idles; the records and
    # pages are the same as executing after all training (the chapters only load runs).
    free, stop, results = threading.Event(), threading.Event(), []

    def execute_chapters() -> None:
        for name in selected:
            while not (free.wait(1.0) or stop.is_set()):
                pass
            if stop.is_set():
                return
            print(f"[rote] executing {name} ({profile}) ...", file=sys.stderr, flush=True)
            result = run_chapter(name, profile, resolved[name])
            status = "ok" if result.ok else f"FAILED: {result.error}"
            print(f"[rote] {name}: {status} in {result.seconds:.1f} s -> {result.notebook}", file=sys.stderr,
                  flush=True)
            results.append(result)

    seeds_before = os.environ.get("ROTE_SEEDS")
    os.environ["ROTE_SEEDS"] = str(len(seed_values))
    executor_thread = threading.Thread(target=execute_chapters, name="rote-chapters", daemon=True)
    try:
        executor_thread.start()
        if configs:
            print(f"[rote] plan: {len(configs)} runs ({profile}, seeds {seed_values})", file=sys.stderr, flush=True)
            outcomes = train_plan(configs, workers=workers, executor=executor, slurm=slurm,
                                  on_free=lambda n: free.set() if n else free.clear())
            failures = report_failures(outcomes)
            if failures:
                stop.set()
                executor_thread.join()
                print(f"[rote] chapters not executed: some runs of the plan failed "
                      f"({len(results)} executed before the failure)", file=sys.stderr)
                return failures
        free.set()
        executor_thread.join()
    finally:
        stop.set()
        if seeds_before is None:
            os.environ.pop("ROTE_SEEDS", None)
        else:
            os.environ["ROTE_SEEDS"] = seeds_before
    code = 0
    if render:
        print("[rote] rendering the site with Jupyter Book ...", file=sys.stderr, flush=True)
        if render_site(profile) != 0:
            print("[rote] Jupyter Book failed", file=sys.stderr)
            code = 1
        else:
            print(f"[rote] site: {BUILD_DIR / 'html' / 'index.html'}", file=sys.stderr)
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"[rote] chapter {r.name} FAILED at {r.error}; executed copy: {r.notebook}", file=sys.stderr)
    return 1 if failed else code


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

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
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import claims
from .claims import ClaimRecord
from .config import PROJECT_ROOT, ConfigError, make_config, param_names

BOOK_DIR = PROJECT_ROOT / "book"
BUILD_DIR = PROJECT_ROOT / "_build"
KERNEL = "python3"
STAMP_TAG = "rote-build-stamp"


# -- helpers for chapters ---------------------------------------------------------------------
SEED_MARKS = {"pass": "✓", "fail": "✗", "unresolved": "?"}


def claims_table(records: list[ClaimRecord]) -> pd.DataFrame:
    """One row per (claim, task, condition, profile): the registered and the amended verdict side by
    side, a mark per seed (amended reading: ✓ pass, ✗ fail, ? unresolved), the checks that decide
    the amended verdict with their numbers, whether the record comes from the profile's own runs
    ("other runs": overrides, or left from an older profile or code), and the section that computed it."""
    from .verdicts import deciding

    origin = {True: "profile default", False: "other runs", None: ""}
    rows = []
    for r in records:
        rows.append({"claim": r.claim, "task": r.task, "condition": r.condition,
                     "registered": r.verdict_registered, "amended": r.verdict_amended,
                     "seeds": " ".join(f"{s['seed']}{SEED_MARKS[s['amended']]}" for s in r.per_seed),
                     "deciding checks": deciding(r),
                     "runs": origin[claims.runs_are_profile_defaults(r)] if r.per_seed else "",
                     "section": f"{r.page}#{r.anchor}", "profile": r.profile})
    return pd.DataFrame(rows)


def _fmt(value) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def record_table(rec: ClaimRecord) -> pd.DataFrame:
    """A record's checks, one row per check and seed: kind, value, threshold and result."""
    result = {True: "pass", False: "FAIL", None: "unresolved"}
    return pd.DataFrame([{"seed": s["seed"], "check": c["name"], "kind": c["kind"], "value": _fmt(c["value"]),
                          "threshold": _fmt(c["threshold"]), "result": result[c["passed"]]}
                         for s in rec.per_seed for c in s["checks"]])


def show_record(rec: ClaimRecord) -> None:
    """Display a claim's verdicts in a notebook: a headline and the table of its checks."""
    from IPython.display import Markdown, display

    condition = "" if rec.condition == "-" else f" / {rec.condition} noise"
    display(Markdown(f"**{rec.claim} / {rec.task.upper()}{condition} / {rec.profile}**: registered "
                     f"**{rec.verdict_registered}**, amended **{rec.verdict_amended}** (seeds {rec.seeds})"))
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
        if key in defaults:
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
    if "overrides" in out:
        if not isinstance(out["overrides"], dict):
            raise ConfigError("overrides must be a JSON object, e.g. '{\"noise_ratio\": 0.2}'")
        tasks = out.get("tasks") or _literal(defaults.get("tasks")) or ["fda", "thr"]
        for task in tasks:  # validate every run the chapter will ask for, as the chapter will build it
            make_config(task, profile, **out["overrides"])
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
    """Insert (or replace) the build stamp after the notebook's title cell."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    nb.cells = [c for c in nb.cells if STAMP_TAG not in c.get("metadata", {}).get("tags", [])]
    cell = nbformat.v4.new_markdown_cell(text, metadata={"tags": [STAMP_TAG]})
    nb.cells.insert(1, cell)
    nb.metadata["rote"] = meta
    tmp = nb_path.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, nb_path)


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
            "executed": when, "ok": not error, "error": error, "source_sha": _source_hash(source)}
    if partial.exists():
        if error:
            text = (f"```{{error}}\nThis chapter FAILED in the build of {when} (profile `{profile}`): {error}. "
                    f"The outputs below stop at the failing cell.\n```")
        else:
            text = (f"```{{note}}\nExecuted {when} with profile `{profile}` and parameters "
                    f"`{json.dumps(params)}` in {seconds:.0f} s.\n```")
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
                          "executed": v["executed"]} for k, v in data.items()])


# -- rendering --------------------------------------------------------------------------------
def stage_site(profile: str) -> Path:
    """Copy the book's text and the executed chapters into ``_build/site_src`` for Jupyter Book."""
    import nbformat

    site = BUILD_DIR / "site_src"
    if site.exists():
        shutil.rmtree(site)
    (site / "book").mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(PROJECT_ROOT / name, site / name)
    for path in BOOK_DIR.iterdir():
        if path.suffix in (".md", ".png", ".bib"):
            shutil.copy(path, site / "book" / path.name)
    for name, source in chapters().items():
        executed = output_dir(name, profile, {"profile": profile}) / f"{name}.ipynb"
        target = site / "book" / source.name
        if executed.exists():
            nb = nbformat.read(executed, as_version=4)
            if nb.metadata.get("rote", {}).get("source_sha") != _source_hash(source):
                nb.cells.insert(1, nbformat.v4.new_markdown_cell(
                    "```{warning}\nThe chapter's source changed after this page was executed; rebuild it.\n```"))
            nbformat.write(nb, target)
        else:
            nb = nbformat.read(source, as_version=4)
            nb.cells.insert(1, nbformat.v4.new_markdown_cell(
                f"```{{warning}}\nThis chapter has not been executed for profile `{profile}` yet.\n```"))
            nbformat.write(nb, target)
    return site


def render_site(profile: str) -> int:
    site = stage_site(profile)
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(site), "--path-output", str(PROJECT_ROOT),
           "--all", "-W", "--keep-going"]
    result = subprocess.run(cmd, cwd=PROJECT_ROOT)
    return result.returncode


def build_book(profile: str, names: list[str] | None, params: dict[str, object], render: bool = True) -> int:
    """Execute the chapters (all, or ``names``) and render the site. Returns a process exit code."""
    selected = names or list(chapters())
    resolved = {name: resolve_parameters(name, profile, params) for name in selected}  # errors before work
    results = []
    for name in selected:
        print(f"[rote] executing {name} ({profile}) ...", file=sys.stderr, flush=True)
        result = run_chapter(name, profile, resolved[name])
        status = "ok" if result.ok else f"FAILED: {result.error}"
        print(f"[rote] {name}: {status} in {result.seconds:.1f} s -> {result.notebook}", file=sys.stderr, flush=True)
        results.append(result)
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


def run_chapter_cli(name: str, profile: str, params: dict[str, object]) -> int:
    resolved = resolve_parameters(name, profile, params)
    result = run_chapter(name, profile, resolved, progress=True)
    print(json.dumps({"chapter": name, "ok": result.ok, "seconds": round(result.seconds, 1),
                      "notebook": str(result.notebook), "figures": str(result.figures), "error": result.error}))
    return 0 if result.ok else 1

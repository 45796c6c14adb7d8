"""The papermill driver: the book's chapters (``book/NN_name.ipynb`` in reading order, then
``book/scorecard.ipynb``), their parameters, and executing them: :func:`run_chapter` into
``_build/executed/<profile>/<name>/`` with a stamp (a failed chapter's page says so), and
:func:`execute_jobs` for a build, each chapter in a process of its own (``python -m rote.build.driver execute``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from .. import plan
from . import provenance, site
from ..chapters.params import parse_list, parse_text
from ..config import PRECISIONS, PROJECT_ROOT, TASKS, ConfigError, make_config, param_names
from ..fmt import say
from ..settings import Settings

KERNEL = "python3"
STAMP_TAG = "rote-build-stamp"


def chapters() -> dict[str, Path]:
    """Chapter name -> source notebook, in reading order (numbered chapters, then the scorecard)."""
    found = {p.stem.split("_", 1)[1]: p for p in sorted(site.BOOK_DIR.glob("[0-9][0-9]_*.ipynb"))}
    if (site.BOOK_DIR / "scorecard.ipynb").exists():
        found["scorecard"] = site.BOOK_DIR / "scorecard.ipynb"
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


def resolve_parameters(name: str, profile: str, params: dict[str, object]) -> dict[str, object]:
    """Papermill parameters for a chapter, checked before anything runs: a name of its ``parameters``
    cell read from its text and checked as its declaration says (:meth:`ChapterParams.parse`), a run
    parameter into its ``overrides`` (checked against its tasks), anything else an error; then its
    parameter dataclass is built from them (the checks across fields)."""
    declared, defaults = _declared_parameters(name)
    out: dict[str, object] = {"profile": profile}
    run_params: dict[str, object] = {}
    known_run = run_param_names()
    for key, raw in params.items():
        if key == "profile":
            raise ConfigError("give the profile with --profile, not -p profile")
        if key == "settings":
            raise ConfigError("the book's settings come from --seeds and $ROTE_RUNS, $ROTE_RESULTS, ..., "
                              "not -p settings")
        if key in defaults:
            out[key] = declared.parse(key, raw) if declared else parse_list(raw) if isinstance(
                defaults[key], list) else parse_text(raw)
        elif key in known_run and "overrides" in defaults:
            run_params[key] = parse_text(raw)
        else:
            raise ConfigError(f"unknown parameter {key!r} for chapter {name!r}; chapter parameters: "
                              f"{', '.join(defaults)}; run parameters go into overrides")
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


def run_param_names() -> set[str]:
    """The run parameters of every task (what goes into a chapter's ``overrides``)."""
    return {name for task in TASKS for name in param_names(task)}


def _declared_parameters(name: str):
    """The chapter's parameter dataclass and defaults; an undeclared notebook (a test's) has no
    dataclass, only its cell's literal defaults."""
    from ..chapters.params import CHAPTER_PARAMS, chapter_params

    path = chapter_path(name)  # an unknown chapter: the error names the chapters
    if name not in CHAPTER_PARAMS:
        return None, {key: literal_default(source) for key, source in notebook_parameters(path).items()}
    declared = chapter_params(name)
    return declared, declared.defaults()


def literal_default(source):
    """A ``parameters`` cell's default (source text) as a Python literal; None where it is not one."""
    import ast

    try:
        return ast.literal_eval(source) if source else None
    except (ValueError, SyntaxError):
        return None


# Parameters that say how a page is built, not what it computes: the book's own page either way.
BUILD_PARAMETERS = ("profile", "train_grid")


def output_dir(name: str, profile: str, params: dict[str, object]) -> Path:
    """A chapter's output folder: one per (chapter, profile, parameters but :data:`BUILD_PARAMETERS`)."""
    extra = {k: v for k, v in params.items() if k not in BUILD_PARAMETERS}
    suffix = "-" + hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8] if extra else ""
    return site.BUILD_DIR / "executed" / profile / f"{name}{suffix}"


@dataclass
class ChapterResult:
    name: str
    ok: bool
    seconds: float
    notebook: Path
    figures: Path
    error: str = ""


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _stamp(nb_path: Path, text: str, meta: dict) -> None:
    """Insert (or replace) the build stamp as cell 1 (the site moves it under the title)."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    nb.cells = [c for c in nb.cells if STAMP_TAG not in c.get("metadata", {}).get("tags", [])]
    cell = nbformat.v4.new_markdown_cell(text, metadata={"tags": [STAMP_TAG]})
    nb.cells.insert(1, cell)
    nb.metadata["rote"] = meta
    tmp = nb_path.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, nb_path)


def _asked_precision(params: dict[str, object]) -> str:
    overrides = params.get("overrides") if isinstance(params.get("overrides"), dict) else {}
    return str(overrides.get("precision"))


def chapter_precisions(params: dict[str, object]) -> dict[str, str]:
    """Task -> the training precision of a chapter's runs, per task of its ``tasks`` (all without one):
    its ``precision`` override, else what ``auto`` resolves to here."""
    from ..config import precision_for

    asked, tasks = _asked_precision(params), params.get("tasks")
    tasks = [t for t in TASKS if t in tasks] if isinstance(tasks, (list, tuple)) else TASKS  # the chapter's own
    return {task: asked if asked in PRECISIONS else precision_for(task) for task in tasks}


def chapter_precision(params: dict[str, object]) -> str:
    """The training precision of a chapter's runs: its ``precision`` override, else "fda fp32, thr bf16"."""
    asked = _asked_precision(params)
    return asked if asked in PRECISIONS else ", ".join(f"{t} {p}" for t, p in chapter_precisions(params).items())


def with_default_folders(settings: Settings) -> Settings:
    """``settings`` with each folder left to the project's default named: where this process stores
    (:func:`rote.runs.runs_root`, :func:`rote.claims.results_root`, :func:`rote.analysis_cache.analysis_root`), so
    that a chapter's kernel, another process, stores in the same place."""
    from .. import analysis_cache, claims, runs

    defaults = {"runs": runs.runs_root, "results": claims.results_root, "analysis": analysis_cache.analysis_root}
    return replace(settings, **{name: where() for name, where in defaults.items() if getattr(settings, name) is None})


def chapter_parameters(params: dict[str, object], settings: Settings, figures: Path) -> dict[str, object]:
    """The papermill parameters of a chapter: its resolved ``params`` and the book's ``settings`` (the papermill
    parameter ``settings``: seeds and folders, the figures into the page's ``figures`` folder, training's
    progress as plain lines). Nothing reaches the chapter through the environment."""
    settings = with_default_folders(replace(settings, figures=figures, plain_progress=True))
    return {**params, "profile": settings.profile, "settings": settings.parameter()}


def run_chapter(name: str, profile: str, params: dict[str, object] | None = None, *,
                progress: bool = False, settings: Settings | None = None) -> ChapterResult:
    """Execute one chapter with papermill (parameters already resolved, ``settings`` the book's) and stamp its page
    (the site rewrites the stamp from its metadata: :func:`rote.build.site.stamp_markdown`)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source, params = chapter_path(name), dict(params or {"profile": profile})
    settings = replace(settings or Settings(), profile=profile)
    out_dir = output_dir(name, profile, params)
    figures, notebook = out_dir / "figures", out_dir / f"{name}.ipynb"
    partial = out_dir / f"{name}.partial.ipynb"
    figures.mkdir(parents=True, exist_ok=True)
    error, start = "", time.perf_counter()
    try:
        papermill.execute_notebook(str(source), str(partial), parameters=chapter_parameters(params, settings, figures),
                                   kernel_name=KERNEL, cwd=str(site.BOOK_DIR), progress_bar=progress)
    except PapermillExecutionError as err:
        error = f"cell {err.exec_count} raised {err.ename}: {err.evalue}"
    except Exception as err:  # kernel died, notebook unreadable, ...
        error = f"{type(err).__name__}: {err}"
    seconds = time.perf_counter() - start
    meta = {"chapter": name, "profile": profile, "parameters": params, "seconds": round(seconds, 1),
            "executed": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "ok": not error, "error": error,
            "source_sha": source_hash(source), "precision": chapter_precision(params),
            "environment": provenance.collect(chapter_precisions(params))}  # the page's "Build environment"
    if partial.exists():
        _stamp(partial, site.stamp_markdown(meta), meta)
        os.replace(partial, notebook)
    elif notebook.exists():  # nothing new was written: never leave the old page looking current
        notebook.unlink()
    if out_dir == output_dir(name, profile, {"profile": profile}):  # a book build, not a rerun with new parameters
        _record_build(profile, name, meta)
    return ChapterResult(name, not error, seconds, notebook, figures, error)


def _record_build(profile: str, name: str, meta: dict) -> None:
    """Add a chapter's entry to the build's ``build.json``, under a lock (chapters execute at once)."""
    import fcntl

    path = site.BUILD_DIR / "executed" / profile / "build.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        data[name] = meta
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, path)


@dataclass(frozen=True)
class ChapterJob:
    """One chapter execution of a build: its parameters, its records' root (``results``; None: the
    book's), a log label; ``last`` / ``waits``: it starts once every earlier job ended (``last``: the
    scorecard); ``before`` / ``after``: what runs in this process before it / with its result."""

    name: str
    params: dict
    results: Path | None = None
    label: str = ""
    last: bool = False
    before: Callable[[], None] | None = None
    waits: bool = False
    after: Callable[[ChapterResult], None] | None = None


def execute_job(job: ChapterJob, profile: str, settings: Settings | None = None,
                progress: bool = False) -> ChapterResult:
    """Run one job's chapter in a process of its own (``python -m rote.build.driver``), with the book's
    ``settings`` (the job's records folder where it has one) and this module's book and build folders on its
    command line, with plain progress lines for its training (no live bar in a page). Its environment is this
    one's, unchanged."""
    settings = with_default_folders(replace(settings or Settings(), profile=profile, plain_progress=True))
    if job.results is not None:
        settings = replace(settings, results=job.results)
    cmd = [sys.executable, "-m", "rote.build.driver", "execute", job.name, json.dumps(job.params),
           json.dumps({**settings.parameter(), "profile": profile}), str(site.BOOK_DIR), str(site.BUILD_DIR)]
    proc = subprocess.run(cmd + (["--progress"] if progress else []), cwd=PROJECT_ROOT,
                          stdout=subprocess.PIPE, stderr=None, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return ChapterResult(job.name, False, 0.0, Path(), Path(), f"the chapter process exited {proc.returncode}")
    out = json.loads(lines[-1])
    return ChapterResult(job.name, out["ok"], out["seconds"], Path(out["notebook"]), Path(out["figures"]), out["error"])


def execute_jobs(jobs: list[ChapterJob], profile: str, slots: Callable[[], int], stop: threading.Event,
                 capacity: int, settings: Settings | None = None) -> list[ChapterResult]:
    """Execute the jobs in order (with the book's ``settings``), at most ``min(slots(), capacity)`` at once (the
    cores training leaves free); the results in the jobs' order, the same as executing one after another."""
    cond = threading.Condition()
    state = {"next": 0, "running": 0}
    results: dict[int, ChapterResult] = {}

    def worker() -> None:
        while True:
            with cond:
                while True:
                    if stop.is_set() or state["next"] >= len(jobs):
                        return
                    index, job, busy = state["next"], jobs[state["next"]], state["running"]
                    # the scorecard (last) and a waiting job start once every earlier one ended
                    if not ((job.last or job.waits) and busy) and busy < min(capacity, slots()):
                        state["next"], state["running"] = index + 1, busy + 1
                        break
                    cond.wait(1.0)
            try:
                if job.before is not None:
                    job.before()
                what = f"{job.name}{f' ({job.label})' if job.label else ''}"
                say(f"executing {what} ({profile}) ...")
                result = execute_job(job, profile, settings)
                status = "ok" if result.ok else f"FAILED: {result.error}"
                say(f"{what}: {status} in {result.seconds:.1f} s -> {result.notebook}")
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


def run_chapter_cli(name: str, profile: str, params: dict[str, object], seeds: int | None = None,
                    settings: Settings | None = None) -> int:
    """Rerun one chapter (missing runs train in it) with the book's ``settings``; ``seeds`` (N): its ``seeds``
    0 .. N-1 and the book's seeds."""
    resolved = resolve_parameters(name, profile, params)
    settings = replace(settings or Settings(), profile=profile)
    if seeds is not None:
        settings = replace(settings, seeds=seeds)
        if "seeds" in notebook_parameters(chapter_path(name)):
            resolved["seeds"] = settings.seed_list
    result = execute_job(ChapterJob(name, resolved), profile, settings, progress=True)
    return _report(result)


def _report(result: ChapterResult) -> int:
    """Print a chapter's result as one JSON line (what :func:`execute_job` reads); the exit code."""
    print(json.dumps({"chapter": result.name, "ok": result.ok, "seconds": round(result.seconds, 1),
                      "notebook": str(result.notebook), "figures": str(result.figures), "error": result.error}))
    return 0 if result.ok else 1


USAGE = "usage: python -m rote.build.driver execute NAME PARAMS_JSON SETTINGS_JSON BOOK_DIR BUILD_DIR [--progress]"


def _main(argv: list[str]) -> int:
    """``python -m rote.build.driver execute NAME PARAMS_JSON SETTINGS_JSON BOOK_DIR BUILD_DIR [--progress]``: one
    chapter of a build, with the book's settings (:class:`rote.settings.Settings`, the profile among them)."""
    progress = argv[-1:] == ["--progress"]
    argv = argv[:-1] if progress else argv
    if len(argv) != 6 or argv[0] != "execute":
        print(USAGE, file=sys.stderr)
        return 2
    _, name, params, given, site.BOOK_DIR, site.BUILD_DIR = argv
    site.BOOK_DIR, site.BUILD_DIR = Path(site.BOOK_DIR), Path(site.BUILD_DIR)
    settings = Settings(**json.loads(given))
    result = run_chapter(name, settings.profile, json.loads(params), progress=progress, settings=settings)
    return _report(result)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

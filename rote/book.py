"""The book build: the runs the chapters need, trained, then the chapters executed and the site rendered.

:func:`build_book` (``rote book``) trains the missing runs of the selected chapters (:func:`book_plan`,
from :data:`CHAPTER_RUNS`), executes the chapters with the papermill driver (:mod:`rote.driver`) as
cores free up, and renders the site (:mod:`rote.staging`); with ``stability``, also protocol 10's
stability build (:func:`stability_jobs`, :func:`write_stability`). A failing chapter is reported with
its cell, the other chapters still build, and the command exits non-zero.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import claims, driver, plan, site, staging
from .config import TASKS, ConfigError, param_names
from .driver import (ChapterJob, ChapterResult, chapter_path, chapters, literal_default, notebook_parameters,
                     parse_value, resolve_parameters)


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
    given = parse_value(params.get("overrides")) if "overrides" in params else None
    overrides = {**(given if isinstance(given, dict) else {}),
                 **{k: parse_value(v) for k, v in params.items() if k in known_run}}

    def listed(name):
        value = parse_value(params[name]) if name in params else None
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
        tasks = listed("tasks") if "tasks" in params else literal_default(defaults.get("tasks"))
        chapter_seeds = [int(s) for s in listed("seeds")] if "seeds" in params and "seeds" in defaults else seeds
        grid = PlanGrid(sweep=sweep, widths=listed("widths"), noise_ratios=listed("noise_ratios"))
        for config in runs(profile, parts, chapter_seeds, overrides, tasks=tasks, grid=grid):
            out.setdefault(config.key, config)
    return list(out.values())


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
    from .engine import EngineSettings

    options = options or BookOptions()
    engine = options.engine or EngineSettings()
    seeds, configs, jobs = _book_jobs(profile, names, params, options)
    seeds_before = os.environ.get("ROTE_SEEDS")
    os.environ["ROTE_SEEDS"] = str(len(seeds))
    try:
        return _train_and_execute(profile, seeds, configs, jobs, engine, options.render)
    finally:
        if seeds_before is None:
            os.environ.pop("ROTE_SEEDS", None)
        else:
            os.environ["ROTE_SEEDS"] = seeds_before


def _book_jobs(profile: str, names: list[str] | None, params: dict[str, object], options: BookOptions):
    """A build's seeds, the runs it trains and its chapter executions (:class:`rote.driver.ChapterJob`),
    every chapter's parameters checked before any work; with ``options.stability``, protocol 10's too."""
    selected = names or list(chapters())
    known_run = set(param_names("fda")) | set(param_names("thr"))

    def own(name):  # run parameters reach the chapters that run models; the scorecard only reads records
        takes_runs = "overrides" in notebook_parameters(chapter_path(name))
        return {k: v for k, v in params.items() if takes_runs or k not in known_run}

    resolved = {name: resolve_parameters(name, profile, own(name)) for name in selected}  # errors before work
    with_x1 = x1_asked(names, options.x1)
    if X1_CHAPTER in resolved and not with_x1 and "train_grid" in notebook_parameters(chapter_path(X1_CHAPTER)):
        resolved[X1_CHAPTER]["train_grid"] = False
    seed_values = plan.seed_list(profile, options.seeds)
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
    return seed_values, configs, jobs


def _train_and_execute(profile: str, seeds: list[int], configs: list, jobs: list[ChapterJob], engine,
                       render: bool) -> int:
    """Train ``configs`` and execute ``jobs``, then render the site (``render``); the exit code.

    The chapters execute in book order, each in a process of its own, as many at once as training
    leaves cores free (a run a chapter loads that is still training, it waits for under that run's
    lock), so no core idles; the scorecard last. The records and pages are the same as executing
    one after another after all training (the chapters only load runs)."""
    from .engine import report_failures, train_plan
    from .timings import default_workers

    capacity = engine.workers or default_workers()
    free_slots = {"n": 0 if configs else capacity}
    stop = threading.Event()
    results: list[ChapterResult] = []

    def run_jobs() -> None:
        results.extend(driver.execute_jobs(jobs, profile, lambda: free_slots["n"], stop, capacity))

    executor_thread = threading.Thread(target=run_jobs, name="rote-chapters", daemon=True)
    try:
        executor_thread.start()
        if configs:
            print(f"[rote] plan: {len(configs)} runs ({profile}, seeds {seeds})", file=sys.stderr, flush=True)
            failures = report_failures(train_plan(configs, settings=engine,
                                                  on_free=lambda n: free_slots.__setitem__("n", n)))
            if failures:
                stop.set()
                executor_thread.join()
                print(f"[rote] chapters not executed: some runs of the plan failed "
                      f"({len(results)} executed before the failure)", file=sys.stderr)
                return failures
        free_slots["n"] = capacity
        executor_thread.join()
        code = 0 if not render else _render(profile)  # still under the book's $ROTE_SEEDS: its seeds' records
    finally:
        stop.set()
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"[rote] chapter {r.name} FAILED at {r.error}; executed copy: {r.notebook}", file=sys.stderr)
    return 1 if failed else code


def _render(profile: str) -> int:
    print("[rote] rendering the site with Jupyter Book ...", file=sys.stderr, flush=True)
    if staging.render_site(profile) != 0:
        print("[rote] Jupyter Book failed", file=sys.stderr)
        return 1
    print(f"[rote] site: {site.BUILD_DIR / 'html' / 'index.html'}", file=sys.stderr)
    return 0


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
        tasks = params.get("tasks") or literal_default(notebook_parameters(chapter_path(name)).get("tasks")) or list(TASKS)
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

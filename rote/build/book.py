"""The book build (``rote book``): train the missing runs of the selected chapters (:func:`book_plan`),
execute the chapters as cores free up (:mod:`rote.build.driver`), render the site (:mod:`rote.build.staging`); with
``stability``, also protocol 10's stability build. A failing chapter is reported; the others still build."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import claims, plan
from . import driver, site, staging
from ..chapters.params import parse_text
from ..config import TASKS, ConfigError
from .driver import (ChapterJob, ChapterResult, chapter_path, chapters, literal_default, notebook_parameters,
                     resolve_parameters, run_param_names)
from ..fmt import say
from ..settings import Settings
from ..specs import specs


# What each chapter trains: the parts of the plan (:data:`rote.plan.PARTS`) its notebook loads (the specs')
CHAPTER_RUNS = claims.CHAPTER_RUNS
CLAIM_CHAPTERS = claims.CLAIM_CHAPTERS  # the claims whose spec says protocol 10 reruns them


def grid_chapters() -> set[str]:
    """The chapters whose spec trains X1's grid (plan part ``x1``), only when asked for."""
    return {spec.chapter for spec in specs() if "x1" in spec.runs}


def _needs_runs(name: str) -> bool:
    """Whether a chapter loads trained runs: it declares a ``seeds`` parameter."""
    return "seeds" in notebook_parameters(chapter_path(name))


def chapter_runs(name: str, x1: bool = False) -> tuple[str, ...]:
    """The parts of the plan a chapter needs (:data:`CHAPTER_RUNS`; X1's grid only with ``x1``, else the
    runs it shares with C1); an undeclared chapter that loads runs gets the C1-C5 parts."""
    if name not in CHAPTER_RUNS:
        return ("noisy", "twin", "sweep") if _needs_runs(name) else ()
    parts = CHAPTER_RUNS[name]
    return tuple("x1-shared" if p == "x1" and not x1 else p for p in parts)


def x1_asked(names: list[str] | None, x1: bool = False) -> bool:
    """Whether a book build trains X1's grid: asked for (``--x1``) or its chapter named."""
    return bool(x1 or (names and grid_chapters() & set(names)))


def book_plan(profile: str, names: list[str], params: dict[str, object], seeds: list[int],
              x1: bool = False, runs_root: Path | None = None) -> list:
    """The union of the selected chapters' runs (:func:`chapter_runs`, each for its own tasks) with the
    run parameters of ``params``, in the plan's order (X1's rates chosen on the runs cached in ``runs_root``)."""
    from ..plan import PlanGrid, runs

    known_run = run_param_names()
    given = parse_text(params.get("overrides")) if "overrides" in params else None
    overrides = {**(given if isinstance(given, dict) else {}),
                 **{k: parse_text(v) for k, v in params.items() if k in known_run}}

    def listed(name):
        value = parse_text(params[name]) if name in params else None
        if isinstance(value, str):
            return [v for v in value.split(",") if v]
        return [value] if isinstance(value, (int, float)) else value

    grid = PlanGrid(listed("sweep_ratios"), widths=listed("widths"), noise_ratios=listed("noise_ratios"),
                    runs=runs_root)
    out: dict[str, object] = {}
    for name in [n for n in names if chapter_runs(n, x1)]:
        defaults = notebook_parameters(chapter_path(name))
        tasks = listed("tasks") if "tasks" in params else literal_default(defaults.get("tasks"))
        chapter_seeds = [int(s) for s in listed("seeds")] if "seeds" in params and "seeds" in defaults else seeds
        for config in runs(profile, chapter_runs(name, x1), chapter_seeds, overrides, tasks=tasks, grid=grid):
            out.setdefault(config.key, config)
    return list(out.values())


@dataclass(frozen=True)
class BookOptions:
    """``rote book``'s options: ``render`` the site, ``seeds`` (N; None: the settings' seeds), how runs
    train (``engine``: :class:`rote.build.engine.EngineSettings`), ``x1`` (X1's grid), ``stability`` (protocol 10)."""

    render: bool = True
    seeds: int | None = None
    engine: object = None  # rote.build.engine.EngineSettings (not imported here: the engine loads torch)
    x1: bool = False
    stability: bool = False

    def __post_init__(self):
        if self.seeds is not None and not plan.at_least(self.seeds, 1):
            raise ConfigError(f"the number of seeds must be >= 1, got {self.seeds!r}")


def build_book(profile: str, names: list[str] | None, params: dict[str, object],
               options: BookOptions | None = None, settings: Settings | None = None) -> int:
    """Train the runs the chapters (all, or ``names``) need, execute them and render the site; the exit
    code. ``settings``: the book's folders and seeds (``options.seeds``, N, where given), which reach the chapters
    as their ``settings`` parameter, not as their ``seeds``, so the pages stay the book's own. Without X1 asked
    for, X1's chapter runs with ``train_grid = False``."""
    from .engine import EngineSettings

    options = options or BookOptions()
    engine = options.engine or EngineSettings()
    settings = dataclasses.replace(settings or Settings(), profile=profile,
                                   **({} if options.seeds is None else {"seeds": options.seeds}))
    seeds, replan, jobs = _book_jobs(profile, names, params, options, settings)
    return _train_and_execute(settings, seeds, replan, jobs, engine, options.render)


def _book_jobs(profile: str, names: list[str] | None, params: dict[str, object], options: BookOptions,
               settings: Settings):
    """A build's seeds, runs and chapter jobs (protocol 10's too with ``options.stability``), every
    chapter's parameters checked before any work."""
    selected = names or list(chapters())
    known_run = run_param_names()

    def own(name):  # run parameters reach the chapters that run models; the scorecard only reads records
        takes_runs = "overrides" in notebook_parameters(chapter_path(name))
        return {k: v for k, v in params.items() if takes_runs or k not in known_run}

    resolved = {name: resolve_parameters(name, profile, own(name)) for name in selected}  # errors before work
    with_x1 = x1_asked(names, options.x1)
    for name in set() if with_x1 else grid_chapters() & set(resolved):  # its chapter shows what is missing
        if "train_grid" in notebook_parameters(chapter_path(name)):
            resolved[name]["train_grid"] = False
    seed_values = settings.seed_list
    configs = book_plan(profile, selected, params, seed_values, x1=with_x1, runs_root=settings.runs)
    jobs = [ChapterJob(name, resolved[name], last=(name == "scorecard")) for name in selected]
    if options.stability:
        from .. import stability as stab

        why_not = stab.precision_not_run()
        if why_not:  # said before anything trains
            say(f"stability: {why_not}")
        failed: dict = {}  # the stability chapters that failed: their change is not run (8.6)
        extra_configs, extra_jobs = stability_jobs(settings, selected, resolved, precision=not why_not, failed=failed)
        configs = list({c.key: c for c in configs + extra_configs}.values())
        params = resolved.get("scorecard") or resolve_parameters("scorecard", profile, {})
        # the scorecard last, after the entries it shows are written (also when it was not selected)
        jobs = [j for j in jobs if not j.last] + extra_jobs + [ChapterJob(
            "scorecard", params, last=True,
            before=lambda: write_stability(profile, seed_values, why_not, failed, settings.results))]

    def replan() -> list:  # with X1: its widths at the rates their selection chose, once that trained (12.4)
        again = book_plan(profile, selected, params, seed_values, x1=True, runs_root=settings.runs) if with_x1 else []
        return list({c.key: c for c in configs + again}.values())

    return seed_values, replan, jobs


def _train_and_execute(settings: Settings, seeds: list[int], replan, jobs: list[ChapterJob], engine,
                       render: bool) -> int:
    """Train the runs ``replan()`` lists (again after training, while it adds runs: :func:`train_staged`) while
    executing ``jobs`` on the cores training leaves free (a chapter waits for a run still training under its
    lock), then render the site; the exit code."""
    from .engine import report_failures, train_staged
    from .timings import default_workers

    profile, capacity, configs = settings.profile, engine.workers or default_workers(), replan()
    free_slots = {"n": 0 if configs else capacity}
    stop = threading.Event()
    results: list[ChapterResult] = []

    def run_jobs() -> None:
        results.extend(driver.execute_jobs(jobs, profile, lambda: free_slots["n"], stop, capacity, settings))

    executor_thread = threading.Thread(target=run_jobs, name="rote-chapters", daemon=True)
    try:
        executor_thread.start()
        if configs:
            say(f"plan: {len(configs)} runs ({profile}, seeds {seeds})")
            failures = report_failures(train_staged(replan, settings=engine, root=settings.runs,
                                                    on_free=lambda n: free_slots.__setitem__("n", n)))
            if failures:
                stop.set()
                executor_thread.join()
                say(f"chapters not executed: some runs of the plan failed "
                      f"({len(results)} executed before the failure)")
                return failures
        free_slots["n"] = capacity
        executor_thread.join()
        code = 0 if not render else _render(settings)  # the book's seeds' records
    finally:
        stop.set()
    failed = [r for r in results if not r.ok]
    for r in failed:
        say(f"chapter {r.name} FAILED at {r.error}; executed copy: {r.notebook}")
    return 1 if failed else code


def _render(settings: Settings) -> int:
    say("rendering the site with Jupyter Book ...")
    if staging.render_site(settings.profile, settings) != 0:
        say("Jupyter Book failed")
        return 1
    say(f"site: {site.BUILD_DIR / 'html' / 'index.html'}")
    return 0


# -- stability (protocol 10) --------------------------------------------------------------------------
def stability_root(change: str, results: Path | None = None) -> Path:
    """Where a stability change's records go: beside the book's (in ``results``, None: the project's), never over
    them."""
    return (results or claims.results_root()) / "stability" / change


def stability_jobs(settings: Settings, names: list[str], resolved: dict, precision: bool = True,
                   failed: dict | None = None):
    """The runs and chapter jobs of protocol 10's two changes for the selected claim chapters: each task
    in its other precision (unless not ``precision``; one job per task) and seeds 3 and 4, recorded under
    :func:`stability_root` (in the book's ``settings``: profile, seeds, records folder); the first waits for the
    default chapters (8.6); failures go to ``failed``."""
    from .. import stability as stab

    profile, seeds, results, runs = settings.profile, settings.seed_list, settings.results, settings.runs
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
                jobs.append(ChapterJob(name, p, stability_root("precision", results),
                                       label=f"stability: {task} in {other}",
                                       after=_note_failure(failed, ("precision", claim_of[name], task))))
                configs += book_plan(profile, [name], {"tasks": [task], "precision": other}, seeds, runs_root=runs)
        p = {**params, "seeds": list(stab.EXTRA_SEEDS)}
        jobs.append(ChapterJob(name, p, stability_root("seeds", results), label="stability: seeds 3, 4",
                               after=_note_failure(failed, ("seeds", claim_of[name], None))))
        configs += book_plan(profile, [name], {}, list(stab.EXTRA_SEEDS), runs_root=runs)
    if jobs:
        jobs[0] = dataclasses.replace(jobs[0], waits=True)
    return list({c.key: c for c in configs}.values()), jobs


def _note_failure(failed: dict | None, key: tuple) -> Callable[[ChapterResult], None] | None:
    """A stability job's ``after``: a failed chapter's error into ``failed[key]`` (change, claim, task)."""
    if failed is None:
        return None
    return lambda result: None if result.ok else failed.setdefault(key, result.error or "it failed")


def stability_failure(failed: dict | None, change: str, claim: str, task: str) -> str:
    """Why ``change`` is not run for a row whose chapter failed in this build ("" where it did not)."""
    error = (failed or {}).get((change, claim, task if change == "precision" else None))
    return f"its chapter failed in this build ({error}), so no {change} record of this build exists" if error else ""


def write_stability(profile: str, seeds: list[int], precision_why_not: str = "", failed: dict | None = None,
                    results: Path | None = None) -> int:
    """Store each default record's stability entry (:func:`rote.stability.stability`) beside it, from the
    two changes' records; a claim protocol 10 does not rerun is ``not run``. Returns how many."""
    from .. import stability as stab

    twins = {(r.claim, r.task, r.condition): r
             for r in claims.load_all(profile, stability_root("precision", results), seeds) if r.per_seed}
    extra = {(r.claim, r.task, r.condition): r
             for r in claims.load_all(profile, stability_root("seeds", results), list(stab.EXTRA_SEEDS)) if r.per_seed}
    written = 0
    for rec in claims.load_all(profile, results, seeds):
        if not rec.per_seed:
            continue
        key = (rec.claim, rec.task, rec.condition)
        if rec.claim not in CLAIM_CHAPTERS:
            entry = stab.Stability(stab.NOT_RUN, f"{rec.claim}'s grid is not part of the stability build (protocol 10 "
                                   "recomputes C1-C5's rows)", {})
        else:
            entry = stab.stability(rec, twins.get(key), extra.get(key),
                                   precision_why_not or stability_failure(failed, "precision", rec.claim, rec.task),
                                   stability_failure(failed, "seeds", rec.claim, rec.task))
        claims.save_stability(rec, entry.to_dict(), results)
        written += 1
    say(f"stability: {written} entries written")
    return written

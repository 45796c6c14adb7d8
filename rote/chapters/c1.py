"""Chapter 02, claim C1: generalize first, then memorize; the memorization is benign. Sections: the
learning curves (:func:`load`, :func:`learning_curves`), the noise-ratio sweep (:func:`sweep`) and the
Verdict; :func:`evaluate` is the only caller of :mod:`rote.verdicts.c1`.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from .. import plan, plots, verdicts
from ..analysis import curves
from ..config import make_config
from ..report import each_seed, where
from ..runs import get_or_train
from ..settings import Settings
from ..specs.c1 import SPEC
from . import Build as ChapterBuild, book_units, noisy_runs, ClaimResult, glue_thresholds_of
from .params import ClaimParams, noise_ratios, param

T = SPEC.values()  # the thresholds in force


@dataclass(frozen=True)
class Params(ClaimParams):
    """The chapter's parameters (its notebook's ``parameters`` cell), checked before anything trains."""

    sweep_ratios: list[float] | None = param(None, noise_ratios(),  # None: rote.plan.sweep_ratios of each run
                                             per_profile=lambda p: plan.sweep_ratios(p, make_config("fda", p)))


def glue_thresholds() -> None:
    """The thresholds the chapter's method text quotes."""
    glue_thresholds_of(SPEC, lambda T: {
        "c1_t_gen_level": T["t_gen_level"], "c1_t_mem_level": T["t_mem_level"], "c1_final_min": T["final_gen_min"],
        "c1_benign_drop": T["benign_gen_drop_max"], "c1_twin_gen_min": T["twin_gen_min"],
        "c1_plateau_rise_max": T["plateau_rise_max"], "c1_plateau_at": f"{curves.PLATEAU_AT:.0%}"})


@dataclass(kw_only=True)
class Build(ChapterBuild):
    """The chapter's units, each with its noisy run (``runs``) and its noise-free twin (``twins``)."""

    twins: dict  # unit -> the noise-free twin's run (FDA's two conditions share one twin per seed)


def load(profile: str, tasks, seeds, overrides, settings: Settings = Settings()) -> Build:
    """Every unit's noisy run and twin (FDA's two conditions share one twin per seed); ``seeds`` None: the
    book's (``settings``, with the runs folder)."""
    units = book_units(profile, tasks, seeds, overrides, settings)
    twins = {u: get_or_train(u.clean, root=settings.runs, progress=settings.train_progress) for u in units}
    return Build(profile, units, noisy_runs(units, settings), twins=twins, settings=settings)


def learning_curves(build: Build) -> C1Sections:
    """What the learning-curves section measures on: every unit's metric tables, noisy run and twin, and
    how many examples their shares are measured on (section 11's intervals)."""
    return C1Sections(noisy_curves={u: build.runs[u].metrics for u in build.units},
                      clean_curves={u: build.twins[u].metrics for u in build.units},
                      sizes={u: (curves.sample_sizes(u.noisy), curves.sample_sizes(u.clean)) for u in build.units})


def curves_figure(build: Build, result: ClaimResult):
    """One row per task and condition: the noisy runs (one line per seed, with each seed's interpolated
    t_gen solid and t_mem dotted, from ``result``) and their noise-free twins."""
    fig, axes = plt.subplots(len(build.groups), 2, figsize=(12, 3.6 * len(build.groups)), sharey=True, squeeze=False)
    for row, ((task, condition), members) in zip(axes, build.groups.items()):
        noisy = pd.concat([build.runs[u].metrics.assign(seed=u.seed) for u in members])
        clean = pd.concat([build.twins[u].metrics.assign(seed=u.seed) for u in members])
        plots.learning_curves(noisy, ax=row[0], columns=("gen", "mem", "rec"),
                              title=f"{where(task, condition)}: noise ratio {members[0].noisy.data.noise_ratio}")
        for u in members:
            m = result.metrics[u]
            for step, style in ((m.t_gen_interpolated, "-"), (m.t_mem_interpolated, ":")):
                if step is not None:
                    row[0].axvline(step, ls=style, lw=1, color="k", alpha=0.5)
        plots.learning_curves(clean, ax=row[1], columns=("gen", "fit"), title=f"{task.upper()}: noise-free twin")
    fig.tight_layout()
    return fig


# generated: the sentences it chooses (the rule first on every seed or not, rec falling) depend on the result
def curves_text(groups_: dict, evaluations: dict) -> str:
    """Per task and condition: the crossings, rec's rise and fall, the final numbers and the cost against
    the twin (``evaluations``: :attr:`rote.chapters.ClaimResult.evaluations`)."""
    lines = []
    for (task, condition), members in groups_.items():
        ms = {u: evaluations[u][0] for u in members}

        def seeds(key, spec=".3f", missing="n/a"):
            return each_seed(ms, members, key, spec, missing)

        first = all(m["t_gen_interpolated"] is not None and (m["t_mem_interpolated"] is None
                                                             or m["t_mem_interpolated"] > m["t_gen_interpolated"])
                    for m in ms.values())
        falls = all(m["rec_peak_before_t_mem"] > m["final_rec"] for m in ms.values())
        lines.append(
            f"- **{where(task, condition)}** (seed {', '.join(str(u.seed) for u in members)}): gen reaches "
            f"{T['t_gen_level']} at step {seeds('t_gen_interpolated', '.0f', 'never')} and mem reaches "
            f"{T['t_mem_level']} at step {seeds('t_mem_interpolated', '.0f', 'never')}, so the rule "
            + ("is learned before the noise on every seed. " if first else "does not come first on every seed. ")
            + f"rec peaks at {seeds('rec_peak_before_t_mem')} before $t_{{mem}}$ and ends at {seeds('final_rec')}"
            + (" (the noisy examples are first answered by the rule). " if falls else ". ")
            + f"Final gen {seeds('final_gen')} and mem {seeds('final_mem')}; the noise-free twin ends at gen "
            f"{seeds('clean_final_gen')}, a cost of {seeds('gen_cost')} (allowance {T['benign_gen_drop_max']}).")
    return "\n".join(lines)


def sweep(build: Build, profile: str, ratios=None) -> pd.DataFrame:
    """Final gen and mem of runs that differ from each unit's noisy run only in the noise ratio."""
    rows = []
    for u in build.units:
        for r in (ratios if ratios is not None else plan.sweep_ratios(profile, u.noisy)):
            run = get_or_train(u.noisy.replace(noise_ratio=r), root=build.settings.runs,
                               progress=build.settings.train_progress)
            rows += [{"task": where(u.task, u.condition), "seed": u.seed, "noise ratio": r, "metric": m,
                      "final accuracy": curves.final(run.metrics, m)} for m in ("gen", "mem")]
    return pd.DataFrame(rows).dropna()


@plots.seeded_jitter
def sweep_figure(table: pd.DataFrame):
    """The sweep, one panel per task and condition, one point per seed."""
    if table.empty or table["final accuracy"].isna().all():
        fig, ax = plt.subplots(figsize=(4, 3))
        plots.missing(ax, "no run of the sweep has a final accuracy")
        return fig
    grid = sns.catplot(data=table, x="noise ratio", y="final accuracy", hue="metric", col="task", kind="strip",
                       palette=plots.METRIC_COLORS, height=3.5, aspect=1.1, size=7, alpha=0.8)
    grid.set(ylim=(-0.02, 1.02))
    return grid.figure


def sweep_table(table: pd.DataFrame) -> pd.DataFrame:
    """The sweep's numbers: rows task and ratio, columns metric and seed (mem: none where no label is noisy)."""
    out = table.pivot_table(index=["task", "noise ratio"], columns=["metric", "seed"], values="final accuracy").round(3)
    out.attrs["missing"] = {c: "no noisy label to memorize at noise ratio 0" for c in out.columns if c[0] == "mem"}
    return out


def results(build: Build, result: ClaimResult) -> list[dict]:
    """Each unit's seed result for the record (its runs: the noisy run and its twin)."""
    return [verdicts.seed_result(u, result.metrics[u], result.checks[u], configs=[u.noisy, u.clean])
            for u in build.units]


@dataclass(frozen=True)
class C1Sections:
    """What C1's checks read, per unit (:func:`learning_curves`): the noisy run's and the twin's metric
    tables and sample sizes."""

    noisy_curves: dict  # unit -> the noisy run's metric table
    clean_curves: dict  # unit -> the noise-free twin's metric table
    sizes: dict  # unit -> (the noisy run's SampleSizes, the twin's)


def evaluate(build: Build, sections: C1Sections) -> ClaimResult:
    """C1 on every unit's learning curves (:func:`rote.verdicts.c1.checks`): its metrics and checks."""
    judged = {u: verdicts.c1.checks(sections.noisy_curves[u], sections.clean_curves[u], u.noisy.train.eval_every,
                                    *sections.sizes[u]) for u in build.units}
    return ClaimResult(SPEC.id, metrics={u: m for u, (m, _) in judged.items()},
                       checks={u: checks for u, (_, checks) in judged.items()})

"""Chapter 02, claim C1: generalize first, then memorize; the memorization is benign.

Sections: the learning curves of every noisy run and its noise-free twin (:func:`load`,
:func:`curves_figure`, :func:`curves_text`), the noise-ratio sweep (:func:`sweep`), and the
Verdict (:func:`results`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from .. import claims, plan, plots, verdicts
from ..report import values, where
from ..runs import get_or_train
from . import glue_values, groups

T = claims.THRESHOLDS["C1"]


def glue_thresholds() -> None:
    """The thresholds the chapter's method text quotes."""
    glue_values({"c1_t_gen_level": T["t_gen_level"], "c1_t_mem_level": T["t_mem_level"],
                 "c1_final_min": T["final_gen_min"], "c1_benign_drop": T["benign_gen_drop_max"]})


@dataclass
class Build:
    """The chapter's units with their noisy runs, noise-free twins and C1 evaluations
    (:func:`rote.verdicts.c1`: metrics and checks per unit)."""

    units: list
    noisy: dict
    clean: dict
    evaluations: dict
    groups: dict = field(init=False)

    def __post_init__(self):
        self.groups = groups(self.units)


def load(profile: str, tasks, seeds, overrides) -> Build:
    """Every unit's noisy run and twin (FDA's two conditions share one twin per seed), evaluated."""
    units = plan.units(profile, tasks, seeds, overrides)
    noisy = {u: get_or_train(u.noisy) for u in units}
    clean = {u: get_or_train(u.clean) for u in units}
    evaluations = {u: verdicts.c1(noisy[u].metrics, clean[u].metrics, u.noisy.train.eval_every) for u in units}
    return Build(units, noisy, clean, evaluations)


def curves_figure(build: Build):
    """One row per task and condition: the noisy runs (one line per seed, with each seed's interpolated
    t_gen solid and t_mem dotted) and their noise-free twins."""
    fig, axes = plt.subplots(len(build.groups), 2, figsize=(12, 3.6 * len(build.groups)), sharey=True, squeeze=False)
    for row, ((task, condition), members) in zip(axes, build.groups.items()):
        noisy = pd.concat([build.noisy[u].metrics.assign(seed=u.seed) for u in members])
        clean = pd.concat([build.clean[u].metrics.assign(seed=u.seed) for u in members])
        plots.learning_curves(noisy, ax=row[0], columns=("gen", "mem", "rec"),
                              title=f"{where(task, condition)}: noise ratio {members[0].noisy.data.noise_ratio}")
        for u in members:
            m = build.evaluations[u][0]
            for key, style in (("t_gen_interpolated", "-"), ("t_mem_interpolated", ":")):
                if m[key] is not None:
                    row[0].axvline(m[key], ls=style, lw=1, color="k", alpha=0.5)
        plots.learning_curves(clean, ax=row[1], columns=("gen", "fit"), title=f"{task.upper()}: noise-free twin")
    fig.tight_layout()
    return fig


def curves_text(groups_: dict, evaluations: dict) -> str:
    """What the curves show, one paragraph per task and condition: the crossings, whether the rule
    comes first on every seed, rec's rise and fall, the final numbers and the cost against the twin."""
    lines = []
    for (task, condition), members in groups_.items():
        ms = [evaluations[u][0] for u in members]

        def each_seed(key, spec, missing="n/a"):
            return values([m[key] for m in ms], spec, missing)

        first = all(m["t_gen_interpolated"] is not None and (m["t_mem_interpolated"] is None
                                                             or m["t_mem_interpolated"] > m["t_gen_interpolated"])
                    for m in ms)
        falls = all(m["rec_peak_before_t_mem"] > m["final_rec"] for m in ms)
        lines.append(
            f"- **{where(task, condition)}** (seed {', '.join(str(u.seed) for u in members)}): gen reaches "
            f"{T['t_gen_level']} at step {each_seed('t_gen_interpolated', '.0f', 'never')} and mem reaches "
            f"{T['t_mem_level']} at step {each_seed('t_mem_interpolated', '.0f', 'never')}, so "
            + ("the rule is learned before the noise on every seed. " if first else
               "the rule does not come first on every seed. ")
            + f"rec peaks at {each_seed('rec_peak_before_t_mem', '.3f')} before $t_{{mem}}$ and ends at "
            f"{each_seed('final_rec', '.3f')}"
            + (" (the noisy examples are first answered by the rule). " if falls else ". ")
            + f"Final gen {each_seed('final_gen', '.3f')} and mem {each_seed('final_mem', '.3f')}; the noise-free twin "
            f"ends at gen {each_seed('clean_final_gen', '.3f')}, a cost of {each_seed('gen_cost', '.3f')} "
            f"(allowance {T['benign_gen_drop_max']}).")
    return "**What this build shows** (mean of the last 5 evaluations; one number per seed):\n\n" + "\n".join(lines)


def sweep(build: Build, profile: str, ratios=None) -> pd.DataFrame:
    """Final gen and mem (mean of the last 5 evaluations) of runs that differ from each unit's noisy
    run only in the noise ratio (``ratios``; None: :func:`rote.plan.sweep_ratios`), one row per seed,
    ratio and metric."""
    rows = []
    for u in build.units:
        for r in (ratios if ratios is not None else plan.sweep_ratios(profile, u.noisy)):
            run = get_or_train(u.noisy.replace(noise_ratio=r))
            rows += [{"task": where(u.task, u.condition), "seed": u.seed, "noise ratio": r, "metric": m,
                      "final accuracy": verdicts.final(run.metrics, m)} for m in ("gen", "mem")]
    return pd.DataFrame(rows).dropna()


@plots.seeded_jitter
def sweep_figure(table: pd.DataFrame):
    """The sweep, one panel per task and condition, one point per seed."""
    grid = sns.catplot(data=table, x="noise ratio", y="final accuracy", hue="metric", col="task", kind="strip",
                       palette=plots.METRIC_COLORS, height=3.5, aspect=1.1, size=7, alpha=0.8)
    grid.set(ylim=(-0.02, 1.02))
    return grid.figure


def sweep_table(table: pd.DataFrame) -> pd.DataFrame:
    """The sweep's numbers: rows task and ratio, columns metric and seed."""
    return table.pivot_table(index=["task", "noise ratio"], columns=["metric", "seed"], values="final accuracy").round(3)


def results(build: Build) -> list[dict]:
    """Each unit's seed result for the record (its runs: the noisy run and its twin)."""
    return [verdicts.seed_result(u, *build.evaluations[u], configs=[u.noisy, u.clean]) for u in build.units]

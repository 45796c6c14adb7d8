"""The book's plotting style (set on import) and the recurring figure types."""

from __future__ import annotations

import functools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

METRIC_COLORS = {"gen": "#1b9e77", "fit": "#7570b3", "mem": "#d95f02", "rec": "#e7298a", "atomic": "#666666"}
GROUP_COLORS = {"M": "#d95f02", "C": "#1b9e77", "control": "#999999"}


def set_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "figure.figsize": (7, 4),
                         "axes.titleweight": "bold", "legend.frameon": False})


set_style()


def learning_curves(metrics: pd.DataFrame, ax=None, marks: dict[str, int | None] | None = None, title: str = "",
                    columns=("gen", "fit", "mem", "rec")):
    """Accuracy metrics over training steps (one line per seed when ``metrics`` has a ``seed`` column),
    with vertical lines at the marked steps (t_gen, t_mem)."""
    ax = ax or plt.subplots()[1]
    seeds = "seed" in metrics  # several seeds: one line per seed and metric, never averaged
    tidy = metrics.melt(id_vars=["step", "seed"] if seeds else "step", value_vars=[c for c in columns if c in metrics],
                        var_name="metric", value_name="accuracy")
    sns.lineplot(data=tidy, x="step", y="accuracy", hue="metric", palette=METRIC_COLORS, ax=ax,
                 **({"units": "seed", "estimator": None, "lw": 1.2} if seeds else {}))
    for label, step in (marks or {}).items():
        if step is not None:
            ax.axvline(step, ls="--", lw=1, color="k", alpha=0.6)
            ax.text(step, 1.02, f" {label}={step}", transform=ax.get_xaxis_transform(), fontsize=8)
    ax.set(ylim=(-0.02, 1.02), title=title)
    return ax


def save_figure(fig, name: str, folder=None) -> None:
    """Save a figure next to the executed notebook (``$ROTE_FIGURES`` or ``_build/figures``).

    Returns nothing: a chapter ends a cell with this call, and a returned path would print the
    build machine's absolute path into the public page. The file is ``<folder>/<name>.png``."""
    import os
    from pathlib import Path

    from .config import PROJECT_ROOT

    folder = Path(folder or os.environ.get("ROTE_FIGURES") or PROJECT_ROOT / "_build" / "figures")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, bbox_inches="tight")


def save_and_show(fig, name: str) -> None:
    """Save a chapter's figure as ``name`` (:func:`save_figure`) and show it in the page."""
    save_figure(fig, name)
    plt.show()


def check_values(records, ax=None, title: str = ""):
    """The numbers that decide a claim, one point per seed: each numeric check of the amended reading
    (and the superseded registered ones) as value / threshold, so that 1 is the pass line for every
    check alike; checks whose value or threshold is missing are listed as 'not computed'.
    Returns the axes (None when no check has a number)."""
    rows = []
    for rec in records:
        where = rec.task.upper() + ("" if rec.condition == "-" else f" {rec.condition}")
        for s in rec.per_seed:
            for c in s["checks"]:
                v, t = c["value"], c["threshold"]
                if isinstance(v, bool) or isinstance(t, bool) or v is None or t is None or not t:
                    continue
                result = {True: "pass", False: "fail", None: "unresolved"}[c["passed"]]
                rows.append({"check": f"{where}: {c.get('id') or c['name']}" + (" [superseded]" if c["kind"] == "superseded" else ""),
                             "value / threshold": v / t, "seed": str(s["seed"]), "result": result})
    if not rows:
        return None
    tidy = pd.DataFrame(rows)
    ax = ax or plt.subplots(figsize=(8, 0.32 * tidy.check.nunique() + 1.2))[1]
    sns.scatterplot(data=tidy, y="check", x="value / threshold", hue="result", style="seed", s=60, alpha=0.8, ax=ax,
                    palette={"pass": "#1b9e77", "fail": "#d95f02", "unresolved": "#999999"})
    ax.axvline(1.0, ls="--", color="k", lw=1)
    ax.set(xscale="symlog", ylabel="", title=title or "Deciding numbers per seed (value / threshold; dashed: the threshold)")
    ax.legend(fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left")
    return ax


def _shade(verdict) -> float:
    """Heat-map value of a verdict: 1 holds / pass, 0 fails / fail, 0.5 mixed or unresolved; NaN not run."""
    if not isinstance(verdict, str) or verdict == "not run":
        return float("nan")
    word = verdict.split()[0].rstrip(":")
    return 1.0 if word in ("holds", "pass") else 0.0 if word in ("fails", "fail") else 0.5


def verdict_heatmap(table: pd.DataFrame, title: str, column: str = "amended"):
    """The scorecard at a glance: one cell per claim (rows) and task / condition (columns), coloured by
    its ``column`` verdict (:func:`rote.book.claims_table`) and labelled with it. Returns the figure."""
    where = table.task.str.upper() + [("" if c == "-" else f" {c}") for c in table.condition]
    verdict = table.assign(where=where).pivot(index="claim", columns="where", values=column)[list(dict.fromkeys(where))]
    labels = verdict.map(lambda v: "" if not isinstance(v, str) else v.replace(": ", ":\n").replace(", ", ",\n"))
    fig, ax = plt.subplots(figsize=(1.9 * verdict.shape[1] + 1.5, 4.4))
    sns.heatmap(verdict.map(_shade).astype(float), annot=labels, fmt="", vmin=0, vmax=1, cbar=False,
                cmap=sns.color_palette(["#d95f02", "#e6c84f", "#1b9e77"], as_cmap=True), linewidths=1, ax=ax,
                annot_kws={"fontsize": 7})
    ax.set_facecolor("#eeeeee")  # not run, or a claim that does not apply (C5 is FDA only)
    for i, claim in enumerate(verdict.index):
        for j, col in enumerate(verdict.columns):
            if verdict.loc[claim, col] == "not run":
                ax.text(j + 0.5, i + 0.5, "not run", ha="center", va="center", fontsize=8, color="#666666")
    ax.grid(False)
    ax.set(title=title, xlabel="", ylabel="")
    return fig


# -- X1: the gen cost against model width (rote.x1) ---------------------------------------------------
def gen_cost_by_width(widths: pd.DataFrame, margin: float, title: str = ""):
    """X1's headline (``widths``: :attr:`rote.x1.Study.widths`): left, the gen cost (twin gen - noisy gen)
    against model width, one line per seed, the registered margin dashed, a hollow marker on a width that
    does not memorize (unresolved); right, the final gen of the twins (dashed) and of the noisy runs and
    their final mem. Returns the figure."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    idle_labelled = False
    for i, (seed, g) in enumerate(widths.sort_values("width").groupby("seed")):
        (line,) = left.plot(g.width, g.cost, marker="o", label=f"seed {seed}")
        idle = g[~g.memorizes.astype(bool)]
        if len(idle):
            left.scatter(idle.width, idle.cost, s=110, facecolors="white", edgecolors=line.get_color(), zorder=3,
                         label=None if idle_labelled else "does not memorize")
            idle_labelled = True
        right.plot(g.width, g.gen_twin, ls="--", marker="o", color=METRIC_COLORS["gen"], alpha=0.6,
                   label="gen, twin" if i == 0 else None)
        right.plot(g.width, g.gen_noisy, marker="o", color=METRIC_COLORS["gen"], label="gen, noisy" if i == 0 else None)
        right.plot(g.width, g.mem, marker="s", color=METRIC_COLORS["mem"], label="mem, noisy" if i == 0 else None)
    left.axhline(margin, ls="--", color="k", lw=1)
    left.text(widths.width.min(), margin, " margin", va="bottom", fontsize=8)
    ticks = sorted(widths.width.unique())
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(w) for w in ticks])
        ax.minorticks_off()
        ax.set_xlabel("model width (d_model)")
        ax.legend(fontsize=8)
    left.set(ylabel="gen cost (twin gen - noisy gen)", title=title or "Gen cost against model width")
    right.set(ylabel="final accuracy (mean of last 5)", ylim=(-0.02, 1.02), title="Final gen and mem")
    fig.tight_layout()
    return fig


def curves_by_width(curves: pd.DataFrame, timing: pd.DataFrame | None = None):
    """One panel per width (``curves``: :attr:`rote.x1.Study.curves`): the noisy runs' gen, mem and rec, one
    line per seed, the twins' gen in grey (dashed), and each seed's t_gen (solid) and t_mem (dotted) from
    ``timing`` (rows with ``width``, ``seed``, ``t_gen``, ``t_mem``). Returns the figure."""
    widths = sorted(curves.width.unique())
    fig, axes = plt.subplots(1, len(widths), figsize=(4.4 * len(widths), 3.6), sharey=True, squeeze=False)
    for ax, w in zip(axes[0], widths):
        part = curves[curves.width == w]
        learning_curves(part, ax=ax, columns=("gen", "mem", "rec"), title=f"width {w}")
        for i, (_, g) in enumerate(part.groupby("seed")):
            ax.plot(g.step, g.twin_gen, color="#666666", ls="--", lw=1, label="gen, twin" if i == 0 else None)
        for row in ([] if timing is None else timing[timing.width == w].itertuples()):
            for step, style in ((row.t_gen, "-"), (row.t_mem, ":")):
                if step is not None and not pd.isna(step):
                    ax.axvline(step, ls=style, lw=1, color="k", alpha=0.5)
        ax.legend(fontsize=8) if ax is axes[0][0] else ax.get_legend() and ax.get_legend().remove()
    fig.tight_layout()
    return fig


def gen_cost_by_ratio(ratios: pd.DataFrame, title: str = ""):
    """The gen cost against the noise ratio (``ratios``: :attr:`rote.x1.Study.ratios`), one line per seed
    (shown, not judged). Returns the figure."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    sns.lineplot(data=ratios.assign(seed=ratios.seed.astype(str)), x="noise_ratio", y="cost", hue="seed",
                 marker="o", ax=ax)
    ax.set_xticks(sorted(ratios.noise_ratio.unique()))
    ax.set(xlabel="noise ratio", ylabel="gen cost (twin gen - noisy gen)", title=title or "Gen cost against noise ratio")
    return fig


def seeded_jitter(draw):
    """Decorator for a figure function with seaborn strip plots: their jitter draws from numpy's
    global generator, so the same numbers gave figures that differed from run to run. The function
    draws with that generator seeded (0) and leaves its state as it found it."""

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        state = np.random.get_state()
        np.random.seed(0)
        try:
            return draw(*args, **kwargs)
        finally:
            np.random.set_state(state)

    return wrapper

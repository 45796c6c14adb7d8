"""The book's plotting style (set on import) and the recurring figure types."""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .display import install_reader_tables
from .verdicts.core import OUTCOME_WORDS

install_reader_tables()  # every chapter imports this module: its kernel shows tables as readers read them

METRIC_COLORS = {"gen": "#1b9e77", "fit": "#7570b3", "mem": "#d95f02", "rec": "#e7298a", "atomic": "#666666"}
GROUP_COLORS = {"M": "#d95f02", "C": "#1b9e77", "control": "#999999"}


sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "figure.figsize": (7, 4), "axes.titleweight": "bold",
                     "legend.frameon": False})


def missing(ax, what: str) -> None:
    """Say in ``ax`` what it cannot show (``what``: 'no ... ', in words), in place of a figure that degenerate
    data (an empty group, one point, all-equal values, NaN) would leave empty or make raise."""
    ax.text(0.5, 0.5, what, ha="center", va="center", transform=ax.transAxes)


def learning_curves(metrics: pd.DataFrame, ax=None, marks: dict[str, int | None] | None = None, title: str = "",
                    columns=("gen", "fit", "mem", "rec")):
    """Accuracy metrics over training steps (one line per seed when ``metrics`` has a ``seed`` column),
    with vertical lines at the marked steps (t_gen, t_mem)."""
    ax = ax or plt.subplots()[1]
    seeds = "seed" in metrics  # several seeds: one line per seed and metric, never averaged
    tidy = metrics.melt(id_vars=["step", "seed"] if seeds else "step", value_vars=[c for c in columns if c in metrics],
                        var_name="metric", value_name="accuracy")
    if tidy.accuracy.notna().any():
        sns.lineplot(data=tidy, x="step", y="accuracy", hue="metric", palette=METRIC_COLORS, ax=ax,
                     **({"units": "seed", "estimator": None, "lw": 1.2} if seeds else {}))
    else:
        missing(ax, "no accuracy recorded")
    for label, step in (marks or {}).items():
        if step is not None:
            ax.axvline(step, ls="--", lw=1, color="k", alpha=0.6)
            ax.text(step, 1.02, f" {label}={step}", transform=ax.get_xaxis_transform(), fontsize=8)
    ax.set(ylim=(-0.02, 1.02), title=title)
    return ax


def figures_root() -> Path:
    """The project's default figures folder (a caller with a figures folder setting passes it as ``folder``)."""
    from .config import PROJECT_ROOT

    return PROJECT_ROOT / "_build" / "figures"


def save_figure(fig, name: str, folder=None) -> None:
    """Save a figure as ``<folder>/<name>.png`` (default :func:`figures_root`). Returns nothing: a
    chapter ends a cell with this call, and a returned path would print the machine's path into the page."""
    folder = Path(folder or figures_root())
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / f"{name}.png", bbox_inches="tight")


def save_and_show(fig, name: str, folder=None) -> None:
    """Save a chapter's figure as ``name`` in ``folder`` (:func:`save_figure`) and show it in the page."""
    save_figure(fig, name, folder)
    plt.show()


def check_values(records, ax=None, title: str = ""):
    """The numbers that decide a claim, one point per seed: each numeric check of the amended reading
    (and the superseded registered ones) as value / threshold, so that 1 is the pass line for every
    check alike; checks whose value or threshold is missing are listed as 'not computed'.
    Returns the axes (saying so when no check has a number)."""
    rows = []
    for rec in records:
        where = rec.task.upper() + ("" if rec.condition == "-" else f" {rec.condition}")
        for s, c in ((s, c) for s in rec.per_seed for c in s["checks"]):
            v, t = c["value"], c["threshold"]
            if not (isinstance(v, bool) or isinstance(t, bool) or v is None or t is None or not t):
                superseded = " [superseded]" if c["kind"] == "superseded" else ""
                rows.append({"check": f"{where}: {c.get('id') or c['name']}{superseded}", "value / threshold": v / t,
                             "seed": str(s["seed"]), "result": OUTCOME_WORDS[c["passed"]]})
    tidy = pd.DataFrame(rows, columns=["check", "value / threshold", "seed", "result"])
    if tidy["value / threshold"].isna().all():
        ax = ax or plt.subplots(figsize=(8, 1.5))[1]
        missing(ax, "no check has a number (a value and a threshold)")
        ax.set(xticks=[], yticks=[], title=title or "Deciding numbers per seed")
        return ax
    ax = ax or plt.subplots(figsize=(8, 0.32 * tidy.check.nunique() + 1.2))[1]
    sns.scatterplot(data=tidy, y="check", x="value / threshold", hue="result", style="seed", s=60, alpha=0.8, ax=ax,
                    palette={"pass": "#1b9e77", "fail": "#d95f02", "unresolved": "#999999"})
    ax.axvline(1.0, ls="--", color="k", lw=1)
    ax.set(xscale="symlog", ylabel="", title=title or "Deciding numbers per seed (value / threshold; dashed: the threshold)")
    ax.legend(fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left")
    return ax


NO_VERDICT = ("not run", "stale")  # grey cells: no record, or one judged by older code (rote.claims.shown)


def _shade(verdict) -> float:
    """Heat-map value of a verdict: 1 holds / pass, 0 fails / fail, 0.5 mixed or unresolved; NaN not run."""
    if not isinstance(verdict, str) or verdict in NO_VERDICT:
        return float("nan")
    word = verdict.split()[0].rstrip(":")
    return 1.0 if word in ("holds", "pass") else 0.0 if word in ("fails", "fail") else 0.5


def _cell_label(verdict, compact: bool) -> str:
    """A heat-map cell's verdict in lines: "mixed:", then each count on its own line (``compact``: the counts
    in lines of at most 15 characters, a parenthesis on a line of its own)."""
    import textwrap

    if not isinstance(verdict, str):
        return ""
    if not compact:
        return verdict.replace(": ", ":\n").replace(", ", ",\n")
    lines = verdict.replace(": ", ":\n").replace(" (", "\n(").split("\n")
    return "\n".join(textwrap.fill(line, 15, break_long_words=False) for line in lines)


LABEL_PT = {False: 7, True: 9}  # its cell labels' size in points: wide (the scorecard), compact (the front page)


def verdict_heatmap(table: pd.DataFrame, title: str, column: str = "amended", compact: bool = False):
    """The scorecard at a glance: one cell per claim (rows) and task / condition (columns), coloured by
    its ``column`` verdict (:func:`rote.display.claims_table`) and labelled with it. Returns the figure.
    ``compact``: 3.7 inches wide for three columns, so that on a phone (a 390 px screen) its labels stay >= 9 px."""
    if table.empty:
        fig, ax = plt.subplots(figsize=(4, 2))
        missing(ax, "no claim has a verdict")
        ax.set(title=title, xticks=[], yticks=[])
        return fig
    where = table.task.str.upper() + [("" if c == "-" else f" {c}") for c in table.condition]
    verdict = table.assign(where=where).pivot(index="claim", columns="where", values=column)[list(dict.fromkeys(where))]
    labels = verdict.map(lambda v: _cell_label(v, compact))
    rows, columns = verdict.shape
    size = (1.1 * columns + 0.4, 0.62 * rows + 0.6) if compact else (1.9 * columns + 1.5, 4.4)
    fig, ax = plt.subplots(figsize=size)
    if compact:
        fig.subplots_adjust(left=0.1, right=0.99)
    label_pt = LABEL_PT[compact]
    sns.heatmap(verdict.map(_shade).astype(float), annot=labels, fmt="", vmin=0, vmax=1, cbar=False,
                cmap=sns.color_palette(["#d95f02", "#e6c84f", "#1b9e77"], as_cmap=True), linewidths=1, ax=ax,
                annot_kws={"fontsize": label_pt, "color": "black"})  # black: >= 5.6:1 on each colour (white: 3.4:1)
    ax.set_facecolor("#eeeeee")  # not run, or a claim that does not apply (C5 is FDA only)
    for (i, j) in zip(*np.nonzero(verdict.isin(NO_VERDICT).to_numpy())):
        ax.text(j + 0.5, i + 0.5, verdict.iloc[i, j], ha="center", va="center", fontsize=max(8, label_pt),
                color="#666666")
    ax.grid(False)
    ax.set(xlabel="", ylabel="")
    ax.set_title(title, fontsize=label_pt + 1 if compact else None, wrap=compact)
    if compact:
        ax.tick_params(labelsize=label_pt)
        ax.tick_params(axis="x", labelrotation=0)
    return fig


def seeded_jitter(draw):
    """Decorator for a figure function with seaborn strip plots, whose jitter draws from numpy's global
    generator: it draws with that generator seeded (0) and leaves its state as it found it."""

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        state = np.random.get_state()
        np.random.seed(0)
        try:
            return draw(*args, **kwargs)
        finally:
            np.random.set_state(state)

    return wrapper

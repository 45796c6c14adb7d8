"""Chapter 06, claim C5: outlier heuristics (FDA).

Sections, in the chapter's order (some analyses seed torch's generator, so the order is part of the
result), each a pure function of the build and earlier results: :func:`load`, :func:`heuristic_maps`,
:func:`untrained_maps`, :func:`cut` (8.3), :func:`outliers`, :func:`patching`, :func:`dose` (7.7),
:func:`jstar` (8.4), then :func:`evaluate`, the only caller of :mod:`rote.verdicts.c5`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from .. import plots, verdicts
from ..analysis import fda_features, heuristics, neuron_patching, outliers as outlier_analysis
from ..analysis.heuristics import CutShares
from ..analysis.neuron_patching import DoseSummary, JstarAnalysis
from ..analysis.outliers import NullComparison, OutlierComparison, ShiftDirection
from ..analysis.sets import memorized
from ..report import (chance_side, choose_by, each_seed, label, measured, per_seed, registered_not_passed, seeds_head,
                      values, versus, where)
from ..tasks.fda import MAX_OPERAND, MIN_OPERAND
from ..train import build_model
from ..settings import Settings
from ..specs.c5 import SPEC
from . import Build, book_units, noisy_runs, ClaimResult, glue_thresholds_of
from .params import ClaimParams, number, param, task_list, whole

T = SPEC.values()  # the thresholds in force
CHECKS_HEAD = "One number per seed (the checks are in the Verdict section):"
CURVE_COLORS = {"top": plots.GROUP_COLORS["M"], "random": plots.GROUP_COLORS["control"], "mismatched": "#7570b3"}


@dataclass(frozen=True)
class Params(ClaimParams):
    """The notebook's ``parameters`` cell, checked before anything trains."""

    tasks: list[str] = param(["fda"], task_list(("fda",)))  # C5 is an FDA claim
    grid_size: int = param(4096, whole(1, (MAX_OPERAND - MIN_OPERAND + 1) ** 2),
                           "distinct clean inputs: at least one, at most every pair of four-digit operands")
    grid_seed: int = param(0, whole(0))
    top_k: int = param(50, whole(1), "a feature must cover at least one top input, drawn from the grid",
                       at_most="grid_size")
    max_shift: int = param(3, whole(1), "0 would leave no clean neighbour")
    z_outlier: float = param(2.0, number(0, low_open=True), "an outlier lies some way out, not at |z| = 0")
    n_clean: int = param(500, whole(1), "at least one clean example for the reference |z| distribution")
    n_null: int = param(300, whole(1), "the null relabels the first n_null of the clean examples",
                        at_most="n_clean")
    null_seed: int = param(0, whole(0))
    n_dose: int = param(300, whole(1), "at least one memorized example in the dose-response")
    n_controls: int = param(3, whole(1), "at least one random draw for the patching control")
    n_heatmaps: int = param(4, whole(1), "at least one unit shown")


def glue_thresholds(max_shift: int, z_outlier: float) -> None:
    """The thresholds and parameters the chapter's method text quotes."""
    same = ("heuristic_fraction_min", "z_ratio_min", "pattern_corr_min", "patch_revert_min", "control_revert_max")
    glue_thresholds_of(SPEC, lambda T: {
                 "c5_coverage_min": T["heuristic_coverage_min"], **{f"c5_{k}": T[k] for k in same},
                 "c5_max_shift": max_shift, "c5_z_outlier": z_outlier, "c5_m_grid": ", ".join(map(str, T["m_grid"])),
                 "c5_untrained_factor": T["untrained_share_factor_min"], "c5_cut_quantile": T["untrained_cut_quantile"],
                 "c5_untrained_offset": T["untrained_cut_seed_offset"]})


def load(profile: str, tasks, seeds, overrides, n_clean: int, settings: Settings = Settings()) -> Build:
    """Every FDA unit's noisy run with M (memorized noisy training examples) and the first ``n_clean``
    clean training examples (the reference for |z|; ``tasks``: ["fda"], as :class:`Params` checks)."""
    units = book_units(profile, tasks, seeds, overrides, settings)  # seeds None: the book's
    runs = noisy_runs(units, settings)
    sets = {u: {"M": memorized(run.model, run.data), "clean": run.data.train_clean[:n_clean]} for u, run in runs.items()}
    return Build(profile, units, runs, sets, settings)


def set_table(build: Build) -> pd.DataFrame:
    return pd.DataFrame({label(u): {"memorized (M)": len(build.sets[u]["M"]),
                                    "noisy training examples": len(build.runs[u].data.train_noisy),
                                    "clean reference examples": len(build.sets[u]["clean"])} for u in build.units})


def _classify(build: Build, u, model, grid_size: int, grid_seed: int, top_k: int):
    """``model``'s units classified by section 5's coverage rule on a grid of clean inputs (``u``'s answer order)."""
    grid = fda_features.operand_grid(grid_size, grid_seed, build.runs[u].data.meta["answer_order"])
    return heuristics.classify_neurons(model, grid, heuristics.ClassifySettings(T["heuristic_coverage_min"], top_k=top_k))


def _last(hmap) -> int:
    return max(hmap.layers)


def _strip(ax, data: pd.DataFrame, y: str, hue: str, palette, reference, factor: float, name: str, offset: float, *,
           line: bool = False, s: int = 300, fontsize: int = 8) -> None:
    """One point per seed and condition (``line``: the registered share, dashed), and the bar each must reach:
    ``factor`` x the rows ``reference`` selects, drawn at ``offset``."""
    sns.stripplot(data=data, x="condition", y=y, hue=hue, dodge=True, jitter=False, size=7, ax=ax, palette=palette)
    if line:
        ax.axhline(T["heuristic_fraction_min"], ls="--", color="k", lw=1)
    bar = f"{factor:g} x {name}"
    for i, cond in enumerate(data.condition.unique()):  # a NaN has no bar (a masked point on a categorical axis raises)
        need = (factor * data[(data.condition == cond) & reference][y]).dropna()
        if len(need):
            ax.scatter([i + offset] * len(need), need, marker="_", s=s, color="k", zorder=3,
                       label=None if bar in ax.get_legend_handles_labels()[1] else bar)
    if data[reference][y].isna().all():
        plots.missing(ax, f"no {name} value: no {bar} bar")
    ax.legend(fontsize=fontsize)


def _bullets(head: str, groups_: dict, line) -> str:
    """``head``, then one bullet per noise condition: ``- **FDA, random noise**: `` and ``line(its units)``."""
    return head + "\n\n" + "\n".join(f"- **{where(t, c)}**: {line(ms)}" for (t, c), ms in groups_.items())


# -- heuristic neurons -------------------------------------------------------------------------------
def heuristic_maps(build: Build, grid_size: int, grid_seed: int, top_k: int) -> dict:
    """Per unit: every (layer, answer position, neuron) unit classified."""
    return {u: _classify(build, u, run.model, grid_size, grid_seed, top_k) for u, run in build.runs.items()}


def share_figure(build: Build, hmaps: dict):
    """Per layer, the share of heuristic units split by the kind of their best feature (first seed),
    and every seed's share (dots)."""
    fig, axes = plt.subplots(1, len(build.shown), figsize=(8 * len(build.shown), 3.8), squeeze=False)
    for ax, u in zip(axes[0], build.shown):
        hm = hmaps[u]
        per = hm.per_layer()
        if len(per) and per.fraction.notna().any():
            wide = per.pivot(index="layer", columns="kind", values="fraction").reindex(hm.layers).fillna(0.0)
            wide = wide[[k for k in fda_features.FEATURE_KINDS if k in wide]]
            wide.plot.bar(stacked=True, ax=ax, rot=0, color=sns.color_palette("tab10", len(wide.columns)), width=0.6)
        else:
            plots.missing(ax, "no heuristic unit in any layer")
        for i, v in enumerate(build.groups[(u.task, u.condition)]):
            ax.scatter(range(len(hmaps[v].layers)), hmaps[v].layer_fractions(), color="k", s=18, zorder=3,
                       label="all heuristics, each seed" if i == 0 else None)
        ax.legend(title="best feature", bbox_to_anchor=(1.02, 1), loc="upper left", fontsize=8)
        ax.axhline(T["heuristic_fraction_min"], ls="--", color="k", lw=1)
        ax.text(-0.45, T["heuristic_fraction_min"] + 0.01, "threshold", fontsize=8)
        ax.set_xticks(range(len(hm.layers)), [str(layer) for layer in hm.layers])
        ax.set(ylim=(0, 1), xlabel="layer", ylabel="share of units that are heuristics",
               title=f"{label(u)}: heuristic units per layer ({hm.heuristic_fraction:.0%} overall)")
    plt.tight_layout()
    return fig


def feature_table(hmap, u):
    """The most frequent best features per layer of the unit's heuristic units."""
    table = hmap.table()
    return (table[table.heuristic].groupby(["layer", "feature"]).size().rename("units").reset_index()
            .sort_values("units", ascending=False).groupby("layer").head(6).reset_index(drop=True)
            .style.set_caption(label(u)))


def untrained_maps(build: Build, grid_size: int, grid_seed: int, top_k: int) -> dict:
    """Per unit: the same classification on the untrained model (step 0, rebuilt from the run's model
    seed; rebuilding it seeds torch's generator)."""
    return {u: _classify(build, u, build_model(u.noisy, run.data).eval(), grid_size, grid_seed, top_k)
            for u, run in build.runs.items()}


def null_figure(build: Build, hmaps: dict, untrained: dict):
    """Left: the share of heuristic neurons, trained against untrained, one point per seed, with the
    two lines it must clear; right: units and any-position neurons, shown, not judged."""
    share = pd.DataFrame([{"condition": where(u.task, u.condition), "seed": u.seed, "model": model_name,
                           "measure": measure, "share": value}
                          for u in build.units for model_name, hm in (("trained", hmaps[u]), ("untrained", untrained[u]))
                          for measure, value in (("neurons (judged)", hm.neuron_fraction),
                                                 ("(neuron, position) units", hm.heuristic_fraction),
                                                 ("neurons, any position", hm.any_position_fraction))])
    palette = {"trained": plots.GROUP_COLORS["M"], "untrained": plots.GROUP_COLORS["control"]}
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), gridspec_kw={"width_ratios": [1, 1.6]})
    judged = share[share.measure == "neurons (judged)"]
    _strip(axes[0], judged, "share", "model", palette, judged.model == "untrained", T["untrained_share_factor_min"],
           "untrained", 0.2, line=True)
    top = max([1.0] + [T["untrained_share_factor_min"] * hm.neuron_fraction for hm in untrained.values()])
    axes[0].set(ylim=(0, top + 0.05), ylabel="share of neurons that are heuristics", title="heuristic neurons (judged)")
    other = share[share.measure != "neurons (judged)"].assign(key=lambda d: d.measure + ", " + d.condition)
    sns.stripplot(data=other, x="key", y="share", hue="model", dodge=True, jitter=False, size=6, ax=axes[1],
                  palette=palette)
    axes[1].tick_params(axis="x", labelsize=7, rotation=15)
    axes[1].set(ylim=(0, 1), xlabel="", ylabel="share", title="shown beside it, not judged")
    plt.tight_layout()
    return fig


def null_text(groups_: dict, hmaps: dict, untrained: dict) -> str:
    """Per condition, trained against untrained share (generated: on how many seeds it clears both lines)."""
    def line(members) -> str:
        shares = [hmaps[u].neuron_fraction for u in members]
        blank = [untrained[u].neuron_fraction for u in members]
        need = [max(T["heuristic_fraction_min"], T["untrained_share_factor_min"] * b) for b in blank]
        ok = sum(t >= n for t, n in zip(shares, need))
        verdict_text = ("above both lines on every seed" if ok == len(members) else "below at least one line on every seed"
                        if ok == 0 else f"above both lines on {ok} of {len(members)} seeds")
        ratio = " / ".join("n/a" if not b else f"{t / b:.2g}" for t, b in zip(shares, blank))
        alone = sum(b >= T["heuristic_fraction_min"] for b in blank)
        return (f"heuristic neurons {' / '.join(f'{t:.2f}' for t in shares)} of the trained model against "
                f"{' / '.join(f'{b:.2f}' for b in blank)} of the untrained one (ratio {ratio}; needed: at least "
                f"{T['heuristic_fraction_min']} and {T['untrained_share_factor_min']:g} x untrained), {verdict_text}"
                + (f". The untrained model alone reaches the registered share on {alone} of {len(members)} seeds, "
                   "so the registered threshold by itself does not show that training made the heuristics."
                   if alone else "."))

    return _bullets("One number per seed:", groups_, line)


# -- amendment 2, 8.3: the cut calibrated on an untrained model ---------------------------------------
@dataclass(frozen=True)
class Cut:
    """Per unit: the trained and the untrained model's maps under the 8.3 cut, and their shares."""

    maps: dict
    null_maps: dict
    shares: dict[object, CutShares]

    def table(self, units) -> pd.DataFrame:
        return pd.DataFrame({label(u): {k: v for k, v in asdict(self.shares[u]).items() if "per_layer" not in k}
                             for u in units})


def cut(build: Build, hmaps: dict, untrained: dict, grid_size: int, grid_seed: int, top_k: int) -> Cut:
    """8.3: per layer and answer position, a quantile of the scores of an untrained model of another
    initialization (model seed s + the protocol's offset), applied to both classifications."""
    maps, null_maps, shares = {}, {}, {}
    for u, run in build.runs.items():
        other_seed = u.noisy.model.model_seed + T["untrained_cut_seed_offset"]
        other = build_model(u.noisy.replace(model_seed=other_seed), run.data).eval()
        threshold = heuristics.score_cut(_classify(build, u, other, grid_size, grid_seed, top_k), T["untrained_cut_quantile"])
        maps[u], null_maps[u] = heuristics.with_cut(hmaps[u], threshold), heuristics.with_cut(untrained[u], threshold)
        shares[u] = heuristics.cut_summary(maps[u], null_maps[u], other_seed)
    return Cut(maps, null_maps, shares)


def cut_figure(build: Build, result: Cut):
    """Left: the share of heuristic neurons under the cut, trained against the null, one point per
    seed; right: per layer (first seed)."""
    cut_share = pd.DataFrame([{"condition": where(u.task, u.condition), "seed": u.seed, "model": name, "share": value}
                              for u in build.units
                              for name, value in (("trained", result.shares[u].cut_heuristic_fraction),
                                                  ("untrained, seed s (null)", result.shares[u].cut_null_fraction))])
    palette = {"trained": plots.GROUP_COLORS["M"], "untrained, seed s (null)": plots.GROUP_COLORS["control"]}
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    _strip(axes[0], cut_share, "share", "model", palette, cut_share.model != "trained", T["untrained_share_factor_min"],
           "null", -0.2, line=True)
    axes[0].set(ylim=(0, 1), xlabel="", ylabel="share of neurons that are heuristics",
                title="8.3 cut: heuristic neurons (judged)")
    per_layer = pd.DataFrame([{"layer": layer, "share": f, "model": f"{label(u)}, {name}"} for u in build.shown
                              for name, cm in (("trained", result.maps[u]), ("null", result.null_maps[u]))
                              for layer, f in zip(cm.layers, cm.neuron_layer_fractions())],
                             columns=["layer", "share", "model"])
    if len(per_layer):
        sns.barplot(data=per_layer, x="layer", y="share", hue="model", ax=axes[1])
        axes[1].legend(fontsize=7)
    else:
        plots.missing(axes[1], "no layer has a share")
    axes[1].axhline(T["heuristic_fraction_min"], ls="--", color="k", lw=1)
    axes[1].set(ylim=(0, 1), ylabel="share of neurons that are heuristics", title="8.3 cut, per layer")
    plt.tight_layout()
    return fig


def cut_text(groups_: dict, cut_metrics: dict) -> str:
    """Per condition: the shares under the cut, trained against the null, and the layers with no unit over
    the cut (generated: which layers are empty)."""
    def line(members) -> str:
        empty = [f"seed {u.seed}: layer {', '.join(str(x) for x in cut_metrics[u].cut_empty_layers)}"
                 for u in members if cut_metrics[u].cut_empty_layers]
        share, null, units, null_units = (each_seed(cut_metrics, members, f"cut_{k}") for k in (
            "heuristic_fraction", "null_fraction", "heuristic_fraction_units", "null_fraction_units"))
        return (f"under the cut, a share {share} of the trained model's neurons are heuristics, against {null} of the "
                f"untrained model of the same seed (units: {units} against {null_units}). "
                + ("No unit of these layers exceeds the cut, so they hold no heuristic under 8.3 (" + "; ".join(empty)
                   + ")." if empty else "Every layer holds at least one heuristic unit under the cut."))

    return _bullets(CHECKS_HEAD, groups_, line)


# -- outliers -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outliers:
    """Per unit: the sets (M, clean and the never-trained null), each set's activations against its clean
    neighbours, |z| on M against clean and against the null, the shifts' direction, and the clean set's
    median |z| per answer position (for the figures)."""

    sets: dict
    stats: dict
    comparison: dict[object, OutlierComparison]
    null: dict[object, NullComparison]
    direction: dict[object, ShiftDirection]
    clean_by_position: dict

    def table(self, units) -> pd.DataFrame:
        return pd.DataFrame({label(u): {**asdict(self.comparison[u]),
                                        "outlier shifts at memorized digits": self.direction[u].n_shifts,
                                        "share toward the noisy digit": self.direction[u].shift_toward_noisy}
                             for u in units})

    def null_table(self, units) -> pd.DataFrame:
        return pd.DataFrame({label(u): {k: v for k, v in asdict(self.null[u]).items() if "by_position" not in k}
                             for u in units}).round(3)


def outliers(build: Build, hmaps: dict, max_shift: int, z_outlier: float, n_null: int, null_seed: int) -> Outliers:
    """|z| of every heuristic unit on M, on the clean reference and on the never-trained null (the first
    ``n_null`` clean reference examples relabelled by the run's noise process)."""
    sets, stats, comparison, direction, null, clean = {}, {}, {}, {}, {}, {}
    for u, run in build.runs.items():
        order = run.data.meta["answer_order"]
        sets[u] = {**build.sets[u], "null": outlier_analysis.fresh_noisy_labels(
            build.sets[u]["clean"][:n_null], u.noisy.data.noise_kind, order, seed=null_seed)}
        settings = outlier_analysis.NeighbourSettings(order=order, max_shift=max_shift)
        stats[u] = {name: outlier_analysis.neighbour_stats(run.model, ex, hmaps[u], settings) for name, ex in sets[u].items()}
        null[u] = outlier_analysis.null_comparison(stats[u]["M"], stats[u]["null"], hmaps[u])
        comparison[u] = outlier_analysis.outlier_comparison(stats[u]["M"], stats[u]["clean"], hmaps[u])
        direction[u] = outlier_analysis.shift_direction(run.model, sets[u]["M"], stats[u]["M"], hmaps[u], z_min=z_outlier)
        clean[u] = outlier_analysis.outlier_summary(stats[u]["clean"], hmaps[u]).median_abs_z_by_position
    return Outliers(sets, stats, comparison, null, direction, clean)


def z_figure(u, hmaps: dict, result: Outliers, z_outlier: float):
    """Left: |z| over (example, heuristic unit) pairs, memorized digits of M against the clean examples;
    right: the median per answer position."""
    zt = pd.concat([outlier_analysis.z_table(result.stats[u]["M"], hmaps[u], "M").query("differs"),
                    outlier_analysis.z_table(result.stats[u]["clean"], hmaps[u], "clean")])
    zt = zt.groupby("set").sample(frac=1.0, random_state=0).groupby("set").head(50_000)  # plotted: 50k pairs per set
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    if zt.z[zt["set"].eq("M")].notna().any():
        zt["|z|"] = zt.z.abs().clip(lower=1e-3)
        sns.ecdfplot(data=zt, x="|z|", hue="set", palette={"M": plots.GROUP_COLORS["M"], "clean": plots.GROUP_COLORS["C"]},
                     log_scale=True, ax=axes[0])
        axes[0].axvline(z_outlier, ls=":", color="k", lw=1)
        axes[0].set(title=f"{label(u)}: |z| of heuristic units", ylabel="share of (example, unit) pairs")
        pos = pd.DataFrame({"M": result.null[u].median_abs_z_by_position_M, "clean": result.clean_by_position[u]})
        pos.index.name = "answer position"
        pos.plot(marker="o", ax=axes[1], color=[plots.GROUP_COLORS["M"], plots.GROUP_COLORS["C"]])
        axes[1].set(ylabel="median |z|", title="median |z| per answer position", xticks=range(len(pos)))
    else:
        for ax in axes:
            plots.missing(ax, f"{label(u)}: no memorized examples")
            ax.set_axis_off()
    plt.tight_layout()
    return fig


def z_null_figure(build: Build, result: Outliers):
    """Left: median |z| on M, on the null and on clean examples, one point per seed, with the
    threshold over the null; right (first seed): the median per answer position."""
    null_name = "null: never-trained noisy labels"
    zrows = pd.DataFrame([{"condition": where(u.task, u.condition), "seed": u.seed, "set": name, "median |z|": value}
                          for u in build.units for name, value in (("M", result.comparison[u].median_abs_z_M),
                                                                   (null_name, result.null[u].median_abs_z_null),
                                                                   ("clean", result.comparison[u].median_abs_z_clean))])
    palette = {"M": plots.GROUP_COLORS["M"], null_name: plots.GROUP_COLORS["control"], "clean": plots.GROUP_COLORS["C"]}
    fig, axes = plt.subplots(1, 1 + len(build.shown), figsize=(5.5 * (1 + len(build.shown)), 3.8), squeeze=False)
    axes = axes[0]
    if zrows["median |z|"].notna().any():
        _strip(axes[0], zrows, "median |z|", "set", palette, zrows.set.str.startswith("null"), T["z_ratio_min"], "null", 0,
               s=400, fontsize=7)
        axes[0].set(title="median |z| at memorized digits, each seed")
    else:
        plots.missing(axes[0], "no memorized examples")
    for ax, u in zip(axes[1:], build.shown):
        pos = pd.DataFrame({"M": result.null[u].median_abs_z_by_position_M,
                            null_name: result.null[u].median_abs_z_by_position_null, "clean": result.clean_by_position[u]})
        pos.index = [f"{9 + j}" for j in range(len(pos))]
        pos.plot(marker="o", ax=ax, color=[palette[c] for c in pos.columns])
        ax.axvspan(-0.3, 0.3, color="0.9", zorder=0)
        ax.text(0, ax.get_ylim()[1], "no noisy prefix", fontsize=7, ha="center", va="top")
        ax.set(xlabel="sequence position (9: the =)", ylabel="median |z|", title=f"{label(u)}: per position")
    plt.tight_layout()
    return fig


Z_NULL_READINGS = ("so memorized examples are further out than a never-trained noisy label puts them, by the required "
                   "factor, on every seed", "so a never-trained noisy label puts examples at least as far out as "
                   "memorization does, on every seed", "so M is further out than the null, but not by the required "
                   "factor on any seed", "so M is out by the required factor on {ok} of {n} seeds only")


def z_null_text(groups_: dict, comparison: dict, null: dict, sizes: dict) -> str:
    """Per condition, |z| on M, the null and clean examples (generated: on how many seeds M clears the null)."""
    def line(members) -> str:
        if not any(sizes[u]["M"] for u in members):
            return "no memorized examples; the null does not apply."
        n, ratios = len(members), [null[u].z_null_ratio for u in members]
        ok, below_one = (sum(measured(r) and f(r) for r in ratios) for f in (lambda r: r >= T["z_ratio_min"], lambda r: r < 1))
        prefix_part = sum(measured(c) and measured(r) and c > r for c, r in zip([comparison[u].z_ratio for u in members], ratios))
        reading = Z_NULL_READINGS[0 if ok == n else 1 if below_one == n else 2 if ok == 0 else 3].format(ok=ok, n=n) + (
            f"; the ratio over clean examples is the larger one on {prefix_part} of {n} seeds, so that part of it comes "
            "from the noisy prefix, not from memorization" if prefix_part else "")
        return (f"median |z| at memorized digits {each_seed(comparison, members, 'median_abs_z_M')} on M, "
                f"{each_seed(null, members, 'median_abs_z_null')} on the null and "
                f"{each_seed(comparison, members, 'median_abs_z_clean')} on clean examples: M over null "
                f"{each_seed(null, members, 'z_null_ratio')} (threshold {T['z_ratio_min']:g}), against "
                f"{each_seed(comparison, members, 'z_ratio')} over clean; {reading}. At position 9 alone, where "
                f"neither set has a noisy prefix, M over null is {each_seed(null, members, 'z_null_ratio_position9')}; "
                f"after it, {each_seed(null, members, 'z_null_ratio_after_position9')}.")

    return _bullets("One number per seed:", groups_, line)


def heatmap_figure(build: Build, u, hmaps: dict, result: Outliers, n_heatmaps: int, z_outlier: float):
    """Heuristic units on a memorized digit of one memorized example each, over the operand grid around
    it, the example in the framed centre cell; top row the largest |z|, bottom row typical outliers."""
    run = build.runs[u]
    picks = {kind: outlier_analysis.example_outliers(result.stats[u]["M"], hmaps[u], k=n_heatmaps, kind=kind, z_min=z_outlier)
             for kind in ("strongest", "typical")}
    fig, axes = plt.subplots(2, n_heatmaps, figsize=(3.7 * n_heatmaps, 7.4), squeeze=False)
    for ax_row, (kind, top) in zip(axes, picks.items()):
        for ax in ax_row[len(top):]:
            if top.empty:
                plots.missing(ax, "no memorized examples")
            ax.set_axis_off()
        for ax, row in zip(ax_row, top.itertuples()):
            example, r = result.sets[u]["M"][row.example:row.example + 1], outlier_analysis.RADIUS
            grid = outlier_analysis.operand_neighbourhood(run.model, example, row.layer, row.position, [row.neuron],
                                                          run.data.meta["answer_order"])[0]
            sns.heatmap(grid, ax=ax, cmap="viridis", square=True, xticklabels=False, yticklabels=False)
            ax.add_patch(plt.Rectangle((r, r), 1, 1, fill=False, ec=plots.GROUP_COLORS["M"], lw=2.5))
            a, b = (int(example.info[k][0]) for k in "ab")
            ax.set_title(f"{kind}: L{row.layer} pos {row.position} n{row.neuron} [{row.feature}]\n"
                         f"{a}+{b}: {row.act:.2f} vs {row.expected:.2f}, z={row.z:.1f}", fontsize=8)
            ax.set(xlabel=f"b + db, db = -{r}..{r}", ylabel=f"a + da, da = -{r}..{r}")
    fig.suptitle(label(u))
    plt.tight_layout()
    return fig


# -- patching -------------------------------------------------------------------------------------------
def patching(build: Build, hmaps: dict, result: Outliers, z_outlier: float, n_controls: int) -> dict:
    """Per unit and layer: the share of M reverted and recovered when the layer's outlier heuristics,
    all its heuristic units, or the whole layer are patched to clean-neighbour means, with random controls."""
    settings = neuron_patching.LayerPatchSettings(z_min=z_outlier, n_controls=n_controls)
    return {u: neuron_patching.layer_patching(run.model, build.sets[u]["M"], result.stats[u]["M"], hmaps[u], settings)
            for u, run in build.runs.items()}


def patching_figure(u, table: pd.DataFrame):
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    if table[["reverted", "recovered"]].notna().any(axis=None):
        for ax, metric in zip(axes, ("reverted", "recovered")):
            sns.lineplot(data=table, x="layer", y=metric, hue="units", style="control", markers=True, ax=ax,
                         hue_order=["outliers", "heuristics", "all"], style_order=[False, True])
            ax.set(ylim=(-0.02, 1.02), xticks=sorted(table.layer.unique()), ylabel=f"share of M {metric}")
        axes[0].axhline(T["patch_revert_min"], ls=":", color="k", lw=1)
        axes[0].axhline(T["control_revert_max"], ls=":", color="grey", lw=1)
    else:
        for ax in axes:
            plots.missing(ax, "no memorized examples")
    fig.suptitle(f"{label(u)}: patching MLP units to clean-neighbour means")
    plt.tight_layout()
    return fig


def registered_reverts(hmaps: dict, patched: dict) -> dict:
    """Per unit: the share of M the registered outlier set of the last layer reverts."""
    return {u: neuron_patching.patching_summary(table, _last(hmaps[u])).patch_revert_last for u, table in patched.items()}


def patching_table(u, table: pd.DataFrame):
    return table.style.set_caption(label(u)) if len(table) else table


@dataclass(frozen=True)
class Dose:
    """Per unit: 7.7's dose-response table of the last layer (``curves``) and its :class:`DoseSummary`."""

    curves: dict
    last: dict[object, DoseSummary]

    def table(self, build: Build, n_dose: int) -> pd.DataFrame:
        keys = ("m50", "top_revert_m50", "random_revert_m50", "mismatched_revert_m50", "top_revert_max")
        return pd.DataFrame({label(u): {"memorized examples patched": min(n_dose, len(build.sets[u]["M"])),
                                        **{k: getattr(self.last[u], k) for k in keys}} for u in build.units})


def dose(build: Build, hmaps: dict, result: Outliers, n_controls: int, n_dose: int) -> Dose:
    settings = neuron_patching.DoseSettings(T["m_grid"], n_controls=n_controls, max_examples=n_dose)
    curves = {u: neuron_patching.dose_response(run.model, build.sets[u]["M"], result.stats[u]["M"], [_last(hmaps[u])],
                                               settings) for u, run in build.runs.items()}
    return Dose(curves, {u: neuron_patching.dose_summary(curves[u], _last(hmaps[u]), T["patch_revert_min"])
                         for u in build.units})


def _dose_panels(build: Build, curves: dict, m50: dict, *, at: str, ylabel: str, title: str, empty: str,
                 nan_curves: bool):
    """Share of M reverted against m, one panel per noise condition, one line per seed and curve (top,
    random, mismatched m; the first seed opaque), each seed's m50 dotted. ``curves``: unit -> its dose
    table; ``at``: what m counts (the x label); ``nan_curves``: whether a curve without any value is
    drawn (and counts as drawn; a panel without any value draws none: a log axis of NaN alone raises)."""
    groups_ = build.groups
    fig, axes = plt.subplots(1, len(groups_), figsize=(6.5 * len(groups_), 4), squeeze=False, sharey=True)
    for ax, ((task, condition), members) in zip(axes[0], groups_.items()):
        drawn, any_value = False, any(len(curves[u]) and curves[u].reverted.notna().any() for u in members)
        for k, u in enumerate(members):
            t = curves[u]
            for units_name, color in CURVE_COLORS.items():
                c = t[t.units == units_name] if len(t) else t
                if any_value and len(c) and (nan_curves or c.reverted.notna().any()):
                    drawn = True
                    ax.plot(c.m, c.reverted, marker="o", ms=4, color=color, alpha=1.0 if k == 0 else 0.55,
                            ls="-" if units_name == "top" else "--", label=f"{units_name} m" if k == 0 else None)
            if m50[u] is not None:
                ax.axvline(m50[u], color=CURVE_COLORS["top"], lw=0.8, ls=":")
        ax.axhline(T["patch_revert_min"], ls=":", color="k", lw=1)
        ax.axhline(T["control_revert_max"], ls=":", color="grey", lw=1)
        ax.set_xscale("log")
        ax.set(xticks=list(T["m_grid"]), xticklabels=[str(m) for m in T["m_grid"]], ylim=(-0.02, 1.02),
               xlabel=f"m ({at} per example, last layer)", ylabel=ylabel, title=f"{where(task, condition)}: {title}")
        if drawn:
            ax.legend(fontsize=8, title="each seed a line")
        else:
            plots.missing(ax, empty)
    plt.tight_layout()
    return fig


def dose_figure(build: Build, result: Dose):
    """7.7's dose-response: the share of M reverted against m, one panel per condition, a line per seed
    (:func:`dose` computes the last layer only)."""
    return _dose_panels(build, result.curves, {u: result.last[u].m50 for u in build.units}, at="neurons",
                        ylabel="share of M reverted", title="top-m against random and mismatched m",
                        empty="no memorized examples", nan_curves=True)


def _dose_part(seed: int, d: DoseSummary) -> str:
    """One seed's m50 and reverts there (generated: whether m50 exists and the controls stay under the line)."""
    if d.m50 is None:
        return (f"seed {seed}: no m up to {max(T['m_grid'])} reverts {T['patch_revert_min']} of M (at most "
                f"{values([d.top_revert_max], '.3g')}), so the specificity check fails")
    specific = d.random_revert_m50 < T["control_revert_max"] and d.mismatched_revert_m50 < T["control_revert_max"]
    why = ("both controls stay under the line, so it is each example's own outliers that carry its memorized label"
           if specific else "a control reverts too much, so the effect is not specific to the example's own outliers"
           if measured(d.mismatched_revert_m50) else "the mismatched control needs a second memorized example")
    return (f"seed {seed}: m50 = {d.m50} (top m reverts {values([d.top_revert_m50], '.3g')}; random m "
            f"{values([d.random_revert_m50], '.3g')}, mismatched m {values([d.mismatched_revert_m50], '.3g')}): {why}")


def dose_text(groups_: dict, dose_last: dict, registered_revert: dict, sizes: dict) -> str:
    """Per seed, m50 and the reverts there (generated: whether both controls stay under their line)."""
    def line(members) -> str:
        if not any(sizes[u]["M"] for u in members):
            return "no memorized examples; there is nothing to patch."
        return ("; ".join(_dose_part(u.seed, dose_last[u]) for u in members) + ". (The registered outlier set reverts "
                f"{per_seed([registered_revert[u] for u in members], [u.seed for u in members], '.3g')}.)")

    return _bullets("Last layer, per seed:", groups_, line)


# -- amendment 2, 8.4: memorization at the first differing digit j* ----------------------------------------
JSTAR_ROWS = {"table": ("jstar_n_M", "jstar_n_without", "jstar_counts", "jstar_z_M", "jstar_z_clean", "jstar_z_ratio",
                        "jstar_median_z_M", "jstar_median_z_clean", "jstar_median_z_ratio", "jstar_pattern_corr_M"),
              "dose_table": ("jstar_n", "jstar_units_min", "jstar_units_max", "jstar_m50", "jstar_top_revert_m50",
                             "jstar_random_revert_m50", "jstar_mismatched_revert_m50", "jstar_short_m50",
                             "jstar_recovered_m50", "jstar_top_revert_max"),
              "after_table": ("after_jstar_n_M", "after_jstar_n_null", "after_jstar_z_M", "after_jstar_z_null",
                              "after_jstar_z_ratio_null", "after_jstar_max_z_ratio_null")}  # the rows of each table


def _jstar_numbers(comparison, after, summary) -> dict:
    """The numbers at and after j* by their names (for tables and prose)."""
    return {**vars(comparison), **vars(after), **{f"jstar_{k}": v for k, v in vars(summary).items()}}


@dataclass(frozen=True)
class Jstar:
    """Per unit: :func:`rote.analysis.neuron_patching.jstar_analysis`; each table one column per unit."""

    out: dict[object, JstarAnalysis]

    def rows(self, units, table: str) -> pd.DataFrame:
        return pd.DataFrame({label(u): {k: _jstar_numbers(o.comparison, o.after, o.summary)[k] for k in JSTAR_ROWS[table]}
                             for u, o in ((u, self.out[u]) for u in units)})


def jstar(build: Build, hmaps: dict, result: Outliers, cut_result: Cut, n_controls: int, n_dose: int) -> Jstar:
    settings = neuron_patching.DoseSettings(T["m_grid"], n_controls=n_controls, max_examples=n_dose,
                                            revert_min=T["patch_revert_min"])
    return Jstar({u: neuron_patching.jstar_analysis(run.model, result.sets[u], result.stats[u], cut_result.maps[u],
                                                    _last(hmaps[u]), settings) for u, run in build.runs.items()})


def jstar_figure(build: Build, result: Jstar):
    """Left: the median of the largest |z| at j* on M and on clean examples, one point per seed, with
    the line M must reach; right: where j* falls (first seed)."""
    zj = pd.DataFrame([{"condition": where(u.task, u.condition), "seed": u.seed, "set": name,
                        "median": getattr(result.out[u].comparison, key)}
                       for u in build.units for name, key in (("M, largest |z| at j*", "jstar_z_M"),
                                                              ("clean, same positions", "jstar_z_clean"))])
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    if zj["median"].notna().any():
        _strip(axes[0], zj, "median", "set", [plots.GROUP_COLORS["M"], plots.GROUP_COLORS["C"]],
               zj.set.str.startswith("clean"), T["z_ratio_min"], "clean", -0.2, fontsize=7)
    else:
        plots.missing(axes[0], "no memorized example with a j*")
    axes[0].set(xlabel="", ylabel="median of the largest |z| at j*", title="8.4: outliers at j*, each seed")
    counts = pd.DataFrame([{"j*": f"{9 + j}", "examples": c, "run": label(u)} for u in build.shown
                           for j, c in result.out[u].comparison.jstar_counts.items()], columns=["j*", "examples", "run"])
    if len(counts):
        sns.barplot(data=counts, x="j*", y="examples", hue="run", ax=axes[1])
    else:
        plots.missing(axes[1], "no memorized example with a j*")
    axes[1].set(xlabel="sequence position of j* (9: the =)", ylabel="memorized examples", title="where j* falls")
    plt.tight_layout()
    return fig


def jstar_dose_figure(build: Build, result: Jstar):
    """8.4's specificity: the share of M reverted at j* against m (each example's top m of the 8.3 units of
    the last layer at its j*, 8.5; only the m that enough units allow), one panel per condition, a line per seed."""
    return _dose_panels(build, {u: o.dose for u, o in result.out.items()},
                        {u: result.out[u].summary.m50 for u in build.units}, at="8.3 units at j*",
                        ylabel="share of M reverted at j*", title="patched at j* only",
                        empty="no memorized example with a j*", nan_curves=False)


def after_jstar_figure(build: Build, result: Jstar):
    """After j*, M against the never-trained null: the share whose predictions change when each
    example's top m (and m random) neurons are patched, one panel per condition, a line per seed."""
    groups_ = build.groups
    fig, axes = plt.subplots(1, len(groups_), figsize=(6.5 * len(groups_), 4), squeeze=False, sharey=True)
    styles = {"after_jstar_patch_revert": ("M, top m", "-", plots.GROUP_COLORS["M"]),
              "after_jstar_random_patch_revert": ("M, random m", "-", plots.GROUP_COLORS["control"]),
              "after_jstar_null_patch_revert": ("null, top m", "--", plots.GROUP_COLORS["M"]),
              "after_jstar_null_random_patch_revert": ("null, random m", "--", plots.GROUP_COLORS["control"])}
    for ax, ((task, condition), members) in zip(axes[0], groups_.items()):
        for k, u in enumerate(members):
            m = result.out[u].curves
            for key, (name, ls, color) in styles.items():
                ax.plot(m.after_jstar_m, getattr(m, key), marker="o", ms=3, ls=ls, color=color,
                        alpha=1.0 if k == 0 else 0.55, label=name if k == 0 else None)
        ax.set_xscale("log")
        ax.set(xticks=list(T["m_grid"]), xticklabels=[str(m) for m in T["m_grid"]], ylim=(-0.02, 1.02),
               xlabel="m (neurons per example, last layer, after j*)", ylabel="share whose predictions change",
               title=f"{where(task, condition)}: after j*, M against the null")
        ax.legend(fontsize=8)
        if not any(pd.notna(getattr(result.out[u].curves, key)).any() for u in members for key in styles):
            plots.missing(ax, "no share after j*: no memorized example reaches past j*")
    plt.tight_layout()
    return fig


JSTAR_LINE = (
    "{jstar_n_M} memorized examples have a j* ({jstar_n_without} have none and are left out). At j*, the "
    "median of each example's largest |z| is {jstar_z_M} on M against {jstar_z_clean} on clean examples (ratio "
    "{jstar_z_ratio}); the median over all heuristic units gives the ratio {jstar_median_z_ratio}; the pattern "
    "correlation at j* over the 8.3 units is {jstar_pattern_corr_M}. Ranking and patching each example's 8.3 units of "
    "the last layer at its j* (from {jstar_units_min} to {jstar_units_max} units at an example's j*; every m of the grid "
    "up to the most is tried, each example capped at its own units, and once all of them) gives m50 = {jstar_m50} (top "
    "m reverts {jstar_top_revert_m50}, m random 8.3 units outside the top m {jstar_random_revert_m50}, mismatched m "
    "{jstar_mismatched_revert_m50}; the true digit comes back in {jstar_recovered_m50}; the largest revert over the "
    "doses is {jstar_top_revert_max}).{short} After j* (shown, not judged, every neuron of the last layer), median |z| "
    "on M over the never-trained null is {after_jstar_z_ratio_null}.{no_units}")


def jstar_text(groups_: dict, metrics: dict, sizes: dict) -> str:
    """Per condition, the numbers at and after j* (generated: which seeds have no j*, no unit at j*, or
    too few units for the controls)."""
    def line(members) -> str:
        n = {u: _jstar_numbers(metrics[u].jstar, metrics[u].after, metrics[u].jdose) for u in members}
        if not any(n[u]["jstar_n_M"] for u in members):
            return ("no memorized examples" if not any(sizes[u]["M"] for u in members) else "no memorized example "
                    "has a digit that differs from the true sum") + ", so nothing can be read at j*."
        s = {k: values([n[u][k] for u in members], ".3g") for k, v in n[members[0]].items()
             if v is None or isinstance(v, (int, float))}
        no_units = [str(u.seed) for u in members if n[u]["jstar_n_M"] and not measured(n[u]["jstar_z_clean"])]
        short = [f"seed {u.seed}: {n[u]['jstar_short_m50']}" for u in members if n[u]["jstar_short_m50"]]
        return JSTAR_LINE.format(**s, short=(
            " Memorized examples with fewer than m50 units outside their top m50, from which the controls draw: "
            f"{'; '.join(short)}, so the controls are unresolved there." if short else ""), no_units=(
            f" No heuristic unit under the cut sits at the j* positions of seed {', '.join(no_units)}, so |z| at j* is not "
            "measured there." if no_units else ""))

    return _bullets(CHECKS_HEAD, groups_, line)


# -- the claim's metrics and checks ----------------------------------------------------------------------
@dataclass(frozen=True)
class C5Sections:
    """The sections' results, each per unit, that :func:`evaluate` reads."""

    hmaps: dict
    untrained: dict
    cut: Cut
    outliers: Outliers
    patched: dict
    dose: Dose
    jstar: Jstar

    def __post_init__(self):
        for name, per_unit in (("untrained", self.untrained), ("cut", self.cut.shares), ("outliers", self.outliers.null),
                               ("patched", self.patched), ("dose", self.dose.last), ("jstar", self.jstar.out)):
            if set(per_unit) != set(self.hmaps):
                raise ValueError(f"C5Sections: the {name} section covers other units than the heuristic maps")


def evaluate(build: Build, s: C5Sections) -> ClaimResult:
    """Per unit, C5's metrics (each analysis's own result, nested) and its checks."""
    metrics = {}
    for u in build.units:
        o = s.jstar.out[u]
        metrics[u] = verdicts.c5.C5Metrics(
            len(build.sets[u]["M"]), heuristics.shares(s.hmaps[u], s.untrained[u]), s.outliers.null[u], s.dose.last[u],
            s.outliers.comparison[u], s.outliers.direction[u],
            neuron_patching.patching_summary(s.patched[u], _last(s.hmaps[u])), s.cut.shares[u], o.comparison, o.after,
            o.summary, o.curves)
    return ClaimResult(SPEC.id, metrics, {u: verdicts.c5.checks(m)[1] for u, m in metrics.items()})


LAST_LAYER_KEYS = ["patch_revert_last", "control_revert_last", "patch_recover_last", "heuristics_revert_last",
                   "heuristics_control_revert_last", "layer_revert_last", "layer_recover_last"]


def last_layer_table(units: list, claim: ClaimResult) -> pd.DataFrame:
    """Section 5's patching of the last layer, one column per unit."""
    return pd.DataFrame({label(u): {k: getattr(claim.metrics[u].patch, k) for k in LAST_LAYER_KEYS} for u in units}).round(3)


def top_kinds(hmap) -> str:
    """The two most frequent kinds of best feature per layer: ``layer 0: sum 40%, carry 12%; ...``."""
    per = hmap.per_layer()
    if not len(per):
        return "no layer has heuristic units"
    return "; ".join(f"layer {layer}: " + ", ".join(f"{row.kind} {row.fraction:.0%}" for row in
                                                    g.sort_values("fraction", ascending=False).head(2).itertuples())
                     for layer, g in per.groupby("layer"))


REG_NUMBERS = {"share": ("shares", "heuristic_fraction"), "pattern": ("z", "pattern_corr_M"),
               "pattern_clean": ("z", "pattern_corr_clean"), "z": ("z", "z_ratio"), "z_all": ("z", "z_ratio_all_positions"),
               "shift": ("shift", "shift_toward_noisy"), "patch": ("patch", "patch_revert_last"),
               "control": ("patch", "control_revert_last"), "layer": ("patch", "layer_revert_last"),
               "layer_recover": ("patch", "layer_recover_last")}  # the registered reading's numbers: (group, field)
REG_READINGS = {  # generated: the words each number's check chooses (c5_reg_<number>_reading)
    "share": ("c5.share.registered", "so heuristics in Nikankin et al.'s sense make up at least the required share of "
              "the neurons", "so heuristics make up less than the required share of the neurons"),
    "pattern": ("c5.pattern", "so the heuristic pattern still holds on M", "so the heuristic pattern does not hold on M"),
    "z": ("c5.z.registered", "so memorized examples are outliers of those heuristics by the claim's measure",
          "so memorized examples are less far out than the claim requires"),
    "control": ("c5.patch.random.registered", "so the effect is specific to the outliers", "so the control does not "
                "rule out that any disturbance of that many units of the layer reverts M")}


def registered_values(groups_: dict, claim: ClaimResult, hmaps: dict) -> dict:
    """The registered reading's numbers and readings (``c5_reg_*``, glued for the Verdict section's markdown),
    each as ``FDA, random noise: ...; FDA, digit noise: ...``, one number per seed."""
    m, checks = claim.metrics, claim.checks

    def get(name: str, members) -> list:
        return [getattr(getattr(m[u], REG_NUMBERS[name][0]), REG_NUMBERS[name][1]) for u in members]

    def side(members) -> str:  # generated: where the shifts lie against chance
        sides = [chance_side(m[u].shift.shift_toward_noisy, m[u].shift.n_shifts) for u in members]
        return sides[0] if len(set(sides)) == 1 else ", ".join(f"seed {u.seed}: {x}" for u, x in zip(members, sides))

    parts = {name: lambda ms, name=name: values(get(name, ms), ".3g") for name in REG_NUMBERS}
    parts.update({f"{name}_reading": lambda ms, name=name, r=r: choose_by([checks[u] for u in ms], *r, get(name, ms))
                  for name, r in REG_READINGS.items()})
    parts.update(shift_side=side, seeds=lambda ms: f"{seeds_head([u.seed for u in ms], plural=True)}, |M| = "
                                                   f"{values([m[u].n_memorized for u in ms], 'd')}",
                 share_layers=lambda ms: " / ".join("[" + ", ".join(values([v]) for v in m[u].shares.heuristic_fraction_per_layer)
                                                    + "]" for u in ms),
                 kinds=lambda ms: f"seed {ms[0].seed}, {top_kinds(hmaps[ms[0]])}",
                 not_passed=lambda ms: registered_not_passed({u.seed: checks[u] for u in ms}, key="name"))
    sep = {"not_passed": " "}  # whole sentences, one per condition; the rest: values in one sentence
    return {f"c5_reg_{k}": sep.get(k, "; ").join(f"{where(t, c)}: {fn(ms)}" for (t, c), ms in groups_.items())
            for k, fn in parts.items()}


AMENDED_IDS = ["c5.share", "c5.share.null", "c5.z", "c5.pattern.jstar", "c5.specificity",
               "c5.specificity.random", "c5.specificity.mismatched"]


def amended_notes(units: list, claim: ClaimResult) -> str:
    """Why an amended check is unresolved or fails by construction, per unit (generated: which seeds)."""
    notes = []
    for u in units:
        m, d = claim.metrics[u], claim.metrics[u].jdose
        found = [f"no unit of layer {', '.join(str(x) for x in m.cut.cut_empty_layers)} exceeds the 8.3 cut"
                 if m.cut.cut_empty_layers else "",
                 ("no memorized examples" if not m.n_memorized else "no memorized example with a differing digit")
                 + ", so the j* checks are unresolved" if not m.jstar.jstar_n_M else "",
                 _no_m50(d) if m.jstar.jstar_n_M and d.m50 is None else "",
                 f"at m50 = {d.m50}, {d.short_m50} memorized examples hold fewer than {d.m50} 8.3 units "
                 "outside their own top m50, so both controls are unresolved (8.6)" if d.short_m50 else ""]
        if any(found):
            notes.append(f"- **{label(u)}**: " + "; ".join(n for n in found if n))
    return ("**What this build shows, amended reading** (amendment 2; value against threshold, per seed):"
            + ("\n\n" + "\n".join(notes) if notes else ""))


def _no_m50(d) -> str:
    """Why m50 at j* does not exist (``d``: a unit's JstarDose): nothing to patch, or no dose reverts half of M."""
    if not d.m_tried:
        return ("no memorized example holds an 8.3 unit of the last layer at its j*, so there is nothing to patch and "
                "the specificity check is unresolved")
    return (f"no dose reverts {T['patch_revert_min']} of M at j*, up to all the 8.3 units of the last layer each example "
            f"holds there (at most {d.units_max}), so m50 does not exist and the specificity check fails (8.6)")


def amended_table(units: list, evaluations: dict) -> pd.DataFrame:
    """The amended reading's checks, value against threshold and outcome, one column per seed."""
    rows = {}
    for u in units:
        for cid in AMENDED_IDS:
            c = verdicts.find(evaluations[u][1], cid)
            rows.setdefault((where(u.task, u.condition), cid, c.name if c is not None else ""), {})[f"seed {u.seed}"] = \
                versus(c)
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(["condition", "check", "name"])


def results(build: Build, claim: ClaimResult) -> list[dict]:
    """Each unit's seed result for the record."""
    return [verdicts.seed_result(u, claim.metrics[u], claim.checks[u], configs=[u.noisy]) for u in build.units]

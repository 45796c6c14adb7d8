"""Chapter 03, claim C2: intermediate results survive memorization.

One call per section (:func:`load`, :func:`probes`, :func:`bridge`, :func:`masked_tail`, :func:`lens_race`,
:func:`lens_prior`, :func:`worked_examples`), each with its figure; :func:`evaluate` judges them once (the
only caller of :mod:`rote.verdicts.c2`) and the ``*_text`` paragraphs read its result."""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
import torch

from .. import analysis_cache, plots, verdicts
from ..analysis import intervals, lens, probes as probe_analysis, targets
from ..analysis.sets import correct, memorized
from ..report import label, layers_text, num, ratio, reach, seeds_head, values, where
from ..settings import Settings
from ..specs.c2 import SPEC
from . import Build, book_units, noisy_runs, ClaimResult, glue_thresholds_of
from .params import ClaimParams, param, positions_by_task, whole

T = SPEC.values()  # the thresholds in force


@dataclass(frozen=True)
class Params(ClaimParams):
    """The chapter's parameters (its notebook's ``parameters`` cell), checked before anything trains."""

    max_probe_train: int = param(3000, whole(1), "clean training examples each probe is fitted on")
    probe_seed: int = param(0, whole(0))
    # per task, extra positions of the prompt ("1234+5678=", "h r1 r2") at which every target is probed
    extra_positions: dict = param(targets.EXTRA_PROBE_POSITIONS, positions_by_task({"fda": targets.FDA_PROMPT_LEN,
                                                                    "thr": targets.THR_LAST + 1}))
    mask_seed: int = param(0, whole(0))


def glue_thresholds() -> None:
    """The thresholds the chapter's method text quotes."""
    glue_thresholds_of(SPEC, lambda T: {
        "c2_probe_ratio": T["probe_ratio_min"], "c2_over_chance": T["probe_over_chance_min"],
        "c2_level_pct": 100 * T["lens_interval_level"], "c2_interval_pct": 100 * intervals.LEVEL})


def load(profile: str, tasks, seeds, overrides, settings: Settings = Settings()) -> Build:
    """Every unit's noisy run, with M (memorized noisy training examples) and C (correct test examples).
    Seeds torch's generator first, as the analyses after it draw from it."""
    torch.manual_seed(0)
    units = book_units(profile, tasks, seeds, overrides, settings)  # seeds None: the book's
    runs = noisy_runs(units, settings)
    sets = {u: {"M": memorized(r.model, r.data), "C": correct(r.model, r.data.test)} for u, r in runs.items()}
    return Build(profile, units, runs, sets, settings)


# -- probes ---------------------------------------------------------------------------------------
@dataclass
class Probes:
    """Per unit: every probe's accuracy by layer and set (``sweeps``), the result groups by layer
    (``curves``), each at its best layer on M (``summary``) and the cached sweep (``full``)."""

    sweeps: dict
    curves: dict
    summary: dict
    full: dict | None = None

    def summary_table(self, units) -> pd.DataFrame:
        return pd.concat([self.summary[u].assign(run=label(u)) for u in units]).set_index(["run", "group"]).round(3)

    def every_layer(self, units) -> pd.DataFrame:
        every = pd.concat([self.sweeps[u].assign(run=label(u)) for u in units])
        return every.pivot_table(index=["run", "target", "position", "set"], columns="layer", values="accuracy").round(2)


def probes(build: Build, extra_positions: dict, max_train: int, seed: int) -> Probes:
    """Probes fitted on clean training examples, read on M and C at every layer and position (the cached
    sweep chapters 04 and 05 take their erasure sites from, 8.6), each group at its best layer on M."""
    settings = probe_analysis.ProbeSettings(max_train=max_train, seed=seed)
    positions = {u: list(targets.probe_positions(u.task, extra_positions)) for u in build.units}
    full = {u: analysis_cache.probe_sweep_cached(r, positions=positions[u], settings=settings,
                                                     root=build.settings.analysis)
            for u, r in build.runs.items()}
    for u, r in build.runs.items():  # where chapters 04 and 05 read their erasure sites (8.6), -p included
        analysis_cache.record_probe_choice(r, positions=positions[u], settings=settings, root=build.settings.analysis)
    sweeps = {u: full[u].table for u in build.units}
    curves = {u: probe_analysis.group_curves(sweeps[u], u.task) for u in build.units}
    summary = {u: probe_analysis.with_ratio_intervals(probe_analysis.best_layer_summary(curves[u]), full[u],
                                                      targets.headline_targets(u.task)) for u in build.units}
    return Probes(sweeps, curves, summary, full)


def probes_figure(shown: list, result: Probes):
    """Probe accuracy by layer on M and C, with chance, one panel per result group (first seed)."""
    curves = result.curves
    ncols = max([curves[u].group.nunique() for u in shown] + [1])
    fig, axes = plt.subplots(len(shown), ncols, figsize=(3.4 * ncols, 3.2 * len(shown)), sharey=True, squeeze=False)
    for row, u in zip(axes, shown):
        names = list(curves[u].group.unique())
        for ax in row[max(1, len(names)):]:
            ax.set_visible(False)
        if not names:
            plots.missing(row[0], f"{label(u)}: no probe result")
        for ax, g in zip(row, names):
            part = curves[u][curves[u].group == g]
            if part.accuracy.notna().any():
                sns.lineplot(data=part, x="layer", y="accuracy", hue="set", palette=plots.GROUP_COLORS, marker="o", ax=ax)
                for name, chance in part.groupby("set"):
                    ax.plot(chance.layer, chance.chance, ls="--", lw=1, color=plots.GROUP_COLORS[name],
                            label=f"chance ({name})")
                ax.legend(fontsize=8)
            else:
                plots.missing(ax, "no examples")
            ax.set(title=f"{label(u)}: {g}", ylim=(-0.02, 1.02), xlabel="layer")
            ax.xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle("Linear probe accuracy by layer: memorized (M) vs clean correct (C)")
    fig.tight_layout()
    return fig


def out_of_reach(reachable, seeds) -> str:
    """A sentence naming the seeds where C itself is below the chance threshold (``reachable``: per seed,
    :attr:`rote.verdicts.c2.C2Metrics.reachable`); empty when there is none. Generated: which seeds."""
    hit = [str(s) for s, ok in zip(seeds, reachable) if ok is False]
    if not hit:
        return ""
    return (f" On seed{'s' if len(hit) > 1 else ''} {', '.join(hit)} the accuracy on C, even at C's own best layer, is "
            f"itself below its chance threshold on C (12.1: min({T['probe_over_chance_min']:g} x chance, half-way "
            "to 1), chance measured on C, 8.6): a model that "
            "carried this result on M exactly as on C would fail the check too, so failing it there says nothing "
            "about the claim. The registered reading counts it "
            "as written; the amended reading (8.2) leaves it unresolved there: the seed can neither pass "
            "nor fail on it.")


def probes_text(groups_: dict, result: Probes, claim: ClaimResult) -> str:
    """Per task, condition and result group, one line (:func:`probe_sentence`), and for THR the bridge read
    at the last position. Generated: one line per group, each naming its seeds."""
    lines = []
    for (task, condition), members in groups_.items():
        for g in result.summary[members[0]].group:
            rows = [result.summary[u].set_index("group").loc[g] for u in members]
            reachable = [claim.metrics[u].reachable.get(g.replace(" ", "_")) for u in members]
            replaced = task == "thr" and g in verdicts.c2.C2_SUPERSEDED  # judged differently by amendment 7.4
            lines.append(f"- **{where(task, condition)}, {g}** ({seeds_head([u.seed for u in members])}): "
                         + probe_sentence(rows, "", [u.seed for u in members], reachable, ". ")
                         + capped_sentence([claim.checks[u] for u in members], g.replace(" ", "_"))
                         + (f" This is the registered check, superseded by amendment 7.4 "
                            f"({verdicts.c2.C2_SUPERSEDED[g][1]})." if replaced else ""))
        if task == "thr":
            lines.append("- **THR, bridge at the last position** (amendment 7.4 judges it here; see the next section): "
                         "read best on M with " + "; ".join(_bridge_last(u, result.sweeps[u]) for u in members) + ".")
    return "\n".join(lines)


def capped_sentence(checks_by_seed: list, key: str) -> str:
    """Where 12.1 moved a read's chance threshold on some seed: its threshold and on how many seeds M reaches
    it (empty where nothing moved). Generated: the thresholds and the count, from the checks."""
    capped = [verdicts.find(checks, f"c2.probe.{key}.chance.capped") for checks in checks_by_seed]
    moved = [c for c in capped if c is not None]
    if not moved:
        return ""
    return (f" Amendment 3 (12.1) caps the chance threshold at half-way from chance to a perfect probe (a pooled "
            f"read: the mean of its targets' thresholds): {values([verdicts.numeric(c.threshold) for c in moved])} on "
            f"the {len(moved)} seed{'s' if len(moved) > 1 else ''} where it moves it, reached by M on "
            f"{sum(c.passed is True for c in moved)}.")


def _bridge_last(u, sweep: pd.DataFrame) -> str:
    """The bridge read at THR's last position at its best layer on M, for one seed."""
    part = sweep[(sweep.target == "bridge") & (sweep.position == targets.THR_LAST)]
    m, c = (part[part.set == s].set_index("layer").accuracy for s in ("M", "C"))
    if not m.notna().any():
        return f"no memorized examples (seed {u.seed})"
    best = int(m.idxmax())
    return f"accuracy {num(float(m[best]))} on M (C: {num(float(c.get(best, math.nan)))}) at layer {best} (seed {u.seed})"


def probe_sentence(rows, what: str, seeds, reachable, sep: str = "; ") -> str:
    """What the seeds show for one probe read (one summary row per seed), judged as the verdict is: M over C
    and M over chance, each with how many seeds reach its threshold (a seed without memorized examples has no
    value to reach it with). Generated: how many seeds reach each threshold, which are out of reach."""
    acc_m, acc_c, chance = ([float(r[k]) for r in rows] for k in ("acc_M", "acc_C", "chance"))
    spec, without = "g" if sep == "; " else "", "without memorized examples to read"
    layers = " / ".join("n/a" if pd.isna(r["best_layer"]) else str(int(r["best_layer"])) for r in rows)
    return (f"{what}{': ' if what else ''}read best on M at layer {layers}, with accuracy {values(acc_m)} "
            f"on M against {values(acc_c)} on C and chance {values(chance, '.3f' if spec else '.2f')}. "
            f"M over C is {values([ratio(m, c) for m, c in zip(acc_m, acc_c)])} (required: at least "
            f"{T['probe_ratio_min']}): {reach(acc_m, [T['probe_ratio_min'] * c for c in acc_c], without)}{sep}"
            f"M over chance is {values([ratio(m, c) for m, c in zip(acc_m, chance)], '.1f')} (required: at least "
            f"{format(T['probe_over_chance_min'], spec)}): "
            + reach([m if m > 0 else math.nan for m in acc_m], [T['probe_over_chance_min'] * c for c in chance], without)
            + "." + out_of_reach(reachable, seeds))


# -- THR: bridge at r2, true tail masked ----------------------------------------------------------------
@dataclass
class Bridge:
    """THR's bridge probe at its best layer on M, per THR unit: at r1 (context) and at r2 (judged)."""

    units: list
    r1: dict
    r2: dict

    def table(self) -> pd.DataFrame:
        return pd.concat([pd.concat([self.r1[u].assign(position="r1"), self.r2[u].assign(position="r2")])
                          .assign(run=label(u)) for u in self.units]).set_index(["run", "position"]).round(3)


def bridge(build: Build, result: Probes) -> Bridge:
    thr = [u for u in build.units if u.task == "thr"]
    r2 = {u: probe_analysis.position_summary(result.sweeps[u], "bridge", targets.THR_LAST, "bridge at r2") for u in thr}
    if result.full is not None:
        r2 = {u: probe_analysis.with_ratio_intervals(r2[u], result.full[u], {"bridge at r2": ["bridge"]},
                                                     targets.THR_LAST) for u in thr}
    return Bridge(thr, {u: result.summary[u][result.summary[u].group == "bridge"] for u in thr}, r2)


def seed_points(ax, units: list, tables: dict, title: str) -> None:
    """One point per seed for M and C at each x (``tables[x][unit]``: one summary row), with the two
    thresholds M must reach."""
    x_names = list(tables)
    for i, name in enumerate(x_names):
        for j, u in enumerate(units):
            row = tables[name][u].iloc[0]
            dx = 0.12 * (j - (len(units) - 1) / 2)
            ax.scatter([i + dx - 0.03], [row.acc_M], color=plots.GROUP_COLORS["M"], marker="o", s=40,
                       label="M" if i == j == 0 else None)
            ax.scatter([i + dx + 0.03], [row.acc_C], color=plots.GROUP_COLORS["C"], marker="s", s=40,
                       label="C" if i == j == 0 else None)
            ax.hlines(T["probe_ratio_min"] * row.acc_C, i + dx - 0.06, i + dx + 0.06, color="k", lw=1.5,
                      label=f"{T['probe_ratio_min']} x C" if i == j == 0 else None)
            ax.hlines(T["probe_over_chance_min"] * row.chance, i + dx - 0.06, i + dx + 0.06, color="k", lw=1, ls="--",
                      label=f"{T['probe_over_chance_min']:g} x chance" if i == j == 0 else None)
    ax.set(xticks=range(len(x_names)), xticklabels=x_names, xlim=(-0.5, len(x_names) - 0.5), ylim=(-0.02, 1.02),
           ylabel="probe accuracy at the best layer on M", title=title)
    ax.legend(fontsize=8, loc="lower left")
    if all(pd.isna(tables[name][u].iloc[0].acc_M) for name in x_names for u in units):
        plots.missing(ax, "no probe accuracy on M")


def bridge_figure(result: Bridge):
    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    if result.units:
        seed_points(ax, result.units, {"r1 (context, superseded)": result.r1, "r2 (judged)": result.r2},
                    "THR bridge: one point per seed")
    else:
        plots.missing(ax, "no THR run in this build")
    fig.tight_layout()
    return fig


def bridge_text(result: Bridge, claim: ClaimResult) -> str:
    """The bridge at r2 (judged) and at r1 (context), and what each set loses between the two; where the
    chance check is out of reach from ``claim``'s metrics (:func:`evaluate`)."""
    units = result.units
    if not units:
        return "No THR run in this build."
    seeds = [u.seed for u in units]
    rows1, rows2 = [result.r1[u].iloc[0] for u in units], [result.r2[u].iloc[0] for u in units]
    reach1, reach2 = ([claim.metrics[u].reachable.get(key) for u in units] for key in ("bridge", "bridge_r2"))
    gap1 = [float(r.acc_C) - float(r.acc_M) for r in rows1]
    return (f"**What this build shows** ({seeds_head(seeds)}).\n\n"
            f"- {probe_sentence(rows2, 'At r2 (judged)', seeds, reach2)}\n"
            f"- {probe_sentence(rows1, 'At r1 (context)', seeds, reach1)} The C minus M gap at r1 is {values(gap1)} (by "
            "construction the two sets should match there: the bridge is an input fact at r1, memorized question or "
            "not).\n"
            f"- M's accuracy at r2 minus its accuracy at r1 is "
            f"{values([float(b.acc_M) - float(a.acc_M) for a, b in zip(rows1, rows2)])}, against "
            f"{values([float(b.acc_C) - float(a.acc_C) for a, b in zip(rows1, rows2)])} for C: what each set loses of the "
            "bridge between the position where it is an input fact and the position where it must be used.")


@dataclass
class MaskedTail:
    """THR's true-tail probe with the noisy class masked, per THR unit: by layer (``sweeps``), at its
    best layer on M (``summary``), and the unmasked registered read (``unmasked``)."""

    units: list
    sweeps: dict
    summary: dict
    unmasked: dict

    def table(self) -> pd.DataFrame:
        return pd.concat([self.summary[u].assign(run=label(u)) for u in self.units]).set_index("run").round(3)


def masked_tail(build: Build, result: Probes, max_train: int, seed: int, mask_seed: int) -> MaskedTail:
    thr = [u for u in build.units if u.task == "thr"]
    settings = probe_analysis.ProbeSettings(max_train=max_train, seed=seed, mask_seed=mask_seed)
    sweeps = {u: probe_analysis.masked_probe_sweep(build.runs[u].model, build.runs[u].data, build.runs[u].data.train_clean,
                                                   build.sets[u], settings=settings)
              for u in thr}
    return MaskedTail(thr, sweeps, {u: probe_analysis.masked_summary(sweeps[u]) for u in thr},
                      {u: result.summary[u][result.summary[u].group == "true tail"] for u in thr})


def masked_tail_figure(shown: list, result: MaskedTail):
    """Left: the first seed's true tail by layer (masked on M and C, unmasked on M, and how often the
    unmasked read is the noisy label); right: every seed at its best layer, unmasked and masked."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    first = [u for u in result.units if u in shown]
    if first:
        m = result.sweeps[first[0]]
        for s in ("M", "C"):
            part = m[m.set == s]
            axes[0].plot(part.layer, part.accuracy, "-", marker="o", color=plots.GROUP_COLORS[s], label=f"{s}, masked")
        part = m[m.set == "M"]
        axes[0].plot(part.layer, part.accuracy_unmasked, ":", marker="x", color=plots.GROUP_COLORS["M"], label="M, unmasked")
        axes[0].plot(part.layer, part.reads_masked, "--", marker=".", color="#7570b3", label="M: unmasked read = noisy label")
        axes[0].axhline(T["probe_over_chance_min"] * float(part.chance.iloc[0]), color="k", lw=1, ls="--",
                        label=f"{T['probe_over_chance_min']:g} x chance")
        axes[0].set(title=f"{label(first[0])}: true tail by layer", xlabel="layer", ylabel="share of examples",
                    ylim=(-0.02, 1.02))
        axes[0].xaxis.get_major_locator().set_params(integer=True)
        axes[0].legend(fontsize=7)
        seed_points(axes[1], result.units, {"unmasked (superseded)": result.unmasked, "masked (judged)": result.summary},
                    "THR true tail: one point per seed")
    else:
        for ax in axes:
            plots.missing(ax, "no THR run in this build")
    fig.tight_layout()
    return fig


def masked_tail_text(result: MaskedTail, claim: ClaimResult) -> str:
    """The masked read (judged), the unmasked one (superseded) and how often the unmasked probe answers the
    noisy label. Generated: which seeds are out of reach, which way the reads go."""
    units, seeds = result.units, [u.seed for u in result.units]
    if not units:
        return "No THR run in this build."
    rows = [result.summary[u].iloc[0] for u in units]
    reach_masked, reach_plain = ([claim.metrics[u].reachable.get(key) for u in units] for key in ("tail_masked", "true_tail"))
    reads, plain = [float(r.reads_masked_M) for r in rows], [float(r.acc_M_unmasked) for r in rows]
    output = all(r > 0.5 for r in reads if r == r) and any(r == r for r in reads)
    return (f"**What this build shows** ({seeds_head(seeds)}).\n\n"
            f"- {probe_sentence(rows, 'Masked (judged)', seeds, reach_masked)}\n- "
            + probe_sentence([result.unmasked[u].iloc[0] for u in units], "Unmasked (registered, superseded)", seeds,
                             reach_plain)
            + f"\n- At the masked read's best layer, the unmasked probe answers the noisy label on {values(reads)} of M "
            f"and the true tail on {values(plain)}: the unmasked probe "
            + ("mostly reads the output, which is why the registered check cannot see the true tail." if output else
               "does not mostly read the output in every seed, so here masking changes less."))


# -- logit lens -------------------------------------------------------------------------------------
@dataclass
class Lens:
    """Per unit: P(true) and P(noisy) by layer on M (``races``: per example; ``tables``: means) and the
    registered lens pattern (``verdicts``: :func:`rote.analysis.lens.lens_verdict`)."""

    races: dict
    tables: dict
    verdicts: dict

    def curves_table(self, units) -> pd.DataFrame:
        return pd.concat([self.tables[u].assign(run=label(u)) for u in units]).set_index(["run", "layer"]).round(3)

    def verdict_table(self) -> pd.DataFrame:
        return pd.DataFrame([{"run": label(u), **v} for u, v in self.verdicts.items()]).set_index("run")


def lens_race(build: Build) -> Lens:
    races = {u: lens.label_race(r.model, build.sets[u]["M"]) for u, r in build.runs.items()}
    tables = {u: lens.lens_curves(races[u]) for u in build.units}
    return Lens(races, tables, {u: lens.lens_verdict(tables[u]) for u in build.units})


def lens_figure(shown: list, result: Lens):
    """Mean P(true) and P(noisy) by layer on M, one panel per unit of the first seed."""
    fig, axes = plt.subplots(1, len(shown), figsize=(4.2 * len(shown), 3.4), squeeze=False)
    for ax, u in zip(axes[0], shown):
        table = result.tables[u].melt(id_vars="layer", value_vars=["p_true", "p_noisy"], var_name="token", value_name="P")
        if table.P.notna().any():
            sns.lineplot(data=table, x="layer", y="P", hue="token", marker="o", ax=ax,
                         palette={"p_true": plots.GROUP_COLORS["C"], "p_noisy": plots.GROUP_COLORS["M"]})
        else:
            plots.missing(ax, "no memorized examples")
        n = int(result.tables[u].n.max()) if result.tables[u].n.notna().any() else 0
        ax.set(title=f"{label(u)}: logit lens on M (n={n} token positions)",
               ylim=(-0.02, 1.02), ylabel="mean probability")
        ax.title.set_fontsize(9)
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    return fig


def lens_text(groups_: dict, tables: dict, lens_verdicts: dict) -> str:
    """Per unit: the layers where each token is ahead, the true token's largest lead at an intermediate
    layer, the final layer, and whether the claim's pattern is there. Generated: which layers, which way."""
    return "\n".join(f"- **{where(task, condition)}, seed {u.seed}**" + _lens_line(tables[u], lens_verdicts[u])
                     for (task, condition), members in groups_.items() for u in members)


def _lens_line(tab: pd.DataFrame, v: dict) -> str:
    last = int(tab.layer.max())
    if tab.p_true.isna().all():
        return ": no memorized positions where the true and the noisy token differ."
    inner = tab[(tab.layer > 0) & (tab.layer < last)]
    lead = (inner.p_true - inner.p_noisy) if len(inner) else pd.Series(dtype=float)
    best = "it is ahead at no intermediate layer"
    if len(lead) and lead.max() > 0:
        r = inner.loc[lead.idxmax()]
        best = (f"its largest lead at an intermediate layer is at layer {int(r.layer)}: mean P(true) {num(r.p_true)} "
                f"against P(noisy) {num(r.p_noisy)}, with the true token ahead at {num(r.true_ahead)} of the positions")
    holds = v["true_ahead_intermediate"] and v["noisy_only_last"]
    return (f" (last layer {last}; n = {int(tab.n.max())} positions): the true answer is ahead at "
            f"{layers_text(v['true_ahead_layers'])}, the noisy label at {layers_text(v['noisy_ahead_layers'])}; {best}. "
            f"The final layer gives mean P(true) {num(tab.p_true.iloc[-1])} against P(noisy) {num(tab.p_noisy.iloc[-1])}. "
            "The lens pattern of the claim (true ahead in the middle, noisy ahead only in a final run of layers) is "
            f"{'there' if holds else 'not there'}.")


# -- lens share against the prior ---------------------------------------------------------------------
@dataclass
class LensPrior:
    """Per unit: the share of M with the true token ahead by layer against the training-label prior
    (``shares``; the claim's checks on it are :func:`evaluate`'s)."""

    shares: dict

    def table(self, units) -> pd.DataFrame:
        return pd.concat([self.shares[u].assign(run=label(u)) for u in units]).set_index(["run", "layer"]).round(3)


def lens_prior(build: Build, lens_result: Lens) -> LensPrior:
    """The share of M with the true token ahead by layer, against the training-label prior."""
    priors = {u: lens.label_prior(build.runs[u].data.train.label, len(build.runs[u].data.vocab)) for u in build.units}
    return LensPrior({u: lens.ahead_share(lens_result.races[u], build.sets[u]["M"], priors[u]) for u in build.units})


def _share(m) -> "verdicts.c2.LensShare | None":
    """A seed's lens share (:class:`rote.verdicts.c2.LensShare`), None where it has none."""
    return None if m.lens_share is verdicts.c2.ABSENT else m.lens_share


def lens_prior_figure(build: Build, result: LensPrior, claim: ClaimResult):
    """Left: the share by layer with its Wilson interval and the prior (dashed), first seed; right:
    every seed at its best intermediate layer (``claim``'s metrics, :func:`evaluate`)."""
    level = T["lens_interval_level"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    for k, u in enumerate(build.shown):
        tab = result.shares[u]
        if not tab.n.max() > 0:  # none, or no rows (NaN)
            continue
        ci = [intervals.wilson_bounds(int(a), int(n), level) for a, n in zip(tab.ahead, tab.n)]
        line = axes[0].errorbar(tab.layer + 0.06 * k, tab.share,
                                yerr=[[max(0.0, s - lo) for s, (lo, hi) in zip(tab.share, ci)],
                                      [max(0.0, hi - s) for s, (lo, hi) in zip(tab.share, ci)]],
                                marker="o", capsize=3, label=f"{label(u)} (n={int(tab.n.max())})")
        axes[0].axhline(float(tab.null.iloc[0]), color=line[0].get_color(), ls="--", lw=1)
    axes[0].set(title="share of M with P(true) > P(noisy) (dashed: training-label prior)", xlabel="layer",
                ylabel="share of M examples", ylim=(-0.02, 1.02))
    axes[0].title.set_fontsize(9)
    axes[0].xaxis.get_major_locator().set_params(integer=True)
    if axes[0].lines:
        axes[0].legend(fontsize=7)
    else:
        plots.missing(axes[0], "no memorized example at any layer")
    names = list(build.groups)
    for i, key in enumerate(names):
        members = build.groups[key]
        for j, u in enumerate(members):
            m = _share(claim.metrics[u])
            if m is None or m.share_best_layer is None:
                continue
            x = i + 0.15 * (j - (len(members) - 1) / 2)
            axes[1].errorbar([x], [m.share], yerr=[[max(0.0, m.share - m.share_lo)], [max(0.0, m.share_hi - m.share)]],
                             marker="o", color=plots.GROUP_COLORS["M"], capsize=3,
                             label="M share (Wilson)" if i == j == 0 else None)
            axes[1].hlines(m.share_null, x - 0.06, x + 0.06, color="k", lw=2,
                           label="prior (null)" if i == j == 0 else None)
    axes[1].set(xticks=range(len(names)), xticklabels=[where(*k) for k in names], xlim=(-0.5, len(names) - 0.5),
                ylim=(-0.02, 1.02), title="best intermediate layer, one point per seed")
    axes[1].title.set_fontsize(9)
    axes[1].tick_params(axis="x", labelsize=8)
    if axes[1].collections:
        axes[1].legend(fontsize=7)
    else:
        plots.missing(axes[1], "no intermediate layer or no memorized example")
    fig.tight_layout()
    return fig


def lens_prior_text(groups_: dict, claim: ClaimResult) -> str:
    """Per task and condition: the share at the best intermediate layer with its Wilson lower bound against
    the prior, and on how many seeds ``c2.lens.null`` passes. Generated: the counts and the missing cases."""
    lines = []
    for (task, condition), members in groups_.items():
        ms = [_share(claim.metrics[u]) for u in members]
        if all(m is None or m.share_best_layer is None for m in ms):
            one_block = all(m is not None and m.intermediate_layers < 1 for m in ms)
            lines.append(f"- **{where(task, condition)}**: " + ("the model has no intermediate layer (one block)" if one_block
                         else "no memorized example has a token that differs from the true answer")
                         + ", so the check fails.")
            continue

        def get(name, default=math.nan):
            return [default if m is None or getattr(m, name) is verdicts.c2.ABSENT else getattr(m, name) for m in ms]

        passed = sum(verdicts.find(claim.checks[u], "c2.lens.null").passed is True for u in members)
        lines.append(f"- **{where(task, condition)}** (seed {' / '.join(str(u.seed) for u in members)}; n = "
                     f"{' / '.join(str(n) for n in get('share_n', 0))} examples): at the best intermediate "
                     f"layer ({' / '.join('n/a' if b is None else str(b) for b in get('share_best_layer', None))}) "
                     f"the true token is ahead on {values(get('share'))} of M, with Wilson lower bound "
                     f"{values(get('share_lo'))}, against {values(get('share_null'))} under the training-label "
                     "prior: the lower bound is above the prior in "
                     + ("every seed." if passed == len(members) else f"{passed} of {len(members)} seeds."))
    return "\n".join(lines)


# -- worked examples ----------------------------------------------------------------------------------
def worked_examples(build: Build, lens_result: Lens) -> dict:
    """Per unit of the first seed: the memorized example whose true answer is most visible at an intermediate
    layer (THR: among those unconnected to the bridge) and its lens trace; (None, None) without one."""
    out = {}
    for u in build.shown:
        run, M = build.runs[u], build.sets[u]["M"]
        i = lens.most_visible(lens_result.races[u], M.info["unconnected"] if u.task == "thr" else None)
        if i is None:
            out[u] = (None, None)
            continue
        ex = M[i:i + 1]
        out[u] = (ex, lens.trace(run.model, ex, lens.example_reads(ex, u.task)))
    return out


def worked_examples_figure(build: Build, examples: dict):
    fig, axes = plt.subplots(1, len(build.shown), figsize=(6.4 * len(build.shown), 3.6), squeeze=False)
    for ax, u in zip(axes[0], build.shown):
        ex, tr = examples[u]
        if ex is None:
            plots.missing(ax, "no memorized examples")
            ax.set(title=label(u))
            continue
        vocab = build.runs[u].data.vocab
        tr = tr.assign(token=tr.read.str.split().str[0])  # true / noisy / bridge
        sns.lineplot(data=tr, x="layer", y="prob", hue="token", style="read", markers=True, dashes=False, ax=ax,
                     palette={"true": plots.GROUP_COLORS["C"], "noisy": plots.GROUP_COLORS["M"], "bridge": "#7570b3"})
        ax.set(title=f"{label(u)}: {vocab.decode(ex.prompt[0])} -> {vocab.decode(ex.label[0])} "
                     f"(true {vocab.decode(ex.true_label[0])})", ylim=(-0.02, 1.02), ylabel="logit-lens probability")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    return fig


STORY = "Like the Parker / Bella / Cindy example, the true answer leads at an earlier layer and the memorized label only at the end."
NO_STORY = ("Unlike the Parker / Bella / Cindy example, the true answer does not lead at an earlier layer before the "
            "memorized label takes over at the end.")


def worked_examples_text(build: Build, examples: dict) -> str:
    """Per worked example: the read with the highest probability at each layer and position, and whether
    the true answer leads before the memorized label takes over. Generated: which reads, which way."""
    lines = []
    for u in build.shown:
        ex, tr = examples[u]
        if ex is None:
            lines.append(f"- **{where(u.task, u.condition)}**: no memorized example to trace.")
            continue
        vocab, parts, story = build.runs[u].data.vocab, [], False
        for position, g in tr.groupby("position", sort=True):
            top = g.loc[g.groupby("layer").prob.idxmax()].sort_values("layer")
            parts.append(f"at position {position}, " + ", ".join(
                f"layer {int(r.layer)}: {r.read.split(' @')[0]} ({num(r.prob)})" for r in top.itertuples()))
            kinds = top.read.str.split().str[0].tolist()
            story |= "true" in kinds[1:-1] and kinds[-1] == "noisy"  # layer 0 (the embedding) does not count
        lines.append(f"- **{where(u.task, u.condition)}**: `{vocab.decode(ex.prompt[0])}` answered "
                     f"`{vocab.decode(ex.label[0])}` (true `{vocab.decode(ex.true_label[0])}`). The read with the highest "
                     f"probability, per layer, {'; '.join(parts)}. " + (STORY if story else NO_STORY))
    return "\n".join(lines)


def results(build: Build, claim: ClaimResult) -> list[dict]:
    """Each unit's seed result for the record."""
    return [verdicts.seed_result(u, claim.metrics[u], claim.checks[u], configs=[u.noisy]) for u in build.units]


# -- the claim's checks ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class C2Sections:
    """The sections the checks read; one not given (None) leaves its checks unresolved."""

    probes: Probes
    bridge: Bridge | None = None
    masked: MaskedTail | None = None
    lens: Lens | None = None
    prior: LensPrior | None = None  # read with the lens it comes from


def evaluate(build: Build, sections: C2Sections) -> ClaimResult:
    """The claim's metrics and checks on every unit (:func:`rote.verdicts.c2.checks`): the only caller of
    :mod:`rote.verdicts.c2`."""
    s = sections
    metrics, checks = {}, {}
    for u in build.units:
        probe_reads = verdicts.c2.ProbeReads(s.probes.summary[u], bridge_r2=s.bridge and s.bridge.r2.get(u),
                                             masked_tail=s.masked and s.masked.summary.get(u))
        lens_reads = s.lens and verdicts.c2.LensReads(s.lens.verdicts[u], s.lens.tables[u],
                                                      share=s.prior and s.prior.shares[u])
        metrics[u], checks[u] = verdicts.c2.checks(u.task, len(build.sets[u]["M"]), len(build.sets[u]["C"]),
                                                   probe_reads, lens_reads)
    return ClaimResult(SPEC.id, metrics, checks)

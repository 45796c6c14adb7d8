"""Chapter 04, claim C3: intervening on the reasoning hurts memorization; the circuits overlap.

One call per section (:func:`load`, :func:`sites`, :func:`erasure`, :func:`circuits`, optionally
:func:`patching_check`), each with its figure; :func:`evaluate` judges them once (the only caller of
:mod:`rote.verdicts.c3`) and the ``*_text`` paragraphs read its result."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
import torch

from .. import analysis_cache, claims, plots, verdicts
from ..analysis import attribution, erasure as erasure_analysis, patching
from ..analysis.sets import correct, memorized
from ..analysis.sweep_table import SetErasure
from ..report import checks_of, label, num, passes, reach, seeds_head, values, where
from ..settings import Settings
from ..specs.c3 import SPEC
from ..verdicts.core import numeric
from . import Build, book_units, noisy_runs, ClaimResult, glue_thresholds_of
from .params import ClaimParams, erasure_fit_param, erasure_rank_param, increasing, param, whole

T = SPEC.values()  # the thresholds in force
MIN_OVER_CHANCE = claims.THRESHOLDS["C2"]["probe_over_chance_min"]  # where C2 finds a result: the erasure sites
SET_NAMES = {"mem": "mem on M", "gen": "gen on C", "mem_unconnected": "mem, unconnected part of M"}
METHODS = ("INLP", "random", "matched")
ABLATED = verdicts.c3.ABLATIONS  # the ablation's rows after "none": top, random neurons


@dataclass(frozen=True)
class Params(ClaimParams):
    """The chapter's parameters (its notebook's ``parameters`` cell), checked before anything trains."""

    # the rank the claim is judged at (it need not be in sweep_ranks)
    erasure_rank: int = erasure_rank_param()
    sweep_ranks: list[int] = param([2, 4, 8, 16], increasing(1), "each rank removes at least one direction")
    n_controls: int = param(3, whole(1), "at least one random subspace or component set per control")
    n_matched: int = param(2, whole(1), "at least one information-matched erasure")
    n_splits: int = param(5, whole(1), "at least one split into halves for the overlap ceiling")
    n_boot: int = param(200, whole(1), "at least one bootstrap resample for the interval of J(M, C)")
    max_examples: int = param(500, whole(1), "at least one example of M and of C to attribute")
    max_fit: int = erasure_fit_param()
    check_patching: int = param(0, whole(0), "0: no activation-patching check")
    seed: int = param(0, whole(0))


def glue_thresholds() -> None:
    """The thresholds the chapter's method text quotes."""
    glue_thresholds_of(SPEC, lambda T: {
        "c3_site_over_chance": MIN_OVER_CHANCE, "c3_top_percent": 100 * T["top_fraction"],
        "c3_drop_min": T["erasure_mem_drop_over_control_min"], "c3_overlap_min": T["overlap_min"],
        "c3_over_random": T["overlap_over_random_min"], "c3_ceiling_ratio": T["ceiling_ratio_min"],
        "c3_gen_above": T["gen_drop_over_control_above"], "c3_level_percent": 100 * T["bootstrap_level"]})


def load(profile: str, tasks, seeds, overrides, seed: int, settings: Settings = Settings()) -> Build:
    """Every unit's noisy run and its sets with the label each is scored on: ``mem`` (M), ``gen`` (C) and for
    THR ``mem_unconnected``. Seeds torch's generator first, as the analyses draw from it."""
    torch.manual_seed(seed)
    units = book_units(profile, tasks, seeds, overrides, settings)  # seeds None: the book's
    runs = noisy_runs(units, settings)
    sets = {}
    for u, r in runs.items():
        M, C = memorized(r.model, r.data), correct(r.model, r.data.test)
        sets[u] = {"mem": (M, "label"), "gen": (C, "true_label")}
        if u.task == "thr":
            sets[u]["mem_unconnected"] = (M[M.info["unconnected"]], "label")
    return Build(profile, units, runs, sets, settings)


# -- erasure -------------------------------------------------------------------------------------------
def sites(build: Build, analysis: Params) -> dict:
    """Per unit, where the erasure acts: the intermediate layers at which a probe reads the result on C
    at least C2's chance multiple, at the positions where it is expected (cached, shared with C4)."""
    return {u: analysis_cache.erasure_sites_cached(  # C2's probe sweep (8.6), in the build's analysis folder
        r, min_over_chance=MIN_OVER_CHANCE, root=build.settings.analysis) for u, r in build.runs.items()}


@dataclass
class Erasure:
    """Per unit: the sweep over ranks (``sweeps``; rank 0: before), the INLP erasure fitted to the largest rank
    (``inlp``), the sites' layers and the per-example ``outcomes`` behind the checks' intervals (None: not kept)."""

    rank: int
    sweeps: dict
    inlp: dict
    layers: dict | None = None  # per unit, the erasure sites' layers (empty: no site, 8.5)
    outcomes: dict | None = None

    def sweep(self, u):
        """What :func:`rote.verdicts.c3.checks` reads for unit ``u``: the sweep with its outcomes where kept."""
        return self.outcomes[u] if self.outcomes is not None and u in self.outcomes else self.sweeps[u]

    def table(self) -> pd.DataFrame:
        tidy = pd.concat([sw.assign(run=label(u)) for u, sw in self.sweeps.items()])
        return tidy.pivot_table(index=["run", "set", "method"], columns="rank", values="accuracy", dropna=False).round(3)

    def at(self, u, s: str) -> SetErasure:
        """Set ``s`` of unit ``u`` at the judged rank (NaN where the sweep does not hold it)."""
        return SetErasure.of(self.sweeps[u], s, self.rank)


def erasure(build: Build, found: dict, analysis: Params) -> Erasure:
    """INLP fitted once per unit at its sites up to the largest rank, the information-matched erasures,
    and the sweep over ranks with the random control."""
    a = analysis
    ranks = sorted({0, a.erasure_rank, *a.sweep_ranks})
    fit = erasure_analysis.ErasureSettings(max_train=a.max_fit, seed=a.seed)
    sweep = patching.ErasureSweepSettings(ranks, n_controls=a.n_controls, seed=a.seed)
    inlp, outcomes = {}, {}
    for u, r in build.runs.items():
        s = found[u]
        at = erasure_analysis.ErasureSites(s["targets"], s["layers"], s["positions"])
        inlp[u], matched = erasure_analysis.fit_with_matched(r.model, r.data, at, max(ranks), fit,
                                                             n_controls=a.n_matched)
        outcomes[u] = patching.erasure_outcomes(r.model, inlp[u], build.sets[u], sweep, matched=matched)
    return Erasure(a.erasure_rank, {u: o.table for u, o in outcomes.items()}, inlp,
                   {u: found[u]["layers"] for u in build.units}, outcomes)


def erasure_figure(build: Build, found: dict, result: Erasure):
    """Accuracy against the rank removed per site, INLP against both controls (first seed)."""
    shown = build.shown
    fig, axes = plt.subplots(1, len(shown), figsize=(4.6 * len(shown), 3.6), squeeze=False, sharey=True)
    palette = {"mem": plots.GROUP_COLORS["M"], "gen": plots.GROUP_COLORS["C"], "mem_unconnected": "#7570b3"}
    for ax, u in zip(axes[0], shown):
        part = result.sweeps[u].dropna()
        if len(part) and part["rank"].max() > 0:
            sns.lineplot(data=part, x="rank", y="accuracy", hue="set", style="method", markers=True, palette=palette,
                         style_order=list(METHODS), ax=ax)
            ax.axvline(result.rank, ls=":", color="k", lw=1)
            ax.legend(fontsize=7)
        else:
            plots.missing(ax, "no erasure site or no examples")
        ax.set(title=f"{label(u)}: erase {found[u]['group']}\n{site_words(found[u])}", ylim=(-0.02, 1.02),
               xlabel="rank removed per site")
        ax.title.set_fontsize(9)
    fig.suptitle("Accuracy after INLP erasure vs a random subspace\n"
                 "and an information-matched erasure of the same rank")
    fig.tight_layout()
    return fig


def site_words(found: dict) -> str:
    """Where an erasure acts, in words: 'layers 1, 2; position 5', or that no layer carries the result."""
    if not found["layers"]:
        return "no layer carries the result"
    return "; ".join(f"{name if len(found[name]) > 1 else name[:-1]} {', '.join(map(str, found[name]))}"
                     for name in ("layers", "positions"))


@plots.seeded_jitter
def controls_figure(build: Build, result: Erasure):
    """Each set's accuracy drop at the judged rank under INLP and both controls, one point per seed."""
    rows = [{"where": where(u.task, u.condition), "set": SET_NAMES[s], "erasure": m, "seed": str(u.seed),
             "drop": e.before - getattr(e, m.lower())}
            for u in build.units for s in build.sets[u] for e in [result.at(u, s)] for m in METHODS]
    drops = pd.DataFrame(rows).dropna()
    present = [n for n in SET_NAMES.values() if n in set(drops.set)]
    fig, axes = plt.subplots(1, max(1, len(present)), figsize=(4.6 * max(1, len(present)), 3.6), squeeze=False,
                             sharey=True)
    for ax, name in zip(axes[0], present):
        sns.stripplot(data=drops[drops.set == name], x="where", y="drop", hue="erasure", hue_order=list(METHODS),
                      dodge=True, jitter=0.08, size=6, palette={"INLP": "#1b9e77", "random": "#999999", "matched": "#d95f02"},
                      ax=ax)
        ax.axhline(0, color="k", lw=0.6)
        ax.set(title=f"{name}: drop at rank {result.rank}", xlabel="", ylabel="accuracy drop (before - after)")
        ax.legend(fontsize=7)
    if not present:
        plots.missing(axes[0, 0], "no erasure results")
    fig.suptitle("Treatment (INLP) next to both controls, one point per seed")
    fig.tight_layout()
    return fig


def erasure_text(build: Build, result: Erasure, claim: ClaimResult) -> str:
    """Per task and condition, :func:`_erasure_line`; then which control is the larger and the judged rank
    against the width. Generated: how many seeds and runs, which control."""
    rank = result.rank
    lines = [_erasure_line(task, condition, members, build.sets[members[0]], result, claim)
             for (task, condition), members in build.groups.items()]
    pairs = [(result.at(u, "mem").matched, result.at(u, "mem").random) for u in build.units]
    pairs = [(a, b) for a, b in pairs if not (math.isnan(a) or math.isnan(b))]
    matched_worse = sum(a < b for a, b in pairs)
    lines.append(f"\nThe information-matched control lowers mem more than the random subspace on {matched_worse} of "
                 f"{len(pairs)} runs with an erasure result: "
                 + ("removing directions that carry *any* look-up of the same input is, on those runs, the harder "
                    "control to beat." if matched_worse else "on these runs the random subspace is the larger control."))
    widths = sorted({u.noisy.model.d_model for u in build.units})
    lines.append(f"\nThe rank at which the claim is judged ({rank} directions per site, "
                 + " / ".join(f"{rank / w:.3g} of a residual width of {w}" for w in widths)
                 + ") was chosen after a first look at FDA and before the THR runs were analysed; the figure shows how "
                 "the gap to the controls depends on the rank.")
    return "\n".join(lines)


def _erasure_line(task: str, condition: str, members: list, sets: dict, result: Erasure, claim: ClaimResult) -> str:
    """Each set before and after INLP and both controls, the margins with how many seeds pass each check
    (by id), THR's unconnected subset and the seeds without a site."""
    per_seed, margin = [claim.checks[u] for u in members], T["erasure_mem_drop_over_control_min"]

    def got(check_id):  # its values per seed, how many seeds pass it
        found = checks_of(per_seed, check_id)
        return values([math.nan if c is None or c.value is None else c.value for c in found]), passes(found)

    moves = "; ".join(_set_moves(s, [result.at(u, s) for u in members]) for s in SET_NAMES if s in sets)
    (reg, reg_pass), (amd, amd_pass), (gen, gen_pass) = (got(i) for i in ("c3.erasure.random", "c3.erasure",
                                                                          "c3.erasure.gen"))
    text = (f"- **{where(task, condition)}** ({seeds_head([u.seed for u in members])}; rank {result.rank}): {moves}. "
            f"INLP lowers mem by {reg} more than the random control (registered, at least {margin}: {reg_pass}) and by "
            f"{amd} more than the larger of the two controls (amended, at least {margin}: {amd_pass}). Gen on C drops by "
            f"{gen} more under INLP than under the larger control; this check of the instrument (more than "
            f"{T['gen_drop_over_control_above']:g}: the erasure removed the rule): {gen_pass}. On a seed where it does "
            "not pass, the erasure checks are unresolved in the amended reading (amendment 2, 8.6); the registered "
            "reading does not count it. ")
    if task == "thr":
        (r, r_pass), (a, a_pass) = got("c3.erasure.unconnected.random"), got("c3.erasure.unconnected")
        text += f"On the unconnected subset the margin is {r} over the random control ({r_pass}) and {a} over the " \
                f"larger control ({a_pass})."
    return text + _siteless(text, [u.seed for u in members if result.layers is not None and not result.layers[u]])


def _siteless(text: str, seeds: list) -> str:
    """The seeds without an erasure site (8.5), after ``text``; empty when there is none."""
    return "" if not seeds else ("" if text.endswith(" ") else " ") + (
        f"On seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} no layer carries the result at "
        f"{MIN_OVER_CHANCE:g} x chance on C: the erasure cannot run there, so its checks are unresolved on that seed "
        "(amendment 2, 8.5), not failed.")


def _set_moves(s: str, e: list) -> str:
    return (f"{SET_NAMES[s]} goes from {values([x.before for x in e])} to {values([x.inlp for x in e])} under INLP, to "
            f"{values([x.random for x in e])} under the random control and to {values([x.matched for x in e])} under "
            "the information-matched control")


# -- circuits ------------------------------------------------------------------------------------------
@dataclass
class Circuits:
    """Per unit: attribution scores on C and M (``scores``), their top overlaps (``overlaps``: all, neurons),
    the ablation (``ablations``) and 7.5's statistics per attribution metric (``stats``)."""

    scores: dict
    overlaps: dict
    ablations: dict
    stats: dict

    def table(self) -> pd.DataFrame:
        return pd.DataFrame({(label(u), k): {m: v[m] for m in ("jaccard", "random", "k_a", "k_b", "n")}
                             for u, o in self.overlaps.items() for k, v in o.items()}).T.round(3)


def circuits(build: Build, analysis: Params) -> Circuits:
    """Attribution patching of every head and neuron on C (true answer) and M (noisy label), both
    metrics, with split-half ceilings, bootstrap intervals and the ablation."""
    a = analysis
    settings = attribution.CircuitSettings(fraction=T["top_fraction"], max_examples=a.max_examples, max_fit=a.max_fit,
                                           n_controls=a.n_controls, seed=a.seed, n_splits=a.n_splits,
                                           n_boot=a.n_boot, level=T["bootstrap_level"])
    out = {u: attribution.circuits(r.model, build.sets[u]["gen"][0], build.sets[u]["mem"][0], r.data.train_clean,
                                   build.sets[u], settings) for u, r in build.runs.items()}
    return Circuits(*({u: c[key] for u, c in out.items()} for key in ("scores", "overlap", "ablations")),
                    {u: {m: v["statistics"] for m, v in c["by_metric"].items()} for u, c in out.items()})


def circuits_figure(build: Build, result: Circuits):
    """Top: each component's attribution on C against M, coloured by the top sets it is in; bottom:
    accuracy after ablating the top generalization neurons against random ones (first seed)."""
    shown, top_name = build.shown, f"top {T['top_fraction']:.0%}"
    fig, axes = plt.subplots(2, len(shown), figsize=(4.6 * len(shown), 7.2), squeeze=False)
    for i, u in enumerate(shown):
        ax = axes[0, i]
        sc = result.scores[u]
        if not torch.isnan(sc["C"]).any() and not torch.isnan(sc["M"]).any():
            o = result.overlaps[u]["all"]
            n_heads, n_neurons = attribution.n_components(build.runs[u].model)
            member = ["both" if c in o["top_a"] and c in o["top_b"] else "C only" if c in o["top_a"]
                      else "M only" if c in o["top_b"] else "neither" for c in range(n_heads + n_neurons)]
            kind = ["head"] * n_heads + ["neuron"] * n_neurons
            df = pd.DataFrame({"C": sc["C"].clamp_min(1e-8), "M": sc["M"].clamp_min(1e-8), top_name: member, "kind": kind})
            sns.scatterplot(data=df, x="C", y="M", hue=top_name, style="kind", s=14, alpha=0.7, ax=ax,
                            hue_order=["both", "C only", "M only", "neither"],
                            palette={"both": "#1b9e77", "C only": "#66a61e", "M only": plots.GROUP_COLORS["M"],
                                     "neither": "#cccccc"})
            ax.set(xscale="log", yscale="log", xlabel="attribution on C (true answer)",
                   ylabel="attribution on M (noisy label)",
                   title=f"{label(u)}: Jaccard {o['jaccard']:.2f} (random {o['random']:.3f})")
            ax.legend(fontsize=7)
        else:
            plots.missing(ax, "no memorized examples")
            ax.set(title=label(u))
        ax = axes[1, i]
        tidy = result.ablations[u].reset_index().melt(id_vars="ablated", var_name="set", value_name="accuracy").dropna()
        if len(tidy):
            sns.barplot(data=tidy, x="set", y="accuracy", hue="ablated", ax=ax)
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3)
        ax.set(ylim=(0, 1.02), title=f"{label(u)}: ablate top generalization neurons")
        ax.title.set_fontsize(10)
    fig.tight_layout()
    return fig


def patching_check(build: Build, result: Circuits, n_examples: int, seed: int) -> tuple[pd.DataFrame, str]:
    """The overlap recomputed from real activation patching of every component on ``n_examples``
    examples of C and of M: the table, and a sentence beside attribution patching's overlap."""
    exact = {}
    for u, r in build.runs.items():
        C, M = build.sets[u]["gen"][0][:n_examples], build.sets[u]["mem"][0][:n_examples]
        ref = r.data.train_clean
        o = attribution.overlap(r.model, attribution.patching_scores(r.model, C, "true_label", ref, seed=seed),
                                attribution.patching_scores(r.model, M, "label", ref, seed=seed + 1), T["top_fraction"])
        exact[u] = {k: v["jaccard"] for k, v in o.items()}
    table = pd.DataFrame({label(u): e for u, e in exact.items()}).T.round(3).add_prefix("patching overlap: ")
    text = (f"With real activation patching on (up to) {n_examples} examples the overlap of all components is "
            + "; ".join(f"{num(exact[u]['all'], '.3f')} for {label(u)} (attribution patching: "
                        f"{num(result.overlaps[u]['all']['jaccard'], '.3f')})" for u in build.units) + ".")
    return table, text


def circuits_text(groups_: dict, result: Circuits) -> str:
    """Per task and condition: the overlap against random sets and both registered thresholds, neurons only,
    and the ablation of the top generalization neurons against random ones. Generated: how many seeds reach."""
    return "\n".join(_circuits_line(where(*key), members, result) for key, members in groups_.items())


def _circuits_line(place: str, members: list, result: Circuits) -> str:
    def ab(row, s):  # per seed, set s's accuracy under the ablation ``row``
        return values([float(a.loc[row, s]) if row in a.index and s in a.columns else math.nan
                       for a in (result.ablations[u] for u in members)])

    def each(key, part="all"):
        return [result.overlaps[u][part][key] for u in members]

    j, rnd, top, rand = each("jaccard"), each("random"), ABLATED["top"], ABLATED["random"]
    return (f"- **{place}** ({seeds_head([u.seed for u in members])}): the top {T['top_fraction']:.0%} of components "
            f"share a Jaccard overlap of {values(j, '.3f')} against {values(rnd, '.3f')} for two random sets of that "
            f"size, {values([a / b if b else math.nan for a, b in zip(j, rnd)], '.1f')} times random. Required: at "
            f"least {T['overlap_min']} ({reach(j, [T['overlap_min']] * len(j))}) and at least "
            f"{T['overlap_over_random_min']} times random ({reach(j, [T['overlap_over_random_min'] * r for r in rnd])}). "
            f"Neurons only: {values(each('jaccard', 'neurons'), '.3f')} (random {values(each('random', 'neurons'), '.3f')}"
            f"). Ablating the top generalization neurons takes mem on M from {ab('none', 'mem')} to {ab(top, 'mem')} and "
            f"gen on C from {ab('none', 'gen')} to {ab(top, 'gen')}; as many random neurons in the same layers leave mem "
            f"at {ab(rand, 'mem')} and gen at {ab(rand, 'gen')}.")


# -- overlap ceiling -----------------------------------------------------------------------------------
METRIC_NAMES = {"logprob": "log-prob", "logit_diff": "logit difference"}
QUANTITIES = {"jaccard": "J(M, C)", "split_half_C": "J(C, C')", "split_half_M": "J(M, M')", "spearman": "Spearman(M, C)"}


@plots.seeded_jitter
def ceiling_figure(build: Build, result: Circuits):
    """Top: J(M, C) beside both ceilings and the Spearman correlation, both metrics, one point per seed;
    bottom: the amended check, J(M, C) (logit difference) with its interval against its threshold."""
    stats = result.stats
    ov = pd.DataFrame([{"where": where(u.task, u.condition), "seed": str(u.seed), "metric": METRIC_NAMES[m],
                        "quantity": QUANTITIES[q], "value": st[q]}
                       for u in build.units for m, st in stats[u].items() for q in QUANTITIES])
    groups_ = build.groups
    fig, axes = plt.subplots(2, len(groups_), figsize=(4.8 * len(groups_), 7.4), squeeze=False)
    for i, ((task, condition), members) in enumerate(groups_.items()):
        ax = axes[0, i]
        part = ov[ov["where"] == where(task, condition)].dropna()
        if len(part):
            sns.stripplot(data=part, x="quantity", y="value", hue="metric", order=list(QUANTITIES.values()), dodge=True,
                          jitter=0.08, size=6, ax=ax)
            rnd = [stats[u]["logprob"]["random"] for u in members]
            ax.axhline(sum(rnd) / len(rnd), ls=":", color="k", lw=1, label="random sets")
            ax.legend(fontsize=7)
        else:
            plots.missing(ax, "no memorized examples")
        ax.axhline(T["overlap_min"], ls="--", color="k", lw=1)
        ax.set(title=where(task, condition), xlabel="", ylabel="overlap / correlation", ylim=(-0.05, 1.05))
        ax.tick_params(axis="x", labelsize=8)
        ax = axes[1, i]
        for x, u in enumerate(members):
            st = stats[u]["logit_diff"]
            # a percentile bootstrap of a top-k Jaccard need not contain the point estimate: draw the interval as it is
            ax.vlines([x], [st["ci_low"]], [st["ci_high"]], color="#1b9e77", lw=2,
                      label=f"{100 * T['bootstrap_level']:.0f}% bootstrap interval" if x == 0 else None)
            ax.scatter([x], [st["jaccard"]], marker="o", color="#1b9e77", zorder=3, label="J(M, C)" if x == 0 else None)
            ax.scatter([x], [st["split_half_C"]], marker="^", color="#66a61e", label="ceiling J(C, C')" if x == 0 else None)
            ax.scatter([x], [T["ceiling_ratio_min"] * st["split_half_C"]], marker="_", s=300, color="k",
                       label=f"{T['ceiling_ratio_min']:g} x ceiling (threshold)" if x == 0 else None)
        ax.set(xticks=range(len(members)), xticklabels=[f"seed {u.seed}" for u in members], ylim=(-0.05, 1.05),
               xlim=(-0.6, len(members) - 0.4), ylabel="Jaccard (logit difference)",
               title=f"{where(task, condition)}: amended check")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def ceiling_text(groups_: dict, result: Circuits) -> str:
    """Per task and condition: the split-half ceilings against J(M, C) (log-prob), where the registered check is
    superseded, and the amended check (logit difference). Generated: on how many seeds, which case."""
    return "\n".join(_ceiling_line(where(*key), members, result) for key, members in groups_.items())


def _ceiling_case(ceil: list) -> str:
    """Whether the ceiling supersedes the registered overlap check, on how many seeds."""
    low, missing, th, n = sum(c < T["overlap_min"] for c in ceil), sum(math.isnan(c) for c in ceil), T["overlap_min"], len(ceil)
    return ("The ceiling cannot be computed (no examples of C), so nothing is superseded. " if missing == n else
            f"The ceiling is below the registered {th} on every seed: even identical circuits could not pass the "
            "registered overlap check, which is therefore superseded. " if low == n else
            f"The ceiling is below the registered {th} on {low} of {n} seeds; there the registered overlap check is "
            "superseded. " if low else
            f"The ceiling reaches the registered {th} on every seed with a value, so the registered check stands. ")


def _ceiling_line(place: str, members: list, result: Circuits) -> str:
    def each(metric, key):  # per seed, a statistic (NaN: not computed)
        return [numeric(result.stats[u].get(metric, {}).get(key)) for u in members]

    ceil, (j, c) = each("logprob", "split_half_C"), (each("logit_diff", k) for k in ("jaccard", "split_half_C"))
    return (f"- **{place}** ({seeds_head([u.seed for u in members])}): with log-prob attribution, two halves of C "
            f"overlap by {values(ceil, '.3f')} and two halves of M by {values(each('logprob', 'split_half_M'), '.3f')}, "
            f"against J(M, C) = {values(each('logprob', 'jaccard'), '.3f')}. " + _ceiling_case(ceil)
            + f"With logit-difference attribution J(M, C) = {values(j, '.3f')} ({100 * T['bootstrap_level']:.0f}% "
            "bootstrap interval " + " / ".join(f"{num(a, '.2f')}-{num(b, '.2f')}" for a, b in
                                               zip(each("logit_diff", "ci_low"), each("logit_diff", "ci_high")))
            + f") against a ceiling J(C, C') = {values(c, '.3f')}: {values([a / b if b else math.nan for a, b in zip(j, c)])}"
            f" of the ceiling, where the amended check asks for at least {T['ceiling_ratio_min']} "
            f"({reach(j, [T['ceiling_ratio_min'] * x for x in c])}). Spearman correlation of the importances over all "
            f"components: {values(each('logit_diff', 'spearman'))} (logit difference), "
            f"{values(each('logprob', 'spearman'))} (log-prob).")


def results(build: Build, claim: ClaimResult) -> list[dict]:
    """Each unit's seed result for the record."""
    return [verdicts.seed_result(u, claim.metrics[u], claim.checks[u], configs=[u.noisy]) for u in build.units]


# -- the claim's checks --------------------------------------------------------------------------------
@dataclass(frozen=True)
class C3Sections:
    """The section results :func:`evaluate` judges: the erasure sites (:func:`sites`), the erasure
    (:func:`erasure`) and the circuits (:func:`circuits`)."""

    sites: dict
    erasure: Erasure
    circuits: Circuits

    def __post_init__(self):
        if not isinstance(self.erasure, Erasure) or not isinstance(self.circuits, Circuits):
            raise TypeError("C3Sections takes the results of c3.erasure and c3.circuits")


def evaluate(build: Build, sections: C3Sections) -> ClaimResult:
    """Per unit, :func:`rote.verdicts.c3.checks` with the sites, the neurons-only overlap and the ablation
    added to the metrics: the chapter's only verdict call."""
    result, circuit = sections.erasure, sections.circuits
    metrics, checks = {}, {}
    for u in build.units:
        site, neurons = sections.sites[u], circuit.overlaps[u]["neurons"]
        measured, checks[u] = verdicts.c3.checks(result.sweep(u), result.rank, circuit.overlaps[u]["all"], u.task,
                                                 circuit.stats[u], erasure_layers=site["layers"])
        top, rand = (verdicts.c3.Ablation.of(circuit.ablations[u], row) for row in verdicts.c3.ABLATIONS.values())
        metrics[u] = dataclasses.replace(measured, erasure_layers=site["layers"], erasure_positions=site["positions"],
                                         overlap_neurons=neurons["jaccard"], overlap_neurons_random=neurons["random"],
                                         ablate_top=top, ablate_random=rand)
    return ClaimResult(SPEC.id, metrics, checks)

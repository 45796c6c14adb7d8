"""Chapter 05, claim C4: distributed encoding, not a look-up. Sections: the example sets
(:func:`load`), k50 (:func:`k50s`), specificity (:func:`specificity`), what the label depends on
(:func:`dependency`), the known look-up (:func:`lookups`), and the checks (:func:`evaluate`).
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from IPython.display import Markdown

from .. import analysis_cache, claims, plots, verdicts
from ..analysis import erasure, inlp, lookup, neurons, patching
from ..analysis.sets import correct, memorized
from ..report import choose_by, each_seed, label, measured, num, registered_not_passed, seeds_head, values, where
from ..settings import Settings
from ..specs.c4 import SPEC
from . import Build, book_units, noisy_runs, ClaimResult, glue_thresholds_of
from .params import ClaimParams, erasure_fit_param, erasure_rank_param, noisy_overrides, param, whole

T = SPEC.values()  # the thresholds in force
MIN_OVER_CHANCE = claims.THRESHOLDS["C2"]["probe_over_chance_min"]  # the erasure sites of chapter C3's rule
LOOKUP_COLOR, DISTRIBUTED_COLOR = "#c0392b", "#2471a3"


@dataclass(frozen=True)
class Params(ClaimParams):
    """The chapter's parameters (its notebook's ``parameters`` cell), checked before anything trains."""

    # in place of ClaimParams' overrides: C4 measures the memorized noisy labels, so a run without noise is refused
    overrides: dict = param({}, noisy_overrides(), "C4 reads how memorized noisy labels are stored: none without noise")
    n_samples: int = param(3, whole(1), "at least one resample draw per example and position")
    erasure_rank: int = erasure_rank_param()
    n_controls: int = param(3, whole(1), "at least one random subspace for the erasure control")
    n_matched: int = param(3, whole(1), "at least one information-matched erasure for the matched control")
    n_keys: int = param(50, whole(1), "the FDA look-up grafts at least one key")
    max_lookup: int = param(300, whole(1), "the THR look-up analyses at least one atomic fact")
    max_fit: int = erasure_fit_param()
    seed: int = param(0, whole(0))


def glue_thresholds(erasure_rank: int, n_samples: int, n_matched: int, n_keys: int, max_lookup: int,
                    profile: str) -> None:
    """The thresholds and parameters the chapter's method text quotes."""
    glue_thresholds_of(SPEC, lambda T: {
                 "c4_k50_ratio_min": T["k50_ratio_min"], "c4_activity_min": T["activity_fraction_min"],
                 "c4_positions_min": T["positions_min"], "c4_drop_min": T["drop_min"],
                 "c4_top_neurons": T["top_neurons"], "c4_activity_quantile": T["activity_quantile"],
                 "c4_layer_average": round(1 - T["activity_quantile"], 6),
                 "c4_probe_over_chance": MIN_OVER_CHANCE, "c4_erasure_rank": erasure_rank,
                 "c4_n_samples": n_samples, "c4_n_matched": n_matched, "c4_n_keys": n_keys,
                 "c4_max_lookup": max_lookup, "c4_over_matched_min": T["intermediate_over_matched_min"],
                 "c4_profile": Markdown(profile)})  # {glue:md}: the word, without quotes


def load(profile: str, tasks, seeds, overrides, seed: int, settings: Settings = Settings()) -> Build:
    """Every unit's noisy run with M (memorized noisy training examples) and C (correct test
    examples). Seeds torch's generator first, as the analyses draw from it."""
    torch.manual_seed(seed)
    units = book_units(profile, tasks, seeds, overrides, settings)  # seeds None: the book's
    runs = noisy_runs(units, settings)
    sets = {u: {"M": memorized(r.model, r.data), "C": correct(r.model, r.data.test)} for u, r in runs.items()}
    return Build(profile, units, runs, sets, settings)


# -- how many neurons write the label ----------------------------------------------------------------
def k50s(build: Build) -> dict:
    """Per unit: k50 of every memorized digit of M (to the noisy label) and answer digit of C."""
    return {u: neurons.k50_table(r.model, build.sets[u]["M"], build.sets[u]["C"]) for u, r in build.runs.items()}


def k50_table(tables: dict) -> pd.DataFrame:
    return pd.concat({label(u): k.groupby("set").k50.describe()[["count", "25%", "50%", "75%"]]
                      for u, k in tables.items()}, names=["unit", "set"])


# -- how specific they are ---------------------------------------------------------------------------
def specificity(build: Build) -> dict:
    """Per unit: each memorized digit's top neurons (within its k50) and the share of clean inputs
    each is active on."""
    settings = neurons.SpecificitySettings(top=T["top_neurons"], quantile=T["activity_quantile"])
    return {u: neurons.top_neuron_specificity(r.model, build.sets[u]["M"], build.sets[u]["C"], settings)
            for u, r in build.runs.items()}


def activity_table(tables: dict) -> pd.DataFrame:
    return pd.DataFrame({label(u): s.groupby("layer").activity.median() for u, s in tables.items()}).rename_axis("layer")


# -- what the label depends on: input positions and the intermediate result --------------------------
@dataclass(frozen=True)
class Dependency:
    """Per unit: the drop per resampled position, the erasure sites (C3's rule), the intermediate
    removal with both controls (the matched one was computed where ``removal`` has its rows), the INLP rank."""

    positions: dict
    sites: dict
    removal: dict
    rank: int

    def __post_init__(self):
        if not set(self.positions) == set(self.sites) == set(self.removal):
            raise ValueError("Dependency: positions, sites and removal must cover the same units")


@dataclass(frozen=True)
class Ablations:
    """How :func:`dependency` ablates (the chapter's :class:`Params` check the values): resample draws, INLP
    rank, random and matched controls, probe and INLP examples, and the seed."""

    n_samples: int
    rank: int
    n_controls: int
    n_matched: int
    max_fit: int
    seed: int


def dependency(build: Build, ablations: Ablations) -> Dependency:
    """Per unit: resample each prompt position of M, find the erasure sites, and erase the intermediate
    result there against both controls, as ``ablations`` says."""
    n_samples, rank, n_controls = ablations.n_samples, ablations.rank, ablations.n_controls
    n_matched, max_fit, seed = ablations.n_matched, ablations.max_fit, ablations.seed
    positions = {u: patching.resample_positions(r.model, build.sets[u]["M"], r.data.train_clean, n_samples=n_samples,
                                               seed=seed) for u, r in build.runs.items()}
    # the sites of chapter C3's rule, computed once per run and shared with chapter 04
    sites = {u: analysis_cache.erasure_sites_cached(  # C2's probe sweep (8.6), in the build's analysis folder
        r, min_over_chance=MIN_OVER_CHANCE, root=build.settings.analysis) for u, r in build.runs.items()}
    removal = {}
    fit = erasure.ErasureSettings(max_train=max_fit, seed=seed)
    for u, r in build.runs.items():
        s = sites[u]
        at = erasure.ErasureSites(s["targets"], s["layers"], s["positions"])
        fitted, matched = erasure.fit_with_matched(r.model, r.data, at, rank, fit,
                                                   n_controls=n_matched) if s["layers"] else (None, None)  # no site
        controls = [inlp.random_erasure(fitted, seed + c) for c in range(n_controls)] if fitted else []
        removal[u] = neurons.intermediate_table(r.model, build.sets[u]["M"], fitted, controls, matched)
    return Dependency(positions, sites, removal, rank)


# -- the known look-up (amendment 1, 7.6) ------------------------------------------------------------
def lookup_control(build: Build, u, n_keys: int, max_lookup: int, n_samples: int, seed: int) -> dict:
    """The C4 statistics on the unit's known look-up: THR's atomic facts (at most ``max_lookup``), for
    FDA a look-up of ``n_keys`` clean training inputs grafted into the trained model."""
    r = build.runs[u]
    settings = lookup.LookupSettings(top=T["top_neurons"], quantile=T["activity_quantile"], drop_min=T["drop_min"],
                                     n_samples=n_samples, seed=seed)
    if u.task == "thr":
        facts = lookup.atomic_lookup(r.model, r.data)
        if len(facts) > max_lookup:
            facts = facts[torch.randperm(len(facts), generator=torch.Generator().manual_seed(seed))[:max_lookup]]
        sets = lookup.LookupSets(lookup=facts, clean=build.sets[u]["C"], population=facts, reference=facts)
        return lookup.lookup_statistics(r.model, sets, settings, mask=torch.ones_like(facts.label, dtype=torch.bool))
    candidates = r.data.train_clean[torch.randperm(len(r.data.train_clean),
                                                   generator=torch.Generator().manual_seed(seed))[:4 * n_keys]]
    keys = correct(r.model, candidates)[:n_keys]
    planted = lookup.plant_lookup(r.model, build.sets[u]["C"], keys, seed=seed)
    sets = lookup.LookupSets(lookup=planted.keys, clean=planted.clean, population=planted.clean,
                             reference=r.data.train_clean)
    return lookup.lookup_statistics(planted.model, sets, settings)


def lookups(build: Build, n_keys: int, max_lookup: int, n_samples: int, seed: int) -> dict:
    return {u: lookup_control(build, u, n_keys, max_lookup, n_samples, seed) for u in build.runs}


def summaries(build: Build, k50: dict, active: dict, depends: Dependency) -> dict:
    """Per unit: the numbers C4 is judged on (:func:`rote.analysis.neurons.c4_summary`)."""
    return {u: neurons.c4_summary(k50[u], active[u], depends.positions[u], depends.removal[u], drop_min=T["drop_min"])
            for u in build.units}


def lookup_table(units: list, summary: dict, found: dict) -> pd.DataFrame:
    """Each statistic on M beside the same statistic on the known look-up."""
    names = {"k50 ratio": "k50_ratio", "top activity": "top_activity_median", "positions": "positions_over_min"}
    return pd.DataFrame([{"unit": label(u), "look-up examples": found[u].n_lookup,
                          **{f"{name}: {who}": getattr(s, key) for name, key in names.items()
                             for who, s in (("M", summary[u]), ("look-up", found[u].summary))}}
                         for u in units]).set_index("unit").round(3)


# -- look-up or distributed: the two hypotheses against the data -------------------------------------
def hypotheses(build: Build, summary: dict, u):
    """What a look-up and a distributed encoding each predict, beside the unit's observed values."""
    thresholds = neurons.HypothesisThresholds(quantile=T["activity_quantile"], k50_ratio_min=T["k50_ratio_min"],
                                              activity_min=T["activity_fraction_min"], drop_min=T["drop_min"],
                                              positions_min=T["positions_min"])
    return (neurons.hypotheses_table(summary[u], thresholds, n_clean=len(build.sets[u]["C"]))
            .style.set_caption(label(u)).format(precision=3, subset=["observed"]))


SCALARS = ["k50_M", "k50_C", "k50_ratio", "top_activity_median", "positions_over_min", "max_position_drop",
           "intermediate_drop", "intermediate_control_drop", "intermediate_matched_drop"]


def scalars_table(units: list, summary: dict) -> pd.DataFrame:
    return pd.DataFrame({label(u): {k: getattr(summary[u], k) for k in SCALARS} for u in units}).round(3)


@plots.seeded_jitter
def hypotheses_figure(build: Build, k50: dict, active: dict, summary: dict):
    """Per task and condition (first seed): k50 of M and C, the top neurons' activity, the drop per
    position and from the intermediate result."""
    fig, axes = plt.subplots(len(build.shown), 3, figsize=(15, 4.2 * len(build.shown)), squeeze=False)
    for row, u in zip(axes, build.shown):
        r, k, s = build.runs[u], k50[u], active[u]
        ax = row[0]
        if k.k50.notna().any():
            sns.boxplot(data=k, x="set", y="k50", hue="set", order=["M", "C"], palette=plots.GROUP_COLORS, ax=ax,
                        showfliers=False, legend=False)
            sns.stripplot(data=k.sample(min(len(k), 2000), random_state=0), x="set", y="k50", order=["M", "C"],
                          color="k", size=1.5, alpha=0.3, ax=ax)
            ax.set_yscale("log")
        else:
            plots.missing(ax, "no examples")
        ax.axhline(1, ls="--", color=LOOKUP_COLOR, lw=1.5, label="look-up: 1 neuron")
        if not np.isnan(summary[u].k50_C):
            ax.axhline(T["k50_ratio_min"] * summary[u].k50_C, ls=":", color="k", lw=1, label="threshold")
        ax.set(title=f"{label(u)}: neurons carrying half the attribution", xlabel="", ylabel="k50")
        ax.legend(fontsize=8, loc="upper left")
        ax = row[1]
        if len(s):
            sns.histplot(s.activity.clip(lower=1e-4), bins=30, log_scale=True, color=plots.GROUP_COLORS["M"], ax=ax)
        else:
            plots.missing(ax, "no memorized examples")
        ax.axvline(1 / max(len(build.sets[u]["C"]), 1), ls="--", color=LOOKUP_COLOR, lw=1.5, label="look-up: one input")
        ax.axvline(1 - T["activity_quantile"], ls="--", color=DISTRIBUTED_COLOR, lw=1.5, label="layer average")
        ax.axvline(T["activity_fraction_min"], ls=":", color="k", lw=1, label="threshold")
        ax.set(title="top neurons of memorized digits",
               xlabel="share of clean inputs the neuron is active on (0 drawn at 1e-4)")
        ax.legend(fontsize=8, loc="upper left")
        _drops_panel(row[2], build, summary, u, neurons.prompt_position_names(u.task, r.data.train.prompt.shape[1]))
    plt.tight_layout()
    return fig


def _drops_panel(ax, build: Build, summary: dict, u, names: list) -> None:
    def drops(v):
        return (summary[v].position_drops or [np.nan] * len(names)) + \
            [summary[v].intermediate_drop, summary[v].intermediate_control_drop]

    bars = pd.DataFrame({"removed": names + ["intermediate", "random subspace"], "drop": drops(u),
                         "kind": ["input position"] * len(names) + ["intermediate result", "control"]})
    sns.barplot(data=bars, x="removed", y="drop", hue="kind", dodge=False, ax=ax, order=list(bars["removed"]),
                palette={"input position": plots.GROUP_COLORS["M"], "intermediate result": DISTRIBUTED_COLOR,
                         "control": plots.GROUP_COLORS["control"]})
    dots = pd.DataFrame([{"removed": x, "drop": d} for v in build.groups[(u.task, u.condition)]
                         for x, d in zip(bars["removed"], drops(v)) if not np.isnan(d)])
    if len(dots):
        ax.scatter(dots["removed"], dots["drop"], color="k", s=14, zorder=3, label="each seed")
    ax.axhline(T["drop_min"], ls=":", color="k", lw=1)
    if np.isnan(summary[u].intermediate_drop):
        ax.text(len(names), 0.02, "not\nfound", ha="center", fontsize=8)
    if bars["drop"].isna().all():
        plots.missing(ax, "no memorized examples")
    ax.set(ylim=(min(-0.05, dots["drop"].min() - 0.05) if len(dots) else -0.05, 1.02),
           title="share of P(noisy label) removed", xlabel="", ylabel="mean drop")
    ax.tick_params(axis="x", rotation=45)
    ax.legend(fontsize=8, loc="upper right")


# each statistic per task and condition: {name} is one value per seed, {part} the clause its check chooses
HYPOTHESES = (
    "the median k50 of a memorized {noun} is {k50_M} neurons against {k50_C} for a correct answer {noun} (ratio "
    "{k50_ratio}; threshold {k50_ratio_min}), {k50}. The top neurons of memorized {noun}s are active on a median "
    "share {top_activity_median} of clean inputs (a look-up neuron: about {one_input}; the layer average: "
    "{layer_average}; threshold {activity_fraction_min}), {activity}. Resampling one prompt position at a time, "
    "{positions_over_min} of {n_pos} positions each remove at least {drop_min} of P(noisy label) (largest mean drop "
    "{max_position_drop}; at least {positions_min} required), {positions}; erasing the intermediate result removes "
    "{intermediate_drop} (random subspaces of the same rank: {intermediate_control_drop}; information-matched "
    "erasures: {intermediate_matched_drop}), {intermediate}. ")
CLAUSES = {  # part: (its check, the number it judges, the clause where it passes, where it does not)
    "k50": ("c4.k50", "k50_ratio", f"so a memorized label is written by at least {T['k50_ratio_min']} times as many "
            "neurons as a correct answer (a look-up would use one)", f"so memorized labels are written by fewer than "
            f"{T['k50_ratio_min']} times as many neurons as correct answers"),
    "activity": ("c4.activity", "top_activity_median", "so they are shared with other inputs",
                 "so they are active on fewer clean inputs than the claim requires"),
    "positions": ("c4.positions", "max_position_drop", "so the label depends on several input tokens",
                  "so fewer positions than required matter this much"),
    "intermediate": ("c4.intermediate.registered", "intermediate_drop", "so the memorized label depends on the "
                     "intermediate result, which a look-up would bypass", "so this build does not show the dependency "
                     "on the intermediate result that separates a distributed encoding from a look-up"),
}


# generated: which clause each statistic gets depends on its check on each seed
def hypotheses_text(groups_: dict, summary: dict, evaluations: dict, sizes: dict) -> str:
    """Per task and condition: :data:`HYPOTHESES` and the registered checks not passed (``sizes``: unit ->
    {"M": |M|, "C": |C|})."""
    lines = []
    for (task, condition), members in groups_.items():
        head = (f"- **{where(task, condition)}** ({seeds_head([u.seed for u in members], plural=True)}; |M| = "
                f"{' / '.join(str(sizes[u]['M']) for u in members)}): ")
        not_passed = registered_not_passed({u.seed: evaluations[u][1] for u in members})
        if not any(sizes[u]["M"] for u in members):
            lines.append(head + "no memorized examples, so none of the measures applies. " + not_passed)
            continue
        values_ = {k: each_seed(summary, members, k, "d" if k == "positions_over_min" else ".3g") for k in SCALARS}
        clauses = {part: choose_by([evaluations[u][1] for u in members], check, yes, no,
                                   [getattr(summary[u], key) for u in members])
                   for part, (check, key, yes, no) in CLAUSES.items()}
        lines.append(head + HYPOTHESES.format(
            **T, **values_, **clauses, noun="digit" if task == "fda" else "label",
            layer_average=num(1 - T["activity_quantile"], ".3g"),
            one_input=values([1 / sizes[u]["C"] if sizes[u]["C"] else None for u in members], ".3g"),
            n_pos=values([len(summary[u].position_drops or []) or None for u in members], "d")) + not_passed)
    return "\n".join(lines)


# -- amendment 1: the statistics on a known look-up, and the information-matched erasure -------------
@plots.seeded_jitter
def controls_figure(units: list, evaluations: dict, found: dict):
    """Amendment 1's controls, one number per seed: each statistic on M and on the known look-up with
    its threshold, and the intermediate drop over the information-matched control's."""
    table = pd.DataFrame([{"where": where(u.task, u.condition), "seed": u.seed, "set": who,
                           "k50 / (threshold x k50 on C)": s["k50_M"] / (T["k50_ratio_min"] * s["k50_C"])
                           if s["k50_C"] else np.nan,
                           "top-neuron activity": s["top_activity_median"],
                           "positions removing >= drop_min": s["positions_over_min"]}
                          for u in units
                          for who, s in (("M", evaluations[u][0]), ("look-up", found[u].summary.record()))])
    over = pd.DataFrame([{"where": where(u.task, u.condition), "seed": u.seed,
                          "over matched": evaluations[u][0]["intermediate_over_matched"]} for u in units])
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    panels = [(table, "k50 / (threshold x k50 on C)", 1.0, "threshold", None),
              (table, "top-neuron activity", T["activity_fraction_min"], "threshold", None),
              (table, "positions removing >= drop_min", T["positions_min"], "threshold", None),
              (over, "over matched", T["intermediate_over_matched_min"], "amended margin",
               "intermediate drop minus matched control's drop")]
    palette = {"M": plots.GROUP_COLORS["M"], "look-up": LOOKUP_COLOR}
    for ax, (frame, col, threshold, line, title) in zip(axes, panels):
        data = frame.dropna(subset=[col])
        if len(data) and frame is over:  # one colour, every unit on the axis
            sns.stripplot(data=over, x="where", y=col, color=DISTRIBUTED_COLOR, size=7, jitter=0.1, ax=ax)
        elif len(data):
            sns.stripplot(data=data, x="where", y=col, hue="set", palette=palette, dodge=True, size=7, jitter=0.1, ax=ax)
        else:
            plots.missing(ax, "not measured")
        ax.axhline(threshold, ls=":", color="k", lw=1, label=line)
        if col == "top-neuron activity" and len(data) and (data[col] > 0).any():
            ax.set_yscale("symlog", linthresh=1e-3)
        ax.set(xlabel="", title=title or col)
        ax.tick_params(axis="x", rotation=20)
        ax.legend(fontsize=8)
    plt.tight_layout()
    return fig


STATISTIC_NAMES = {"k50": "the median k50 (threshold: the k50 ratio times the median k50 on C)",
                   "activity": "the median top-neuron activity", "positions": "the count of input positions"}


def lookup_verdict(checks: list, n: int) -> str:
    """What the look-up control (``c4.<statistic>.lookup`` of each seed) says about a statistic."""
    separates = sum(c is not None and c.passed is True for c in checks)
    fails = sum(c is not None and c.passed is False for c in checks)
    if separates == n:
        return "the look-up fails it, so the statistic separates a look-up from a distributed encoding and its check decides"
    if fails == n:
        return ("the look-up passes it, so the statistic cannot tell a look-up from a distributed encoding: its "
                "registered check is superseded and does not count in the amended reading (amendment 2, 8.1)")
    unmeasured = n - separates - fails
    if separates + fails == 0:
        return ("the look-up could not be measured, so the statistic is not validated: its check is superseded and "
                "does not count in the amended reading, nor does it leave the seed unresolved (amendment 2, 8.5)")
    return (f"the look-up fails it on {separates} of {n} seeds and passes it on {fails}"
            + (f" (not measured on {unmeasured})" if unmeasured else "")
            + ", so the check is superseded on the seeds where it " + ("passes or was not measured" if unmeasured
                                                                          else "passes"))


# generated: what each look-up control decides, and on which seeds, depends on the result
def controls_text(groups_: dict, evaluations: dict) -> str:
    """Per task and condition: each statistic on the known look-up and what its control decides, then
    :func:`_intermediate_text`."""
    lines = []
    for (task, condition), members in groups_.items():
        kind = "atomic facts" if task == "thr" else "grafted look-up"
        sentences = []
        for short, text in STATISTIC_NAMES.items():
            found = [verdicts.find(evaluations[u][1], f"c4.{short}.lookup") for u in members]
            sentences.append(f"{text} gives {values([c.value if c is not None else None for c in found], '.3g')} on the "
                             f"{kind} (threshold {values([c.threshold if c is not None else None for c in found], '.3g')}):"
                             f" {lookup_verdict(found, len(members))}")
        rests = (" No look-up statistic is validated on any seed: the amended verdict rests on the intermediate "
                 "dependency alone." if all(evaluations[u][0].get("rests_on_intermediate_alone") for u in members) else "")
        lines.append(f"- **{where(task, condition)}**: " + ". ".join(x[0].upper() + x[1:] for x in sentences)
                     + f". Finally, {_intermediate_text(members, evaluations)}." + rests)
    return "\n".join(lines)


# generated: whether the intermediate drop beats the matched control, and on which seeds, depends on the result
def _intermediate_text(members: list, evaluations: dict) -> str:
    margin = T["intermediate_over_matched_min"]
    overs = [evaluations[u][0].get("intermediate_over_matched", float("nan")) for u in members]
    if not any(measured(o) for o in overs):
        return ("the intermediate result was not erased (no site found or no memorized example), so its checks are "
                "unresolved (amendment 2, 8.5: the intervention cannot run, and a missing number never decides)")
    ok = sum(o >= margin for o in overs if measured(o))
    text = (f"erasing the intermediate result removes {values(overs, '.3g')} more of P(noisy label) than the "
            f"information-matched control (margin {margin}), "
            + ("enough on every seed" if ok == len(members) else "not enough on any seed" if ok == 0
               else f"enough on {ok} of {len(members)} seeds"))
    siteless = [str(u.seed) for u in members if evaluations[u][0].get("erasure_layers") == []]
    if siteless:
        text += (f"; on seed{'s' if len(siteless) > 1 else ''} {', '.join(siteless)} no layer carries the result at "
                 f"{MIN_OVER_CHANCE:g} x chance on C, so the removal cannot run and both intermediate checks are "
                 "unresolved there (amendment 2, 8.5)")
    return text


# -- the claim's metrics and checks, and the records -------------------------------------------------
def results(build: Build, result: ClaimResult) -> list[dict]:
    """Each unit's seed result for the record (its metrics stored as their dict)."""
    return [verdicts.seed_result(u, result.metrics[u], result.checks[u], configs=[u.noisy]) for u in build.units]


@dataclass(frozen=True)
class C4Sections:
    """What C4 is judged on, per unit: :func:`summaries`, :func:`dependency` and :func:`lookups`."""

    summary: dict
    dependency: Dependency
    lookups: dict

    def __post_init__(self):
        if set(self.summary) != set(self.lookups) or not set(self.summary) <= set(self.dependency.sites):
            raise ValueError("C4Sections: summary, lookups and dependency must cover the same units")


def evaluate(build: Build, sections: C4Sections) -> ClaimResult:
    """Per unit: the claim's metrics (:class:`rote.verdicts.c4.C4Metrics`) and checks, with the look-up
    control (:func:`rote.verdicts.c4.checks`; the only caller of :mod:`rote.verdicts.c4`)."""
    depends, judged = sections.dependency, {}
    for u in build.units:
        summary, removal = sections.summary[u], depends.removal[u]
        matched = bool(len(removal)) and "matched" in set(removal.method)  # the control computed
        setting = verdicts.c4.Setting(len(build.sets[u]["M"]), len(build.sets[u]["C"]), len(summary.position_drops),
                                      depends.sites[u]["layers"], depends.rank, matched)
        judged[u] = verdicts.c4.checks(summary, sections.lookups[u], setting)
    return ClaimResult(SPEC.id, {u: m for u, (m, _) in judged.items()}, {u: c for u, (_, c) in judged.items()})

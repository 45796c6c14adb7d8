"""Chapter 07, X1 (beyond the paper): the gen cost (twin gen - noisy gen) against model width
(protocol 9), the grid from :func:`rote.plan.x1_units`. Sections: the grid and what of it this page
measured (:func:`grid`, :func:`load`, :func:`study`), the cost against width, the learning curves per
width, the cost against the noise ratio (shown, not judged) and the Verdict; the checks are
:mod:`rote.verdicts.x1`, called in :func:`evaluate` only. Without ``train_grid`` the chapter loads C1's
shared runs and what else is cached; a width not trained is unresolved, and no two widths: not run.
"""

from __future__ import annotations

import functools
import math
import shlex
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Protocol

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from .. import claims, plan, plots, verdicts
from ..analysis import curves
from ..claims import THRESHOLDS
from ..config import ConfigError, RunConfig
from ..plan import Unit
from ..specs.x1 import SPEC
from ..report import num, seeds_head
from ..settings import Settings
from ..verdicts import Check
from ..verdicts.x1 import DECIMALS, NOT_TRAINED
from .params import ClaimParams, checked_elsewhere, flag, param, parse_list, task_list

CLAIM = SPEC.id


def _rounded(x: float) -> float:
    """``x`` as X1's checks compare it (:data:`rote.verdicts.x1.DECIMALS` decimals), for the sentences."""
    return round(float(x), DECIMALS)


def _listed(xs, sep: str = ", ") -> str:
    """Widths, noise ratios or seeds in prose and commands: ``16, 32``, ``0.05,0.1``."""
    return sep.join(f"{x:g}" for x in xs)


def _runs(units: Iterable[Unit]) -> list[RunConfig]:
    """The noisy runs and twins of ``units``, each once."""
    return list({c.key: c for u in units for c in (u.noisy, u.clean)}.values())


# -- the grid --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Grid:
    """X1's runs for a profile: 12.4's selection runs (per width other than the profile's, seed 0's twin at
    each rate of the selection) and the ``rates`` they chose (:class:`rote.plan.RateChoice`); one unit (noisy
    run and twin) per (width, seed) at its chosen rate, a width waiting for its selection left out; and one
    unit per (noise ratio, seed) at the profile's width. ``overrides`` and ``seed_list``: as asked for;
    ``settings``: the book's (its runs folder)."""

    profile: str
    widths: tuple[int, ...]
    noise_ratios: tuple[float, ...]
    width_units: tuple[Unit, ...]
    ratio_units: tuple[Unit, ...]
    selection: dict = field(default_factory=dict)
    rates: dict = field(default_factory=dict)
    overrides: dict = field(default_factory=dict)
    seed_list: tuple[int, ...] = ()
    settings: Settings = Settings()

    @property
    def seeds(self) -> list[int]:
        return list(self.seed_list) or sorted({u.seed for u in self.width_units})

    @property
    def selection_configs(self) -> list[RunConfig]:
        return [c for runs in self.selection.values() for c in runs]

    @property
    def waiting(self) -> list[int]:
        """The widths whose runs wait for their learning-rate selection (12.4)."""
        return [w for w, choice in self.rates.items() if choice.waiting]

    @property
    def configs(self) -> list[RunConfig]:
        """Every distinct run of the grid (selection runs, noisy runs and twins), each once."""
        return list({c.key: c for c in self.selection_configs + _runs(self.width_units + self.ratio_units)}.values())

    @property
    def sweep_width(self) -> int:
        return self.ratio_units[0].noisy.model.d_model

    @property
    def noise_ratio(self) -> float:
        """The noise ratio of the width grid."""
        return self.width_units[0].noisy.data.noise_ratio


def grid(profile: str, tasks: Iterable[str] = ("fda",), seeds: list[int] | None = None,
         overrides: Mapping[str, object] | None = None, widths: object = None, noise_ratios: object = None,
         settings: Settings = Settings()) -> Grid:
    """The chapter's parameters, validated (a ConfigError names the problem before anything trains),
    and X1's grid from the plan (``seeds`` None: the book's, ``settings.seeds``), each width at the rate its
    selection chose (12.4) on the selection runs cached in the settings' runs folder
    (:func:`rote.plan.cached_final_gen`; :func:`resolved` chooses on metric tables instead)."""
    return _grid(profile, tasks, settings.seed_list if seeds is None else seeds, overrides, (widths, noise_ratios),
                 functools.partial(plan.cached_final_gen, root=settings.runs), settings)


def _grid(profile: str, tasks: Iterable[str], seeds: list[int], overrides: Mapping[str, object] | None,
          sizes: tuple[object, object], final_gen, settings: Settings) -> Grid:
    """:func:`grid`, each width's rate chosen from ``final_gen(config)`` (a selection twin's final gen, None:
    not trained); ``sizes``: (widths, noise ratios)."""
    widths, noise_ratios = sizes
    if list(tasks) != ["fda"]:
        raise ConfigError(f"X1 is an FDA claim (protocol 9); tasks must be ['fda'], got {list(tasks)}")
    width_list, ratio_list = plan.x1_grid(profile, widths, noise_ratios, overrides)
    seed_values = list(seeds)
    rates = plan.x1_rates(profile, final_gen, overrides, width_list)
    width_units, ratio_units = plan.x1_units(profile, seed_values, overrides, width_list, ratio_list,
                                             {w: choice.chosen for w, choice in rates.items()})
    return Grid(profile, width_list, ratio_list, tuple(width_units), tuple(ratio_units),
                plan.x1_selection(profile, overrides, width_list), rates, dict(overrides or {}), tuple(seed_values),
                settings)


def resolved(g: Grid, metrics: Mapping[str, pd.DataFrame]) -> Grid:
    """``g`` with each width's rate chosen on the selection runs' metric tables in ``metrics`` (run key ->
    table; a selection run not in it is not trained: its width waits)."""
    def final_gen(config: RunConfig) -> float | None:
        return curves.final(metrics[config.key], "gen") if config.key in metrics else None

    return _grid(g.profile, ["fda"], list(g.seeds), g.overrides, (g.widths, g.noise_ratios), final_gen, g.settings)


@dataclass(frozen=True)
class Params(ClaimParams):
    """Chapter 07's parameters (its notebook's ``parameters`` cell). Widths and noise ratios are
    checked with the grid they make (:func:`grid`: whole widths divisible by n_heads, at least two,
    ratios in [0, 1), both increasing); a string "16,32" is a list there."""

    tasks: list[str] = param(["fda"], task_list(("fda",)))
    widths: list[int] | None = param(None, checked_elsewhere(  # checked by the grid
        "None or increasing model widths", parse_list,
        edges=((None, True), ([8, 16], True), ([8], False), ([0, 8], False), ([16, 8], False), ([8, 8], False))),
        "X1 compares widths: at least two, each divisible by the runs' n_heads",
        per_profile=lambda p: list(plan.X1_WIDTHS[p]))
    noise_ratios: list[float] | None = param(None, checked_elsewhere(  # checked by the grid
        "None or increasing noise ratios", parse_list,
        edges=((None, True), ([0.0], True), ([-1e-9], False), ([math.nextafter(1.0, 0.0)], True), ([1.0], False),
               ([0.2, 0.1], False))), "each a noise ratio in [0, 1)",
        per_profile=lambda p: list(plan.X1_NOISE_RATIOS))
    train_grid: bool = param(True, flag())

    def check_together(self) -> None:
        """widths: whole numbers > 0, at least two, each divisible by the runs' n_heads; noise_ratios: in
        [0, 1); both increasing without repeats; the runs' noise: FDA random, noise_ratio > 0
        (rote.plan.x1_grid)."""
        grid(self.profile, self.tasks, self.seeds, self.overrides, self.widths, self.noise_ratios, self.book)


def shared_configs(g: Grid) -> list[RunConfig]:
    """The grid's runs that chapter C1 trains too: C1's FDA random units (noisy run and twin, every seed),
    at the profile's width (or the ``d_model`` override) and noise ratio."""
    return _runs(u for u in g.ratio_units + g.width_units
                 if u.noisy.model.d_model == g.sweep_width and u.noisy.data.noise_ratio == g.noise_ratio)


def load(g: Grid, train_grid: bool = True) -> dict[str, pd.DataFrame]:
    """The metric tables of the grid's runs (run key -> :attr:`rote.runs.Run.metrics`): with ``train_grid``
    every run, trained where missing; else the runs shared with C1 (trained where missing: C1 needs
    them) and whatever else of the grid is cached, nothing trained (:func:`rote.runs.lookup`)."""
    from ..runs import get_or_train, lookup

    def fetch(configs, allowed) -> dict[str, pd.DataFrame]:
        root = g.settings.runs
        runs = {c.key: get_or_train(c, root=root, progress=g.settings.train_progress) if c.key in allowed
                else lookup(c, root) for c in configs}
        return {key: run.metrics for key, run in runs.items() if run is not None}

    selection = g.selection_configs  # 12.4: first the selection, then each width at the rate it chose
    chosen = fetch(selection, {c.key for c in selection} if train_grid else set())
    g = resolved(g, chosen)
    trained = {c.key for c in (g.configs if train_grid else shared_configs(g))}
    return {**chosen, **fetch(g.configs, trained)}


def glue_values(g: Grid) -> dict[str, object]:
    """The protocol's numbers and the grid, for the chapter's method text."""
    th, c1 = THRESHOLDS[CLAIM], THRESHOLDS["C1"]
    return {"x1_cost_max": th["cost_largest_max"], "x1_rise_max": th["rise_max"], "x1_mem_min": th["final_mem_min"],
            "x1_t_gen_level": c1["t_gen_level"], "x1_t_mem_level": c1["t_mem_level"],
            "x1_final_window": curves.FINAL_WINDOW, "x1_widths": _listed(g.widths),
            "x1_twin_gen_min": th["twin_gen_min"], "x1_plateau_rise_max": th["plateau_rise_max"],
            "x1_plateau_at": f"{curves.PLATEAU_AT:.0%}", "x1_lr_factors": _listed(plan.X1_LR_FACTORS),
            "x1_noise_ratio": g.noise_ratio, "x1_noise_ratios": _listed(g.noise_ratios),
            "x1_sweep_width": g.sweep_width, "x1_profile": g.profile}


# -- measures --------------------------------------------------------------------------------------
def measure(noisy: pd.DataFrame, clean: pd.DataFrame) -> dict:
    """The X1 measures of one noisy run and its twin, from their metric tables (module docstring)."""
    c1 = THRESHOLDS["C1"]
    t_gen = curves.first_evaluated(noisy, "gen", c1["t_gen_level"])
    t_mem = curves.first_evaluated(noisy, "mem", c1["t_mem_level"])
    before = noisy if t_mem is None else noisy[noisy["step"] < t_mem]
    gen_twin, gen_noisy, at_90 = curves.final(clean, "gen"), curves.final(noisy, "gen"), curves.plateau(noisy, "mem")
    return {"gen_twin": gen_twin, "gen_noisy": gen_noisy, "cost": gen_twin - gen_noisy,
            "mem": curves.final(noisy, "mem"), "rec": curves.final(noisy, "rec"), "t_gen": t_gen, "t_mem": t_mem,
            "peak_gen_before_t_mem": float(before["gen"].max()) if len(before) else math.nan,
            "mem_at_90": at_90.earlier, "mem_at_90_step": at_90.at_step}


# the width table's columns end with section 11's sample sizes, which the checks' intervals read
WIDTH_COLUMNS = ["width", "seed", "gen_twin", "gen_noisy", "cost", "mem", "rec", "t_gen", "t_mem",
                 "peak_gen_before_t_mem", "mem_at_90", "mem_at_90_step", "n_test", "n_test_twin", "n_noisy"]
RATIO_COLUMNS = ["noise_ratio", "seed", "width", "gen_twin", "gen_noisy", "cost", "mem"]


# -- the study: the grid measured, judged (:func:`evaluate`) and put into sentences ----------------
class RunCosts(Protocol):
    """How long runs train on the machine that builds the page; the book tool's estimates
    (:mod:`rote.build.timings`) are one, passed in by the notebook (the library does not import the tool)."""

    def estimate_seconds(self, config: RunConfig) -> float: ...

    def fmt_seconds(self, seconds: float) -> str: ...

    def pool_seconds(self, seconds: list[float], workers: int) -> float: ...

    def default_workers(self) -> int: ...


@dataclass
class Study:
    """X1 measured on a grid: ``widths`` (a row per width and seed), ``ratios`` (a row per noise ratio and
    seed), ``curves`` (with the twin's gen) and per seed its metrics and checks (:func:`evaluate`)."""

    grid: Grid
    widths: pd.DataFrame
    ratios: pd.DataFrame
    curves: pd.DataFrame
    evaluations: dict[int, tuple[verdicts.x1.X1Metrics, list[Check]]] = field(default_factory=dict)
    missing: list[RunConfig] = field(default_factory=list)  # runs of the grid not trained (:func:`load`)
    costs: RunCosts | None = None  # the missing runs' training time estimates (:func:`study`)

    def _values(self, rows: pd.DataFrame, column: str, spec: str = ".3f") -> str:
        """One value per seed of the grid, in seed order (:func:`rote.report.num`): "never" where it is not
        reached, "not trained" where the seed has no row."""
        by_seed = dict(zip(rows["seed"], rows[column]))
        return " / ".join(num(by_seed[s], spec, "never") if s in by_seed else NOT_TRAINED for s in self.grid.seeds)

    # -- what of the grid is trained ---------------------------------------------------------------
    @property
    def judged(self) -> bool:
        """Whether some seed has two widths trained (X1 compares widths): else the record is not run."""
        return any(sum(m.trained) >= 2 for m, _ in self.evaluations.values())

    def train_command(self) -> str:
        """The command that trains the missing runs: ``rote train --plan --x1`` for the profile's grid and
        seeds 0 .. N-1, else a rerun of the chapter with its parameters (which trains its grid)."""
        g = self.grid
        registered = [c.key for c in grid(g.profile, seeds=g.seeds).configs]
        if [c.key for c in g.configs] == registered and g.seeds == list(range(len(g.seeds))):
            return shlex.join(["python", "-m", "rote", "train", "--plan", "--x1", "--profile", g.profile,
                               "--seeds", str(len(g.seeds))])
        parts = ["python", "-m", "rote", "run", SPEC.chapter, "--profile", g.profile, "-p", "seeds",
                 _listed(g.seeds, ","), "-p", "widths", _listed(g.widths, ","),
                 "-p", "noise_ratios", _listed(g.noise_ratios, ",")]
        return shlex.join(parts + [word for name, value in plan.differs(g.width_units[0].noisy, g.profile).items()
                                   if name not in (*plan.SEED_NAMES, "d_model") for word in ("-p", name, str(value))])

    def missing_table(self) -> pd.DataFrame:
        """One row per run of the grid not trained: width, noise ratio, seed, noisy run or twin, its key
        and its estimated training time (one thread) on this machine."""
        seeds = {c.key: u.seed for u in self.grid.width_units + self.grid.ratio_units for c in (u.noisy, u.clean)}
        costs = self.costs
        selection = {c.key: f"twin, lr {c.train.lr:g} (rate selection)" for c in self.grid.selection_configs}
        return pd.DataFrame([{"width": c.model.d_model, "noise ratio": c.data.noise_ratio, "seed": seeds.get(c.key, 0),
                              "run": selection.get(c.key) or ("twin" if c.data.noise_ratio == 0 else "noisy"),
                              "key": c.key,
                              "estimate": costs.fmt_seconds(costs.estimate_seconds(c))} for c in self.missing])

    def not_run_reason(self) -> str:
        """Why the record is not run: the grid was not trained, how to train it, and how long that takes."""
        seconds = sum(self.costs.estimate_seconds(c) for c in self.missing)
        return (f"X1's grid was not trained in this build ({len(self.missing)} of its {len(self.grid.configs)} "
                f"runs missing; `{self.train_command()}` trains them, about {self.costs.fmt_seconds(seconds)} of "
                f"training on one thread on the machine that built this page)")

    def _estimate(self) -> str:
        """How long the missing runs train, on one thread and on the default workers."""
        seconds, workers = [self.costs.estimate_seconds(c) for c in self.missing], self.costs.default_workers()
        return (f"about {self.costs.fmt_seconds(sum(seconds))} on one thread, "
                f"~{self.costs.fmt_seconds(self.costs.pool_seconds(seconds, workers))} on {workers} worker"
                f"{'s' if workers != 1 else ''}")

    # generated: which rate each width's selection chose, and which widths amendment 3 leaves unresolved
    def rates_text(self) -> str:
        """Protocol 12.4 and 12.2-12.3 on the page: per width other than the profile's, the learning rate its
        selection chose on seed 0's twin (with each rate's final gen; at the grid's edge, said), or that it waits
        for its selection; then each width and seed whose twin did not train or whose noisy run did not finish
        memorizing (unresolved in the amended reading)."""
        g, base = self.grid, plan.x1_base(self.grid.profile, self.grid.overrides).train.lr
        lines = [f"Learning rate per width (protocol 12.4): width {g.sweep_width} keeps the profile's lr {base:g}; "
                 "each other width trains at the rate under which seed 0's noise-free twin ends with the highest final "
                 "gen (a tie to the larger rate)."]
        for w, choice in g.rates.items():
            lines.append(f"- **width {w}**: " + _rate_words(choice, base))
        invalid = [f"- **width {w}, seed {seed}**: {why}" for seed, (m, _) in self.evaluations.items()
                   for w, why in m.invalid.items()]
        if invalid:
            lines += ["", "Unresolved in the amended reading (protocol 12.2, 12.3: a twin that did not train or a "
                          "noisy run that did not finish memorizing is evidence neither for nor against X1):", *invalid]
        return "\n".join(lines)

    def grid_text(self) -> str:
        """What of the registered grid this page measured: every run, or which are missing, the command
        that trains them and their estimate on the machine that built the page."""
        g, seeds = self.grid, seeds_head(self.grid.seeds, plural=True)
        if not self.missing:
            return f"All {len(g.configs)} runs of the registered grid are trained ({seeds})."
        have = sorted({int(w) for w in self.widths.width})
        shared = f" (width {g.sweep_width} is chapter C1's FDA random run)" if g.sweep_width in have else ""
        head = (f"**X1's grid was not trained in this build** (it is trained only when asked for: `make book X1=1`, "
                f"`python -m rote book --x1`, or this chapter named with `--chapter {SPEC.chapter}`). "
                if not self.judged else "**Part of X1's grid is not trained.** ")
        return (head + f"The registered grid is widths {_listed(g.widths)} at noise ratio {g.noise_ratio:g}, and "
                f"noise ratios {_listed(g.noise_ratios)} at width {g.sweep_width} ({seeds}). This page measures the "
                f"width{'s' if len(have) != 1 else ''} trained, {_listed(have) or 'none'}{shared}; "
                f"{len(self.missing)} of the grid's {len(g.configs)} runs are missing (table below). "
                f"`{self.train_command()}` trains them: {self._estimate()}, estimated on the machine that built this "
                f"page; then rebuild this page (`python -m rote run {SPEC.chapter} --profile {g.profile}`).")

    # -- the gen cost against model width ----------------------------------------------------------
    def trend(self, seed: int) -> str:
        """How the cost of one seed moves up the grid, in words."""
        metrics = self.evaluations[seed][0]
        widths, rises, rise_max = metrics.widths, metrics.rises, THRESHOLDS[CLAIM]["rise_max"]
        steps = [(a, b, r) for a, b, r in zip(widths, widths[1:], rises) if not math.isnan(r)]
        if not steps:
            return "cannot be followed (no two neighbouring widths trained)"
        among = " (among the neighbouring widths trained)" if len(steps) < len(rises) else ""
        up = [f"{a} to {b}" for a, b, r in steps if _rounded(r) > rise_max]
        if up:
            return f"rises by more than {rise_max:g} from width {', and from '.join(up)}{among}"
        if all(_rounded(r) < 0 for _, _, r in steps):
            return f"falls at every step up in width{among}"
        return f"never rises by more than {rise_max:g} from one width to the next{among}"

    # generated: the trend, where the cost ends and which widths do not memorize depend on the result
    def cost_sentence(self) -> str:
        """What the gen cost does across the widths, per seed, and where it ends against the margin."""
        parts = [f"{self._values(self.widths[self.widths.width == w], 'cost')} at width {w}" for w in self.grid.widths]
        seeds = seeds_head(self.grid.seeds, plural=True)
        head = f"The gen cost (twin gen minus noisy gen; {seeds}) is {', '.join(parts)}."
        if not self.judged:
            return head + " With one width trained there is nothing to compare it with: X1 is not run (see above)."
        trends = {s: self.trend(s) for s in self.grid.seeds}
        if len(set(trends.values())) == 1:
            trend = ("On every seed the cost " if len(trends) > 1 else "The cost ") + next(iter(trends.values())) + "."
        else:
            trend = "The cost " + "; ".join(f"{t} on seed {s}" for s, t in trends.items()) + "."
        idle = [f"width {w} on seed {s} (final mem {m:.3f})" for w, s, m in
                self.widths.loc[~self.widths.memorizes & self.widths.mem.notna(), ["width", "seed", "mem"]]
                .itertuples(index=False)]
        unresolved = (f" These widths do not memorize (final mem below {THRESHOLDS[CLAIM]['final_mem_min']:g}), so "
                      f"their cost cannot speak for benign memorization: {'; '.join(idle)}.") if idle else ""
        return f"{head} {trend} At the largest width the cost is {self._largest_end()}." + unresolved

    # generated: within or above the margin, on how many seeds, depends on the result
    def _largest_end(self) -> str:
        th, largest = THRESHOLDS[CLAIM], self.widths[self.widths.width == self.grid.widths[-1]]
        known = largest["cost"].dropna()  # 8.6: a cost that is missing is neither within the margin nor above it
        within = int(sum(_rounded(c) <= th["cost_largest_max"] for c in known))
        n, margin = len(known), f"the margin of {th['cost_largest_max']:g}"
        every = " on every seed" if n > 1 else ""
        end = (f"within {margin}{every}" if within == n else f"above {margin}{every}" if within == 0
               else f"within {margin} on {within} of {n} seeds")
        if len(largest) < len(self.grid.seeds):
            end = (f"{end.replace(every, '')} on the {n} of {len(self.grid.seeds)} seeds trained at width "
                   f"{self.grid.widths[-1]}" if n else f"not known: width {self.grid.widths[-1]} is {NOT_TRAINED}")
        if n < len(largest):
            end = (f"{end}, and missing on {len(largest) - n} seed{'s' if len(largest) - n > 1 else ''} (a NaN among "
                   "the last 5 evaluations)" if n else "missing (a NaN among the last 5 evaluations)")
        return end

    # -- the learning curves per width -------------------------------------------------------------
    # generated: whether the rule comes first at each width depends on the result
    def timing_sentence(self) -> str:
        """Per width: when the rule and the noise are learned, and how high gen got before memorization."""
        never = bool(len(self.widths)) and self.widths["t_mem"].isna().any()
        note = (f" Where mem never reaches {THRESHOLDS['C1']['t_mem_level']:g}, the peak is over the whole run."
                if never else "")
        return (f"Per width ({seeds_head(self.grid.seeds, plural=True)}):{note}\n\n"
                + "\n".join(self._timing_line(w) for w in self.grid.widths))

    def _timing_line(self, w: int) -> str:
        c1, rows = THRESHOLDS["C1"], self.widths[self.widths.width == w]
        if not len(rows):
            return f"- **width {w}**: {NOT_TRAINED}."
        learned = [not pd.isna(r.t_gen) for r in rows.itertuples()]
        first = all(ok and (pd.isna(r.t_mem) or r.t_gen < r.t_mem) for ok, r in zip(learned, rows.itertuples()))
        order = ("the rule first" + (", on every seed" if len(rows) > 1 else "") if first
                 else f"gen never reaches {c1['t_gen_level']:g}" if not any(learned)
                 else "the rule does not come first on every seed")
        return (f"- **width {w}**: gen reaches {c1['t_gen_level']:g} at step {self._values(rows, 't_gen', '.0f')} and "
                f"mem reaches {c1['t_mem_level']:g} at step {self._values(rows, 't_mem', '.0f')} ({order}); gen peaks "
                f"at {self._values(rows, 'peak_gen_before_t_mem')} before t_mem and ends at "
                f"{self._values(rows, 'gen_noisy')} (twin: {self._values(rows, 'gen_twin')}); final mem "
                f"{self._values(rows, 'mem')}.")

    def table(self) -> pd.DataFrame:
        """Per width and seed: the twin's and the noisy run's final gen, the cost, mem, t_gen, t_mem
        and the peak gen before t_mem."""
        columns = {"gen_twin": "gen (twin)", "gen_noisy": "gen (noisy)", "cost": "gen cost", "mem": "mem",
                   "t_gen": "t_gen", "t_mem": "t_mem", "peak_gen_before_t_mem": "peak gen before t_mem"}
        out = self.widths.set_index(["width", "seed"])[list(columns)].rename(columns=columns)
        for step in ("t_gen", "t_mem"):
            out[step] = out[step].map(lambda s: "never" if s is None or pd.isna(s) else str(int(s)))
        return out.round(3)

    # -- the gen cost against the noise ratio (shown, not judged) ----------------------------------
    def ratio_sentence(self) -> str:
        """The cost against the noise ratio at the sweep width (shown, not judged)."""
        parts = [f"{self._values(self.ratios[self.ratios.noise_ratio == r], 'cost')} at noise ratio {r:g}"
                 for r in self.grid.noise_ratios]
        seeds = seeds_head(self.grid.seeds, plural=True)
        head = f"At width {self.grid.sweep_width} the gen cost ({seeds}) is " + ", ".join(parts)
        complete = [g for _, g in self.ratios.sort_values("noise_ratio").groupby("seed")
                    if len(g) == len(self.grid.noise_ratios)]  # a seed with a ratio not trained says nothing here
        if len(self.grid.noise_ratios) == 1 or not complete:
            return head + "."
        grows = [all(_rounded(b) > _rounded(a) for a, b in zip(g.cost, g.cost.iloc[1:])) for g in complete]
        every = " on every seed" if len(grows) > 1 else ""
        how = (f"grows with the noise ratio{every}" if all(grows) else
               f"does not grow steadily with the noise ratio{every}" if not any(grows) else
               f"grows with the noise ratio on {sum(grows)} of {len(grows)} seeds")
        return head + f": it {how}."

    # -- the record --------------------------------------------------------------------------------
    def records(self) -> list[claims.ClaimRecord]:
        """The X1 record (one: FDA random) with every seed's checks and both readings; ``not run``, with
        the reason, when no seed has two widths trained."""
        if not self.judged:
            return [claims.placeholder(CLAIM, "fda", "random", self.grid.profile, self.grid.seeds,
                                       self.not_run_reason())]
        missing = {c.key for c in self.missing}
        results = []
        for seed, (metrics, seed_checks) in self.evaluations.items():
            mine = [u for u in self.grid.width_units + self.grid.ratio_units if u.seed == seed]
            chosen_by = self.grid.selection_configs  # 12.4: the runs that chose each width's rate
            configs = [c for c in {c.key: c for c in _runs(mine) + chosen_by}.values() if c.key not in missing]
            results.append(verdicts.seed_result(mine[0], metrics, seed_checks, configs))
        return verdicts.records(CLAIM, self.grid.profile, results)

    # generated: the verdict, and for a mixed one its reasons, depend on the result
    def verdict_sentence(self, rec: claims.ClaimRecord) -> str:
        """What the record's registered verdict says, in words, with its reason (:data:`WHY`)."""
        th, verdict = THRESHOLDS[CLAIM], rec.verdict_registered
        if verdict == claims.NOT_RUN:
            return f"**X1 ({rec.profile}): not run.** {rec.reason[:1].upper()}{rec.reason[1:]}."
        word = verdict.split()[0].rstrip(":")
        names = dict(largest=self.grid.widths[-1], margin=f"{th['cost_largest_max']:g}", rise=f"{th['rise_max']:g}",
                     mem=f"{th['final_mem_min']:g}", untrained=f"is {NOT_TRAINED} or " if self.missing else "")
        text = WHY.get(word, "").format(**names)
        if word == "mixed":
            rising = [str(s["seed"]) for s in rec.per_seed
                      if (verdicts.find(s["checks"], "x1.cost_largest") or {}).get("passed") is True
                      and (verdicts.find(s["checks"], "x1.not_rising") or {}).get("passed") is False]
            parts = ["the seeds disagree"] if len({s["registered"] for s in rec.per_seed}) > 1 else []
            if rising:
                parts.append(RISING.format(seeds=("seed " if len(rising) == 1 else "seeds ") + ", ".join(rising), **names))
            text = "; ".join(parts) + ": X1 neither holds nor fails on this grid"
        per_seed = "; ".join(f"seed {s['seed']}: {s['registered']}" for s in rec.per_seed)
        amended = ("" if rec.verdict_amended == verdict else
                   f" In the amended reading (protocol 12) X1 is **{rec.verdict_amended}**: "
                   + "; ".join(f"seed {s['seed']}: {s['amended']}" for s in rec.per_seed) + ".")
        return f"**X1 ({rec.profile}): {verdict}.** {text[:1].upper()}{text[1:]}. Per seed: {per_seed}.{amended}"


def _rate_words(choice: plan.RateChoice, base: float) -> str:
    """One width's learning-rate selection in words (:meth:`Study.rates_text`)."""
    if choice.waiting:
        left = sum(g is None for g in choice.final_gen)
        return (f"waits for its learning-rate selection ({left} of {len(choice.rates)} runs of seed 0's twin not "
                f"trained): its runs are {NOT_TRAINED}, so the width is unresolved")
    gens = ", ".join(f"lr {r:g}: {num(g, '.3f', 'missing')}" for r, g in zip(choice.rates, choice.final_gen))
    if choice.chosen is None:
        return f"no selection run has a final gen ({gens}): the width is unresolved"
    edge = (" It is at the edge of the grid: a rate beyond it might train the twin better."
            if choice.at_edge else "")
    return (f"lr {choice.chosen:g} ({choice.chosen / base:g} x the profile's), chosen on the twin's final gen "
            f"({gens}).{edge}")


_WITHIN = ("at the largest width ({largest}) the gen cost is within {margin} and it never rises by more than {rise} "
           "from one width to the next{every}: on this grid the cost of memorizing the noise shrinks with capacity "
           "until it is benign by C1's margin")
_ABOVE = ("at the largest width ({largest}) the gen cost is above {margin}{every}: up to this width, memorizing the "
          "noise costs generalization, and capacity alone does not make it benign")
WHY = {  # the registered verdict's first word: why, in words
    "holds": _WITHIN.replace("{every}", ", on every seed"), "pass": _WITHIN.replace("{every}", ""),
    "fails": _ABOVE.replace("{every}", " on every seed"), "fail": _ABOVE.replace("{every}", ""),
    "unresolved": "a width the verdict needs {untrained}does not memorize (final mem below {mem}), so the grid "
                  "cannot tell whether memorization is benign there"}
RISING = ("on {seeds} the cost ends within {margin} but rises by more than {rise} from one width to the next on the "
          "way, which protocol 9 counts as neither holding nor failing")


def study(g: Grid, metrics: Mapping[str, pd.DataFrame], costs: RunCosts) -> Study:
    """X1 measured and judged from the grid's metric tables (run key -> table, :func:`load`); a width
    without both runs is left out of its seed's rows (not trained); ``costs`` estimates the missing runs."""
    g = resolved(g, metrics)  # 12.4: each width at the rate its selection runs chose

    def trained(units):
        return [u for u in units if u.noisy.key in metrics and u.clean.key in metrics]

    def row(u):  # with how many examples the shares are measured on (:func:`rote.analysis.curves.sample_sizes`)
        noisy, twin = curves.sample_sizes(u.noisy), curves.sample_sizes(u.clean)
        return {"noise_ratio": u.noisy.data.noise_ratio, "width": u.noisy.model.d_model, "seed": u.seed,
                **measure(metrics[u.noisy.key], metrics[u.clean.key]), "n_test": noisy.n_test,
                "n_test_twin": twin.n_test, "n_noisy": noisy.n_noisy}

    have = trained(g.width_units)
    widths = pd.DataFrame([row(u) for u in have], columns=WIDTH_COLUMNS).sort_values(["width", "seed"])
    ratios = pd.DataFrame([row(u) for u in trained(g.ratio_units)], columns=RATIO_COLUMNS)
    by_step = pd.concat([metrics[u.noisy.key][["step", "gen", "mem", "rec"]].merge(
        metrics[u.clean.key][["step", "gen"]].rename(columns={"gen": "twin_gen"}), on="step", how="left")
        .assign(width=u.noisy.model.d_model, seed=u.seed) for u in have], ignore_index=True) if have else \
        pd.DataFrame(columns=["step", "gen", "mem", "rec", "twin_gen", "width", "seed"])
    widths, evaluations = evaluate(g, widths.reset_index(drop=True), ratios)
    return Study(g, widths, ratios, by_step, evaluations, missing=[c for c in g.configs if c.key not in metrics],
                 costs=costs)


# -- figure: the gen cost against model width ------------------------------------------------------
def gen_cost_by_width(widths: pd.DataFrame, margin: float):
    """X1's headline: the gen cost against width, one line per seed (hollow: does not memorize), the
    margin dashed; right, the final gen of twins and noisy runs and final mem."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    idle_labelled = False
    for i, (seed, g) in enumerate(widths.sort_values("width").groupby("seed")):
        (line,) = left.plot(g.width, g.cost, marker="o", label=f"seed {seed}")
        idle = g[~g.memorizes.astype(bool)]
        if len(idle):
            left.scatter(idle.width, idle.cost, s=110, facecolors="white", edgecolors=line.get_color(), zorder=3,
                         label=None if idle_labelled else "does not memorize")
            idle_labelled = True
        right.plot(g.width, g.gen_twin, ls="--", marker="o", color=plots.METRIC_COLORS["gen"], alpha=0.6,
                   label="gen, twin" if i == 0 else None)
        right.plot(g.width, g.gen_noisy, marker="o", color=plots.METRIC_COLORS["gen"],
                   label="gen, noisy" if i == 0 else None)
        right.plot(g.width, g.mem, marker="s", color=plots.METRIC_COLORS["mem"], label="mem, noisy" if i == 0 else None)
    if widths.cost.isna().all():
        plots.missing(left, "no width has a gen cost")
    left.axhline(margin, ls="--", color="k", lw=1)
    left.text(widths.width.min(), margin, " margin", va="bottom", fontsize=8)
    ticks = sorted(widths.width.unique())
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(w) for w in ticks])
        ax.minorticks_off()
        ax.set_xlabel("model width (d_model)")
        ax.legend(fontsize=8)
    left.set(ylabel="gen cost (twin gen - noisy gen)", title="Gen cost against model width")
    right.set(ylabel="final accuracy (mean of last 5)", ylim=(-0.02, 1.02), title="Final gen and mem")
    fig.tight_layout()
    return fig


# -- figure: the learning curves per width ---------------------------------------------------------
def curves_by_width(curves: pd.DataFrame, timing: pd.DataFrame):
    """One panel per width (``curves``: :attr:`Study.curves`): the noisy runs' gen, mem and rec, one
    line per seed, the twins' gen in grey (dashed), and each seed's t_gen (solid) and t_mem (dotted) from
    ``timing`` (rows with ``width``, ``seed``, ``t_gen``, ``t_mem``). Returns the figure."""
    widths = sorted(curves.width.unique())
    fig, axes = plt.subplots(1, max(1, len(widths)), figsize=(4.4 * max(1, len(widths)), 3.6), sharey=True,
                             squeeze=False)
    if not widths:
        plots.missing(axes[0][0], "no width has learning curves")
    for ax, w in zip(axes[0], widths):
        part = curves[curves.width == w]
        plots.learning_curves(part, ax=ax, columns=("gen", "mem", "rec"), title=f"width {w}")
        for i, (_, g) in enumerate(part.groupby("seed")):
            ax.plot(g.step, g.twin_gen, color="#666666", ls="--", lw=1, label="gen, twin" if i == 0 else None)
        for row in timing[timing.width == w].itertuples():
            for step, style in ((row.t_gen, "-"), (row.t_mem, ":")):
                if not pd.isna(step):  # None or NaN: never reached
                    ax.axvline(step, ls=style, lw=1, color="k", alpha=0.5)
        ax.legend(fontsize=8) if ax is axes[0][0] else ax.get_legend() and ax.get_legend().remove()
    fig.tight_layout()
    return fig


# -- figure: the gen cost against the noise ratio (shown, not judged) ------------------------------
def gen_cost_by_ratio(ratios: pd.DataFrame, title: str = ""):
    """The gen cost against the noise ratio (``ratios``: :attr:`Study.ratios`), one line per seed
    (shown, not judged). Returns the figure."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    sns.lineplot(data=ratios.assign(seed=ratios.seed.astype(str)), x="noise_ratio", y="cost", hue="seed",
                 marker="o", ax=ax)
    if ratios.cost.isna().all():
        plots.missing(ax, "no noise ratio has a gen cost")
    ax.set_xticks(sorted(ratios.noise_ratio.unique()))
    ax.set(xlabel="noise ratio", ylabel="gen cost (twin gen - noisy gen)", title=title or "Gen cost against noise ratio")
    return fig


# -- the claim's checks ----------------------------------------------------------------------------
def evaluate(g: Grid, widths: pd.DataFrame,
             ratios: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, tuple[verdicts.x1.X1Metrics, list[Check]]]]:
    """The width table with ``memorizes``, and per seed its metrics (with the noise-ratio sweep's costs,
    shown, not judged) and checks (:func:`rote.verdicts.x1.checks` against the registered widths)."""
    widths = widths.copy()
    widths["memorizes"] = [verdicts.x1.memorizes(m) for m in widths["mem"]]
    out = {}
    for seed in g.seeds:
        metrics, checks = verdicts.x1.checks(widths[widths.seed == seed], g.widths)
        mine = ratios[ratios.seed == seed]
        out[seed] = (replace(metrics, noise_ratio=g.noise_ratio, sweep_width=g.sweep_width,
                             cost_by_noise_ratio={f"{r:g}": c for r, c in zip(mine.noise_ratio, mine.cost)}), checks)
    return widths, out

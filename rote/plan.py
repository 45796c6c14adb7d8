"""The run plan: every trained run a profile's chapters need, listed without training anything.

The chapters build their runs with :func:`units` and :func:`sweep_ratios`, and ``rote plan`` / ``train
--plan`` / ``book`` list :func:`plan`, made of the same calls. A seed s sets data, noise and model seed
(protocol 7.1; N seeds: 0 .. N-1). A unit is one (task, condition, seed): its noisy run and its
noise-free twin (every FDA condition shares one twin). The C1 sweep varies the noise ratio; X1's grid
(protocol 9, :func:`x1_units`) varies the width and the noise ratio, and is listed only when asked for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Mapping

from .analysis.ranges import is_real, is_whole
from .config import TASKS, ConfigError, RunConfig, make_config, param_names
from .noise import kind_names

NO_NOISE_KIND = "-"  # THR's one condition: its noise has no kinds
SEED_NAMES = ("data_seed", "noise_seed", "model_seed")
PAPER_SWEEP = (0.0, 0.05, 0.1, 0.2)
# X1 (protocol 9): the widths per profile (its own among them: those runs are C1's); the noise ratios at its width
X1_WIDTHS = {"smoke": (16, 32), "quick": (64, 128, 256), "paper": (128, 256, 512)}
X1_NOISE_RATIOS = (0.05, 0.1, 0.2)
DEFAULT_SEEDS = 3  # protocol 7.1: the protocol's verdicts are the 3-seed ones (seeds 0, 1, 2)
# The parts of the plan (:func:`runs`); "x1-shared": of X1's grid only the runs C1 trains too
PARTS = ("noisy", "twin", "sweep", "x1", "x1-shared")


def task_conditions(task: str) -> tuple[str, ...]:
    """The noise conditions of ``task``, the primary first (7.3): FDA's noise kinds
    (:data:`rote.noise.NOISE_KINDS`), THR's one."""
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    return kind_names() if task == "fda" else (NO_NOISE_KIND,)


def seed_list(profile: str, n_seeds: int | None = None) -> list[int]:
    """Seeds 0 .. N-1: N from ``n_seeds`` (the book's seeds, :attr:`rote.settings.Settings.seeds`), else
    :data:`DEFAULT_SEEDS` (3)."""
    if n_seeds is None:
        n_seeds = DEFAULT_SEEDS
    if not at_least(n_seeds, 1):
        raise ConfigError(f"the number of seeds must be >= 1, got {n_seeds!r}")
    return list(range(n_seeds))


def at_least(n, least: int) -> bool:
    """Whether ``n`` is a whole number (not a bool, :func:`rote.analysis.ranges.is_whole`) >= ``least``."""
    return is_whole(n) and n >= least


def protocol_seeds(profile: str) -> list[int]:
    """The protocol's seeds (0, 1, 2), whatever the book's seeds are."""
    return seed_list(profile, DEFAULT_SEEDS)


def with_seed(config: RunConfig, seed: int) -> RunConfig:
    """The configuration with the seed triple (data, noise, model) set to ``seed``."""
    return config.replace(**{name: seed for name in SEED_NAMES})


@dataclass(frozen=True)
class Unit:
    """One (task, condition, seed): the noisy run and its noise-free twin."""

    task: str
    condition: str
    seed: int
    noisy: RunConfig
    clean: RunConfig


def _task_overrides(task: str, overrides: Mapping[str, object]) -> dict[str, object]:
    """The overrides that apply to ``task`` (another task's parameter is skipped; an unknown name is kept
    for make_config to report)."""
    mine = set(param_names(task))
    known = {name for t in TASKS for name in param_names(t)}
    return {k: v for k, v in overrides.items() if k in mine or k not in known}


def units(profile: str, tasks: Iterable[str] = ("fda", "thr"), seeds: list[int] | None = None,
          overrides: Mapping[str, object] | None = None,
          conditions: Mapping[str, Iterable[str]] | None = None) -> list[Unit]:
    """The units of ``tasks``: each condition (:func:`task_conditions`, or ``conditions[task]``; an FDA
    ``noise_kind`` override selects one) x each seed, with flat run ``overrides`` (never the seeds)."""
    overrides = dict(overrides or {})
    named = [k for k in SEED_NAMES if k in overrides]
    if named:
        raise ConfigError(f"{', '.join(named)} cannot be overridden: use seeds (a seed s sets data_seed = "
                          f"noise_seed = model_seed = s)")
    seeds = seed_list(profile) if seeds is None else list(seeds)
    for s in seeds:
        if not at_least(s, 0):
            raise ConfigError(f"seeds must be whole numbers >= 0, got {s!r}")
    out = []
    for task in tasks:
        known = task_conditions(task)
        task_overrides = _task_overrides(task, overrides)
        if conditions is not None and task in conditions:
            conds = tuple(conditions[task])
        elif task == "fda" and "noise_kind" in task_overrides:
            conds = (str(task_overrides["noise_kind"]),)
        else:
            conds = known
        for cond in conds:
            if cond not in known:
                raise ConfigError(f"unknown condition {cond!r} for {task}; choose one of {', '.join(known)}")
            params = {**task_overrides, **({"noise_kind": cond} if task == "fda" else {})}
            base = make_config(task, profile, **params)
            for seed in seeds:
                noisy = with_seed(base, seed)
                out.append(Unit(task, cond, seed, noisy, noisy.replace(noise_ratio=0.0)))
    return out


def sweep_ratios(profile: str, config: RunConfig) -> list[float]:
    """Noise ratios of the C1 sweep: 0, 0.05, 0.1, 0.2 on ``paper``, else 0 and the config's own."""
    if profile == "paper":
        return sorted(set(PAPER_SWEEP) | {config.data.noise_ratio})
    return sorted({0.0, config.data.noise_ratio})


@dataclass(frozen=True)
class PlanGrid:
    """A plan's grids instead of the profile's: ``sweep`` (C1's noise ratios; None: :func:`sweep_ratios`),
    ``widths`` and ``noise_ratios`` (X1's; None: the profile's; checked by :func:`x1_grid`); ``runs``: the runs
    folder whose cached selection runs choose X1's rates (None: the project's)."""

    sweep: tuple[float, ...] | None = None
    widths: object = None
    noise_ratios: object = None
    runs: object = None

    def final_gen(self, config: RunConfig) -> float | None:
        """:func:`cached_final_gen` in this grid's runs folder."""
        return cached_final_gen(config, self.runs)

    def __post_init__(self):
        if self.sweep is not None:
            object.__setattr__(self, "sweep", tuple(float(r) for r in self.sweep))


def plan(profile: str, seeds: list[int] | None = None, overrides: Mapping[str, object] | None = None,
         tasks: Iterable[str] | None = None, grid: PlanGrid | None = None, x1: bool = False) -> list[RunConfig]:
    """Every distinct run the book's chapters need: units, twins and sweep (:func:`runs`), with ``x1``
    also X1's grid (left out without FDA random noise)."""
    parts = ("noisy", "twin", "sweep") + (("x1",) if x1 else ())
    return runs(profile, parts, seeds, overrides, tasks, grid)


def runs(profile: str, parts: Iterable[str], seeds: list[int] | None = None,
         overrides: Mapping[str, object] | None = None, tasks: Iterable[str] | None = None,
         grid: PlanGrid | None = None) -> list[RunConfig]:
    """The runs of some parts of the plan (:data:`PARTS`), deduplicated by key, in a stable order (task,
    condition, seed; noisy run, twin, sweep; then X1's grid); ``grid``: :class:`PlanGrid`."""
    parts = tuple(parts)
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValueError(f"unknown plan parts {unknown}; choose from {', '.join(PARTS)}")
    grid = grid or PlanGrid()
    tasks = tuple(tasks or TASKS)
    out: dict[str, RunConfig] = {}
    if {"noisy", "twin", "sweep"} & set(parts):
        for unit in units(profile, tasks, seeds, overrides):
            ratios = sweep_ratios(profile, unit.noisy) if grid.sweep is None else list(grid.sweep)
            listed = ([unit.noisy] if "noisy" in parts else []) + ([unit.clean] if "twin" in parts else []) + \
                ([unit.noisy.replace(noise_ratio=r) for r in ratios] if "sweep" in parts else [])
            for config in listed:
                out.setdefault(config.key, config)
    if ("x1" in parts or "x1-shared" in parts) and "fda" in tasks:
        fda = make_config("fda", profile, **_task_overrides("fda", dict(overrides or {}))).data
        if fda.noise_kind == "random" and fda.noise_ratio > 0:
            if "x1" in parts:  # staged (12.4): the selection runs, then each width whose rate they chose
                for config in (c for selection in x1_selection(profile, overrides, grid.widths).values()
                               for c in selection):
                    out.setdefault(config.key, config)
                width_units, ratio_units = x1_units(profile, seeds, overrides, grid.widths, grid.noise_ratios,
                                                    x1_chosen(profile, overrides, grid.widths, grid.final_gen))
                listed_units = width_units + ratio_units
            else:
                listed_units = units(profile, ["fda"], seeds, overrides, conditions={"fda": ["random"]})
            for unit in listed_units:
                for config in (unit.noisy, unit.clean):
                    out.setdefault(config.key, config)
    return list(out.values())


def _grid_values(name: str, value: object, kind: type) -> list:
    """A grid parameter (a list, a number, or comma text "64,128") as an increasing list of ``kind``."""
    if isinstance(value, str):
        value = [v.strip() for v in value.strip().strip("[]").split(",") if v.strip()]
    out = []
    for item in value if isinstance(value, (list, tuple)) else [value]:
        try:
            number = json.loads(item) if isinstance(item, str) else item
        except json.JSONDecodeError:
            number = None
        if not (is_real(number) and (kind is float or float(number).is_integer())):
            raise ConfigError(f"X1 {name} must be {'whole numbers' if kind is int else 'numbers'}, got {item!r}")
        out.append(kind(number))
    if not out:
        raise ConfigError(f"X1 {name} must not be empty")
    if out != sorted(set(out)):
        raise ConfigError(f"X1 {name} must be increasing, each value once, got {out}")
    return out


def x1_grid(profile: str, widths: object = None, noise_ratios: object = None,
            overrides: Mapping[str, object] | None = None) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """X1's grid (protocol 9), checked before anything trains: widths (None: :data:`X1_WIDTHS`; at least
    two, > 0, divisible by n_heads) and noise ratios (None: :data:`X1_NOISE_RATIOS`; in [0, 1)), on FDA
    random noise with noise."""
    if profile not in X1_WIDTHS:
        make_config("fda", profile)  # names the profiles
    overrides = dict(overrides or {})
    base = make_config("fda", profile, **_task_overrides("fda", overrides))
    if base.data.noise_kind != "random":
        raise ConfigError(f"X1 is registered on FDA random noise (protocol 9); noise_kind "
                          f"{base.data.noise_kind!r} does not apply")
    if base.data.noise_ratio <= 0:
        raise ConfigError("X1 measures the cost of memorizing noise: noise_ratio must be > 0")
    width_list = _grid_values("widths", X1_WIDTHS[profile] if widths is None else widths, int)
    for w in width_list:
        if w <= 0 or w % base.model.n_heads:
            raise ConfigError(f"X1 widths must be > 0, got {w}" if w <= 0 else
                              f"X1 width {w} is not divisible by n_heads={base.model.n_heads}")
    if len(width_list) < 2:
        raise ConfigError(f"X1 compares model widths: give at least two, got {width_list}")
    ratio_list = _grid_values("noise_ratios", X1_NOISE_RATIOS if noise_ratios is None else noise_ratios, float)
    for r in ratio_list:
        if not 0.0 <= r < 1.0:
            raise ConfigError(f"X1 noise_ratios must lie in [0, 1), got {r}")
    return tuple(width_list), tuple(ratio_list)


def x1_units(profile: str, seeds: list[int] | None = None, overrides: Mapping[str, object] | None = None,
             widths: object = None, noise_ratios: object = None,
             rates: Mapping[int, float | None] | None = None) -> tuple[list[Unit], list[Unit]]:
    """X1's runs as FDA ``random`` units: one per (width, seed), and one per (noise ratio, seed) at the
    profile's width (or the ``d_model`` override); by width (or ratio), then seed. ``rates``: width -> its
    learning rate chosen by 12.4 (:func:`x1_rates`); a width mapped to None waits for its selection and is left
    out; a width not in ``rates`` trains at the profile's rate (the profile's own width always does)."""
    width_list, ratio_list = x1_grid(profile, widths, noise_ratios, overrides)
    overrides, random, rates = dict(overrides or {}), {"fda": ["random"]}, dict(rates or {})
    own = x1_base(profile, overrides).model.d_model
    rates = {w: lr for w, lr in rates.items() if w != own}
    by_width = [u for w in width_list if rates.get(w, 0.0) is not None
                for u in units(profile, ["fda"], seeds,
                               {**overrides, "d_model": w, **({"lr": rates[w]} if w in rates else {})},
                               conditions=random)]
    by_ratio = [u for r in ratio_list
                for u in units(profile, ["fda"], seeds, {**overrides, "noise_ratio": r}, conditions=random)]
    return by_width, by_ratio


def differs(config: RunConfig, profile: str) -> dict[str, object]:
    """The parameters of ``config`` that differ from the profile's defaults for its task."""
    base = make_config(config.task, profile).flat()
    return {k: v for k, v in config.flat().items() if base.get(k) != v}


# -- 12.4: X1's learning rate per width --------------------------------------------------------------
X1_LR_FACTORS = (2.0, 1.0, 0.5, 0.25, 0.125)  # the profile's lr times these, largest first (protocol 12.4)
RATE_DECIMALS = 9  # final gens compare at 1e-9: a tie goes to the larger rate


def x1_base(profile: str, overrides: Mapping[str, object] | None = None) -> RunConfig:
    """The FDA random run X1's grid starts from (the profile's, with ``overrides``): its width and lr."""
    return make_config("fda", profile, **_task_overrides("fda", {**dict(overrides or {}), "noise_kind": "random"}))


def x1_selection(profile: str, overrides: Mapping[str, object] | None = None,
                 widths: object = None) -> dict[int, tuple[RunConfig, ...]]:
    """12.4's selection runs: per width of the grid other than the profile's, seed 0's noise-free twin at the
    profile's lr times each of :data:`X1_LR_FACTORS` (largest rate first)."""
    width_list, _ = x1_grid(profile, widths, None, overrides)
    base = with_seed(x1_base(profile, overrides), 0).replace(noise_ratio=0.0)
    return {w: tuple(base.replace(d_model=w, lr=base.train.lr * f) for f in X1_LR_FACTORS)
            for w in width_list if w != base.model.d_model}


@dataclass(frozen=True)
class RateChoice:
    """12.4 at one width: the selection's ``rates`` (largest first) and each twin's ``final_gen`` (None: not
    trained yet; NaN: trained, its final gen missing). ``chosen``: the rate with the highest final gen, a tie to
    the larger rate; None while a selection run waits or where no final gen was measured."""

    width: int
    rates: tuple[float, ...]
    final_gen: tuple[float | None, ...]

    def __post_init__(self):
        if len(self.rates) != len(self.final_gen) or not self.rates:
            raise ValueError(f"width {self.width}: one final gen per rate, got {self.rates} and {self.final_gen}")
        if list(self.rates) != sorted(set(self.rates), reverse=True) or self.rates[-1] <= 0:
            raise ValueError(f"width {self.width}: rates must be > 0 and decreasing, got {self.rates}")

    @property
    def waiting(self) -> bool:
        """Whether a selection run is not trained yet (the width's runs cannot be listed)."""
        return any(g is None for g in self.final_gen)

    @property
    def chosen(self) -> float | None:
        measured = [(round(g, RATE_DECIMALS), r) for r, g in zip(self.rates, self.final_gen)
                    if g is not None and g == g]
        if self.waiting or not measured:
            return None
        best = max(g for g, _ in measured)
        return max(r for g, r in measured if g == best)  # a tie: the larger rate

    @property
    def at_edge(self) -> bool:
        """Whether the chosen rate is the largest or the smallest of the selection (reported as such)."""
        return self.chosen is not None and self.chosen in (self.rates[0], self.rates[-1])


def x1_rates(profile: str, final_gen, overrides: Mapping[str, object] | None = None,
             widths: object = None) -> dict[int, RateChoice]:
    """12.4's choice per width other than the profile's, from ``final_gen(config)`` (a selection twin's final
    gen, None where it is not trained): :func:`cached_final_gen` for the plan, the loaded runs for the chapter."""
    return {w: RateChoice(w, tuple(c.train.lr for c in runs), tuple(final_gen(c) for c in runs))
            for w, runs in x1_selection(profile, overrides, widths).items()}


def x1_chosen(profile: str, overrides: Mapping[str, object] | None = None, widths: object = None,
              final_gen=None) -> dict[int, float | None]:
    """Width -> its chosen rate (None: waiting for its selection, or none measured), from the cache by default."""
    return {w: c.chosen for w, c in x1_rates(profile, final_gen or cached_final_gen, overrides, widths).items()}


def cached_final_gen(config: RunConfig, root=None) -> float | None:
    """A run's final gen (mean of the last 5 evaluations, NaN where missing) if it is cached (in the runs folder
    ``root``, None: the project's), else None."""
    from .analysis.curves import final
    from .runs import lookup

    run = lookup(config, root)
    return None if run is None else final(run.metrics, "gen")


def x1_stage_notes(profile: str, overrides: Mapping[str, object] | None = None, widths: object = None,
                   final_gen=None) -> list[str]:
    """One line per width of 12.4's selection for ``rote plan --x1``: the rate chosen (at the grid's edge or
    not), or that the width waits for its selection runs (its runs are listed once those are trained)."""
    out = []
    for w, choice in x1_rates(profile, final_gen or cached_final_gen, overrides, widths).items():
        if choice.waiting:
            left = sum(g is None for g in choice.final_gen)
            out.append(f"X1 width {w} waits for its learning-rate selection ({left} of {len(choice.rates)} runs of "
                       f"seed 0's twin not trained): its runs are listed once they are (12.4)")
        elif choice.chosen is None:
            out.append(f"X1 width {w}: no selection run has a final gen; the width is unresolved (12.4)")
        else:
            edge = ", at the edge of the grid" if choice.at_edge else ""
            out.append(f"X1 width {w}: lr {choice.chosen:g} chosen{edge} (12.4)")
    return out


def x1_keys(profile: str, seeds: list[int] | None = None) -> set[str]:
    """The keys of every run X1's registered grid may hold on ``profile``: the selection runs and each width's
    runs at any rate of the selection (12.4), the noise-ratio sweep."""
    keys = {c.key for selection in x1_selection(profile).values() for c in selection}
    base = x1_base(profile)
    for factor in X1_LR_FACTORS:
        width_units, ratio_units = x1_units(profile, seeds, rates={
            w: base.train.lr * factor for w in X1_WIDTHS[profile]})
        keys |= {c.key for u in width_units + ratio_units for c in (u.noisy, u.clean)}
    return keys

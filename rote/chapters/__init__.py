"""The claim chapters as library calls: one module per chapter, one function per section.

A chapter notebook (``book/02_*`` .. ``book/06_*``) holds the paper's narrative, its parameters and
one call per section; the module of its claim (:mod:`rote.chapters.c1` .. :mod:`rote.chapters.c5`)
runs the section's analyses (:mod:`rote.analysis`) in the order the chapter states them, returns
the tables and numbers the section shows, draws the figures only that chapter draws (figures that
several chapters draw are :mod:`rote.plots`), and writes the section's generated prose from the
sentences of :mod:`rote.report`. The checks and verdicts stay in :mod:`rote.verdicts`.

What a chapter module provides is its contract, :mod:`rote.chapters.contract` (protocols a test checks every
chapter module against). This module holds what every claim chapter shares: the build's units grouped by task
and noise condition, the glued constants, the table of example sets, and the Verdict section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import pandas as pd

from .. import claims, fmt, plan, plots, verdicts
from ..report import label
from ..runs import get_or_train
from ..settings import Settings


def groups(units: Iterable) -> dict[tuple[str, str], list]:
    """(task, condition) -> its units, one per seed, in the order of ``units``."""
    out: dict[tuple[str, str], list] = {}
    for u in units:
        out.setdefault((u.task, u.condition), []).append(u)
    return out


def book_units(profile: str, tasks, seeds, overrides, settings: Settings) -> list:
    """The chapter's units (:func:`rote.plan.units`) of ``seeds``; None: the book's (``settings.seeds``)."""
    return plan.units(profile, tasks, settings.seed_list if seeds is None else seeds, overrides)


def noisy_runs(units: list, settings: Settings) -> dict:
    """unit -> its noisy run, trained or read from the settings' runs folder."""
    return {u: get_or_train(u.noisy, root=settings.runs, progress=settings.train_progress) for u in units}


def first_seed(units: list) -> list:
    """The units of the build's first seed (the analysis figures show these)."""
    return [u for u in units if u.seed == units[0].seed]


@dataclass
class Build:
    """A claim chapter's units (one per task, noise condition and seed), each unit's noisy run, the
    example sets the chapter analyses on it (e.g. ``{"M": memorized, "C": correct}``), and the settings
    it was loaded with (where the runs, analyses, records and figures are)."""

    profile: str
    units: list
    runs: dict
    sets: dict = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)

    @property
    def groups(self) -> dict[tuple[str, str], list]:
        return groups(self.units)

    @property
    def sizes(self) -> dict:
        """unit -> {set name: number of examples} (a set given with the label it is scored on, as
        ``(examples, which)``, counts its examples)."""
        return {u: {k: len(v[0] if isinstance(v, tuple) else v) for k, v in s.items()} for u, s in self.sets.items()}

    @property
    def shown(self) -> list:
        """The units of the first seed: the analysis figures show these."""
        return first_seed(self.units)


@dataclass(frozen=True)
class ClaimResult:
    """What a claim chapter's ``evaluate`` returns: per unit, the claim's metrics (its typed dataclass,
    ``rote.verdicts.<claim>.<Claim>Metrics``, stored in the record by ``dataclasses.asdict``) and its
    checks. ``evaluate`` is the only caller of the claim's verdict module; the prose and figures read
    this."""

    claim: str
    metrics: dict  # unit -> the claim's metrics dataclass
    checks: dict  # unit -> list[rote.verdicts.Check]

    @property
    def evaluations(self) -> dict:
        """unit -> (metrics as the record stores them, :func:`rote.verdicts.core.flat`, checks): the form
        the chapter's sentences and figures read."""
        from ..verdicts.core import flat

        return {u: (flat(m), self.checks[u]) for u, m in self.metrics.items()}


def glue_values(values: dict) -> None:
    """Glue each value under its name for the chapter's prose (``{glue:text}`name```), not displayed."""
    from myst_nb import glue

    for name, value in values.items():
        glue(name, value, display=False)


def amended_thresholds_text(spec) -> str:
    """One sentence per threshold of ``spec`` (a :class:`rote.spec.ClaimSpec`) that an amendment moved: its
    registered value, which the registered reading judges by, and its value as of each amendment that moved
    it (the amended reading judges by the last); where none moved, a sentence that says so."""
    from ..specs import amendment_names

    names, out = amendment_names(), []
    for name, t in spec.thresholds.items():
        if t.moved:
            moves = ", then ".join(f"{fmt.plain(v)} as of {names.get(s.split('.')[0], 'section')} (section {s})"
                                   for s, v in t.moved)
            out.append(f"The threshold `{name}` is {fmt.plain(t.value)} as registered (section {t.section}), which "
                       f"the registered reading judges by, and {moves}, which the amended reading judges by.")
    return " ".join(out) or (f"No amendment moved a threshold of {spec.id}: the registered and the amended "
                             "reading judge by the same values.")


def glue_thresholds_of(spec, values) -> None:
    """Glue what ``values`` (a function of the thresholds) gives, from the thresholds as registered (the values
    the method text quotes as the claim's), and under ``<module>_amended_thresholds`` the sentence of
    :func:`amended_thresholds_text` (Markdown)."""
    from IPython.display import Markdown

    glue_values({**values(spec.read(spec.registered_in)),
                 f"{spec.module}_amended_thresholds": Markdown(amended_thresholds_text(spec))})


def set_sizes(build: Build) -> pd.DataFrame:
    """How many examples each unit's sets hold: one column per unit, one row per set."""
    return pd.DataFrame({label(u): sizes for u, sizes in build.sizes.items()})


def sites_table(sites: dict) -> pd.DataFrame:
    """Where each unit's intermediate result is erased (:func:`rote.analysis_cache.erasure_sites_cached`):
    one row per unit (chapters C3 and C4 share the sites)."""
    return pd.DataFrame({label(u): s for u, s in sites.items()}).T


def glue_finding(claim: str, records: list, figure: str, figures_folder=None) -> None:
    """Glue what a chapter found, for the section under its title: the sentences of
    :func:`rote.report.finding_sentences` (one per task and noise condition, read from ``records``) as
    ``<claim>_finding``, and the figure of every numeric check as value over threshold, saved and glued as
    ``figure`` in ``figures_folder`` (None: the project's; the finding's ``{glue:figure}`` places it with its
    caption and alt text)."""
    import matplotlib.pyplot as plt
    from IPython.display import Markdown
    from myst_nb import glue

    from ..report import finding_sentences

    checks_figure = plots.check_values(records).figure
    plots.save_figure(checks_figure, figure, figures_folder)
    glue(figure, checks_figure, display=False)
    glue(f"{claim.lower()}_finding", Markdown(finding_sentences(records)), display=False)
    plt.close(checks_figure)


def verdict(claim: str, profile: str, results: list[dict], figure: str,
            settings: Settings = Settings()) -> list[claims.ClaimRecord]:
    """The Verdict section: the records of ``results`` (:func:`rote.verdicts.seed_result`, one per
    unit), stamped with how their runs (in the settings' runs folder) trained (:func:`rote.claims.stamped`), saved in
    the settings' results folder and shown with their checks, and what they found glued for the chapter's opening
    (:func:`glue_finding`: the sentences and the figure ``figure``, saved in the settings' figures folder). Returns
    the records."""
    from ..display import show_record

    records = [claims.stamped(rec, settings.runs) for rec in verdicts.records(claim, profile, results)]
    for rec in records:
        claims.save(rec, settings.results)
        show_record(rec)
    glue_finding(claim, records, figure, settings.figures)
    return records

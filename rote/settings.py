"""The settings a build passes down: the profile, the book's seeds, where runs, records, analyses and figures go, and
whether training shows a plain progress line. They reach the library as arguments, never through the environment.

The environment is read in one place, :func:`read_environment`, which only the command line
(:mod:`rote.build.cli`) and a notebook's ``parameters`` cell call, with ``os.environ``: its ``$ROTE_*`` variables
(:data:`ENVIRONMENT`) are a user's defaults. The build tool hands a chapter its settings as the papermill parameter
``settings`` (:meth:`Settings.parameter`, every value but the profile, which is a parameter of its own), and the
chapter rebuilds them with ``Settings(profile=profile, **settings)``. A folder of None is the project's default
(``_build/runs``, ``_build/results``, ``_build/analysis``, ``_build/figures``), as each module that stores there says.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Mapping

from .analysis.ranges import is_whole
from .config import PROFILES, ConfigError
from .plan import DEFAULT_SEEDS

FOLDERS = ("runs", "results", "analysis", "figures")
# setting -> the environment variable a user sets it with (read by read_environment alone)
ENVIRONMENT = {"profile": "ROTE_PROFILE", "seeds": "ROTE_SEEDS", "runs": "ROTE_RUNS", "results": "ROTE_RESULTS",
               "analysis": "ROTE_ANALYSIS", "figures": "ROTE_FIGURES", "plain_progress": "ROTE_PLAIN_PROGRESS"}


def folder(path) -> Path | None:
    """A folder setting as an absolute path (a notebook's kernel runs in ``book/``: a relative folder would land
    there); None stays None (the project's default)."""
    return None if path in (None, "") else Path(path).expanduser().resolve()


@dataclass(frozen=True)
class Settings:
    """The profile, the book's seeds (0 .. ``seeds`` - 1), the four folders (None: the project's default) and
    whether training prints a plain progress line (a chapter executed by the build) instead of a live bar."""

    profile: str = "quick"
    seeds: int = DEFAULT_SEEDS
    runs: Path | None = None
    results: Path | None = None
    analysis: Path | None = None
    figures: Path | None = None
    plain_progress: bool = False

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise ConfigError(f"unknown profile {self.profile!r}; choose one of {', '.join(PROFILES)}")
        if not (is_whole(self.seeds) and self.seeds >= 1):
            raise ConfigError(f"the number of seeds must be a whole number >= 1, got {self.seeds!r}")
        if not isinstance(self.plain_progress, bool):
            raise ConfigError(f"plain_progress must be true or false, got {self.plain_progress!r}")
        for name in FOLDERS:
            object.__setattr__(self, name, folder(getattr(self, name)))

    @property
    def train_progress(self) -> bool | str:
        """How a run trained on the way shows its progress (:func:`rote.train.train`'s ``progress``)."""
        return "plain" if self.plain_progress else True

    @property
    def seed_list(self) -> list[int]:
        """The book's seeds: 0 .. ``seeds`` - 1."""
        return list(range(self.seeds))

    def parameter(self) -> dict:
        """The papermill parameter ``settings``: every setting but the profile, as JSON values."""
        return {name: str(value) if isinstance(value, Path) else value
                for name, value in asdict(self).items() if name != "profile"}

    def with_folder(self, name: str, path) -> "Settings":
        """These settings with the folder ``name`` moved to ``path`` (e.g. a stability change's records)."""
        return replace(self, **{name: path})


def read_environment(environ: Mapping[str, str], **given) -> Settings:
    """The settings from ``environ`` (the caller's ``os.environ``: :data:`ENVIRONMENT` names the variables), each
    value in ``given`` that is not None taking precedence, the defaults for the rest."""
    values: dict = {}
    for name, variable in ENVIRONMENT.items():
        text = environ.get(variable, "").strip()
        if text:
            values[name] = text
    if "seeds" in values:
        try:
            values["seeds"] = int(values["seeds"])
        except ValueError:
            raise ConfigError(f"ROTE_SEEDS must be a whole number, got {values['seeds']!r}") from None
    if "plain_progress" in values:
        values["plain_progress"] = values["plain_progress"] not in ("0", "false", "no")
    return Settings(**{**values, **{k: v for k, v in given.items() if v is not None}})


def environment_parameter(environ: Mapping[str, str]) -> dict:
    """What a notebook's ``parameters`` cell sets ``settings`` to when run by hand: :func:`read_environment`'s
    settings as the papermill parameter (:meth:`Settings.parameter`)."""
    return read_environment(environ).parameter()

"""Pinned before issue 45's parameter declaration: what the chapters compute from their parameters, for the
defaults on smoke and a few values given with ``-p``, must not move when the declaration changes shape.

Pinned per chapter: the papermill parameters ``rote run`` passes and the chapter's output folder, the run
keys of its units (noisy runs, twins, C1's sweep, X1's grid), the analysis-cache entry of each noisy run's
probe sweep (what chapters 04 and 05 read their erasure sites from) and the record names it writes. A run
key or an analysis-cache key hashes the code fingerprint too, which a change to the fingerprinted code (rote.config,
the tasks, the model, training, the analyses behind the probe sweep) moves on purpose: the pins hold both
fingerprints at their values on the commit where they were taken (b9c8e51), so that they pin what the parameters
make of the configurations, and tests/test_fingerprint.py pins how the code is read."""

import hashlib
import json
from types import SimpleNamespace

import pytest

from rote import analysis_cache, claims, plan
from rote.build import driver
from rote.chapters import book_units, x1
from rote.chapters.params import chapter_params
from rote.settings import Settings
from rote.specs import specs

CLAIM_CHAPTERS = {spec.chapter: spec.id for spec in specs() if spec.id != "X1"}
GIVEN = {"tasks": {"seed": "3", "n_show": "8"}, "learning_dynamics": {"seeds": "0,2", "sweep_ratios": "[0, 0.1]"},
         "intermediate_results": {"extra_positions": '{"fda": [9]}', "noise_ratio": "0.2"},
         "interventions": {"sweep_ranks": "2,4", "check_patching": "1"},
         "distributed_encoding": {"n_keys": "20", "overrides": '{"n_layers": 3}'},
         "outlier_heuristics": {"z_outlier": "3", "top_k": "4096"},
         "benign_memorization": {"widths": "[16, 32]", "train_grid": "false"}, "scorecard": {}}


# The code fingerprints of b9c8e51, where the pins were taken (run keys, and the probe sweep's analysis-cache keys).
PINNED_CODE, PINNED_SWEEP_CODE = "65de01d5e287", "f4b372c2acc2"


@pytest.fixture(autouse=True)
def pinned_code(monkeypatch):
    from rote import config

    monkeypatch.setattr(config, "code_fingerprint", lambda: PINNED_CODE)
    monkeypatch.setattr(analysis_cache, "code_fingerprint", lambda roots=None: PINNED_SWEEP_CODE)


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


# the book's settings the pins were taken with: one seed (``rote book --seeds 1``; passed as an argument since
# issue 45 part 2, the environment's ROTE_SEEDS=1 before)
BOOK = Settings(profile="smoke", seeds=1)


def _units(name: str, params: dict) -> list:
    defaults = chapter_params(name).defaults()
    given = {**defaults, **{k: v for k, v in params.items() if k != "profile"}}
    return book_units("smoke", given["tasks"], given["seeds"], given["overrides"], BOOK)


def _sweep_entry(config) -> str:
    """The probe-sweep entry's name of the run ``config`` (as :func:`rote.analysis_cache.probe_sweep_cached`
    names it for C2's default positions and settings)."""
    from rote.analysis.probes import ProbeSettings
    from rote.analysis.targets import probe_positions

    s = ProbeSettings()
    params = {"positions": [int(p) for p in probe_positions(config.task)], "max_train": s.max_train, "seed": s.seed,
              "weight_decay": float(s.weight_decay), "max_iter": s.max_iter, "chunk": s.chunk,
              "sets": {"M": "memorized", "C": "correct on test"}}
    run = SimpleNamespace(config=config)
    return analysis_cache._entry(run, "probe_sweep", params, analysis_cache.code_fingerprint(), None).relative_to(
        analysis_cache.analysis_root()).as_posix()


def chapter_keys(name: str, given: dict) -> dict:
    """What the chapter computes from its parameters (defaults, then ``given`` as -p text)."""
    params = driver.resolve_parameters(name, "smoke", given)
    out = {"params": params, "folder": driver.output_dir(name, "smoke", params).name}
    if name == "benign_memorization":
        d = {**chapter_params(name).defaults(), **params}
        g = x1.grid("smoke", d["tasks"], d["seeds"], d["overrides"], d["widths"], d["noise_ratios"], BOOK)
        out["runs"] = [c.key for c in g.configs]
    elif name in CLAIM_CHAPTERS:
        units = _units(name, params)
        out["runs"] = [u.noisy.key for u in units] + [u.clean.key for u in units]
        out["sweep"] = [plan.with_seed(u.noisy, u.seed).replace(noise_ratio=r).key for u in units
                        for r in plan.sweep_ratios("smoke", u.noisy)] if name == "learning_dynamics" else []
        out["analysis"] = [_sweep_entry(u.noisy) for u in units]
        out["records"] = sorted({claims.record_path(analysis_cache.analysis_root(), "smoke", CLAIM_CHAPTERS[name],
                                                    u.task, u.condition, params.get("seeds")).name for u in units})
    return out


def test_the_pinned_chapters_are_the_book():
    assert set(PINNED) == set(driver.chapters())


# chapter -> (digest of chapter_keys with the defaults, with GIVEN); and one key of each kind in full
PINNED = {"tasks": ("2aad190f8a06986c", "98613ba929bd21ce"),
          "learning_dynamics": ("324baa2d34e345e4", "daf037df01982d96"),
          "intermediate_results": ("b6f6c04ec38785f4", "9c1b1f7cd012545a"),
          "interventions": ("9263f35fd79cab5e", "a25694400b1600c2"),
          "distributed_encoding": ("134c94c1a73205d3", "4eebc11b473a0084"),
          "outlier_heuristics": ("6d722917dfb5c158", "9ad0a366d5867b22"),
          # re-pinned for protocol 12.4 (X1's learning rate per width): the grid now holds each width's rate
          # selection runs and its runs at the chosen rate (b9c8e51: "0b19437063ae6bd4", "9f52004ce8d9b5e6")
          "benign_memorization": ("7228416877e18a33", "0e8ddc6104c7134e"),
          "scorecard": ("4b83af682feac292", "4b83af682feac292")}
EXAMPLES = {"c4 run": "ebfa0e3fe5e29a87", "c4 analysis": "fda-ebfa0e3fe5e29a87/probe_sweep-4e4247d992071650.json",
            "c4 records": ["C4-fda-digit.json", "C4-fda-random.json", "C4-thr.json"], "c1 sweep": "0e75e487783e0644",
            "c1 twin": "c62b491ab9c7f635"}


@pytest.mark.parametrize("name", list(GIVEN))
def test_keys_of_the_default_and_given_parameters_do_not_move(name):
    assert (_digest(chapter_keys(name, {})), _digest(chapter_keys(name, GIVEN[name]))) == PINNED[name]


def test_a_few_keys_in_full():
    c4 = chapter_keys("distributed_encoding", {})
    c1 = chapter_keys("learning_dynamics", {})
    assert {"c4 run": c4["runs"][0], "c4 analysis": c4["analysis"][0], "c4 records": c4["records"],
            "c1 sweep": c1["sweep"][-1], "c1 twin": c1["runs"][-1]} == EXAMPLES

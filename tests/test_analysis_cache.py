"""The analysis cache (rote.analysis_cache) is as safe as the run cache: its key holds a fingerprint of
the code that computes the value, a damaged entry is moved aside and recomputed, writes are atomic."""

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from rote import analysis_cache as AC
from rote.analysis.erasure import sites_from_sweep
from rote.analysis.probes import SWEEP_COLUMNS, ProbeSettings, ProbeSweep
from rote.config import fingerprint_sources

SITES = {"group": "carries", "targets": ["carry_0", "carry_1", "carry_2", "carry_3"], "layers": [1],
         "positions": [11, 12]}
KW = dict(positions=(), settings=ProbeSettings(max_train=200, seed=0))


def _fake_sweep() -> ProbeSweep:
    """A C2 probe sweep whose carries reach 5 x chance on C at layer 1 only (the sites: SITES)."""
    rows, hits = [], {}
    for target, position in [(f"carry_{i}", 11 + i % 2) for i in range(4)] + [("carries", -1)]:
        for s in ("M", "C"):
            for layer in range(3):
                right = 9 if (s, layer) == ("C", 1) else 1
                rows.append({"target": target, "layer": layer, "position": position, "own": True, "set": s, "n": 10,
                             "correct": right, "accuracy": right / 10, "chance": 0.1})
            correct = np.zeros((3, 10), dtype=bool)
            correct[:, 0] = True
            hits[target, position, s] = (correct, np.ones(10, dtype=bool))
    return ProbeSweep(pd.DataFrame(rows, columns=SWEEP_COLUMNS), hits)


@pytest.fixture
def fake(monkeypatch):
    """A run and a sweep_probes that counts its calls (the cache logic does not depend on the analysis)."""
    calls = []

    def sweep_probes(model, data, train, sets, targets, settings):
        calls.append((targets.positions, settings.max_train, settings.seed))
        return _fake_sweep()

    monkeypatch.setattr(AC, "sweep_probes", sweep_probes)
    monkeypatch.setattr(AC, "correct", lambda model, examples: examples)
    monkeypatch.setattr(AC, "memorized", lambda model, data: data.train_noisy)
    run = SimpleNamespace(config=SimpleNamespace(task="fda", key="0123abcd"), model=None,
                          data=SimpleNamespace(test=[], train_clean=[], train_noisy=[]))
    return run, calls


def _same(a: ProbeSweep, b: ProbeSweep) -> bool:
    return a.table.equals(b.table) and a.hits.keys() == b.hits.keys() and all(
        (a.hits[k][0] == b.hits[k][0]).all() and (a.hits[k][1] == b.hits[k][1]).all() for k in a.hits)


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in (root / "fda-0123abcd").glob("*") if p.is_file())


def test_an_entry_is_computed_once_and_read_back(fake, tmp_path):
    run, calls = fake
    assert _same(AC.probe_sweep_cached(run, root=tmp_path, **KW), _fake_sweep())
    assert _same(AC.probe_sweep_cached(run, root=tmp_path, **KW), _fake_sweep())
    assert len(calls) == 1
    (entry,) = _entries(tmp_path)
    stored = json.loads(entry.read_text())
    assert stored["value"] == json.loads(json.dumps(_fake_sweep().to_json()))
    assert stored["code"] == AC.code_fingerprint(AC.PROBE_SWEEP_SOURCES)
    assert stored["params"] == {"positions": [], "max_train": 200, "seed": 0, "weight_decay": 1e-3, "max_iter": 50,
                                "chunk": 48, "sets": {"M": "memorized", "C": "correct on test"}}
    AC.probe_sweep_cached(run, root=tmp_path, **{**KW, "settings": ProbeSettings(max_train=200, seed=1)})
    assert len(calls) == 2 and len(_entries(tmp_path)) == 2  # other parameters: another entry
    assert not list(tmp_path.rglob("*.tmp"))


def test_the_erasure_sites_are_read_from_the_same_entry_without_refitting(fake, tmp_path):
    """Protocol 8.6: the sites of C3 and C4 are C2's probe results. C2 reads its sweep from the cache;
    the sites come from that entry, for any multiple of chance, and no probe is fitted again."""
    run, calls = fake
    sweep = AC.probe_sweep_cached(run, root=tmp_path, **KW)  # chapter 03 (C2)
    assert AC.erasure_sites_cached(run, min_over_chance=5.0, root=tmp_path, **KW) == SITES  # chapters 04 and 05
    assert AC.erasure_sites_cached(run, min_over_chance=100.0, root=tmp_path, **KW)["layers"] == []
    assert len(calls) == 1 and len(_entries(tmp_path)) == 1
    assert AC.erasure_sites_cached(run, min_over_chance=5.0, root=tmp_path, **KW) == \
        sites_from_sweep(sweep.table, "fda", 5.0)
    AC.erasure_sites_cached(run, min_over_chance=5.0, root=tmp_path)  # C2's default positions for FDA: none extra
    assert calls[-1] == ((), 3000, 0) and len(calls) == 2  # C2's default probe settings: another entry


def test_a_change_to_the_analysis_code_is_never_served_the_old_result(fake, tmp_path, monkeypatch):
    run, calls = fake
    monkeypatch.setattr(AC, "code_fingerprint", lambda roots: "a" * 12)
    AC.probe_sweep_cached(run, root=tmp_path, **KW)
    monkeypatch.setattr(AC, "code_fingerprint", lambda roots: "b" * 12)
    AC.probe_sweep_cached(run, root=tmp_path, **KW)
    assert len(calls) == 2 and len(_entries(tmp_path)) == 2  # recomputed under a new key; the old entry stays
    monkeypatch.setattr(AC, "code_fingerprint", lambda roots: "a" * 12)
    AC.probe_sweep_cached(run, root=tmp_path, **KW)
    assert len(calls) == 2


@pytest.fixture
def package_copy(tmp_path):
    dst = tmp_path / "rote"
    shutil.copytree(Path(AC.__file__).parent, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_the_fingerprint_covers_the_analysis_and_what_it_imports(package_copy):
    files = set(fingerprint_sources(package_copy, roots=AC.PROBE_SWEEP_SOURCES))
    assert {"analysis_cache.py", "analysis/erasure.py", "analysis/sets.py", "analysis/probes.py",
            "analysis/targets.py", "analysis/lens.py", "scoring.py", "model.py"} <= files
    assert "analysis/heuristics.py" not in files and "claims.py" not in files


@pytest.mark.parametrize("file, edit, changes", [
    ("analysis/erasure.py", lambda s: s + "\nEXTRA = 1\n", True),
    ("analysis/probes.py", lambda s: s.replace("def probe_sweep(", "def probe_sweep_(", 1), True),  # imported
    ("analysis/sets.py", lambda s: s + "\n# a comment only\n", False),
    ("analysis/erasure.py", lambda s: s.replace('"""', '"""Reworded docstring. ', 1), False),
    ("analysis/heuristics.py", lambda s: s + "\nEXTRA = 1\n", False),  # not behind the erasure sites
])
def test_a_change_to_an_analysis_source_changes_the_fingerprint(package_copy, file, edit, changes):
    before = AC.sources_fingerprint(AC.PROBE_SWEEP_SOURCES, package_copy)
    path = package_copy / file
    text = path.read_text()
    assert edit(text) != text, "the edit must apply to the current source"
    path.write_text(edit(text))
    assert (AC.sources_fingerprint(AC.PROBE_SWEEP_SOURCES, package_copy) != before) is changes


def _truncate(p):
    p.write_text(p.read_text()[: len(p.read_text()) // 2])


def _empty(p):
    p.write_text("")


def _tamper_value(p):  # valid JSON, another value: the checksum catches it
    d = json.loads(p.read_text())
    d["value"]["rows"][0]["correct"] = 7
    p.write_text(json.dumps(d))


def _drop_value(p):
    d = json.loads(p.read_text())
    del d["value"]
    p.write_text(json.dumps(d))


def _other_params(p):
    d = json.loads(p.read_text())
    d["params"]["seed"] = 7
    p.write_text(json.dumps(d))


@pytest.mark.parametrize("damage", [_truncate, _empty, _tamper_value, _drop_value, _other_params],
                         ids=["truncated", "empty", "tampered", "no-value", "other-params"])
def test_a_damaged_entry_is_detected_moved_aside_and_recomputed(fake, tmp_path, capsys, damage):
    run, calls = fake
    AC.probe_sweep_cached(run, root=tmp_path, **KW)
    (entry,) = _entries(tmp_path)
    damage(entry)
    assert _same(AC.probe_sweep_cached(run, root=tmp_path, **KW), _fake_sweep())
    assert len(calls) == 2  # recomputed, not served
    assert "damaged" in capsys.readouterr().err
    (aside,) = (tmp_path / ".corrupt" / "fda-0123abcd").iterdir()  # kept, not deleted
    assert aside.name.startswith(entry.name)
    (again,) = _entries(tmp_path)
    assert again == entry and json.loads(entry.read_text())["value"] == json.loads(json.dumps(_fake_sweep().to_json()))
    AC.probe_sweep_cached(run, root=tmp_path, **KW)  # a whole entry again
    assert len(calls) == 2


def test_a_failed_write_leaves_neither_an_entry_nor_a_temporary_file(fake, tmp_path, monkeypatch):
    run, calls = fake

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(AC.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        AC.probe_sweep_cached(run, root=tmp_path, **KW)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_c3_and_c4_erase_where_chapter_03s_probes_with_its_own_parameters_found_the_result(fake, tmp_path,
                                                                                           monkeypatch):
    """Issue 43 part 5 (8.6): chapter 03 run with ``-p max_probe_train=200 -p probe_seed=1`` sweeps with those
    settings; C3 and C4 asked for their sites without parameters read that same entry (no probe fitted again),
    never the default sweep (3000 examples, seed 0). A run chapter 03 has not swept gets chapter 03's defaults;
    a damaged record is moved aside."""
    from collections import namedtuple

    from rote.chapters import Build, c2, c3
    from rote.settings import Settings

    run, calls = fake
    unit = namedtuple("Unit", "task condition seed")("fda", "random", 0)
    build = Build("smoke", [unit], {unit: run}, {unit: {"M": [], "C": []}}, Settings(analysis=tmp_path))
    c2.probes(build, {}, 200, 1)  # chapter 03 with its -p overrides, into the build's analysis folder
    assert calls == [((), 200, 1)]
    assert AC.chapter_probe_choice(run, tmp_path) == ((), ProbeSettings(max_train=200, seed=1))
    assert c3.sites(build, None) == {unit: SITES}  # chapter 04's sites (chapter 05's call is the same)
    assert calls == [((), 200, 1)]  # read from chapter 03's entry: no sweep with other parameters
    other = SimpleNamespace(config=SimpleNamespace(task="fda", key="feedbeef"), model=None, data=run.data)
    assert AC.chapter_probe_choice(other, tmp_path) == (None, ProbeSettings())
    (tmp_path / "fda-0123abcd" / AC.CHOICE_NAME).write_text("{not json")
    assert AC.chapter_probe_choice(run, tmp_path) == (None, ProbeSettings())
    assert list((tmp_path / ".corrupt").rglob(f"{AC.CHOICE_NAME}-*"))

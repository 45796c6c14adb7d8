"""The analysis cache (rote.analysis_cache) is as safe as the run cache: its key holds a fingerprint of
the code that computes the value, a damaged entry is moved aside and recomputed, writes are atomic."""

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from rote import analysis_cache as AC
from rote.config import fingerprint_sources

SITES = {"group": "carries", "targets": ["carry_0", "carry_1"], "layers": [1], "positions": [12, 11]}
KW = dict(min_over_chance=5.0, max_train=200, seed=0)


@pytest.fixture
def fake(monkeypatch):
    """A run and an erasure_sites that counts its calls (the cache logic does not depend on the analysis)."""
    calls = []

    def erasure_sites(model, data, train, clean, task, settings):
        calls.append((task, settings.min_over_chance, settings.max_train, settings.seed))
        return json.loads(json.dumps(SITES))

    monkeypatch.setattr(AC, "erasure_sites", erasure_sites)
    monkeypatch.setattr(AC, "correct", lambda model, examples: examples)
    run = SimpleNamespace(config=SimpleNamespace(task="fda", key="0123abcd"), model=None,
                          data=SimpleNamespace(test=[], train_clean=[]))
    return run, calls


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in (root / "fda-0123abcd").glob("*") if p.is_file())


def test_an_entry_is_computed_once_and_read_back(fake, tmp_path):
    run, calls = fake
    assert AC.erasure_sites_cached(run, root=tmp_path, **KW) == SITES
    assert AC.erasure_sites_cached(run, root=tmp_path, **KW) == SITES
    assert len(calls) == 1
    (entry,) = _entries(tmp_path)
    stored = json.loads(entry.read_text())
    assert stored["value"] == SITES and stored["code"] == AC.code_fingerprint(AC.ERASURE_SITES_SOURCES)
    assert stored["params"] == {"min_over_chance": 5.0, "max_train": 200, "seed": 0}
    AC.erasure_sites_cached(run, root=tmp_path, **{**KW, "seed": 1})  # other parameters: another entry
    assert len(calls) == 2 and len(_entries(tmp_path)) == 2
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_change_to_the_analysis_code_is_never_served_the_old_result(fake, tmp_path, monkeypatch):
    run, calls = fake
    monkeypatch.setattr(AC, "code_fingerprint", lambda roots: "a" * 12)
    AC.erasure_sites_cached(run, root=tmp_path, **KW)
    monkeypatch.setattr(AC, "code_fingerprint", lambda roots: "b" * 12)
    AC.erasure_sites_cached(run, root=tmp_path, **KW)
    assert len(calls) == 2 and len(_entries(tmp_path)) == 2  # recomputed under a new key; the old entry stays
    monkeypatch.setattr(AC, "code_fingerprint", lambda roots: "a" * 12)
    AC.erasure_sites_cached(run, root=tmp_path, **KW)
    assert len(calls) == 2


@pytest.fixture
def package_copy(tmp_path):
    dst = tmp_path / "rote"
    shutil.copytree(Path(AC.__file__).parent, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_the_fingerprint_covers_the_analysis_and_what_it_imports(package_copy):
    files = set(fingerprint_sources(package_copy, roots=AC.ERASURE_SITES_SOURCES))
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
    before = AC.sources_fingerprint(AC.ERASURE_SITES_SOURCES, package_copy)
    path = package_copy / file
    text = path.read_text()
    assert edit(text) != text, "the edit must apply to the current source"
    path.write_text(edit(text))
    assert (AC.sources_fingerprint(AC.ERASURE_SITES_SOURCES, package_copy) != before) is changes


def _truncate(p):
    p.write_text(p.read_text()[: len(p.read_text()) // 2])


def _empty(p):
    p.write_text("")


def _tamper_value(p):  # valid JSON, another value: the checksum catches it
    d = json.loads(p.read_text())
    d["value"]["layers"] = [2]
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
    AC.erasure_sites_cached(run, root=tmp_path, **KW)
    (entry,) = _entries(tmp_path)
    damage(entry)
    assert AC.erasure_sites_cached(run, root=tmp_path, **KW) == SITES
    assert len(calls) == 2  # recomputed, not served
    assert "damaged" in capsys.readouterr().err
    (aside,) = (tmp_path / ".corrupt" / "fda-0123abcd").iterdir()  # kept, not deleted
    assert aside.name.startswith(entry.name)
    (again,) = _entries(tmp_path)
    assert again == entry and json.loads(entry.read_text())["value"] == SITES  # a whole entry again
    AC.erasure_sites_cached(run, root=tmp_path, **KW)
    assert len(calls) == 2


def test_a_failed_write_leaves_neither_an_entry_nor_a_temporary_file(fake, tmp_path, monkeypatch):
    run, calls = fake

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(AC.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        AC.erasure_sites_cached(run, root=tmp_path, **KW)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]

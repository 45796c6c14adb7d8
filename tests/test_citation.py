"""CITATION.cff is valid Citation File Format 1.2.0 (cffconvert, a dev tool: tests/tools.py), cites the
book under the licence LICENSE states, and lists the paper the book replicates."""

import subprocess
from pathlib import Path

import yaml

from tools import tool  # tests/tools.py (pytest puts tests/ on sys.path)

ROOT = Path(__file__).resolve().parents[1]
CFF = ROOT / "CITATION.cff"


def _validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([tool("cffconvert"), "--validate", "-i", str(path)], capture_output=True, text=True,
                          timeout=120)


def test_citation_cff_is_valid():
    result = _validate(CFF)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_citation_cff_fails_validation(tmp_path):
    broken = yaml.safe_load(CFF.read_text())
    del broken["title"]  # required by the schema
    broken["authors"] = "The rote project"  # a list of persons or entities, not a string
    path = tmp_path / "CITATION.cff"
    path.write_text(yaml.safe_dump(broken, sort_keys=False))
    assert _validate(path).returncode != 0


def test_citation_cff_names_the_book_its_licence_and_the_paper():
    cff = yaml.safe_load(CFF.read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["title"] == "Reason to Rote, replicated" and cff["authors"] == [{"name": "The rote project"}]
    assert cff["license"] == ["MIT", "CC-BY-4.0"] and (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "CC BY 4.0" in (ROOT / "LICENSE-text.md").read_text()
    [paper] = cff["references"]
    assert paper["title"] == "Reason to Rote: Rethinking Memorization in Reasoning" and paper["year"] == 2025
    assert [a["family-names"] for a in paper["authors"]] == ["Du", "Mondorf", "Casola", "Yao", "Litschko", "Plank"]
    assert "https://arxiv.org/abs/2507.04782" in [i["value"] for i in paper["identifiers"]]


def test_citation_cff_names_the_repository_of_the_one_setting():
    """repository-code is _config.yml's repository.url (rote.publish) where set, and absent where it is empty."""
    from rote.build import publish

    assert yaml.safe_load(CFF.read_text()).get("repository-code", "") == publish.configured_url()

"""The book's reference pages and table of contents (issue 46): the parts in a reader's order, the
Replication chapters numbered, the glossary with every word the verdicts use."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY_TERMS = ("registered reading", "amended reading", "validity", "superseded", "unresolved", "mixed", "near",
                  "margin", "M and C", "gen", "fit", "mem", "rec", "twin", "seed", "plateau", "stale")


def test_the_toc_reads_replication_beyond_results_reference():
    parts = yaml.safe_load((ROOT / "_toc.yml").read_text())["parts"]
    files = {p["caption"]: [c["file"] for c in p["chapters"]] for p in parts}
    assert list(files) == ["Replication", "Beyond the paper", "Results", "Reference"]
    assert parts[0].get("numbered") is True
    assert files["Results"] == ["book/scorecard"]
    assert files["Reference"] == [f"book/{n}" for n in ("protocol", "glossary", "parameters", "environment",
                                                        "calibration", "rerun_gpu", "references")]


def test_the_glossary_defines_every_word_of_the_verdicts():
    text = (ROOT / "book" / "glossary.md").read_text()
    blocks = re.findall(r"```\{glossary\}\n(.*?)```", text, re.S)
    terms = {line.strip() for block in blocks for line in block.splitlines() if line and not line.startswith(" ")}
    assert set(GLOSSARY_TERMS) <= terms, sorted(set(GLOSSARY_TERMS) - terms)

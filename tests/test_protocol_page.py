"""The protocol is a page of the book (issue 46): ``book/protocol.md`` is the project's design document
(identical to ``../shared/replication/protocol.md`` wherever that file exists), staged with a MyST target
before every numbered section, and every section a record, a spec, a page or the code cites is on it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rote.build import frontpage
from rote.specs import specs

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "replication" / "protocol.md"
PAGE_SECTIONS = set(frontpage.protocol_sections(frontpage.PROTOCOL_SOURCE.read_text()))
LINK = re.compile(r"<protocol-([0-9-]+)>`")


def _texts() -> dict[str, str]:
    """The text of every page of the book (markdown cells of the notebooks) and every module of the code."""
    out = {str(p.relative_to(ROOT)): p.read_text() for p in [*ROOT.glob("book/*.md"), *ROOT.glob("rote/**/*.py")]}
    for path in ROOT.glob("book/*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        out[str(path.relative_to(ROOT))] = "\n".join("".join(c["source"]) for c in cells)
    return out


@pytest.mark.skipif(not SHARED.exists(), reason="no ../shared/replication/protocol.md beside this clone")
def test_the_book_protocol_is_the_design_document():
    assert frontpage.PROTOCOL_SOURCE.read_bytes() == SHARED.read_bytes(), (
        "book/protocol.md differs from ../shared/replication/protocol.md: copy the design document into the book")


def test_the_page_has_every_numbered_section_of_the_protocol():
    assert {"1", "5", "7", "7.5", "8.5", "8.6", "9", "10", "11", "12", "12.3"} <= PAGE_SECTIONS


def test_staging_puts_a_target_before_every_numbered_heading_and_only_there():
    text = "# Replication protocol\n\nIntro.\n\n## 7. Amendment 1\n\n### 7.5 C3\n\ntext\n\n### C1. A claim\n"
    staged = frontpage.protocol_markdown(text)
    assert staged.startswith("# Replication protocol\n\n```{note}")
    assert "(protocol-7)=\n## 7. Amendment 1" in staged and "(protocol-7-5)=\n### 7.5 C3" in staged
    assert staged.count(")=\n") == 2  # "### C1." is no numbered section
    committed = frontpage.protocol_markdown()
    assert all(f"({frontpage.protocol_anchor(s)})=" in committed for s in PAGE_SECTIONS)


def test_every_protocol_link_of_the_book_and_the_code_lands_on_a_section():
    linked = {(name, a.replace("-", ".")) for name, text in _texts().items() for a in LINK.findall(text)}
    assert linked, "no page links a protocol section"
    assert not {(n, s) for n, s in linked if s not in PAGE_SECTIONS}


def test_every_section_the_book_and_the_code_cite_is_on_the_page():
    missing = {name: sorted(frontpage.cited_sections(text) - PAGE_SECTIONS) for name, text in _texts().items()}
    assert not {k: v for k, v in missing.items() if v}


def test_every_spec_section_is_on_the_page():
    cited = {s for spec in specs() for s in (spec.registered_in, *spec.amendments)}
    cited |= {s for spec in specs() for t in spec.thresholds.values() for s, _ in t.values}
    assert cited and cited <= PAGE_SECTIONS


def test_a_record_citing_a_section_the_page_lacks_is_caught():
    record = {"claim": "C9", "per_seed": [{"checks": [
        {"id": "c9.a", "history": [["5", "registered"], ["13.2", "superseded"]], "reason": "see sections 8.3-8.6"},
        {"id": "c9.b", "reason": "protocol 7.1 and clarification 14"}]}]}
    assert frontpage.cited_sections(record) == {"5", "13.2", "8.3", "8.6", "7.1", "14"}
    assert frontpage.cited_sections(record) - PAGE_SECTIONS == {"13.2", "14"}
    assert frontpage.cited_sections("amendment 1 (1 seed), seeds 0, 1") == set()

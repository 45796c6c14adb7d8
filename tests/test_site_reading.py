"""A claim chapter read in a browser (issue 46, part 2): it opens with its finding, and it fits a reading budget.

The smoke site and its server are :mod:`tests.test_site`'s (skipped, or built, as that module says), the browser
``tests/conftest.py``'s.
A desktop screen is 1280 x 800 pixels; a chapter's length is its page's height with every dropdown closed, in
screens. The lengths measured go to ``_build/site-screenshots/reading.json``.
"""

from __future__ import annotations

import json

import pytest

from test_site import SHOTS, TIMEOUT_MS, base_url, site  # noqa: F401 (its fixtures; `browser` is conftest's)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

SCREEN = {"width": 1280, "height": 800}
BUDGET_SCREENS = 10  # at most this many desktop screens per claim chapter, dropdowns closed
FINDING_HEAD = "What this build found"  # the heading of a chapter's finding (its notebook's first section)


def _claim_pages() -> list[str]:
    from rote import claims

    return sorted({f"book/{p}.html" for p in claims.CLAIM_PAGES.values()})


CLAIM_PAGES = _claim_pages()

MEASURE_JS = """(head) => {
  for (const d of document.querySelectorAll('details[open]')) d.open = false;  // every dropdown closed
  const main = document.querySelector('main') || document.body;
  const top = e => e.getBoundingClientRect().top + window.scrollY;
  const heading = [...main.querySelectorAll('h2')].find(h => h.textContent.includes(head));
  const section = heading ? heading.closest('section') : null;
  const tables = [...main.querySelectorAll('table')].filter(t => t.offsetParent !== null);
  return {
    height: document.documentElement.scrollHeight,
    finding: heading ? top(heading) : null,
    firstTable: tables.length ? top(tables[0]) : null,
    sentences: section ? [...section.querySelectorAll('li')].map(li => li.textContent.trim()) : [],
    figures: section ? [...section.querySelectorAll('img')].filter(i => i.naturalWidth > 0).length : 0,
    verdictBoxes: main.querySelectorAll('.admonition.rote-verdict').length,
  };
}"""


@pytest.fixture(scope="module")
def measured(browser, base_url) -> dict[str, dict]:  # noqa: F811 (the fixtures imported above)
    page = browser.new_page(viewport=SCREEN)
    page.set_default_timeout(TIMEOUT_MS)
    out = {}
    try:
        for path in CLAIM_PAGES:
            page.goto(base_url + path, wait_until="load")
            info = page.evaluate(MEASURE_JS, FINDING_HEAD)
            out[path] = {**info, "screens": round(info["height"] / SCREEN["height"], 1)}
    finally:
        page.close()
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / "reading.json").write_text(json.dumps({p: i["screens"] for p, i in out.items()}, indent=1))
    return out


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_a_claim_chapter_fits_the_reading_budget(measured, page):
    screens = measured[page]["screens"]
    assert screens <= BUDGET_SCREENS, f"{page}: {screens} desktop screens with its dropdowns closed " \
                                      f"(budget {BUDGET_SCREENS})"


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_a_claim_chapter_opens_with_its_finding(measured, page):
    """Its first section is the finding: a sentence per task and noise condition glued from the records, and a
    figure; it starts high on the first screen, and no table (a check table) comes before it."""
    from rote import claims

    info = measured[page]
    assert info["finding"] is not None, f"{page}: no section {FINDING_HEAD!r}"
    # within the first screen, above the build stamp (rote.build.staging puts the stamp after the finding)
    assert info["finding"] < 0.6 * SCREEN["height"], f"{page}: the finding starts {info['finding']:.0f} px down"
    assert info["firstTable"] is None or info["firstTable"] > info["finding"], f"{page}: a table before the finding"
    claim = next(c for c, p in claims.CLAIM_PAGES.items() if page == f"book/{p}.html")
    rows = {(t.upper(), c) for t in claims.CLAIM_TASKS[claim] for c in claims.claim_conditions(claim, t)}
    said = {(t, c) for t, c in rows for s in info["sentences"]
            if s.startswith(t + (f", {c} noise" if c != "-" else ""))}
    assert said == rows, f"{page}: finding sentences {info['sentences']} miss {sorted(rows - said)}"
    assert info["figures"] >= 1, f"{page}: no figure in the finding"
    assert info["verdictBoxes"] == 1, f"{page}: {info['verdictBoxes']} verdict boxes (the verdict in full, once)"

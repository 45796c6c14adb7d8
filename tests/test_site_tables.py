"""Every table of the built smoke site as a reader reads it (issue 46, part 3), in a browser at desktop width
and at a phone's: no raw value (``NaN``, ``None``, ``True``/``False``, a whole number written "130.0"), no
index column, no cell cut off (pandas' "..." or a CSS ellipsis), check ids beside their names in words; the
front page's "At a glance" labels readable on a phone; source files plain code text when the site has no
repository URL (rote.build.publish; linked when it has one: tests/test_site_staging.py).

The site and its server are tests/test_site.py's, the browser tests/conftest.py's (same skips: no Playwright,
no Chromium, no smoke site unless asked for); see test_site.py's docstring for how the site is built.
"""

from __future__ import annotations

import pytest

from test_site import INTRO, NOTEBOOK_PAGES, PAGES, PHONE, SHOTS, TIMEOUT_MS, base_url, site  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

# Read in the page: every table cell's text outside code (a parameter's default `None` is code, not a value),
# what in it a reader must not see, and whether its text is cut off.
TABLES_JS = r"""() => {
  const main = document.querySelector('main') || document.body;
  const RAW = /^(?:NaN|nan|None|True|False|NaT|<NA>|-?inf|-?\d+\.0)$/;
  const RAW_IN = /\bNaN\b|(?:\bvs\.?|=)\s*(?:True|False|None)\b|\b(?:True|False|None)\s+vs\b/;
  const plain = cell => {  // the cell's text without its code
    const copy = cell.cloneNode(true);
    copy.querySelectorAll('code, pre').forEach(c => c.replaceWith(' '));
    return copy.textContent.replace(/\s+/g, ' ').trim();
  };
  const cut = e => [e, ...e.querySelectorAll('*')].some(x => getComputedStyle(x).textOverflow === 'ellipsis'
      && x.scrollWidth > x.clientWidth + 1);
  const raw = [], cutOff = [], indexed = [], idsAlone = [];
  for (const table of main.querySelectorAll('table')) {
    const head = [...table.querySelectorAll('thead th')].map(th => th.textContent.trim());
    if (head.includes('id')) {  // a record's checks (rote.display.record_table): each id beside its name
      for (const tr of table.querySelectorAll('tbody tr')) {
        const name = tr.children[head.indexOf('check')];
        if (!name || !/[a-z]{3}/.test(name.textContent)) idsAlone.push(tr.children[head.indexOf('id')].textContent);
      }
    }
    const first = table.querySelector('thead tr th');
    if (first && !first.textContent.trim() && table.querySelector('tbody tr > th')) {
      indexed.push(table.textContent.replace(/\s+/g, ' ').trim().slice(0, 80));
    }
    for (const cell of table.querySelectorAll('td, th')) {
      const text = plain(cell);
      if (RAW.test(text) || RAW_IN.test(text)) raw.push(text.slice(0, 80));
      if (/(?:\.\.\.|\u2026)$/.test(text) || (cell.offsetParent !== null && cut(cell))) cutOff.push(text.slice(0, 80));
    }
  }
  const glance = [...main.querySelectorAll('img')].filter(i => i.src.includes('at_a_glance') && i.offsetParent !== null)
      .map(i => ({natural: i.naturalWidth, shown: i.getBoundingClientRect().width}));
  const boxChecks = [...main.querySelectorAll('.admonition.rote-verdict table tbody tr')].map(tr => {
    const cell = tr.querySelector('td');
    return {id: cell.querySelector('code') ? cell.querySelector('code').textContent : '', words: plain(cell)};
  });
  const sourceLinks = [...main.querySelectorAll('a code')].map(c => c.textContent)
      .filter(t => /^(?:rote|book|benchmarks|tests)[/.]|README|\.(?:py|md|cff|toml|lock)$/.test(t));
  return {raw, cutOff, indexed, idsAlone, glance, boxChecks, sourceLinks, tables: main.querySelectorAll('table').length,
          width: document.documentElement.clientWidth};
}"""


LOAD_IMAGES_JS = "Promise.all([...document.images].map(i => { i.loading = 'eager'; return i.decode().catch(() => 0) }))"


def _read_tables(browser, base_url, viewport: dict) -> dict[str, dict]:  # noqa: F811
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(TIMEOUT_MS)
    out = {}
    try:
        for page_path in PAGES:
            page = context.new_page()
            page.goto(base_url + page_path, wait_until="load")
            page.evaluate(LOAD_IMAGES_JS)
            out[page_path] = page.evaluate(TABLES_JS)
            page.close()
    finally:
        context.close()
    return out


@pytest.fixture(scope="module")
def tables(browser, base_url):  # noqa: F811
    return {"desktop": _read_tables(browser, base_url, {"width": 1280, "height": 900}),
            "phone": _read_tables(browser, base_url, PHONE)}


@pytest.mark.parametrize("page", PAGES)
def test_no_raw_value_index_column_or_cut_cell_in_any_table(tables, page):
    for width, found in tables.items():
        info = found[page]
        assert not info["raw"], f"{page} ({width}): raw values in table cells: {info['raw'][:8]}"
        assert not info["indexed"], f"{page} ({width}): tables with an index column: {info['indexed'][:3]}"
        assert not info["cutOff"], f"{page} ({width}): cells cut off: {info['cutOff'][:8]}"
        assert not info["idsAlone"], f"{page} ({width}): check ids without their name: {info['idsAlone'][:8]}"


def test_the_site_has_tables_to_check(tables):
    """The scan above reads something: the chapters and the scorecard show tables."""
    counted = {p: tables["desktop"][p]["tables"] for p in NOTEBOOK_PAGES}
    assert sum(counted.values()) >= 20 and all(counted.values()), counted


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_a_verdict_box_shows_each_check_by_its_name_with_its_id_beside_it(tables, page):
    rows = tables["desktop"][page]["boxChecks"]
    bare = [r for r in rows if not r["id"] or len(r["words"].replace("(", "").replace(")", "").strip()) < 3]
    assert not bare, f"{page}: verdict box checks without a name in words or an id: {bare[:5]}"


def test_the_glance_labels_are_readable_on_a_phone(tables):
    """The front page's "At a glance" heat map at 390 px: its cell labels (rote.plots.LABEL_PT, compact) are
    at least 9 px on the screen."""
    import matplotlib.pyplot as plt

    from rote import plots

    [shown] = tables["phone"][INTRO]["glance"]
    px = plots.LABEL_PT[True] * plt.rcParams["savefig.dpi"] / 72 * shown["shown"] / shown["natural"]
    assert px >= 9, f"the glance labels are {px:.1f} px on a {PHONE['width']} px screen ({shown})"
    assert tables["desktop"][INTRO]["glance"], "no At a glance figure on the desktop front page"


def test_without_a_repository_url_source_files_stay_code_text(tables):
    """The smoke site is built without a repository URL: no source file named on a page is a link."""
    from rote.build import publish

    if publish.repository_url():
        pytest.skip("this site was built with a repository URL")
    linked = {p: info["sourceLinks"] for p, info in tables["desktop"].items() if info["sourceLinks"]}
    assert not linked, f"source files linked without a repository URL: {linked}"


def test_screenshots_of_the_front_page_and_a_chapter(browser, base_url):  # noqa: F811
    """Desktop and phone screenshots (first screen) of the front page and C1's chapter, for review."""
    shots = SHOTS / "tables"
    shots.mkdir(parents=True, exist_ok=True)
    for name, viewport in (("desktop", {"width": 1280, "height": 900}), ("phone", PHONE)):
        page = browser.new_page(viewport=viewport)
        try:
            for page_path in (INTRO, "book/02_learning_dynamics.html"):
                page.goto(base_url + page_path, wait_until="load")
                page.screenshot(path=str(shots / f"{name}_{page_path.split('/')[-1].replace('.html', '.png')}"))
        finally:
            page.close()
    assert len(list(shots.glob("*.png"))) >= 4


def test_the_scan_finds_each_planted_fault(browser):  # noqa: F811
    """The scan fails on what it looks for: pandas' own HTML of a table (index column, NaN, True, 130.0, a cell
    cut with "...") and a cell cut by a CSS ellipsis; a parameter's default `None` in code is not a fault."""
    import pandas as pd

    frame = pd.DataFrame({"count": [130.0, float("nan")], "noisy": [True, False],
                          "reason": ["x" * 60, "ok"]}, index=[3, 7])
    with pd.option_context("display.max_colwidth", 20):
        planted = frame._repr_html_()
    ellipsis = ('<table><tbody><tr><td><div style="width: 40px; overflow: hidden; white-space: nowrap; '
                'text-overflow: ellipsis">a reason far longer than its box</div></td>'
                '<td><code>None</code></td></tr></tbody></table>')
    page = browser.new_page()
    try:
        page.set_content(f"<main>{planted}{ellipsis}</main>")
        found = page.evaluate(TABLES_JS)
    finally:
        page.close()
    assert {"130.0", "NaN", "True", "False"} <= set(found["raw"]) and "None" not in found["raw"], found["raw"]
    assert len(found["indexed"]) == 1, found["indexed"]
    assert any(c.endswith("...") for c in found["cutOff"]), found["cutOff"]
    assert "a reason far longer than its box" in found["cutOff"], found["cutOff"]

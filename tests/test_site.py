"""The built smoke site, opened in a browser as a reader gets it: over HTTP on 127.0.0.1.

Needs Playwright for Python and a system Chromium (Debian's ``chromium``; Playwright's own browser
download is never used). Without either, the whole module is skipped with the reason (or fails,
with ``ROTE_REQUIRE_BROWSER=1``, as in CI). The site is ``$ROTE_SMOKE_DIR/site/_build/html``
(default ``_build/smoke``, the Makefile's ``SMOKE_DIR``); when missing it is built first with
``python -m rote book --profile smoke`` from the smoke caches that ``make notebooks`` leaves there,
but only where asked (``ROTE_SMOKE_DIR`` set, as ``make browser`` does, or ``ROTE_REQUIRE_BROWSER=1``):
a bare ``pytest`` skips the site's tests rather than build the whole book.

Each page of the table of contents is visited once at desktop width and once at 390 pixels
(a phone), every request that leaves 127.0.0.1 is blocked (a reader may be offline), and
screenshots are saved under ``_build/site-screenshots/`` for review (desktop: the whole page;
phone: the first screen). The checks then
read what the visits collected.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest
import yaml

# the words "not run" (a record never computed), not a reason that says an intervention "cannot run" (8.5)
NOT_RUN_WORDS = re.compile(r"(?<![A-Za-z])not run\b")

ROOT = Path(__file__).resolve().parents[1]
PROFILE = "smoke"
SMOKE = (ROOT / os.environ.get("ROTE_SMOKE_DIR", "_build/smoke")).resolve()  # the Makefile's SMOKE_DIR
SITE_ROOT = SMOKE / "site"
HTML = SITE_ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "site-screenshots"
TIMEOUT_MS = 20_000  # every browser wait is bounded
PHONE = {"width": 390, "height": 844}
# the first test pays for building the site when it is missing (`rote book --profile smoke`, up to 1800 s)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]



def _skip(reason: str) -> None:
    """Skip the module with its reason, or fail where the browser is required (CI: ROTE_REQUIRE_BROWSER=1)."""
    if os.environ.get("ROTE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser test required but {reason}", pytrace=False)
    pytest.skip(f"browser test skipped: {reason}", allow_module_level=True)


try:
    from playwright.sync_api import sync_playwright  # noqa: F401 (tests/conftest.py's browser launches it)
except ImportError:  # pragma: no cover - depends on the machine
    _skip("Playwright for Python is not installed (pip install playwright; never `playwright install`)")
CHROMIUM = os.environ.get("ROTE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    _skip("no system Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")


def _toc_pages() -> list[str]:
    """The site's pages in reading order, as paths of their HTML files ("book/intro.html")."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    return [f"{f}.html" for f in files]


PAGES = _toc_pages()
NOTEBOOK_PAGES = [p for p in PAGES if (ROOT / p.replace(".html", ".ipynb")).exists()]
SCORECARD = "book/scorecard.html"
INTRO = "book/intro.html"

# What a reader must never see: a path of the build machine, or a Python object's bare repr.
MACHINE_PATHS = sorted({str(ROOT), str(Path.home()), "/home/", "/Users/", "/tmp/", "/root/", "/work/",
                        "site-packages"}, key=len, reverse=True)
BARE_REPR = re.compile(r"\bat 0x[0-9a-fA-F]{6,}|<Figure size \d+x\d+|<(?:Axes|AxesSubplot)\b|\b(?:Posix|Windows)?Path\('"
                       r"|<matplotlib\.|<seaborn\.|<pandas\.io\.formats\.style\.Styler")

# JavaScript run on every page once it has loaded.
COLLECT_JS = """async () => {
  const main = document.querySelector('main') || document.body;
  for (const img of document.images) img.loading = 'eager';
  const decoded = await Promise.all([...document.images].map(img => Promise.race([
      img.decode().then(() => true, () => false),
      new Promise(r => setTimeout(() => r(false), 10000))])));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await Promise.race([MathJax.startup.promise, new Promise(r => setTimeout(r, 10000))]);
  }
  const outputs = [...main.querySelectorAll('div.cell_output')];
  return {
    title: document.title,
    images: [...document.images].map((img, i) => ({src: img.currentSrc || img.src, width: img.naturalWidth,
        decoded: decoded[i], figure: !!img.closest('div.cell_output, figure')})),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    text: main.textContent,
    outputText: outputs.map(o => o.textContent),
    errors: [...main.querySelectorAll('div.output.traceback, div.output.error, .admonition.error')]
        .map(e => e.textContent.slice(0, 300)),
    mathSource: main.querySelectorAll('.math').length,
    mathRendered: main.querySelectorAll('mjx-container').length,
    rawTex: [...main.querySelectorAll('.math')].filter(m => !m.querySelector('mjx-container'))
        .map(m => m.textContent.slice(0, 80)),
    icon: (document.querySelector('link[rel~="icon"]') || {}).href || null,
    verdictBoxes: [...main.querySelectorAll('.admonition.rote-verdict')].map(b => b.textContent),
    rerun: [...main.querySelectorAll('div.highlight-bash pre')].map(p => p.textContent.trim())
        .filter(t => t.startsWith('python -m rote')),
    hiddenCode: main.querySelectorAll('details.hide, .tag_hide-input details, details.above-input').length,
    banner: [...document.querySelectorAll('.bd-header-announcement')].map(b => b.textContent.trim()).join(' '),
    searchBoxes: [...document.querySelectorAll('.search-button, .search-button-field, input[type="search"]')]
        .filter(e => e.offsetParent !== null && e.getBoundingClientRect().width > 0).length,
  };
}"""

PHONE_JS = """() => {
  const width = document.documentElement.clientWidth;
  const article = document.querySelector('article') || document.body;
  const inScrollBox = e => {  // a wide table or code block may scroll inside its own box
    for (let a = e.parentElement; a && a !== article; a = a.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) return true;
    }
    return false;
  };
  const wide = [...article.querySelectorAll('p, li, h1, h2, h3, dd, .admonition')]
      .filter(e => e.offsetParent !== null && e.getBoundingClientRect().right > width + 1 && !inScrollBox(e))
      .map(e => e.tagName + ': ' + e.textContent.trim().slice(0, 60));
  const broken = [];  // a word of a table cell split across lines (ids in code may break anywhere)
  for (const cell of article.querySelectorAll('td, th')) {
    if (cell.offsetParent === null) continue;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.parentElement.closest('code')) continue;
      for (const m of n.textContent.matchAll(/[A-Za-z]{2,}/g)) {
        const range = document.createRange();
        range.setStart(n, m.index);
        range.setEnd(n, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  return {width, scrollWidth: document.documentElement.scrollWidth, wide, broken};
}"""


# -- the site and a server for it ---------------------------------------------------------------
@pytest.fixture(scope="session")
def site() -> Path:
    """The rendered smoke site; built first (chapters executed with the smoke caches) when missing.
    A chapter that fails still renders (its page says FAILED), so the checks below report it."""
    if not (HTML / "index.html").exists():
        # building the site executes every chapter (and trains the smoke runs if the caches are
        # empty): only when asked, as `make browser` and CI do, never by surprise from a bare pytest
        if not (os.environ.get("ROTE_SMOKE_DIR") or os.environ.get("ROTE_REQUIRE_BROWSER") == "1"):
            pytest.skip(f"no smoke site at {HTML}; `make browser` builds it (or set ROTE_SMOKE_DIR)")
        # the seeds of the notebook stage (the Makefile's TEST_SEEDS, 1), whose cached runs the site reuses
        env = {**os.environ, "ROTE_SITE": str(SITE_ROOT), "ROTE_RUNS": str(SMOKE / "runs"),
               "ROTE_RESULTS": str(SMOKE / "results"), "ROTE_SEEDS": os.environ.get("ROTE_SEEDS", "1")}
        subprocess.run([sys.executable, "-m", "rote", "book", "--profile", PROFILE], cwd=ROOT, env=env,
                       timeout=1800, check=False)
    assert (HTML / "index.html").exists(), f"no smoke site at {HTML}: `python -m rote book --profile smoke` failed"
    return HTML


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def base_url(site):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, b""


# the `browser` fixture (the system Chromium under Playwright) is tests/conftest.py's: one per session, shared with
# tests/test_site_reading.py (a second sync Playwright in the same session fails)


def _visit(browser, base_url: str, viewport: dict, shot_dir: Path, script: str, full_page: bool) -> dict[str, dict]:
    """Open every page in one browser context; return what each page logged, requested and showed."""
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(TIMEOUT_MS)
    host = urlparse(base_url).netloc
    log: dict[str, list] = {}

    def route(r):  # the reader may be offline: nothing leaves 127.0.0.1
        if urlparse(r.request.url).netloc == host or r.request.url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            log["external"].append(r.request.url)
            r.abort()

    context.route("**/*", route)
    shot_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for page_path in PAGES:
        log.update(console=[], failed=[], external=[])
        page = context.new_page()
        page.on("console", lambda m: log["console"].append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: log["console"].append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: log["failed"].append(f"{r.url} ({r.failure})"))
        page.on("response", lambda r: log["failed"].append(f"{r.url} (HTTP {r.status})") if r.status >= 400 else None)
        response = page.goto(base_url + page_path, wait_until="load", timeout=TIMEOUT_MS)
        info = page.evaluate(script)
        page.screenshot(path=str(shot_dir / (page_path.replace("/", "_").replace(".html", ".png"))),
                        full_page=full_page, timeout=TIMEOUT_MS)
        info.update(status=response.status if response else None, console=list(log["console"]),
                    failed=[f for f in log["failed"] if urlparse(f.split(" ")[0]).netloc in (host, "")],
                    external=list(log["external"]))
        out[page_path] = info
        page.close()
    context.close()
    return out


@pytest.fixture(scope="session")
def desktop(browser, base_url):
    return _visit(browser, base_url, {"width": 1280, "height": 900}, SHOTS / "desktop", COLLECT_JS, full_page=True)


@pytest.fixture(scope="session")
def phone(browser, base_url):
    # the first screen's screenshot; the checks read the whole page
    return _visit(browser, base_url, PHONE, SHOTS / "phone", PHONE_JS, full_page=False)


# -- every page ---------------------------------------------------------------------------------
@pytest.mark.parametrize("page", PAGES)
def test_page_loads_cleanly(desktop, page):
    info = desktop[page]
    assert info["status"] == 200, f"{page}: HTTP {info['status']}"
    assert not info["console"], f"{page}: console errors {info['console']}"
    assert not info["failed"], f"{page}: failed requests {info['failed']}"
    assert not info["external"], f"{page}: requests leaving the machine (offline readers lose them) {info['external']}"


@pytest.mark.parametrize("page", PAGES)
def test_page_has_a_favicon(desktop, page):
    """Every page names its icon (html.favicon), and the icon is served: without it Chromium asks for
    /favicon.ico and logs a 404 on the first load."""
    icon = desktop[page]["icon"]
    assert icon, f"{page}: no <link rel=icon>"
    status, body = _get(icon)
    assert status == 200 and body.startswith(b"\x89PNG"), f"{page}: icon {icon}: HTTP {status}"


@pytest.mark.parametrize("page", PAGES)
def test_images_decode(desktop, page):
    broken = [i["src"] for i in desktop[page]["images"] if not (i["decoded"] and i["width"] > 0)]
    assert not broken, f"{page}: images that do not decode: {broken}"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_chapter_shows_a_figure(desktop, page):
    figures = [i for i in desktop[page]["images"] if i["figure"] and i["width"] > 0]
    assert figures, f"{page}: no figure"


@pytest.mark.parametrize("page", PAGES)
def test_no_error_output_or_failed_banner(desktop, page):
    info = desktop[page]
    assert not info["errors"], f"{page}: error output {info['errors']}"
    for banner in ("FAILED", "has not been executed", "source changed after this page was executed"):
        assert banner not in info["text"], f"{page}: shows {banner!r}"


@pytest.mark.parametrize("page", PAGES)
def test_no_machine_path_or_bare_repr(desktop, page):
    info = desktop[page]
    for path in MACHINE_PATHS:
        assert path not in info["text"], f"{page}: shows the build machine's path {path!r}"
    for text in info["outputText"]:
        found = BARE_REPR.search(text)
        assert not found, f"{page}: a cell prints a bare object repr: {text[max(0, found.start() - 40):found.end() + 40]!r}"


@pytest.mark.parametrize("page", PAGES)
def test_formulas_render_offline(desktop, page):
    info = desktop[page]
    assert not info["rawTex"], f"{page}: formulas left as raw TeX: {info['rawTex'][:5]}"
    if info["mathSource"]:
        assert info["mathRendered"] >= info["mathSource"], f"{page}: MathJax rendered {info['mathRendered']} " \
                                                            f"of {info['mathSource']} formulas"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_chapter_shows_its_rerun_command_and_hides_boilerplate(desktop, page):
    info = desktop[page]
    chapter = Path(page).stem.split("_", 1)[-1]
    assert any(cmd.startswith(f"python -m rote run {chapter} --profile {PROFILE}") for cmd in info["rerun"]), \
        f"{page}: no rerun command (found {info['rerun']})"
    assert info["hiddenCode"] >= 1, f"{page}: no collapsed boilerplate cell"


def test_claim_chapters_open_with_a_verdict_box(desktop):
    from rote import claims

    pages = sorted({f"book/{p}.html" for p in getattr(claims, "CLAIM_PAGES", {}).values()})
    assert pages, "rote.claims names no claim pages (CLAIM_PAGES)"
    missing = [p for p in pages if not desktop[p]["verdictBoxes"]]
    assert not missing, f"claim chapters without a verdict box: {missing}"
    # a chapter that ran writes every record it owns: a box still saying "not run" reads the wrong records.
    # X1 alone may be not run, with its reason: its grid trains only when asked for (`rote book --x1`)
    x1_page = f"book/{claims.CLAIM_PAGES['X1']}.html"
    unread = [p for p in pages if "FAILED" not in desktop[p]["text"] and any(NOT_RUN_WORDS.search(b) for b in desktop[p]["verdictBoxes"])
              and not (p == x1_page and all("grid was not trained" in b for b in desktop[p]["verdictBoxes"]))]
    assert not unread, f"verdict boxes say 'not run' on chapters that ran: {unread}"


@pytest.mark.parametrize("page", PAGES)
def test_no_horizontal_scrolling_on_a_phone(phone, page):
    info = phone[page]
    assert info["scrollWidth"] <= info["width"] + 1, \
        f"{page}: at {PHONE['width']} px the page scrolls sideways ({info['scrollWidth']} px wide)"
    assert not info["wide"], f"{page}: text wider than the screen: {info['wide'][:5]}"


@pytest.mark.parametrize("page", PAGES)
def test_no_word_broken_letter_by_letter_on_a_phone(phone, page):
    broken = phone[page]["broken"]
    assert not broken, f"{page}: at {PHONE['width']} px table cells break words across lines: {broken[:8]}"


@pytest.mark.parametrize("page", PAGES)
def test_one_search_box_and_the_smoke_banner(desktop, page):
    info = desktop[page]
    assert info["searchBoxes"] == 1, f"{page}: {info['searchBoxes']} search boxes at desktop width"
    assert "verdicts mean nothing" in info["banner"], f"{page}: no smoke banner (found {info['banner']!r})"


def test_the_contents_list_stays_open_beside_a_wide_table(browser, base_url, desktop):
    """A page with a table tagged full-width (rote.build.site.widen_tables): scrolled to it, the page's contents
    list is still shown (the theme folds it to an empty strip while such a table is on screen)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(TIMEOUT_MS)
    shown = {}
    try:
        for page_path in NOTEBOOK_PAGES:
            page.goto(base_url + page_path, wait_until="load")
            wide = page.locator("div.cell.tag_full-width")
            if not wide.count():
                continue
            wide.first.scroll_into_view_if_needed()
            page.wait_for_timeout(300)  # the theme's IntersectionObserver
            shown[page_path] = page.evaluate("""() => {
              const toc = document.querySelector('.bd-sidebar-secondary nav.page-toc');
              return !!toc && getComputedStyle(toc).opacity === '1' && toc.getBoundingClientRect().height > 48;
            }""")
    finally:
        page.close()
    assert shown, "no page has a full-width table: nothing to check"
    assert all(shown.values()), f"contents list folded beside a wide table: {[p for p, ok in shown.items() if not ok]}"


def test_the_front_page_shows_the_at_a_glance_figure_before_the_results(desktop):
    text = desktop[INTRO]["text"]
    # the results section's first words (rote.build.frontpage.results_markdown; its heading is also in the contents list)
    assert "At a glance" in text and text.index("At a glance") < text.index("This build of the")
    assert any("at_a_glance" in i["src"] and i["width"] > 0 for i in desktop[INTRO]["images"])


def test_every_section_the_records_cite_is_on_the_protocol_page(desktop):
    """Every protocol section the build's records cite (check histories, reasons), read from the scorecard's
    JSON download, has its heading on the protocol page, whose targets the site links."""
    from rote.build import frontpage

    [url] = [u for u in desktop[SCORECARD]["links"] if "/_downloads/" in u and u.endswith(".json")]
    status, body = _get(url)
    assert status == 200
    cited = frontpage.cited_sections(json.loads(body))
    assert cited, "the records cite no protocol section"
    status, page = _get(url.split("/_downloads/")[0] + "/book/protocol.html")
    anchors = set(re.findall(r'id="(protocol-[0-9-]+)"', page.decode("utf-8", "replace")))
    missing = sorted(s for s in cited if frontpage.protocol_anchor(s) not in anchors)
    assert not missing, f"sections the records cite without a heading on the protocol page: {missing}"


# -- the site as a whole ------------------------------------------------------------------------
def test_every_internal_link_resolves(desktop, base_url):
    host = urlparse(base_url).netloc
    targets: dict[str, set[str]] = {}
    for page, info in desktop.items():
        for link in info["links"]:
            url, fragment = urldefrag(link)
            if urlparse(url).netloc == host:
                targets.setdefault(url, set()).add(fragment)
    assert targets
    broken = []
    for url, fragments in sorted(targets.items()):
        status, body = _get(url)
        if status != 200:
            broken.append(f"{url} (HTTP {status})")
            continue
        html = body.decode("utf-8", "replace")
        for fragment in sorted(f for f in fragments if f):
            if not re.search(rf'\b(id|name)="{re.escape(fragment)}"', html):
                broken.append(f"{url}#{fragment} (no such anchor)")
    assert not broken, f"{len(broken)} broken links: {broken[:10]}"


def test_search_finds_memorization(browser, base_url, site):
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(base_url + "search.html?q=memorization", wait_until="load")
        page.wait_for_selector("#search-results ul.search li", timeout=TIMEOUT_MS)
        hits = page.locator("#search-results ul.search li a").all_text_contents()
    finally:
        page.close()
    assert hits, "the search page found nothing for 'memorization'"


def _scorecard_rows(browser, base_url) -> list[dict]:
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(base_url + SCORECARD, wait_until="load")
        return page.evaluate("""() => {
          const rows = [];  // every claims table (with its section links): the paper's claims, then beyond the paper
          for (const table of document.querySelectorAll('div.cell_output table')) {
            const head = [...table.querySelectorAll('thead th')].map(th => th.textContent.trim());
            if (!['claim', 'task', 'condition', 'section'].every(h => head.includes(h))) continue;
            rows.push(...[...table.querySelectorAll('tbody tr')].map(tr => {
              const cells = [...tr.children];
              const offset = cells.length - head.length;  // a leading index cell has no header of its own
              const row = {};
              head.forEach((h, i) => { if (i + offset >= 0 && cells[i + offset]) row[h] = cells[i + offset].textContent.trim(); });
              row.links = [...tr.querySelectorAll('a[href]')].map(a => a.href);
              return row;
            }));
          }
          return rows.length ? rows : null;
        }""")
    finally:
        page.close()


def test_front_page_opens_with_the_results_of_the_build(browser, base_url):
    """The front page's first section is what the build found: a sentence per claim and a table with a
    row per claim, task and condition, each linked to its chapter (rote.build.frontpage, staged into intro.md)."""
    from rote import claims

    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(base_url + INTRO, wait_until="load")
        found = page.evaluate("""() => {
          const main = document.querySelector('main') || document.body;
          const first = main.querySelector('section section');
          const head = first ? first.querySelector('h2').textContent.replace(/[#\u00b6]/g, '').trim() : null;
          const table = first ? first.querySelector('table') : null;
          const cols = table ? [...table.querySelectorAll('thead th')].map(th => th.textContent.trim()) : [];
          const rows = table ? [...table.querySelectorAll('tbody tr')].map(tr => {
            const cells = [...tr.children].map(td => td.textContent.trim());
            return {cells, links: [...tr.querySelectorAll('a[href]')].map(a => a.href)};
          }) : [];
          const sentences = first ? [...first.querySelectorAll('li')].map(li => li.textContent.trim()) : [];
          return {head, cols, rows, sentences};
        }""")
    finally:
        page.close()
    assert found["head"] == "What this build found", f"the front page opens with {found['head']!r}"
    assert found["cols"][:5] == ["claim", "task", "condition", "amended", "registered"], found["cols"]
    expected = {(r.claim, r.task.upper(), r.condition) for r in claims.load_all(PROFILE, root=ROOT / "_nowhere")}
    shown = {tuple(row["cells"][:3]) for row in found["rows"]}
    assert shown == expected, f"front page rows: missing {sorted(expected - shown)}, extra {sorted(shown - expected)}"
    assert all(row["cells"][3] and row["cells"][4] and row["links"] for row in found["rows"])
    assert [s.split(" ")[0] for s in found["sentences"]] == list(claims.CLAIMS), found["sentences"]


def test_scorecard_has_a_linked_row_for_every_claim(browser, base_url):
    from rote import claims

    rows = _scorecard_rows(browser, base_url)
    assert rows is not None, "the scorecard has no table with columns claim, task, condition and section"
    expected = {(r.claim, r.task, r.condition) for r in claims.load_all(PROFILE, root=ROOT / "_nowhere")}
    shown = {(r.get("claim"), r.get("task"), r.get("condition")) for r in rows}
    assert expected <= shown, f"scorecard rows missing: {sorted(expected - shown)}"
    unlinked = [(r.get("claim"), r.get("task"), r.get("condition")) for r in rows if not r["links"]]
    assert not unlinked, f"scorecard rows without a link to their section: {unlinked}"
    broken = []
    for r in rows:
        for link in r["links"]:
            url, fragment = urldefrag(link)
            status, body = _get(url)
            if status != 200 or (fragment and f'id="{fragment}"' not in body.decode("utf-8", "replace")):
                broken.append(link)
    assert not broken, f"scorecard links to sections that do not exist: {broken}"


def test_scorecard_offers_the_records_as_json_and_csv(desktop, base_url):
    links = [u for u in desktop[SCORECARD]["links"] if "/_downloads/" in u]
    by_ext = {Path(urlparse(u).path).suffix: u for u in links}
    assert {".json", ".csv"} <= set(by_ext), f"scorecard download links: {links}"
    status, body = _get(by_ext[".json"])
    assert status == 200
    records = json.loads(body)
    assert records and all({"claim", "task", "profile"} <= set(r) for r in records)
    status, body = _get(by_ext[".csv"])
    assert status == 200
    header = body.decode().splitlines()[0].split(",")
    assert {"claim", "task", "condition", "seed", "check", "value", "threshold"} <= set(header)


# -- what produced each page (rote.build.provenance) and the generated reference pages -----------------
def test_the_stamp_opens_a_build_environment_dropdown(browser, base_url):
    """A chapter's stamp holds a closed "Build environment" dropdown; a click opens it, and it names the
    commit (or says the tree was not a git checkout) and the torch version the page was executed with."""
    from rote.build.provenance import package_version

    page_path = NOTEBOOK_PAGES[0]
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(base_url + page_path, wait_until="load")
        dropdown = page.locator("details.rote-environment")
        assert dropdown.count() == 1, f"{page_path}: {dropdown.count()} build environment dropdowns"
        assert dropdown.evaluate("d => d.open") is False, f"{page_path}: the dropdown is open before a click"
        dropdown.locator("summary").click()
        page.wait_for_function("() => document.querySelector('details.rote-environment').open", timeout=TIMEOUT_MS)
        text = dropdown.inner_text()  # the rendered text: empty for a closed dropdown's body
        SHOTS.mkdir(parents=True, exist_ok=True)
        dropdown.screenshot(path=str(SHOTS / "stamp-build-environment.png"), timeout=TIMEOUT_MS)
    finally:
        page.close()
    assert "Build environment" in text
    assert re.search(r"commit: (?:[0-9a-f]{40} \((?:clean|dirty[^)]*)\)|not a git checkout)", text), text
    assert f"torch {package_version('torch')}" in text, text
    assert "code fingerprint of the runs" in text and "training precision: fda:" in text, text


def _table_rows(browser, base_url, page_path: str) -> tuple[list[int], str]:
    """The number of body rows of each table of a page's main text, and that text."""
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(base_url + page_path, wait_until="load")
        return page.evaluate("""() => {
          const main = document.querySelector('main') || document.body;
          return [[...main.querySelectorAll('table')].map(t => t.querySelectorAll('tbody tr').length),
                  main.textContent];
        }""")
    finally:
        page.close()


def test_the_environment_page_lists_the_locked_packages(browser, base_url):
    from rote.build.provenance import locked_packages, package_version, python_requirement

    rows, text = _table_rows(browser, base_url, "book/environment.html")
    assert rows == [len(locked_packages())], f"package table rows: {rows}"
    assert python_requirement() in text and f"torch {package_version('torch')}" in text
    assert "rote:environment" not in text and "{dropdown}" not in text


def test_the_parameter_reference_has_every_parameter(browser, base_url):
    import dataclasses

    from rote.chapters.params import CHAPTER_PARAMS, chapter_params
    from rote.config import param_names

    rows, text = _table_rows(browser, base_url, "book/parameters.html")
    assert len(rows) == 5 and all(rows), f"rows per table: {rows}"  # the chapters', then data x2, model, training
    names = {f.name for c in CHAPTER_PARAMS for f in dataclasses.fields(chapter_params(c))}
    names |= set(param_names("fda")) | set(param_names("thr"))
    missing = sorted(n for n in names if n not in text)
    assert not missing, f"parameters missing from the page: {missing}"
    assert "{doc}" not in text and "python -m rote run outlier_heuristics -p top_k" in text

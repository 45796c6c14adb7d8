"""What the site adds to the executed chapters (rote.build.site, rote.build.staging.stage_site), without a browser."""

import ast
import csv
import json
import shlex

import nbformat
import pytest

from rote import claims, display
from rote.build import driver, site, staging
from rote.plots import save_figure


def _record(claim="C1", task="fda", condition="random", page="02_learning_dynamics", seeds=(0, 1), passed=(True, False)):
    per_seed = [{"seed": s, "registered": "pass" if ok else "fail", "amended": "pass" if ok else "fail",
                 "metrics": {"gen": 0.9}, "run_keys": [f"k{s}"],
                 "checks": [{"id": "c1.gen", "name": "final gen", "kind": "registered", "value": 0.91 if ok else 0.85,
                             "threshold": 0.9, "passed": ok, "part": "final gen", "section5": True, "reason": "",
                             "margin": 0.01 if ok else -0.05, "interval": [0.89, 0.93] if ok else [0.83, 0.87],
                             "method": "wilson", "near": ok},
                            {"id": "c1.control", "name": "gen control", "kind": "control", "value": 0.5,
                             "threshold": None, "passed": None, "part": "final gen", "section5": False,
                             "reason": "not computed"},
                            {"id": "c1.old", "name": "old check", "kind": "superseded", "value": 0.1,
                             "threshold": 0.9, "passed": False, "part": "final gen", "section5": False,
                             "reason": "7.1: replaced"}]}
                for s, ok in zip(seeds, passed)]
    return {"claim": claim, "task": task, "condition": condition, "profile": "smoke", "seeds": list(seeds),
            "verdict_registered": "mixed: 1 pass, 1 fail, 0 unresolved", "verdict_amended": "mixed: 1 pass, 1 fail, 0 unresolved",
            "status": "mixed: 1 pass, 1 fail, 0 unresolved",
            "per_seed": per_seed, "page": page, "anchor": "verdict", "created": 0.0}


def test_verdict_box_reads_verdicts_seeds_and_deciding_numbers():
    box = site.verdict_box([_record(), _record(task="thr", condition="-", seeds=(0,), passed=(True,))],
                           {"C1": "Generalize first"})
    assert box.startswith(":::{admonition} Verdict. C1: Generalize first")
    assert "rote-verdict-mixed" in box
    assert "**C1 · FDA · random noise**: registered **mixed: 1 pass, 1 fail, 0 unresolved**, amended **mixed: 1 pass, 1 fail, 0 unresolved** (seeds 0, 1)" in box
    # the registered reading: its failing check, in a line; the amended one: a short table
    assert "- registered reading, deciding checks: final gen (`c1.gen`) = 0.91 / 0.85, threshold 0.9: 1/2 seeds pass" in box
    fda = box.split("**C1 · THR**")[0]
    assert "| check ([words](glossary.md)) | value (range) | margin | 95% interval | threshold | outcome |" in fda
    # section 11: per seed the margin and the interval beside the value, the range across seeds, near seeds
    assert ("| final gen (`c1.gen`) | 0.91 / 0.85 (range 0.85 .. 0.91) | +0.01 / -0.05 "
            "| [0.89, 0.93] wilson / [0.83, 0.87] wilson; near on 1 seed | 0.9 | 1/2 seeds pass |") in fda
    assert "`c1.control`" not in fda  # a failure decides; the unresolved control does not
    assert "- superseded (shown, not counted): old check (`c1.old`): 7.1: replaced" in fda
    thr = box.split("**C1 · THR**")[1]
    assert "registered reading, deciding checks: final gen (`c1.gen`) = 0.91, threshold 0.9: pass" in thr
    assert "| gen control (`c1.control`) | 0.5 |  |  | n/a | unresolved (not computed) |" in thr
    assert site.verdict_box([], {}) is None


def test_records_for_page_and_box_colour():
    records = [_record(), _record(claim="C2", page="03_intermediate_results")]
    assert [r["claim"] for r in site.records_for_page(records, "03_intermediate_results")] == ["C2"]
    held = {**_record(), "verdict_amended": "holds"}
    assert "rote-verdict-holds" in site.verdict_box([held])
    assert "rote-verdict-fails" in site.verdict_box([{**held, "verdict_amended": "fails"}])
    assert "rote-verdict-notrun" in site.verdict_box([{**held, "verdict_amended": "not run", "per_seed": []}])


def test_downloads_json_and_long_csv(tmp_path):
    records = [_record(), {**_record(claim="C2"), "per_seed": [], "verdict_amended": "not run"}]
    json_name, csv_name = site.write_downloads(records, tmp_path, "smoke")
    assert json.loads((tmp_path / json_name).read_text()) == records
    rows = list(csv.DictReader(open(tmp_path / csv_name)))
    assert len(rows) == 2 * 3 + 1  # two seeds x three checks, and one row for the record without checks
    assert rows[0]["claim"] == "C1" and rows[0]["seed"] == "0" and rows[0]["check"] == "final gen"
    assert rows[0]["check_id"] == "c1.gen" and rows[1]["reason"] == "not computed"
    assert rows[1]["passed"] == "" and rows[-1]["claim"] == "C2" and rows[-1]["check"] == ""
    assert "{download}`JSON <records-smoke.json>`" in site.downloads_markdown(json_name, csv_name, 2)


@pytest.mark.parametrize("params, command", [
    ({"profile": "smoke"}, "python -m rote run learning_dynamics --profile smoke"),
    ({"profile": "quick", "tasks": ["thr"], "overrides": {"noise_ratio": 0.2}},
     "python -m rote run learning_dynamics --profile quick -p tasks thr -p noise_ratio 0.2"),
    ({"profile": "quick", "sweep_ratios": [0, 0.3]},
     "python -m rote run learning_dynamics --profile quick -p sweep_ratios '[0, 0.3]'"),
])
def test_rerun_command(params, command):
    assert site.rerun_command("learning_dynamics", params) == command


@pytest.mark.parametrize("given", [
    {"tasks": "thr", "sweep_ratios": "[0, 0.3]"},
    {"tasks": "fda,thr", "noise_ratio": "0.2", "seeds": "0,2"},
])
def test_rerun_command_round_trips_through_the_chapter_parameters(given):
    """The command a page shows, run through the shell and the CLI's parameter parsing, asks for
    exactly the parameters the page was executed with."""
    params = driver.resolve_parameters("learning_dynamics", "smoke", given)
    words = shlex.split(site.rerun_command("learning_dynamics", params))
    assert words[:7] == ["python", "-m", "rote", "run", "learning_dynamics", "--profile", "smoke"]
    rest = words[7:]
    assert rest[::3] == ["-p"] * (len(rest) // 3) and len(rest) % 3 == 0
    pairs = {name: value for name, value in zip(rest[1::3], rest[2::3])}
    assert len(pairs) == len(rest) // 3 >= 2
    assert driver.resolve_parameters("learning_dynamics", "smoke", pairs) == params


def _chapter():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title\n\nIntro text."),
                nbformat.v4.new_code_cell("import os"),
                nbformat.v4.new_code_cell("profile = 'quick'\ntasks = ['fda']", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("profile = \"smoke\"\n", metadata={"tags": ["injected-parameters"]}),
                nbformat.v4.new_code_cell("runs = train()\nglue('x', 1, display=False)", outputs=[
                    nbformat.v4.new_output("stream", name="stderr", text="50%"),
                    nbformat.v4.new_output("display_data", data={"application/papermill.record/text/plain": "1"})]),
                nbformat.v4.new_code_cell("table", outputs=[nbformat.v4.new_output("execute_result", data={"text/plain": "1"})]),
                nbformat.v4.new_code_cell("import numpy as np"),
                nbformat.v4.new_code_cell("fig = plot()")]
    return nb


def test_boilerplate_collapses_into_one_toggle():
    nb = _chapter()
    assert site.hide_boilerplate(nb) == 5  # import os, parameters, injected, silent setup; the later import
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) == 4
    first = code[0]
    assert "hide-input" in first.metadata.tags
    assert first.source.index("import os") < first.source.index("# Parameters (the chapter's defaults)") \
        < first.source.index("# Parameters papermill injected") < first.source.index("runs = train()")
    assert any("application/papermill.record/text/plain" in o.get("data", {}) for o in first.outputs)  # glued values kept
    assert "hide-input" not in code[1].metadata.get("tags", [])  # the first output stays in view
    assert "hide-input" in code[2].metadata.tags and code[2].source == "import numpy as np"
    assert "hide-input" not in code[3].metadata.get("tags", [])  # code after the first output stays visible
    assert all("rote_merged" not in c.metadata for c in nb.cells)


def test_a_setup_cell_with_output_hides_its_code_not_its_output():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# T"),
                nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("import pandas as pd\npd.DataFrame()", outputs=[
                    nbformat.v4.new_output("execute_result", data={"text/plain": "df"})]),
                nbformat.v4.new_code_cell("import numpy as np\nnp.zeros(1)", outputs=[
                    nbformat.v4.new_output("execute_result", data={"text/plain": "z"})])]
    assert site.hide_boilerplate(nb) == 2
    assert [("hide-input" in c.metadata.get("tags", []), len(c.outputs)) for c in nb.cells[1:]] == \
        [(True, 0), (True, 1), (False, 1)]  # not merged: the table stays; later code stays visible


def test_effective_parameters_prefer_the_injected_values():
    assert site.effective_parameters(_chapter()) == {"profile": '"smoke"', "tasks": "['fda']"}


def test_notes_go_under_the_title_heading():
    nb = _chapter()
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("papermill banner"))
    site.insert_after_title(nb, [nbformat.v4.new_markdown_cell("NOTE")])
    assert [c.source for c in nb.cells[:4]] == ["papermill banner", "# Title", "NOTE", "Intro text."]


def test_stamp_names_the_rerun_command_and_parameters():
    meta = {"chapter": "tasks", "profile": "smoke", "parameters": {"profile": "smoke"}, "seconds": 11.2,
            "executed": "2026-11-30 16:38 UTC", "ok": True, "error": ""}
    text = site.stamp_markdown(meta, {"profile": '"smoke"'})
    assert text.startswith("::::{note}\nExecuted 2026-11-30 16:38 UTC with profile `smoke` in 11 s.")
    assert "```bash\npython -m rote run tasks --profile smoke\n```" in text and '`profile = "smoke"`' in text
    failed = site.stamp_markdown({**meta, "ok": False, "error": "cell 3 raised ValueError: x"})
    assert failed.startswith("::::{error}\nThis chapter FAILED") and "cell 3 raised ValueError: x" in failed


def test_save_figure_returns_nothing(tmp_path):
    import matplotlib.pyplot as plt

    fig = plt.figure()
    assert save_figure(fig, "x", folder=tmp_path) is None  # a returned path printed the machine's path into pages
    assert (tmp_path / "x.png").stat().st_size > 0
    plt.close(fig)


def test_stage_site_adds_the_reader_cells(tmp_path, monkeypatch):
    monkeypatch.setenv("ROTE_SITE", str(tmp_path / "site"))
    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    name, source = "learning_dynamics", driver.chapters()["learning_dynamics"]
    nb = nbformat.read(source, as_version=4)
    executed = driver.output_dir(name, "smoke", {"profile": "smoke"}) / f"{name}.ipynb"
    executed.parent.mkdir(parents=True)
    nbformat.write(nb, executed)
    driver._stamp(executed, "old stamp", {"chapter": name, "profile": "smoke", "parameters": {"profile": "smoke"},
                                        "seconds": 3.0, "executed": "now", "ok": True, "error": "",
                                        "source_sha": driver.source_hash(source)})
    staged = staging.stage_site("smoke")
    assert staged == tmp_path / "site" / "_build" / "site_src"
    page = nbformat.read(staged / "book" / source.name, as_version=4)
    texts = [c.source for c in page.cells if c.cell_type == "markdown"]
    assert texts[0].startswith("# ")
    # the title, the finding, then the build stamp (issue 46, part 2: a claim chapter opens with its finding)
    assert texts[1].startswith("## What this build found")
    assert "python -m rote run learning_dynamics --profile smoke" in texts[2]
    # the chapter opens with its finding; the verdict box, once and folded, opens its Verdict section
    verdict_at = next(i for i, t in enumerate(texts) if t.startswith("## Verdict"))
    assert texts[verdict_at + 1].startswith(":::{admonition} Verdict. C1")  # placeholders: every claim has a box
    assert sum(t.startswith(":::{admonition} Verdict.") for t in texts) == 1
    assert ":class: rote-verdict dropdown " in texts[verdict_at + 1]
    assert (staged / "_static" / "rote.css").exists()
    assert (staged / "book" / "records-smoke.json").exists() and (staged / "book" / "records-smoke.csv").exists()
    records = json.loads((staged / "book" / "records-smoke.json").read_text())
    assert {(r["claim"], r["task"], r["condition"]) for r in records} == \
        {(r.claim, r.task, r.condition) for r in claims.expected("smoke")}
    assert "python -m rote book --profile smoke" in (staged / "book" / "intro.md").read_text()


@pytest.mark.parametrize("stale", [False, True])
def test_a_page_executed_from_an_older_source_says_so(tmp_path, monkeypatch, stale):
    """The stamp records the hash of the chapter source it was executed from; a staged page whose
    source changed since carries a warning to rebuild it, a current page none."""
    monkeypatch.setenv("ROTE_SITE", str(tmp_path / "site"))
    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    name, source = "learning_dynamics", driver.chapters()["learning_dynamics"]
    executed = driver.output_dir(name, "smoke", {"profile": "smoke"}) / f"{name}.ipynb"
    executed.parent.mkdir(parents=True)
    nbformat.write(nbformat.read(source, as_version=4), executed)
    sha = driver.source_hash(source)
    assert len(sha) >= 12 and sha != driver.source_hash(driver.chapters()["tasks"])
    driver._stamp(executed, "stamp", {"chapter": name, "profile": "smoke", "parameters": {"profile": "smoke"},
                                    "seconds": 3.0, "executed": "now", "ok": True, "error": "",
                                    "source_sha": ("0" * len(sha)) if stale else sha})
    page = nbformat.read(staging.stage_site("smoke") / "book" / source.name, as_version=4)
    warnings = [c.source for c in page.cells if c.cell_type == "markdown" and "source changed" in c.source]
    assert len(warnings) == (1 if stale else 0)
    if stale:
        assert warnings[0].startswith("```{warning}") and "rebuild it" in warnings[0]


def test_wide_tables_get_the_full_width():
    wide = "<table><thead><tr>" + "<th>c</th>" * 7 + "</tr></thead><tbody></tbody></table>"
    narrow = "<table><thead><tr>" + "<th>c</th>" * 3 + "</tr></thead></table>"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("t", outputs=[nbformat.v4.new_output("display_data", data={"text/html": html})])
                for html in (wide, narrow)]
    assert site.widen_tables(nb) == 1
    assert "full-width" in nb.cells[0].metadata.tags and "full-width" not in nb.cells[1].metadata.get("tags", [])


def test_a_records_check_table_links_the_glossary_from_its_headline(monkeypatch):
    """show_record's headline (a cell's Markdown output, rendered as CommonMark) links the built glossary
    page; a record without checks has no table and no link."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    fields = {k: v for k, v in _record().items() if k in claims.ClaimRecord.__dataclass_fields__}
    display.show_record(claims.ClaimRecord(**fields))
    assert f"({display.OUTPUT_GLOSSARY_LINK} of the table below)" in shown[0].data and len(shown) == 2
    shown.clear()
    display.show_record(claims.ClaimRecord(**{**fields, "per_seed": [], "seeds": []}))
    assert "glossary" not in shown[0].data and len(shown) == 1


def test_a_verdict_box_names_its_seeds_in_words():
    """Issue 46: "seed 0" for one seed, never "(seeds 0)"; "seeds 0, 1" for several."""
    one = site.verdict_box([_record(seeds=(0,), passed=(True,))], {"C1": "Generalize first"})
    assert "(seed 0)" in one and "(seeds 0)" not in one
    assert "(seeds 0, 1)" in site.verdict_box([_record(seeds=(0, 1), passed=(True, False))], {"C1": "Generalize first"})


# -- source files named on a page link to the repository where its URL is set (issue 46, part 5) -----------------
URL = "https://github.com/someone/rote"
NAMED = ("Thresholds live in `rote/specs/`, defaults in `rote/config.py`, crossings in `rote.analysis.curves.crossing`;"
         " see the README, `CITATION.cff`, {doc}`protocol`, `smoke` and `paper.md`.\n"
         "```bash\ncat rote/config.py README.md\n```")


def test_source_files_and_the_readme_are_links_only_where_the_repository_url_is_set():
    linked = site.link_sources(NAMED, URL, "main")
    for path, kind in (("rote/specs", "tree"), ("rote/config.py", "blob"), ("README.md", "blob"),
                       ("rote/analysis/curves.py", "blob"), ("CITATION.cff", "blob")):
        assert f"]({URL}/{kind}/main/{path})" in linked, path
    assert "[`rote/config.py`](" in linked and "the [README](" in linked
    # not a file of the repository, a MyST role, a code block: unchanged
    assert "`smoke`" in linked and "`paper.md`" in linked and "{doc}`protocol`" in linked
    assert linked.endswith("```bash\ncat rote/config.py README.md\n```")
    assert site.link_sources(NAMED, "") == NAMED  # unset: plain code text


@pytest.mark.parametrize("url", [URL, ""])
def test_staged_pages_link_their_source_files_from_the_one_setting(tmp_path, monkeypatch, url):
    """The repository URL of rote.build.publish (here $ROTE_REPOSITORY_URL): text pages and chapters' markdown
    link the source files they name; without it, no page links a source file."""
    monkeypatch.setenv("ROTE_SITE", str(tmp_path / "site"))
    monkeypatch.setenv("ROTE_REPOSITORY_URL", url)
    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    staged = staging.stage_site("smoke")
    intro = (staged / "book" / "intro.md").read_text()
    chapter = "".join(c.source for c in nbformat.read(staged / "book" / "02_learning_dynamics.ipynb", 4).cells)
    assert "`rote/specs/`" in intro and "`rote.verdicts`" in chapter
    assert (f"[`rote/specs/`]({URL}/tree/main/rote/specs)" in intro) == bool(url)
    assert (f"[`rote.verdicts`]({URL}/tree/main/rote/verdicts)" in chapter) == bool(url)
    assert (f"{URL}/blob/" in intro + chapter) == bool(url)


def test_a_page_shows_the_injected_settings_without_the_build_machines_paths(tmp_path):
    root = tmp_path / "project"
    settings = {"seeds": 1, "runs": str(root / "_build" / "runs"), "results": None, "analysis": "/elsewhere/analysis",
                "figures": "_build/figures", "plain_progress": True}
    cell = nbformat.v4.new_code_cell(f'profile = "smoke"\nsettings = {json.dumps(settings)}\n',
                                     metadata={"tags": ["injected-parameters"]})
    untouched = nbformat.v4.new_code_cell(f"settings = {json.dumps(settings)}")  # not papermill's: left as it is
    nb = nbformat.v4.new_notebook(cells=[cell, untouched])
    assert site.readable_settings(nb, root) == 2
    line = cell.source.splitlines()[1]
    shown = ast.literal_eval(line.partition(" = ")[2])  # still Python a reader can copy
    assert shown == {**settings, "runs": "_build/runs", "analysis": site.OUTSIDE_FOLDER}
    assert str(tmp_path) not in cell.source and "/elsewhere" not in cell.source and cell.source.startswith("profile")
    assert untouched.source == f"settings = {json.dumps(settings)}"

"""Tables as a reader reads them (issue 46, part 3): every pandas table a chapter shows goes through
rote.display.reader_html (installed in the kernel by rote.display.install_reader_tables, which
rote.plots, imported by every chapter, calls): no NaN, None,
True/False, index column, "130.0" or cell cut off with "...", missing values said in words; and every check
shown by its name in words with its id beside it, never its id alone."""

import importlib
import math

import numpy as np
import pandas as pd
import pytest

from rote import claims, display, plots
from rote.verdicts.core import Check, CheckLabel

RAW = ("NaN", "nan", "None", "True", "False", "NaT", "<NA>", "130.0", "...")


@pytest.mark.parametrize("value, shown", [
    (math.nan, display.MISSING), (None, display.MISSING), (pd.NA, display.MISSING), (pd.NaT, display.MISSING),
    (np.float64("nan"), display.MISSING), (True, "yes"), (np.bool_(False), "no"), (130.0, "130"),
    (np.float32(4.0), "4"), (0.95312, "0.953"), (1234.5, "1234"), (np.int64(7), "7"), ([1.0, None], "1, —"),
    ((), "none"), ("None", display.MISSING), ("True", "yes"), ("a long reason " * 9, "a long reason " * 9)])
def test_a_cell_reads_in_words(value, shown):
    assert display.reader_value(value) == shown


def _planted() -> pd.DataFrame:
    """A table as a chapter computes it: filtered rows (an index of row numbers), a count turned float by a
    missing value, booleans, a column never measured and a reason longer than pandas' 50 characters."""
    frame = pd.DataFrame({"task": ["fda", "thr", "fda"], "count": [130.0, math.nan, 12.0],
                          "noisy": [True, False, True], "ceiling": [None, math.nan, None],
                          "reason": ["x" * 49 + " the reason behind the verdict, never cut", "", "ok"]},
                         index=[3, 7, 9])
    return frame


def test_a_planted_table_has_no_raw_value_no_index_and_no_cut_cell():
    html = display.reader_html(_planted())
    for raw in RAW:
        assert raw not in html, (raw, html)
    assert "<tbody>" in html and "<th>" not in html.split("<tbody>")[1]  # no index column in the rows
    assert "never cut" in html and ">130<" in html and ">yes<" in html and ">no<" in html
    # the column never measured is left out and named; a missing cell says why under the table
    text, notes = display.reader_frame(_planted())
    assert "ceiling" not in text.columns and list(text["count"]) == ["130", display.MISSING, "12"]
    assert notes == ["Columns without any value, not shown: not measured in this build (ceiling).",
                     "—: not measured in this build (count)."]


def test_a_table_gives_its_own_reason_and_keeps_a_named_index():
    frame = _planted().set_index("task")
    frame.attrs["missing"] = {"count": "no twin trained", "ceiling": "one seed: no split-half"}
    text, notes = display.reader_frame(frame)
    assert list(text.columns[:1]) == ["task"]  # a named index is a column, not an index
    assert notes == ["Columns without any value, not shown: one seed: no split-half (ceiling).",
                     "—: no twin trained (count)."]


def test_a_long_table_says_what_it_leaves_out_and_a_styler_keeps_its_caption():
    text, notes = display.reader_frame(pd.DataFrame({"step": range(display.MAX_ROWS + 5)}))
    assert len(text) == display.MAX_ROWS and notes == [f"The first {display.MAX_ROWS} of {display.MAX_ROWS + 5} rows."]
    html = display.reader_styler_html(_planted().style.set_caption("fda random"))
    assert "<caption>fda random</caption>" in html and "NaN" not in html


def test_a_kernel_shows_every_dataframe_and_styler_through_the_reader_html():
    """Importing rote.plots installs the hook; without it pandas' own HTML (index, NaN, True, 130.0) reaches
    the page."""
    from IPython.core.interactiveshell import InteractiveShell

    assert display.install_reader_tables() is False  # no kernel here: nothing changes
    shell = InteractiveShell.instance()
    shell.kernel = object()  # what a Jupyter kernel's shell has
    try:
        importlib.reload(plots)  # what a chapter's kernel does: every chapter imports rote.plots
        assert shell.display_formatter.formatters["text/html"].lookup(_planted()) is display.reader_html
        assert display.install_reader_tables() is True
        for shown in (_planted(), _planted().style):
            html = shell.display_formatter.format(shown)[0]["text/html"]
            assert "rote-table" in html and not any(raw in html for raw in RAW), html
    finally:
        del shell.kernel
        InteractiveShell.clear_instance()


# -- check labels ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["", "  ", "c1.gen"])
def test_a_check_without_a_name_in_words_is_refused(name):
    """Every check a spec produces is built as a Check (rote.verdicts.core): one without a label, or labelled
    with its id, fails there, so no check id reaches a page without its label."""
    with pytest.raises(ValueError, match="needs a name in words"):
        Check("c1.gen", name, "registered", 0.9, 0.5, True)
    with pytest.raises(ValueError, match="needs a name in words"):
        CheckLabel("c1.gen", name, "registered")


def _record():
    checks = [{"id": "c2.lens.ahead", "name": "true answer ahead at an intermediate layer", "kind": "registered",
               "value": False, "threshold": True, "passed": False, "part": "lens", "section5": True, "reason": ""},
              {"id": "c2.lens.null", "name": "share ahead vs the prior", "kind": "amended", "value": None,
               "threshold": 0.2, "passed": None, "part": "lens", "section5": False, "reason": "no M"}]
    return claims.ClaimRecord("C2", "fda", "random", "smoke", [0], "fails", "fails", "fails", page="03_x",
                              per_seed=[{"seed": 0, "registered": "fail", "amended": "fail", "checks": checks}])


def test_check_ids_are_shown_beside_their_labels_in_the_scorecard_and_record_tables():
    rec = _record()
    deciding = display.claims_table([rec]).loc[0, "deciding checks"]
    assert deciding == "true answer ahead at an intermediate layer [c2.lens.ahead] no vs yes"
    table = display.record_table(rec)
    assert list(table.columns[:2]) == ["check", "id"]
    assert table.loc[0, "seed 0"] == "no vs yes: FAIL" and "False" not in table.to_string()
    assert display.labelled("c2.lens.null", "share ahead vs the prior", code=True) == \
        "share ahead vs the prior (`c2.lens.null`)"
    text = "no longer deciding: c2.lens.ahead (7.4: moved); c2.lens.ahead.amended stays"
    assert display.with_labels(text, display.check_names(rec)) == \
        "no longer deciding: true answer ahead at an intermediate layer [c2.lens.ahead] (7.4: moved); " \
        "c2.lens.ahead.amended stays"


def test_a_fragile_row_names_the_moved_check_by_its_label(tmp_path, monkeypatch):
    from rote.stability import FRAGILE

    monkeypatch.setenv("ROTE_RESULTS", str(tmp_path))
    rec = _record()
    moved = {"seed": 0, "check": "c2.lens.ahead", "before": False, "after": True, "outcome_before": "fail",
             "outcome_after": "pass"}
    claims.save_stability(rec, {"status": FRAGILE, "reason": "seeds", "changes": {
        "seeds": {"moved_verdict": True, "verdict": "holds", "moved": [moved]}}})
    [row] = display.fragile_rows([rec]).to_dict("records")
    assert row["what moved"] == ("seed 0 true answer ahead at an intermediate layer [c2.lens.ahead]: no (fail) -> "
                                 "yes (pass)")


# -- the front page's "At a glance" heat map on a phone ---------------------------------------------------------
PHONE_COLUMN_PX = 358  # the article's width on a 390 px screen (tests/test_site_tables.py measures it)


def _glance_table() -> pd.DataFrame:
    words = {"C1": "holds", "C2": "mixed: 1 pass, 1 fail, 0 unresolved", "C3": "unresolved (1 seed)", "C4": "fails",
             "C5": "pass (1 seed)", "X1": "not run"}
    return pd.DataFrame([{"claim": c, "task": t, "condition": k, "amended": w} for c, w in words.items()
                         for t, k in (("fda", "random"), ("fda", "digit"), ("thr", "-"))])


@pytest.mark.parametrize("compact", [True, False])
def test_the_compact_glance_keeps_its_labels_readable_on_a_phone(tmp_path, compact):
    """The front page's heat map (compact) shown in a phone's column keeps its cell labels >= 9 px, each
    inside its cell; the scorecard's wide one, shrunk to that column, does not (4.7 px)."""
    import matplotlib.pyplot as plt
    from PIL import Image

    fig = plots.verdict_heatmap(_glance_table(), "Amended verdicts, smoke profile", compact=compact)
    plots.save_figure(fig, "glance", tmp_path)
    width = Image.open(tmp_path / "glance.png").size[0]
    shown_px = plots.LABEL_PT[compact] * plt.rcParams["savefig.dpi"] / 72 * min(1.0, PHONE_COLUMN_PX / width)
    assert (shown_px >= 9) == compact, (width, shown_px)
    if compact:
        ax, renderer = fig.axes[0], fig.canvas.get_renderer()
        cell = ax.transData.transform([[0, 0], [1, 1]])
        cell_px = abs(cell[1][0] - cell[0][0])
        widest = max(t.get_window_extent(renderer).width for t in ax.texts if t.get_text())
        assert widest <= cell_px, f"a label {widest:.0f} px wide in a cell of {cell_px:.0f} px"
    plt.close(fig)


def test_a_row_with_an_empty_set_says_so_and_an_unnamed_index_has_a_blank_header():
    frame = pd.DataFrame({"run": ["FDA s0", "THR s0"], "acc_M": [math.nan, 0.5], "n_M": [0, 3],
                          "takeover": [math.nan, math.nan]}).set_index("run")
    text, notes = display.reader_frame(frame)
    assert notes == ["Columns without any value, not shown: no example to measure on (n_M = 0) (takeover); "
                     "not measured in this build (takeover).", "—: no example to measure on (n_M = 0) (acc_M)."]
    text, _ = display.reader_frame(pd.DataFrame({"FDA": [0, 1]}, index=["M", "C"]))
    assert list(text.columns) == ["", "FDA"] and list(text[""]) == ["M", "C"]


def test_the_c1_sweep_says_why_mem_is_missing_at_ratio_0():
    from rote.chapters import c1

    sweep = pd.DataFrame([{"task": "fda", "noise ratio": r, "metric": m, "seed": 0, "final accuracy": v}
                          for r, m, v in ((0.0, "gen", 1.0), (0.0, "mem", math.nan), (0.1, "gen", 0.9),
                                          (0.1, "mem", 0.4))])
    _, notes = display.reader_frame(c1.sweep_table(sweep))
    assert notes == ["—: no noisy label to memorize at noise ratio 0 (mem 0)."]


def test_a_table_of_one_column_per_run_says_which_runs_had_nothing_to_measure():
    frame = pd.DataFrame({"FDA s0": [0, math.nan, math.nan], "THR s0": [3, 0.5, math.nan]},
                         index=["memorized examples patched", "m50", "top_revert_max"])
    _, notes = display.reader_frame(frame)
    assert notes == ["—: no example to measure on (memorized examples patched = 0) (FDA s0); "
                     "not measured in this build (THR s0)."]


def test_a_header_shown_twice_and_an_index_named_like_a_column_still_render():
    frame = pd.DataFrame([[1.0, math.nan], [2.0, 3.0]], columns=["x", "x"], index=pd.Index(["a", "b"], name="x"))
    text, notes = display.reader_frame(frame)
    assert list(text.columns) == ["x", "x (2)", "x (3)"] and list(text.iloc[0]) == ["a", "1", display.MISSING]
    assert "NaN" not in display.reader_html(frame)

"""The scorecard's heat map reads the amendment-2 verdict words (rote.plots.verdict_heatmap)."""

import math

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from rote import plots  # noqa: E402


def test_shade_of_every_verdict_word():
    assert plots._shade("holds") == 1.0 and plots._shade("pass (1 seed)") == 1.0
    assert plots._shade("fails") == 0.0 and plots._shade("fail (1 seed)") == 0.0
    assert plots._shade("mixed: 2 pass, 1 fail, 0 unresolved") == 0.5
    assert plots._shade("unresolved") == 0.5 and plots._shade("unresolved (1 seed)") == 0.5
    assert math.isnan(plots._shade("not run")) and math.isnan(plots._shade(None))


def test_heatmap_has_a_cell_per_claim_and_condition_labelled_with_its_verdict():
    table = pd.DataFrame([{"claim": "C1", "task": "fda", "condition": "random", "amended": "holds"},
                          {"claim": "C1", "task": "thr", "condition": "-", "amended": "mixed: 1 pass, 1 fail, 1 unresolved"},
                          {"claim": "C5", "task": "fda", "condition": "random", "amended": "not run"}])
    fig = plots.verdict_heatmap(table, "t")
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert "holds" in texts and "mixed:\n1 pass,\n1 fail,\n1 unresolved" in texts and "not run" in texts
    assert [t.get_text() for t in ax.get_xticklabels()] == ["FDA random", "THR"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["C1", "C5"]


def test_seeded_jitter_draws_the_same_strip_plot_twice_and_leaves_numpy_alone():
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    import seaborn as sns

    from rote import plots

    data = pd.DataFrame({"x": ["a"] * 20 + ["b"] * 20, "y": np.linspace(0, 1, 40)})

    @plots.seeded_jitter
    def draw():
        fig, ax = plt.subplots()
        sns.stripplot(data=data, x="x", y="y", jitter=0.2, ax=ax)
        offsets = ax.collections[0].get_offsets().copy()
        plt.close(fig)
        return offsets

    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    first, second = draw(), draw()  # unseeded, the second drawing would take the generator's next numbers
    assert np.array_equal(first, second)
    assert np.random.random() == expected_next  # the caller's generator continues where it was
    assert not np.array_equal(first, draw.__wrapped__())  # the drawing does jitter


def _luminance(colour) -> float:
    """WCAG 2 relative luminance."""
    from matplotlib.colors import to_rgb

    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(text, background) -> float:
    """WCAG 2 contrast ratio of two colours (1 to 21)."""
    light, dark = sorted((_luminance(text), _luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_contrast_of_the_wcag_reference_colours():
    assert round(contrast("white", "black"), 1) == 21.0
    assert contrast("#777777", "white") < 4.5 < contrast("#767676", "white")  # the grey at the limit


def test_every_text_of_the_heatmap_has_a_contrast_of_at_least_4_5_to_its_cell():
    """Every verdict colour (holds, fails, mixed / unresolved), 'not run' and a claim that does not apply."""
    table = pd.DataFrame([{"claim": "C1", "task": "fda", "condition": "random", "amended": "holds"},
                          {"claim": "C1", "task": "thr", "condition": "-", "amended": "fails"},
                          {"claim": "C2", "task": "fda", "condition": "random", "amended": "mixed: 1 pass, 1 fail"},
                          {"claim": "C2", "task": "thr", "condition": "-", "amended": "unresolved"},
                          {"claim": "C5", "task": "fda", "condition": "random", "amended": "not run"}])
    ax = plots.verdict_heatmap(table, "t").axes[0]
    ax.figure.canvas.draw()
    mesh = ax.collections[0]
    n_columns = len(ax.get_xticklabels())
    cells = mesh.get_facecolors()
    checked = set()
    for text in (t for t in ax.texts if t.get_text()):
        x, y = text.get_position()
        cell = cells[int(y) * n_columns + int(x)]
        background = ax.get_facecolor() if cell[3] == 0 else cell  # a masked (NaN) cell shows the axes
        assert contrast(text.get_color(), background) >= 4.5, (text.get_text(), text.get_color(), background)
        checked.add(text.get_text().split(":")[0])
    assert checked == {"holds", "fails", "mixed", "unresolved", "not run"}

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

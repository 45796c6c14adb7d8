"""Figure functions on degenerate data (an empty group, one point, all-equal values, NaN): each draws a
figure, and where something is missing a text in it says what, instead of raising (issue 46, part 6)."""

import math
from dataclasses import dataclass
from types import SimpleNamespace as NS
from unittest import mock

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from rote import plots  # noqa: E402
from rote.chapters import Build, c1, c2, c3, c4, c5, x1  # noqa: E402

NAN = math.nan


@dataclass(frozen=True)
class Unit:
    task: str
    condition: str
    seed: int


def units(n_seeds: int) -> list:
    return [Unit("fda", "random", s) for s in range(n_seeds)]


def build(n_seeds: int, sets=None) -> Build:
    us = units(n_seeds)
    return Build("smoke", us, {u: None for u in us}, {u: sets or {} for u in us})


def shown_text(fig: Figure) -> str:
    """Every text the figure shows: in its axes, their titles, and the figure's own."""
    texts = [t.get_text() for t in fig.texts] + [t.get_text() for ax in fig.axes for t in ax.texts]
    return " ".join(texts + [ax.get_title() for ax in fig.axes])


# -- the inputs: per function, case -> (draw, what the figure must say is missing; "" when nothing is) -----------
def learning_curves(case: str):
    rows = {"empty": [], "one point": [(0, 0.5, 0.5)], "all equal": [(s, 0.5, 0.5) for s in range(4)],
            "NaN": [(s, NAN, NAN) for s in range(4)]}[case]
    metrics = pd.DataFrame(rows, columns=["step", "gen", "mem"])
    return (lambda: plots.learning_curves(metrics, marks={"t_gen": None}).figure), \
        "no accuracy recorded" if case in ("empty", "NaN") else ""


def check_values(case: str):
    value = {"empty": None, "one point": 0.5, "all equal": 1.0, "NaN": NAN}[case]
    check = {"id": "c1.x", "name": "x", "value": value, "threshold": 1.0, "kind": "amended", "passed": None}
    records = [NS(task="fda", condition="random", per_seed=[{"seed": 0, "checks": [check]}])]
    return (lambda: plots.check_values(records).figure), \
        {"empty": "no check has a number", "NaN": "no check has a number"}.get(case, "")


def verdict_heatmap(case: str):
    rows = {"empty": [], "one point": [("C1", "fda", "random", "holds")],
            "all equal": [("C1", "fda", "random", "fails"), ("C2", "fda", "random", "fails")],
            "NaN": [("C1", "fda", "random", None)]}[case]
    table = pd.DataFrame(rows, columns=["claim", "task", "condition", "amended"])
    return (lambda: plots.verdict_heatmap(table, "t")), "no claim has a verdict" if case == "empty" else ""


def c1_sweep(case: str):
    rows = {"empty": [], "one point": [("FDA", 0.1, 0.5, "gen", 0)],
            "all equal": [("FDA", r, 0.5, "gen", s) for r in (0.1, 0.2) for s in (0, 1)],
            "NaN": [("FDA", 0.1, NAN, "gen", 0)]}[case]
    table = pd.DataFrame(rows, columns=["task", "noise ratio", "final accuracy", "metric", "seed"])
    missing = "no run of the sweep has a final accuracy" if case in ("empty", "NaN") else ""
    return (lambda: c1.sweep_figure(table)), missing


def _sweep(accuracy: float, ranks=(0, 2)) -> pd.DataFrame:
    return pd.DataFrame([{"rank": r, "set": s, "method": m, "accuracy": accuracy}
                         for r in ranks for s in ("mem", "gen") for m in c3.METHODS],
                        columns=["rank", "set", "method", "accuracy"])


def c3_erasure(case: str):
    b = build(1 if case == "one point" else 2)
    sweep = {"empty": _sweep(0.5, ranks=()), "one point": _sweep(0.5, ranks=(0,)), "all equal": _sweep(0.5),
             "NaN": _sweep(NAN)}[case]
    layers = [] if case == "empty" else [1]
    found = {u: {"group": "first operand", "layers": layers, "positions": [3]} for u in b.units}
    result = c3.Erasure(2, {u: sweep for u in b.units}, {}, {u: layers for u in b.units})
    return (lambda: c3.erasure_figure(b, found, result)), \
        {"empty": "no layer carries the result", "one point": "no erasure site or no examples",
         "NaN": "no erasure site or no examples"}.get(case, "")


def c3_controls(case: str):
    b = build(1 if case == "one point" else 2, sets={"mem": None, "gen": None})
    sweep = {"empty": _sweep(0.5, ranks=()), "one point": _sweep(0.5), "all equal": _sweep(0.5),
             "NaN": _sweep(NAN)}[case]
    result = c3.Erasure(2, {u: sweep for u in b.units}, {})
    return (lambda: c3.controls_figure(b, result)), "no erasure results" if case in ("empty", "NaN") else ""


def _fractions(value: float, layers=(1, 2)):
    return NS(neuron_fraction=value, heuristic_fraction=value, any_position_fraction=value, layers=list(layers),
              neuron_layer_fractions=lambda: [value] * len(layers))


def c5_null(case: str):
    b = build(1 if case == "one point" else 2)
    value = NAN if case in ("empty", "NaN") else 0.3
    maps = {u: _fractions(value) for u in b.units}
    return (lambda: c5.null_figure(b, maps, maps)), "no untrained value" if case in ("empty", "NaN") else ""


def c5_cut(case: str):
    b = build(1 if case == "one point" else 2)
    value = NAN if case in ("empty", "NaN") else 0.3
    layers = () if case == "empty" else (1, 2)
    result = NS(shares={u: NS(cut_heuristic_fraction=value, cut_null_fraction=value) for u in b.units},
                maps={u: _fractions(value, layers) for u in b.units},
                null_maps={u: _fractions(value, layers) for u in b.units})
    return (lambda: c5.cut_figure(b, result)), \
        {"empty": "no layer has a share", "NaN": "no null value"}.get(case, "")


def c5_jstar(case: str):
    """``NaN``: M has a j* value and the clean examples none (seeds 3 and 4 of the stability build)."""
    b = build(1 if case == "one point" else 2)
    z_m, z_clean, counts = {"empty": (NAN, NAN, {}), "one point": (3.0, 1.0, {0: 1}),
                            "all equal": (1.0, 1.0, {0: 2, 1: 2}), "NaN": (3.0, NAN, {0: 2})}[case]
    result = NS(out={u: NS(comparison=NS(jstar_z_M=z_m, jstar_z_clean=z_clean, jstar_counts=counts))
                     for u in b.units})
    return (lambda: c5.jstar_figure(b, result)), \
        {"empty": "no memorized example with a j*", "NaN": "no clean value"}.get(case, "")


def c5_after_jstar(case: str):
    b = build(1 if case == "one point" else 2)
    m, value = {"empty": ([], NAN), "one point": ([1], 0.5), "all equal": ([1, 2], 0.5), "NaN": ([1, 2], NAN)}[case]
    keys = ("after_jstar_patch_revert", "after_jstar_random_patch_revert", "after_jstar_null_patch_revert",
            "after_jstar_null_random_patch_revert")
    curves = NS(after_jstar_m=m, **{k: [value] * len(m) for k in keys})
    result = NS(out={u: NS(curves=curves) for u in b.units})
    return (lambda: c5.after_jstar_figure(b, result)), \
        "no share after j*" if case in ("empty", "NaN") else ""


def c5_patching(case: str):
    rows = {"empty": [], "one point": [(1, 0.5, 0.5, "outliers", False)],
            "all equal": [(layer, 0.5, 0.5, units_, control) for layer in (1, 2)
                          for units_ in ("outliers", "all") for control in (False, True)],
            "NaN": [(1, NAN, NAN, "outliers", False)]}[case]
    table = pd.DataFrame(rows, columns=["layer", "reverted", "recovered", "units", "control"])
    return (lambda: c5.patching_figure(units(1)[0], table)), \
        "no memorized examples" if case in ("empty", "NaN") else ""


def _dose(case: str) -> pd.DataFrame:
    m, value = {"empty": ([], NAN), "one point": ([1], 0.5), "all equal": ([1, 2], 0.5), "NaN": ([1, 2], NAN)}[case]
    return pd.DataFrame([{"units": name, "m": x, "reverted": value} for name in c5.CURVE_COLORS for x in m],
                        columns=["units", "m", "reverted"])


def c5_dose(case: str):
    b = build(1 if case == "one point" else 2)
    result = NS(curves={u: _dose(case) for u in b.units}, last={u: NS(m50=None) for u in b.units})
    return (lambda: c5.dose_figure(b, result)), "no memorized examples" if case in ("empty", "NaN") else ""


def c5_jstar_dose(case: str):
    b = build(1 if case == "one point" else 2)
    result = NS(out={u: NS(dose=_dose(case), summary=NS(m50=None)) for u in b.units})
    return (lambda: c5.jstar_dose_figure(b, result)), \
        "no memorized example with a j*" if case in ("empty", "NaN") else ""


def c5_z_null(case: str):
    b = build(1 if case == "one point" else 2)
    z, positions = {"empty": (NAN, []), "one point": (2.0, [1.0]), "all equal": (1.0, [1.0, 1.0]),
                    "NaN": (NAN, [NAN, NAN])}[case]
    result = NS(comparison={u: NS(median_abs_z_M=z, median_abs_z_clean=z) for u in b.units},
                null={u: NS(median_abs_z_null=z, median_abs_z_by_position_M=positions,
                            median_abs_z_by_position_null=positions) for u in b.units},
                clean_by_position={u: positions for u in b.units})
    return (lambda: c5.z_null_figure(b, result)), \
        {"empty": "no memorized examples", "NaN": "no memorized examples"}.get(case, "")


def c5_share(case: str):
    b = build(1 if case == "one point" else 2)
    layers, value = {"empty": ([], NAN), "one point": ([1], 0.5), "all equal": ([1, 2], 0.5),
                     "NaN": ([1, 2], NAN)}[case]
    per_layer = pd.DataFrame([{"layer": layer, "kind": "carry", "fraction": value} for layer in layers],
                             columns=["layer", "kind", "fraction"])
    maps = {u: NS(per_layer=lambda: per_layer, layers=layers, layer_fractions=lambda: [value] * len(layers),
                  heuristic_fraction=value) for u in b.units}
    return (lambda: c5.share_figure(b, maps)), "no heuristic unit" if case in ("empty", "NaN") else ""


def _x1_rows(case: str, row) -> list:
    """``row(width, seed, value)`` for each width and seed the case has (all-NaN values for 'NaN')."""
    cells = {"empty": [], "one point": [(64, 0, 0.5)], "all equal": [(w, s, 0.5) for w in (32, 64) for s in (0, 1)],
             "NaN": [(w, 0, NAN) for w in (32, 64)]}[case]
    return [row(*cell) for cell in cells]


def x1_cost_by_width(case: str):
    columns = ["width", "seed", "cost", "memorizes", "gen_twin", "gen_noisy", "mem"]
    widths = pd.DataFrame(_x1_rows(case, lambda w, s, v: (w, s, v, True, v, v, v)), columns=columns)
    return (lambda: x1.gen_cost_by_width(widths, 0.1)), "no width has a gen cost" if case in ("empty", "NaN") else ""


def x1_curves(case: str):
    columns = ["width", "step", "seed", "gen", "mem", "rec", "twin_gen"]
    curves = pd.DataFrame(_x1_rows(case, lambda w, s, v: (w, 10, s, v, v, v, v)), columns=columns)
    timing = pd.DataFrame(_x1_rows(case, lambda w, s, v: (w, s, None, v)), columns=["width", "seed", "t_gen", "t_mem"])
    return (lambda: x1.curves_by_width(curves, timing)), \
        {"empty": "no width has learning curves", "NaN": "no accuracy recorded"}.get(case, "")


def x1_cost_by_ratio(case: str):
    ratios = pd.DataFrame(_x1_rows(case, lambda w, s, v: (w / 320, s, v)), columns=["noise_ratio", "seed", "cost"])
    return (lambda: x1.gen_cost_by_ratio(ratios)), \
        "no noise ratio has a gen cost" if case in ("empty", "NaN") else ""


@dataclass(frozen=True)
class NoisyUnit(Unit):
    @property
    def noisy(self):
        return NS(data=NS(noise_ratio=0.1))


def c1_curves(case: str):
    us = [NoisyUnit(u.task, u.condition, u.seed) for u in units(1 if case == "one point" else 2)]
    rows = {"empty": [], "one point": [(0, 0.5, 0.5, 0.5, 0.5)],
            "all equal": [(s, 0.5, 0.5, 0.5, 0.5) for s in range(3)],
            "NaN": [(s, NAN, NAN, NAN, NAN) for s in range(3)]}
    metrics = pd.DataFrame(rows[case], columns=["step", "gen", "mem", "rec", "fit"])
    run = NS(metrics=metrics)
    b = NS(groups={("fda", "random"): us}, runs={u: run for u in us}, twins={u: run for u in us})
    result = NS(metrics={u: NS(t_gen_interpolated=None, t_mem_interpolated=None) for u in b.runs})
    return (lambda: c1.curves_figure(b, result)), "no accuracy recorded" if case in ("empty", "NaN") else ""


def _by_layer(case: str, row, columns) -> pd.DataFrame:
    """``row(layer, value)`` per layer: none (empty), one layer, two equal, or NaN."""
    cells = {"empty": [], "one point": [(1, 0.5)], "all equal": [(1, 0.5), (2, 0.5)], "NaN": [(1, NAN), (2, NAN)]}
    return pd.DataFrame([r for cell in cells[case] for r in row(*cell)], columns=columns)


def c2_probes(case: str):
    us = units(1)
    curves = _by_layer(case, lambda layer, v: [("first operand", layer, v, s, 0.1) for s in ("M", "C")],
                       ["group", "layer", "accuracy", "set", "chance"])
    return (lambda: c2.probes_figure(us, NS(curves={u: curves for u in us}))), \
        {"empty": "no probe result", "NaN": "no examples"}.get(case, "")


def c2_lens(case: str):
    us = units(1)
    table = _by_layer(case, lambda layer, v: [(layer, v, v, 0 if v != v else 10)], ["layer", "p_true", "p_noisy", "n"])
    return (lambda: c2.lens_figure(us, NS(tables={u: table for u in us}))), \
        "no memorized examples" if case in ("empty", "NaN") else ""


def c2_bridge(case: str):
    us = units(1 if case == "one point" else 2)
    value = NAN if case in ("empty", "NaN") else 0.5
    row = pd.DataFrame([{"acc_M": value, "acc_C": value, "chance": 0.1}])
    result = NS(units=[] if case == "empty" else us, r1={u: row for u in us}, r2={u: row for u in us})
    return (lambda: c2.bridge_figure(result)), \
        {"empty": "no THR run in this build", "NaN": "no probe accuracy"}.get(case, "")


def c3_ceiling(case: str):
    b = build(1 if case == "one point" else 2)
    value = NAN if case in ("empty", "NaN") else 0.5
    stats = {m: {"jaccard": value, "split_half_C": value, "split_half_M": value, "spearman": value, "random": value,
                 "ci_low": value, "ci_high": value} for m in c3.METRIC_NAMES}
    result = NS(stats={u: stats for u in b.units})
    return (lambda: c3.ceiling_figure(b, result)), "no memorized examples" if case in ("empty", "NaN") else ""


def c4_controls(case: str):
    us = units(1 if case == "one point" else 2)
    value = NAN if case in ("empty", "NaN") else 2.0
    numbers = {"k50_M": value, "k50_C": value, "top_activity_median": value, "positions_over_min": value,
               "intermediate_over_matched": value}
    found = {u: NS(summary=NS(record=lambda: numbers)) for u in us}
    return (lambda: c4.controls_figure(us, {u: (numbers,) for u in us}, found)), \
        "not measured" if case in ("empty", "NaN") else ""


def c2_lens_prior(case: str):
    b = build(1 if case == "one point" else 2)
    shares = _by_layer(case, lambda layer, v: [(layer, v, 0 if v != v else 3, 0 if v != v else 6, 0.4)],
                       ["layer", "share", "ahead", "n", "null"])
    lens_share = NS(share=0.5, share_lo=0.3, share_hi=0.7, share_null=0.4, share_best_layer=1)
    metrics = {u: NS(lens_share=lens_share if case in ("one point", "all equal") else c2.verdicts.c2.ABSENT)
               for u in b.units}
    return (lambda: c2.lens_prior_figure(b, NS(shares={u: shares for u in b.units}), NS(metrics=metrics))), \
        "no memorized example at any layer" if case in ("empty", "NaN") else ""


def c2_masked_tail(case: str):
    us = units(1 if case == "one point" else 2)
    sweep = _by_layer(case, lambda layer, v: [(s, layer, v, v, v, 0.1) for s in ("M", "C")],
                      ["set", "layer", "accuracy", "accuracy_unmasked", "reads_masked", "chance"])
    value = NAN if case == "NaN" else 0.5
    row = pd.DataFrame([{"acc_M": value, "acc_C": value, "chance": 0.1}])
    result = NS(units=[] if case == "empty" else us, sweeps={u: sweep for u in us}, unmasked={u: row for u in us},
                summary={u: row for u in us})
    return (lambda: c2.masked_tail_figure(us, result)), \
        {"empty": "no THR run in this build", "NaN": "no probe accuracy"}.get(case, "")


def c4_hypotheses(case: str):
    b = build(1 if case == "one point" else 2, sets={"C": [0] * 4})
    b.runs = {u: NS(data=NS(train=NS(prompt=NS(shape=(4, 3))))) for u in b.units}
    values = {"empty": [], "one point": [0.5], "all equal": [0.5, 0.5], "NaN": [NAN, NAN]}[case]
    k50 = pd.DataFrame([(s, v) for s in ("M", "C") for v in values], columns=["set", "k50"])
    active = pd.DataFrame({"activity": [v for v in values if v == v]}, columns=["activity"])
    drop = values[0] if values else NAN
    summary = NS(k50_C=drop, position_drops=[drop] * 3, intermediate_drop=drop, intermediate_control_drop=drop)
    return (lambda: c4.hypotheses_figure(b, {u: k50 for u in b.units}, {u: active for u in b.units},
                                         {u: summary for u in b.units})), \
        "no memorized examples" if case in ("empty", "NaN") else ""


def c5_z(case: str):
    """``outlier_analysis.z_table`` stands in with the case's |z| (the real one reads a model's statistics)."""
    u = units(1)[0]
    values = {"empty": [], "one point": [2.0], "all equal": [1.0, 1.0], "NaN": [NAN, NAN]}[case]

    def z_table(stats, hmap, name):
        return pd.DataFrame({"set": name, "z": values, "differs": True}, columns=["set", "z", "differs"])

    result = NS(stats={u: {"M": None, "clean": None}}, null={u: NS(median_abs_z_by_position_M=values)},
                clean_by_position={u: values})

    def draw():
        with mock.patch.object(c5.outlier_analysis, "z_table", z_table):
            return c5.z_figure(u, {u: None}, result, 2.0)
    return draw, "no memorized examples" if case in ("empty", "NaN") else ""


FIGURES = {f.__name__: f for f in (learning_curves, check_values, verdict_heatmap, c1_curves, c1_sweep,
                                   c2_probes, c2_lens, c2_lens_prior, c2_bridge, c2_masked_tail,
                                   c3_erasure, c3_controls, c3_ceiling, c4_hypotheses, c4_controls,
                                   c5_null, c5_cut, c5_jstar, c5_after_jstar, c5_patching, c5_dose, c5_jstar_dose,
                                   c5_z, c5_z_null, c5_share, x1_cost_by_width, x1_curves, x1_cost_by_ratio)}
CASES = ("empty", "one point", "all equal", "NaN")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", FIGURES)
def test_a_figure_on_degenerate_data_is_drawn_and_says_what_is_missing(name, case):
    draw, missing = FIGURES[name](case)
    fig = draw()
    try:
        assert isinstance(fig, Figure)
        fig.canvas.draw()  # the layout and legend placement run here (where the j* figure raised)
        assert missing in shown_text(fig)
    finally:
        plt.close("all")


def test_the_missing_text_sits_inside_the_axes():
    fig, ax = plt.subplots()
    plots.missing(ax, "no memorized example")
    (text,) = ax.texts
    assert text.get_text() == "no memorized example" and text.get_transform() == ax.transAxes
    assert text.get_position() == (0.5, 0.5)
    plt.close(fig)


def test_c3_names_the_erasure_sites_in_words():
    assert c3.site_words({"layers": [1, 2], "positions": [5]}) == "layers 1, 2; position 5"
    assert c3.site_words({"layers": [], "positions": [5, 6]}) == "no layer carries the result"

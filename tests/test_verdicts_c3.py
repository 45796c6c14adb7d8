"""Claim C3's checks (rote.verdicts.c3, amendment 1, 7.5) on made-up analysis outputs, and the
planted-answer test of the overlap ceiling (deliverable 5)."""

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from rote import verdicts
from rote.analysis import attribution as A
from rote.claims import THRESHOLDS

T = THRESHOLDS["C3"]


def _sweep(acc: dict, rank=8) -> pd.DataFrame:
    """acc: {(set, method): (before, after)}; method "random" / "matched" (INLP is given as "INLP")."""
    rows = []
    for (s, method), (before, after) in acc.items():
        rows += [{"rank": 0, "method": method, "set": s, "accuracy": before},
                 {"rank": rank, "method": method, "set": s, "accuracy": after}]
    return pd.DataFrame(rows)


def _stats(j, ceiling, j_ld=None, ceiling_ld=None):
    lp = {"jaccard": j, "random": 0.03, "split_half_C": ceiling, "split_half_M": ceiling, "spearman": 0.8,
          "ci_low": j - 0.05, "ci_high": j + 0.05}
    ld = {"jaccard": j if j_ld is None else j_ld, "random": 0.03,
          "split_half_C": ceiling if ceiling_ld is None else ceiling_ld, "split_half_M": 0.5, "spearman": 0.7,
          "ci_low": 0.1, "ci_high": 0.9}
    return {"logprob": lp, "logit_diff": ld}


def _by(checks, check_id):
    found = verdicts.find(checks, check_id)
    assert found is not None, [c.id for c in checks]
    return found


GOOD = {("mem", "INLP"): (1.0, 0.2), ("mem", "random"): (1.0, 0.95), ("mem", "matched"): (1.0, 0.9),
        ("gen", "INLP"): (1.0, 0.5), ("gen", "random"): (1.0, 0.98), ("gen", "matched"): (1.0, 0.9)}


def test_pass_with_both_controls_and_a_high_ceiling():
    metrics, checks = verdicts.c3.checks(_sweep(GOOD), 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    assert metrics.mem.drop_over_larger_control == pytest.approx(0.7)  # 0.8 - max(0.05, 0.1)
    assert metrics.gen.drop_over_larger_control == pytest.approx(0.4)
    assert _by(checks, "c3.erasure").kind == "amended"
    assert _by(checks, "c3.overlap.registered").kind == "registered"  # ceiling 0.7 >= 0.5: not superseded
    assert verdicts.find(checks, "c3.overlap") is None  # no replacement where the ceiling is reachable
    ceiling = _by(checks, "c3.overlap.ceiling")
    assert ceiling.kind == "validity" and ceiling.value == pytest.approx(0.7) and ceiling.passed is True
    assert ceiling.threshold == T["overlap_min"]
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert metrics.overlap_ld.spearman == pytest.approx(0.7) and metrics.overlap_lp.ci_low == pytest.approx(0.55)


def test_the_information_matched_control_can_fail_what_the_random_control_passes():
    acc = {**GOOD, ("mem", "matched"): (1.0, 0.4)}  # erasing a random look-up of the key hurts M as much
    metrics, checks = verdicts.c3.checks(_sweep(acc), 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    assert metrics.mem.drop_over_control == pytest.approx(0.75)
    assert metrics.mem.drop_over_larger_control == pytest.approx(0.2)
    assert _by(checks, "c3.erasure.random").passed is True
    assert _by(checks, "c3.erasure").passed is False
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_gen_sanity_needs_a_drop_beyond_the_larger_control():
    """Amendment 2, 8.6: the gen check is a validity check of the erasure (before: an amended check that
    decided, so this sweep failed the seed in the amended reading; now the erasure that left the rule in
    place cannot decide: its checks are unresolved in the amended reading)."""
    acc = {**GOOD, ("gen", "INLP"): (1.0, 0.9)}  # gen drops 0.1, exactly as much as the matched control
    _, checks = verdicts.c3.checks(_sweep(acc), 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    sanity = _by(checks, "c3.erasure.gen")
    assert sanity.kind == "validity" and sanity.value == pytest.approx(0.0) and sanity.passed is False
    assert sanity.threshold == T["gen_drop_over_control_above"] and sanity.was == "amended"
    assert verdicts.seed_verdict(checks, "registered") == "pass"  # section 5 did not judge it
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_unresolved_without_the_matched_control_or_statistics():
    acc = {k: v for k, v in GOOD.items() if k[1] != "matched"}
    metrics, checks = verdicts.c3.checks(_sweep(acc), 8, {"jaccard": 0.6, "random": 0.03}, "fda")
    assert math.isnan(metrics.mem.drop_over_larger_control)
    assert _by(checks, "c3.erasure").passed is None
    assert _by(checks, "c3.overlap.ceiling").passed is None
    # no ceiling: the overlap cannot be judged in the amended reading; section 5 still counts it
    assert _by(checks, "c3.overlap.registered").kind == "superseded"
    assert _by(checks, "c3.overlap.registered.amended").passed is None
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"


def test_a_low_ceiling_supersedes_the_registered_overlap_check():
    # identical circuits could not reach 0.5: the registered check fails, the ratio to the ceiling passes
    _, checks = verdicts.c3.checks(_sweep(GOOD), 8, {"jaccard": 0.25, "random": 0.03}, "fda",
                            _stats(0.25, 0.3, j_ld=0.2, ceiling_ld=0.35))
    old = _by(checks, "c3.overlap.registered")
    assert old.kind == "superseded" and old.passed is False
    new = _by(checks, "c3.overlap")
    assert new.kind == "amended" and new.value == pytest.approx(0.2)
    assert new.threshold == pytest.approx(T["ceiling_ratio_min"] * 0.35) and new.passed is True
    assert _by(checks, "c3.overlap.random").kind == "registered"  # the '>= 3 x random' part stays
    assert verdicts.seed_verdict(checks, "registered") == "fail"
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    # ... and fails where M's circuit is no closer to C's than half the ceiling
    _, checks = verdicts.c3.checks(_sweep(GOOD), 8, {"jaccard": 0.25, "random": 0.03}, "fda",
                            _stats(0.25, 0.3, j_ld=0.1, ceiling_ld=0.35))
    assert _by(checks, "c3.overlap").passed is False
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_thr_judges_the_unconnected_subset_against_both_controls():
    acc = {**GOOD, ("mem_unconnected", "INLP"): (1.0, 0.5), ("mem_unconnected", "random"): (1.0, 0.95),
           ("mem_unconnected", "matched"): (1.0, 0.7)}
    metrics, checks = verdicts.c3.checks(_sweep(acc), 8, {"jaccard": 0.6, "random": 0.03}, "thr", _stats(0.6, 0.7))
    assert metrics.mem_unconnected.drop_over_larger_control == pytest.approx(0.2)
    assert _by(checks, "c3.erasure.unconnected.random").passed is True
    assert _by(checks, "c3.erasure.unconnected").passed is False
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_every_check_has_a_unique_id_and_a_required_part():
    _, checks = verdicts.c3.checks(_sweep(GOOD), 8, {"jaccard": 0.25, "random": 0.03}, "thr", _stats(0.25, 0.3))
    ids = [c.id for c in checks]
    assert len(ids) == len(set(ids)) and all(i.startswith("c3.") for i in ids)
    assert {c.part for c in checks} == set(verdicts.REQUIRED_PARTS["C3"])


# -- planted answers (deliverable 5) ----------------------------------------------------------
def _noisy_copies(v: torch.Tensor, n: int, noise: float, seed: int) -> torch.Tensor:
    """[n, len(v)] per-example importances whose expectation is ``v``: multiplicative noise per
    example and component (attribution scores of single examples are that noisy)."""
    g = torch.Generator().manual_seed(seed)
    return v * torch.exp(noise * torch.randn(n, len(v), generator=g) - noise ** 2 / 2)


def _planted(same: bool, noise=2.0, n=60, components=1000):
    g = torch.Generator().manual_seed(0)
    v = torch.exp(torch.randn(components, generator=g))  # one importance vector, heavy-tailed
    w = torch.exp(torch.randn(components, generator=g))  # a genuinely different one
    imp_C = _noisy_copies(v, n, noise, 1)
    imp_M = _noisy_copies(v if same else w, n, noise, 2)
    return A.overlap_statistics(imp_C, imp_M, A.OverlapSettings(0.05, n_splits=5, n_boot=50, seed=0))


def test_identical_importance_plus_noise_reaches_the_ceiling_and_passes_the_amended_check():
    st = _planted(same=True)
    # the construction the issue describes: two noisy estimates of one vector stay far below 0.5
    assert st["split_half_C"] < T["overlap_min"] and st["split_half_M"] < T["overlap_min"]
    assert st["jaccard"] < T["overlap_min"]
    # ... but identical circuits reach the ceiling (full sets: at least the split-half value)
    assert st["jaccard"] >= st["split_half_C"] * 0.9
    assert st["ci_low"] <= st["jaccard"] <= st["ci_high"]
    assert st["spearman"] > 0.5
    _, checks = verdicts.c3.checks(_sweep(GOOD), 8, {"jaccard": st["jaccard"], "random": st["random"]}, "fda",
                            {"logprob": st, "logit_diff": st})
    assert _by(checks, "c3.overlap.registered").kind == "superseded"
    assert _by(checks, "c3.overlap.registered").passed is False  # the registered check cannot pass a true claim
    assert _by(checks, "c3.overlap").passed is True
    assert verdicts.seed_verdict(checks, "amended") == "pass"


def test_a_different_importance_vector_does_not_pass():
    st = _planted(same=False)
    assert st["split_half_C"] > 3 * st["random"]  # C's own halves agree
    assert st["jaccard"] < 0.5 * st["split_half_C"]
    assert abs(st["spearman"]) < 0.2
    _, checks = verdicts.c3.checks(_sweep(GOOD), 8, {"jaccard": st["jaccard"], "random": st["random"]}, "fda",
                            {"logprob": st, "logit_diff": st})
    assert _by(checks, "c3.overlap").passed is False
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_a_seed_without_an_erasure_site_is_unresolved_on_every_erasure_check():
    """Amendment 2, 8.5: where no layer carries the intermediate result at 5 x chance on C the erasure cannot
    run; its checks are unresolved on that seed with that reason, never failed by the NaN sweep (before: the
    NaN sweep failed c3.erasure.random and c3.erasure in _compare, and the seed failed C3)."""
    nan = math.nan
    siteless = {(s, m): (1.0, nan) for s in ("mem", "gen", "mem_unconnected") for m in ("INLP", "random")}
    for task in ("fda", "thr"):
        metrics, checks = verdicts.c3.checks(_sweep(siteless), 8, {"jaccard": 0.6, "random": 0.03}, task, _stats(0.6, 0.7),
                                      erasure_layers=[])
        erasure = [c for c in checks if c.part == "erasure"]
        assert len(erasure) == (5 if task == "thr" else 3)
        for c in erasure:
            assert c.passed is None and c.value is None and c.reason == verdicts.c3.C3_NO_SITE, c
        assert "no layer carries the intermediate result at 5 x chance on C" in verdicts.c3.C3_NO_SITE
        assert verdicts.seed_verdict(checks, "amended") == "unresolved"
        assert verdicts.seed_verdict(checks, "registered") == "unresolved"
    # the same sweep with sites given but not reported (erasure_layers None) reads as a missing number
    _, checks = verdicts.c3.checks(_sweep(siteless), 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    c = _by(checks, "c3.erasure.random")
    assert c.passed is None and c.reason == "the INLP erasure was not computed at rank 8"
    # a site found: decided as before
    _, checks = verdicts.c3.checks(_sweep(GOOD), 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7),
                            erasure_layers=[1])
    assert verdicts.seed_verdict(checks, "amended") == "pass"


# -- the record's metrics (C3Metrics) --------------------------------------------------------------
ERASURE_KEYS = ("before", "inlp", "random", "matched", "drop_over_control", "drop_over_matched",
                "drop_over_larger_control")
STAT_KEYS = ("jaccard", "random", "split_half_C", "split_half_M", "spearman", "ci_low", "ci_high")


def _record_keys(sets, ablated_sets=()):
    """The keys of a record's metrics, in their order, as the metrics dicts before C3Metrics had them."""
    return (["erasure_rank"] + [f"{s}_{k}" for s in sets for k in ERASURE_KEYS]
            + ["overlap", "overlap_random", "overlap_over_random"]
            + [f"overlap_{m}_{k}" for m in ("lp", "ld") for k in STAT_KEYS]
            + ["overlap_ld_over_ceiling", "overlap_superseded", "erasure_layers", "erasure_positions",
               "overlap_neurons", "overlap_neurons_random"]
            + [f"ablate_{row}_neurons_{s}" for row in ("top", "random") for s in ablated_sets])


def test_every_metric_is_a_field_and_the_record_keeps_what_applies():
    c3 = verdicts.c3
    full = c3.C3Metrics(0, *[c3.SetErasure(*[0.0] * 7)] * 3, 0.0, 0.0, 0.0, *[c3.OverlapStats(*[0.0] * 7)] * 2, 0.0,
                        True, [], [], 0.0, 0.0, *[c3.Ablation(0.0, 0.0, 0.0)] * 2)
    assert list(full.record()) == _record_keys(("mem", "gen", "mem_unconnected"), ("mem", "gen", "mem_unconnected"))
    # FDA: no unconnected subset; without statistics no per-metric overlap numbers; NaN kept (null in JSON)
    acc = {k: v for k, v in GOOD.items() if k[1] != "matched"}
    metrics, _ = verdicts.c3.checks(_sweep(acc), 8, {"jaccard": 0.6, "random": 0.03}, "fda")
    record = metrics.record()
    assert list(record) == (["erasure_rank"] + [f"{s}_{k}" for s in ("mem", "gen") for k in ERASURE_KEYS]
                            + ["overlap", "overlap_random", "overlap_over_random", "overlap_ld_over_ceiling",
                               "overlap_superseded"])
    assert math.isnan(record["mem_matched"]) and record["overlap_superseded"] is True
    assert record == {k: v for k, v in verdicts.core.inline(metrics).items() if v is not None}
    with pytest.raises(ValueError):
        verdicts.c3.C3Metrics(erasure_rank=-1)


def test_evaluate_adds_the_sites_neurons_and_ablation_to_the_record():
    from rote.chapters import Build, ClaimResult, c3

    @dataclasses.dataclass(frozen=True)
    class Unit:  # like rote.plan.Unit: hashable, with the noisy run's config the record names
        task: str
        condition: str
        seed: int = 0
        noisy: object = dataclasses.field(compare=False, default_factory=lambda: SimpleNamespace(
            train=SimpleNamespace(precision="fp32"), key="k"))

    def unit(task, condition):
        return Unit(task, condition)

    fda, thr = unit("fda", "random"), unit("thr", "-")
    thr_acc = {**GOOD, **{("mem_unconnected", m): (1.0, 0.5) for m in ("INLP", "random", "matched")}}
    sweeps = {fda: _sweep(GOOD), thr: _sweep(thr_acc)}
    ablations = {fda: pd.DataFrame({"mem": [1.0], "gen": [1.0]}, index=pd.Index(["none"], name="ablated")),
                 thr: pd.DataFrame({"mem": [1.0, 0.5, 0.9], "gen": [1.0, 0.6, 1.0], "mem_unconnected": [1.0, 0.4, 0.8]},
                                   index=pd.Index(["none", "top generalization neurons", "random neurons (matched)"],
                                                  name="ablated"))}
    overlap = {"all": {"jaccard": 0.6, "random": 0.03}, "neurons": {"jaccard": 0.4, "random": 0.02}}
    sections = c3.C3Sections({u: {"layers": [1], "positions": [3]} for u in (fda, thr)},
                             c3.Erasure(8, sweeps, {}), c3.Circuits({}, {fda: overlap, thr: overlap},
                                                                    ablations, {fda: _stats(0.6, 0.7), thr: _stats(0.6, 0.7)}))
    build = Build("smoke", [fda, thr], {})
    result = c3.evaluate(build, sections)
    assert isinstance(result, ClaimResult) and result.claim == "C3"
    assert isinstance(result.metrics[thr], verdicts.c3.C3Metrics)
    seeds = c3.results(build, result)
    assert list(seeds[0]["metrics"]) == _record_keys(("mem", "gen"))
    assert list(seeds[1]["metrics"]) == _record_keys(("mem", "gen", "mem_unconnected"), ("mem", "gen", "mem_unconnected"))
    thr_metrics = seeds[1]["metrics"]
    assert thr_metrics["ablate_top_neurons_mem_unconnected"] == 0.4 and thr_metrics["ablate_random_neurons_gen"] == 1.0
    assert thr_metrics["erasure_layers"] == [1] and thr_metrics["erasure_positions"] == [3]
    assert thr_metrics["overlap_neurons"] == 0.4 and thr_metrics["overlap_neurons_random"] == 0.02
    assert [c.id for c in result.checks[thr]] == [c["id"] for c in seeds[1]["checks"]]
    with pytest.raises(TypeError):
        c3.C3Sections({}, sweeps, sections.circuits)


# -- amendment 2, 8.6: the gen check validates the erasure ---------------------------------------------
ERASURE_IDS = ("c3.erasure.random", "c3.erasure")
THR_IDS = ERASURE_IDS + ("c3.erasure.unconnected.random", "c3.erasure.unconnected")
NO_RULE_REMOVED = {("gen", "INLP"): (1.0, 0.95)}  # gen drops 0.05 under INLP, less than the matched control's 0.1


@pytest.mark.parametrize("mem_inlp", [0.2, 0.9])  # mem drop 0.8 (passes the margin) or 0.1 (fails it)
@pytest.mark.parametrize("task", ["fda", "thr"])
def test_gen_drop_below_the_controls_leaves_the_erasure_checks_unresolved_in_the_amended_reading(mem_inlp, task):
    """Planted: erasure lowers gen on C less than its larger control. 8.6: the erasure did not remove the
    rule, so every erasure check is unresolved in the amended reading, a failing one too (before: the gen
    check decided as an amended check, and the seed failed); the registered reading is what it is without
    the gen check."""
    unconnected = {("mem_unconnected", m): (1.0, a) for m, a in (("INLP", mem_inlp), ("random", 0.95),
                                                                 ("matched", 0.9))}
    planted = {**GOOD, ("mem", "INLP"): (1.0, mem_inlp), **unconnected}
    ids = THR_IDS if task == "thr" else ERASURE_IDS
    _, valid = verdicts.c3.checks(_sweep(planted), 8, {"jaccard": 0.6, "random": 0.03}, task, _stats(0.6, 0.7))
    _, invalid = verdicts.c3.checks(_sweep({**planted, **NO_RULE_REMOVED}), 8, {"jaccard": 0.6, "random": 0.03}, task,
                                    _stats(0.6, 0.7))
    gen = _by(invalid, "c3.erasure.gen")
    assert gen.kind == "validity" and gen.passed is False and "8.6" in gen.reason
    for check_id in ids:
        kept = _by(invalid, check_id)
        assert kept.kind == "superseded" and kept.passed == _by(valid, check_id).passed  # shown as measured
        stand_in = _by(invalid, f"{check_id}.amended")
        assert stand_in.kind == "amended" and stand_in.passed is None and stand_in.reason == gen.reason
        assert verdicts.counts_in(kept, "registered") == (_by(valid, check_id).kind == "registered")
    assert verdicts.seed_verdict(invalid, "amended") == "unresolved"
    assert verdicts.missing_parts(invalid) == []  # the part is there; its checks cannot decide
    # the registered reading does not count the gen check: the same verdict with or without it
    assert verdicts.seed_verdict(invalid, "registered") == verdicts.seed_verdict(valid, "registered") \
        == ("pass" if mem_inlp == 0.2 else "fail")
    assert not verdicts.counts_in(gen, "registered") and not verdicts.counts_in(gen, "amended")


@pytest.mark.parametrize("task", ["fda", "thr"])
def test_gen_drop_above_the_controls_lets_the_erasure_checks_decide_as_before(task):
    """Planted: erasure lowers gen on C more than both controls: the erasure checks decide as they did
    (a failing mem margin fails the seed, a passing one passes), with no stand-ins."""
    unconnected = {("mem_unconnected", m): (1.0, a) for m, a in (("INLP", 0.2), ("random", 0.95), ("matched", 0.9))}
    for mem_inlp, verdict in ((0.2, "pass"), (0.9, "fail")):
        planted = {**GOOD, ("mem", "INLP"): (1.0, mem_inlp), **unconnected}
        _, checks = verdicts.c3.checks(_sweep(planted), 8, {"jaccard": 0.6, "random": 0.03}, task, _stats(0.6, 0.7))
        assert _by(checks, "c3.erasure.gen").passed is True
        assert not [c for c in checks if c.id.endswith(".amended") or c.kind == "superseded"]
        assert _by(checks, "c3.erasure").kind == "amended" and _by(checks, "c3.erasure.random").kind == "registered"
        assert verdicts.seed_verdict(checks, "amended") == verdicts.seed_verdict(checks, "registered") == verdict


def test_an_unmeasured_gen_check_leaves_the_erasure_unresolved_in_the_amended_reading():
    """No example of C: the instrument cannot be validated, so the erasure checks cannot decide (amended);
    the registered reading still counts them."""
    acc = {k: v for k, v in GOOD.items() if k[0] != "gen"}
    sweep = pd.concat([_sweep(acc), pd.DataFrame([{"rank": r, "method": m, "set": "gen", "accuracy": math.nan}
                                                  for r in (0, 8) for m in ("INLP", "random", "matched")])])
    _, checks = verdicts.c3.checks(sweep, 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    gen = _by(checks, "c3.erasure.gen")
    assert gen.passed is None and gen.reason == verdicts.c3.C3_EMPTY["gen"]
    assert _by(checks, "c3.erasure.amended").passed is None
    assert verdicts.seed_verdict(checks, "amended") == "unresolved"
    assert verdicts.seed_verdict(checks, "registered") == "pass"


# -- section 11: margins and sampling intervals ----------------------------------------------------
def _outcomes(per_example: dict, rank=8):
    """An ErasureSweep from per-example outcomes {(set, method): (before [N], after [N])}: the table is
    their means, as erasure_outcomes builds it."""
    from rote.analysis.patching import ErasureSweep

    correct, acc = {}, {}
    for (s, method), (before, after) in per_example.items():
        correct[(0, method, s)], correct[(rank, method, s)] = np.asarray(before, float), np.asarray(after, float)
        acc[(s, method)] = (float(np.mean(before)), float(np.mean(after)))
    return ErasureSweep(_sweep(acc, rank), correct)


def test_the_erasure_checks_carry_margins_and_bootstrap_intervals_from_the_examples():
    rng = np.random.default_rng(0)
    n = 400
    ones = np.ones(n)
    per_example = {("mem", "INLP"): (ones, rng.random(n) < 0.2), ("mem", "random"): (ones, rng.random(n) < 0.95),
                   ("mem", "matched"): (ones, rng.random(n) < 0.9),
                   ("gen", "INLP"): (ones, rng.random(n) < 0.5), ("gen", "random"): (ones, rng.random(n) < 0.98),
                   ("gen", "matched"): (ones, rng.random(n) < 0.9)}
    sweep = _outcomes(per_example)
    metrics, checks = verdicts.c3.checks(sweep, 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    mem = {m: per_example[("mem", m)][1].mean() for m in ("INLP", "random", "matched")}
    for check_id, controls in (("c3.erasure.random", ("random",)), ("c3.erasure", ("random", "matched"))):
        c = _by(checks, check_id)
        assert c.value == pytest.approx(min(mem[k] for k in controls) - mem["INLP"])
        assert c.margin == pytest.approx(c.value - T["erasure_mem_drop_over_control_min"])
        assert c.method == "bootstrap" and c.interval[0] <= c.value <= c.interval[1] and c.near is False
        assert 0.03 < c.interval[1] - c.interval[0] < 0.2  # about 2 x 1.96 x the standard error of a mean of 400
        iv = sweep.drop_over("mem", 8, controls)
        assert c.interval == (iv.low, iv.high)
    gen = _by(checks, "c3.erasure.gen")
    assert gen.method == "bootstrap" and gen.margin == pytest.approx(gen.value) and gen.interval[0] > 0
    for c in checks:  # every check has its margin; the overlaps have no per-example sample: margin only
        assert c.margin is not None, c.id
        if c.part == "overlap":
            assert c.interval is None and c.method == "" and c.near is None
    # the same sweep as a bare table: the same checks, margins only
    _, plain = verdicts.c3.checks(sweep.table, 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    assert [(c.id, c.passed, c.margin) for c in plain] == [(c.id, c.passed, c.margin) for c in checks]
    assert all(c.interval is None for c in plain)


def test_a_drop_close_to_its_margin_is_near_and_near_decides_nothing():
    rng = np.random.default_rng(1)
    n = 60
    ones = np.ones(n)
    inlp = rng.random(n) < 0.62  # mem drop over the controls about 0.3: the threshold
    per_example = {("mem", "INLP"): (ones, inlp), ("mem", "random"): (ones, ones), ("mem", "matched"): (ones, ones),
                   ("gen", "INLP"): (ones, rng.random(n) < 0.5), ("gen", "random"): (ones, ones),
                   ("gen", "matched"): (ones, ones)}
    sweep = _outcomes(per_example)
    _, checks = verdicts.c3.checks(sweep, 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    c = _by(checks, "c3.erasure")
    assert c.near is True and c.interval[0] < T["erasure_mem_drop_over_control_min"] < c.interval[1]
    assert "c3.erasure" in verdicts.near_checks(checks)
    _, plain = verdicts.c3.checks(sweep.table, 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    assert verdicts.seed_verdict(checks, "amended") == verdicts.seed_verdict(plain, "amended")


def test_the_interval_is_paired_over_the_examples():
    """Drop over control = mean over the same examples of (control - INLP): paired, so two methods that
    fail on the same examples give a narrow interval, narrower than the same shares on other examples."""
    from rote.analysis.patching import ErasureSweep

    n = 200
    inlp = np.r_[np.zeros(100), np.ones(100)]
    same = np.r_[np.zeros(80), np.ones(120)]  # fails on a subset of INLP's failures
    shuffled = np.random.default_rng(0).permutation(same)
    ones = np.ones(n)
    paired = ErasureSweep(pd.DataFrame(), {(8, "INLP", "mem"): inlp, (8, "random", "mem"): same,
                                           (0, "INLP", "mem"): ones})
    apart = ErasureSweep(pd.DataFrame(), {(8, "INLP", "mem"): inlp, (8, "random", "mem"): shuffled,
                                          (0, "INLP", "mem"): ones})
    a, b = paired.drop_over("mem", 8, ("random",)), apart.drop_over("mem", 8, ("random",))
    assert a.contains(0.1) and b.contains(0.1)
    assert a.high - a.low < 0.7 * (b.high - b.low)
    assert paired.drop_over("mem", 8, ("random", "matched")) is None  # no matched outcome
    assert ErasureSweep(pd.DataFrame(), {(8, "INLP", "mem"): np.zeros(0), (8, "random", "mem"): np.zeros(0)}) \
        .drop_over("mem", 8, ("random",)) is None


def test_the_chapter_hands_the_kept_outcomes_to_the_verdict():
    """chapters.c3.evaluate reads Erasure.sweep(u): the sweep with its outcomes where the erasure kept them
    (the checks then carry their intervals), the bare table where it did not (margins only)."""
    from rote.chapters import Build, c3

    @dataclasses.dataclass(frozen=True)
    class Unit:
        task: str = "fda"
        condition: str = "random"
        seed: int = 0

    u = Unit()
    n, ones = 100, np.ones(100)
    rng = np.random.default_rng(3)
    kept = _outcomes({("mem", m): (ones, rng.random(n) < p) for m, p in (("INLP", 0.2), ("random", 0.9),
                                                                         ("matched", 0.85))}
                     | {("gen", m): (ones, rng.random(n) < p) for m, p in (("INLP", 0.4), ("random", 0.95),
                                                                           ("matched", 0.9))})
    overlap = {"all": {"jaccard": 0.6, "random": 0.03}, "neurons": {"jaccard": 0.4, "random": 0.02}}
    ablations = pd.DataFrame({"mem": [1.0], "gen": [1.0]}, index=pd.Index(["none"], name="ablated"))
    circuits = c3.Circuits({}, {u: overlap}, {u: ablations}, {u: _stats(0.6, 0.7)})
    sites = {u: {"layers": [1], "positions": [3]}}
    with_outcomes = c3.evaluate(Build("smoke", [u], {}), c3.C3Sections(sites, c3.Erasure(8, {u: kept.table}, {}, None,
                                                                                          {u: kept}), circuits))
    table_only = c3.evaluate(Build("smoke", [u], {}), c3.C3Sections(sites, c3.Erasure(8, {u: kept.table}, {}),
                                                                     circuits))
    for check_id in ("c3.erasure.random", "c3.erasure", "c3.erasure.gen"):
        c = _by(with_outcomes.checks[u], check_id)
        assert c.method == "bootstrap" and c.interval[0] <= c.value <= c.interval[1]
        plain = _by(table_only.checks[u], check_id)
        assert plain.interval is None and plain.margin == c.margin and plain.passed == c.passed

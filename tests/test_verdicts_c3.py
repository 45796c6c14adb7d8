"""Claim C3's checks (rote.verdicts.c3, amendment 1, 7.5) on made-up analysis outputs, and the
planted-answer test of the overlap ceiling (deliverable 5)."""

import dataclasses
import math
from types import SimpleNamespace

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
    assert metrics.mem_drop_over_larger_control == pytest.approx(0.7)  # 0.8 - max(0.05, 0.1)
    assert metrics.gen_drop_over_larger_control == pytest.approx(0.4)
    assert _by(checks, "c3.erasure").kind == "amended"
    assert _by(checks, "c3.overlap.registered").kind == "registered"  # ceiling 0.7 >= 0.5: not superseded
    assert verdicts.find(checks, "c3.overlap") is None  # no replacement where the ceiling is reachable
    ceiling = _by(checks, "c3.overlap.ceiling")
    assert ceiling.kind == "validity" and ceiling.value == pytest.approx(0.7) and ceiling.passed is True
    assert ceiling.threshold == T["overlap_min"]
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "pass"
    assert metrics.overlap_ld_spearman == pytest.approx(0.7) and metrics.overlap_lp_ci_low == pytest.approx(0.55)


def test_the_information_matched_control_can_fail_what_the_random_control_passes():
    acc = {**GOOD, ("mem", "matched"): (1.0, 0.4)}  # erasing a random look-up of the key hurts M as much
    metrics, checks = verdicts.c3.checks(_sweep(acc), 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    assert metrics.mem_drop_over_control == pytest.approx(0.75)
    assert metrics.mem_drop_over_larger_control == pytest.approx(0.2)
    assert _by(checks, "c3.erasure.random").passed is True
    assert _by(checks, "c3.erasure").passed is False
    assert verdicts.seed_verdict(checks, "registered") == "pass"
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_gen_sanity_needs_a_drop_beyond_the_larger_control():
    acc = {**GOOD, ("gen", "INLP"): (1.0, 0.9)}  # gen drops 0.1, exactly as much as the matched control
    _, checks = verdicts.c3.checks(_sweep(acc), 8, {"jaccard": 0.6, "random": 0.03}, "fda", _stats(0.6, 0.7))
    sanity = _by(checks, "c3.erasure.gen")
    assert sanity.kind == "amended" and sanity.value == pytest.approx(0.0) and sanity.passed is False
    assert sanity.threshold == T["gen_drop_over_control_above"]
    assert verdicts.seed_verdict(checks, "registered") == "pass"  # section 5 did not judge it
    assert verdicts.seed_verdict(checks, "amended") == "fail"


def test_unresolved_without_the_matched_control_or_statistics():
    acc = {k: v for k, v in GOOD.items() if k[1] != "matched"}
    metrics, checks = verdicts.c3.checks(_sweep(acc), 8, {"jaccard": 0.6, "random": 0.03}, "fda")
    assert math.isnan(metrics.mem_drop_over_larger_control)
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
    assert metrics.mem_unconnected_drop_over_larger_control == pytest.approx(0.2)
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
    fields = [f.name for f in dataclasses.fields(verdicts.c3.C3Metrics)]
    assert fields == _record_keys(("mem", "gen", "mem_unconnected"), ("mem", "gen", "mem_unconnected"))
    # FDA: no unconnected subset; without statistics no per-metric overlap numbers; NaN kept (null in JSON)
    acc = {k: v for k, v in GOOD.items() if k[1] != "matched"}
    metrics, _ = verdicts.c3.checks(_sweep(acc), 8, {"jaccard": 0.6, "random": 0.03}, "fda")
    record = metrics.record()
    assert list(record) == (["erasure_rank"] + [f"{s}_{k}" for s in ("mem", "gen") for k in ERASURE_KEYS]
                            + ["overlap", "overlap_random", "overlap_over_random", "overlap_ld_over_ceiling",
                               "overlap_superseded"])
    assert math.isnan(record["mem_matched"]) and record["overlap_superseded"] is True
    assert record == {k: v for k, v in dataclasses.asdict(metrics).items() if v is not None}
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

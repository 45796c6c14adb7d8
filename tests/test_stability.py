"""Protocol 10: stability of a row's verdict under precision and more seeds, on planted records."""

from rote import stability
from rote.verdicts import aggregate


def _seed(seed, passed, value=0.9, check="c2.probe"):
    verdict = {True: "pass", False: "fail", None: "unresolved"}[passed]
    return {"seed": seed, "amended": verdict, "registered": verdict,
            "checks": [{"id": check, "name": check, "kind": "registered", "value": value, "threshold": 0.5,
                        "passed": passed},
                       {"id": "c2.lens", "name": "lens", "kind": "amended", "value": 0.7, "threshold": 0.5,
                        "passed": True}]}


def _record(seeds, claim="C2"):
    return {"claim": claim, "task": "fda", "condition": "random", "seeds": [s["seed"] for s in seeds],
            "verdict_amended": aggregate([s["amended"] for s in seeds]), "per_seed": seeds}


def test_a_seed_that_flips_only_in_the_other_precision_is_fragile_precision():
    default = _record([_seed(0, True), _seed(1, True), _seed(2, True)])
    twin = _record([_seed(0, True), _seed(1, False, value=0.3), _seed(2, True)])
    extra = _record([_seed(3, True), _seed(4, True)])
    entry = stability.stability(default, twin, extra)
    assert entry.status == "fragile"
    assert stability.label(entry) == "fragile (precision)"
    precision = entry.changes["precision"]
    assert precision.verdict == "mixed: 2 pass, 1 fail, 0 unresolved"
    assert [(m.seed, m.check, m.before, m.after, m.outcome_before, m.outcome_after) for m in precision.moved] == \
        [(1, "c2.probe", 0.9, 0.3, "pass", "fail")]
    assert entry.changes["seeds"].moved_verdict is False and entry.changes["seeds"].verdict == "holds"


def test_holds_that_becomes_mixed_at_five_seeds_is_fragile_seeds():
    default = _record([_seed(0, True), _seed(1, True), _seed(2, True)])
    twin = _record([_seed(0, True), _seed(1, True), _seed(2, True)])
    extra = _record([_seed(3, True), _seed(4, False, value=0.2)])
    entry = stability.stability(default, twin, extra)
    assert stability.label(entry) == "fragile (seeds)"
    seeds = entry.changes["seeds"]
    assert seeds.verdict == "mixed: 4 pass, 1 fail, 0 unresolved"
    assert [(m.seed, m.check, m.after, m.outcome_after) for m in seeds.moved] == [(4, "c2.probe", 0.2, "fail")]
    assert "seeds: holds -> mixed: 4 pass, 1 fail, 0 unresolved (seed 4)" in entry.reason


def test_mixed_stays_mixed_with_other_counts_and_is_stable():
    default = _record([_seed(0, True), _seed(1, False), _seed(2, True)])
    twin = _record([_seed(0, False), _seed(1, False), _seed(2, True)])
    extra = _record([_seed(3, False), _seed(4, True)])
    entry = stability.stability(default, twin, extra)
    assert entry.status == "stable", entry.reason
    assert entry.changes["precision"].moved  # the checks that moved are listed even when the word holds


def test_a_row_missing_its_perturbed_runs_is_not_run_with_the_reason():
    default = _record([_seed(0, True), _seed(1, True), _seed(2, True)])
    entry = stability.stability(default, None, None, precision_not_run="no native bf16 on this machine")
    assert entry.status == "not run" and stability.label(entry) == "not run"
    assert "no native bf16" in entry.reason and "seeds 3, 4 are not trained" in entry.reason
    # one change computed and unmoved, the other missing: still not run, never stable
    half = stability.stability(default, None, _record([_seed(3, True), _seed(4, True)]))
    assert half.status == "not run"
    # a change that moved the word makes the row fragile even when the other was not run
    moved = stability.stability(default, None, _record([_seed(3, False), _seed(4, False)]))
    assert moved.status == "fragile"


def test_stability_never_changes_the_default_record():
    default = _record([_seed(0, True), _seed(1, True), _seed(2, True)])
    before = repr(default)
    stability.stability(default, _record([_seed(0, False), _seed(1, False), _seed(2, False)]),
                        _record([_seed(3, False), _seed(4, False)]))
    assert repr(default) == before


def test_verdict_word():
    assert stability.verdict_word("mixed: 2 pass, 1 fail, 0 unresolved") == "mixed"
    assert stability.verdict_word("holds") == "holds"
    assert stability.verdict_word("pass (1 seed)") == "holds"  # a 1-seed build against its 3-seed change
    assert stability.verdict_word("fail (1 seed)") == "fails"
    assert stability.verdict_word("unresolved (1 seed)") == "unresolved"
    assert stability.verdict_word("not run") == "not run"

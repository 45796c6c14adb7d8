"""Section 11 on the page: the checks table gives each seed's margin and interval beside its value and
the range across seeds; the scorecard counts the seeds with a near deciding check and, where a
stability build ran, says whether near predicted fragile."""

from rote import claims
from rote.display import claims_table, near_predicted, record_table
from rote.stability import FRAGILE, STABLE


def _check(value, near, passed=True, kind="amended"):
    return {"id": "c1.benign", "name": "benign gap", "kind": kind, "value": value, "threshold": 0.95,
            "passed": passed, "part": "benign gap", "section5": False, "reason": "", "margin": value - 0.95,
            "interval": [value - 0.015, value + 0.015], "method": "newcombe", "near": near}


def _record(values_near, created=1.0):
    per_seed = [{"seed": s, "registered": "pass", "amended": "pass", "metrics": {}, "run_keys": [],
                 "checks": [_check(v, n, passed=v >= 0.95)]} for s, (v, n) in enumerate(values_near)]
    return claims.ClaimRecord("C1", "fda", "digit", "quick", list(range(len(per_seed))), "holds", "holds", "holds",
                              per_seed=per_seed, page="02_learning_dynamics", created=created)


def test_record_table_shows_interval_margin_near_and_range():
    table = record_table(_record([(0.953, True), (0.99, False), (0.943, True)]))
    row = table.iloc[0]
    assert row["seed 0"] == "0.953 [0.938, 0.968] newcombe vs 0.95, margin +0.003: pass (near)"
    assert row["seed 1"].endswith("margin +0.04: pass") and "(near)" not in row["seed 1"]
    assert row["seed 2"].endswith("margin -0.007: FAIL (near)")
    assert row["range"] == "0.943 .. 0.99"


def test_scorecard_counts_near_seeds():
    table = claims_table([_record([(0.953, True), (0.99, False), (0.943, True)]), _record([(0.99, False)] * 3)])
    assert list(table["near seeds"]) == ["2/3", "0/3"]
    assert "near predicted fragile" not in table.columns  # no stability build: no column


def test_near_predicted_fragile_reads_both_ways():
    near, far = _record([(0.953, True)] * 3), _record([(0.99, False)] * 3)
    assert near_predicted(near, {"status": FRAGILE}) == "yes (near, fragile)"
    assert near_predicted(far, {"status": STABLE}) == "yes (none near, stable)"
    assert near_predicted(near, {"status": STABLE}) == "no: near but stable"
    assert near_predicted(far, {"status": FRAGILE}) == "no: fragile, none near"
    assert near_predicted(near, None) == "" and near_predicted(near, {"status": "not run"}) == ""


def test_scorecard_column_beside_stability(tmp_path, monkeypatch):
    monkeypatch.setattr(claims, "results_root", lambda: tmp_path)
    rec = _record([(0.953, True)] * 3)
    claims.save_stability(rec, {"status": FRAGILE, "reason": "seeds", "changes": {}})
    table = claims_table([rec])
    assert table.loc[0, "near predicted fragile"] == "yes (near, fragile)"


def test_near_seeds_count_deciding_checks_only_never_a_near_validity_check():
    """Issue 43 part 5: a seed whose only near check is a validity check (8.1: it never decides) has no near
    deciding check; the record's per-seed list still shows it (near_checks), the count does not."""
    from rote import verdicts

    validity = dict(_check(0.953, True, kind="validity"), id="c1.twin.trained", section5=False, was="new")
    rec = _record([(0.99, False), (0.953, True)])
    rec.per_seed[0]["checks"].append(validity)
    assert verdicts.near_checks(rec.per_seed[0]["checks"]) == ["c1.twin.trained"]
    assert verdicts.near_seeds(rec) == 1  # seed 1's deciding check; seed 0's near check is a validity check
    assert list(claims_table([rec])["near seeds"]) == ["1/2"]

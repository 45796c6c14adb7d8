"""ClaimResult.evaluations hands the chapter's sentences the metrics exactly as the record stores them
(a metrics class stored whole, C4's, is checked in tests/test_verdicts_c4.py)."""

from rote.chapters import ClaimResult
from rote.verdicts import c2


def test_evaluations_leave_out_what_does_not_apply():
    carries = dict(best_layer=1, acc_M=0.5, acc_C=0.9, chance=0.5, best_layer_C=1, acc_C_best=0.9, chance_reachable=True)
    metrics = c2.C2Metrics(n_M=3, n_C=5, carries=c2.ProbeRead(**carries))
    result = ClaimResult("C2", {"unit": metrics}, {"unit": []})
    shown, checks = result.evaluations["unit"]
    assert shown == metrics.record() == {"n_M": 3, "n_C": 5, **{f"carries_{k}": v for k, v in carries.items()}}
    assert c2.ABSENT not in shown.values() and checks == []

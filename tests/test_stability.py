"""Protocol 10: stability of a row's verdict under precision and more seeds, on planted records."""

import itertools

from rote import stability
from rote.settings import Settings
from rote.verdicts import aggregate

CLOCK = itertools.count(1)  # each planted record is later than the ones before it (8.6: twins after the default)


def _seed(seed, passed, value=0.9, check="c2.probe"):
    verdict = {True: "pass", False: "fail", None: "unresolved"}[passed]
    return {"seed": seed, "amended": verdict, "registered": verdict, "precision": "fp32",
            "checks": [{"id": check, "name": check, "kind": "registered", "value": value, "threshold": 0.5,
                        "passed": passed},
                       {"id": "c2.lens", "name": "lens", "kind": "amended", "value": 0.7, "threshold": 0.5,
                        "passed": True}]}


def _record(seeds, claim="C2", precision="fp32", code="c0de", created=None):
    """A record (as its dict) computed by ``code`` at ``created`` (default: later than every record before it),
    its seeds' runs in ``precision``."""
    seeds = [{**s, "precision": precision} for s in seeds]
    return {"claim": claim, "task": "fda", "condition": "random", "seeds": [s["seed"] for s in seeds],
            "verdict_amended": aggregate([s["amended"] for s in seeds]), "per_seed": seeds, "code": code,
            "created": float(next(CLOCK)) if created is None else created}


def _twin(seeds):
    return _record(seeds, precision="bf16")


def test_a_seed_that_flips_only_in_the_other_precision_is_fragile_precision():
    default = _record([_seed(0, True), _seed(1, True), _seed(2, True)])
    twin = _twin([_seed(0, True), _seed(1, False, value=0.3), _seed(2, True)])
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
    twin = _twin([_seed(0, True), _seed(1, True), _seed(2, True)])
    extra = _record([_seed(3, True), _seed(4, False, value=0.2)])
    entry = stability.stability(default, twin, extra)
    assert stability.label(entry) == "fragile (seeds)"
    seeds = entry.changes["seeds"]
    assert seeds.verdict == "mixed: 4 pass, 1 fail, 0 unresolved"
    assert [(m.seed, m.check, m.after, m.outcome_after) for m in seeds.moved] == [(4, "c2.probe", 0.2, "fail")]
    assert "seeds: holds -> mixed: 4 pass, 1 fail, 0 unresolved (seed 4)" in entry.reason


def test_mixed_stays_mixed_with_other_counts_and_is_stable():
    default = _record([_seed(0, True), _seed(1, False), _seed(2, True)])
    twin = _twin([_seed(0, False), _seed(1, False), _seed(2, True)])
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
    stability.stability(default, _twin([_seed(0, False), _seed(1, False), _seed(2, False)]),
                        _record([_seed(3, False), _seed(4, False)]))
    assert repr(default) == before


def test_verdict_word():
    assert stability.verdict_word("mixed: 2 pass, 1 fail, 0 unresolved") == "mixed"
    assert stability.verdict_word("holds") == "holds"
    assert stability.verdict_word("pass (1 seed)") == "holds"  # a 1-seed build against its 3-seed change
    assert stability.verdict_word("fail (1 seed)") == "fails"
    assert stability.verdict_word("unresolved (1 seed)") == "unresolved"
    assert stability.verdict_word("not run") == "not run"


# -- 8.6: like with like -------------------------------------------------------------------------------
def _rows():
    default = _record([_seed(0, True), _seed(1, True), _seed(2, True)])
    flipped = [_seed(0, True), _seed(1, False, value=0.3), _seed(2, True)]
    return default, flipped


def test_a_perturbed_record_of_other_code_is_not_run():
    default, flipped = _rows()
    stale = _record(flipped, precision="bf16", code="01d0")
    entry = stability.stability(default, stale, _record([_seed(3, True), _seed(4, True)], code="01d0"))
    # before 8.6: the stale twin counted and made the row fragile (precision)
    assert entry.status == "not run" and entry.changes["precision"].moved_verdict is None
    assert "computed by other code (01d0) than the default record (c0de)" in entry.changes["precision"].reason
    assert "computed by other code" in entry.changes["seeds"].reason
    legacy = {k: v for k, v in _record(flipped, precision="bf16").items() if k != "code"}  # from before 8.6
    assert "does not name the code" in stability.refusal(default, legacy, "precision")
    assert "the default record does not name the code" in stability.refusal({**default, "code": ""}, _twin(flipped),
                                                                             "precision")


def test_a_perturbed_record_older_than_the_default_is_not_run():
    early = _twin([_seed(0, True), _seed(1, False, value=0.3), _seed(2, True)])
    default = _record([_seed(0, True), _seed(1, True), _seed(2, True)])  # recomputed after the twin
    entry = stability.stability(default, early, _record([_seed(3, True), _seed(4, True)]))
    assert entry.changes["precision"].verdict == "not run"
    assert "not later than the default record" in entry.changes["precision"].reason
    assert entry.status == "not run"  # the seeds change alone is stable, the precision one is not run
    same_time = _twin([_seed(0, True)])
    assert "not later" in stability.refusal({**_record([_seed(0, True)]), "created": same_time["created"]},
                                           same_time, "precision")


def test_a_precision_record_whose_runs_share_the_defaults_precision_is_not_run():
    default, flipped = _rows()
    twin = _twin(flipped)
    twin["per_seed"][1]["precision"] = "fp32"  # seed 1 was trained in the default's precision
    entry = stability.stability(default, twin, _record([_seed(3, True), _seed(4, True)]))
    change = entry.changes["precision"]
    assert change.verdict == "not run" and change.moved_verdict is None and entry.status == "not run"
    assert "seed 1 in the precision record are not in another precision" in change.reason
    twin["per_seed"][1]["precision"] = None  # not recorded: not shown to differ
    assert "seed 1" in stability.refusal(default, twin, "precision")
    twin["per_seed"][1]["precision"] = "bf16"
    assert stability.refusal(default, twin, "precision") == ""
    assert stability.stability(default, twin, _record([_seed(3, True), _seed(4, True)])).status == "fragile"


def _save(rec_dict, root):
    from rote import claims

    fields = {k: v for k, v in rec_dict.items() if k in claims.ClaimRecord.__dataclass_fields__}
    rec = claims.ClaimRecord(**{**fields, "profile": "smoke", "verdict_registered": rec_dict["verdict_amended"],
                                "status": rec_dict["verdict_amended"], "code": ""})  # save stamps this process's
    claims.save(rec, root)
    return rec


def test_a_failed_perturbed_chapter_leaves_its_change_not_run(tmp_path, monkeypatch):
    from rote import claims
    from rote.build import book

    seeds = [_seed(0, True, check="c1.gen")]  # the book's records in tmp_path (its results folder setting)
    default = _save(_record(seeds, claim="C1"), tmp_path)
    twin = _save(_record([_seed(0, False, check="c1.gen")], claim="C1", precision="bf16"),
                 book.stability_root("precision", tmp_path))
    _save(_record([_seed(3, True, check="c1.gen"), _seed(4, True, check="c1.gen")], claim="C1"),
          book.stability_root("seeds", tmp_path))
    assert twin.created > default.created and claims.library_code()
    assert book.write_stability("smoke", [0], results=tmp_path) == 1
    (rec,) = [r for r in claims.load_all("smoke", tmp_path, seeds=[0]) if r.per_seed]
    assert rec.code == claims.library_code()  # save stamps the code that computed the record
    assert claims.load_stability(rec, tmp_path)["status"] == "fragile"  # the twin counts: same code, later, bf16
    # the same folders, but the precision chapter failed in this build: that change is not run
    failed = {("precision", "C1", "fda"): "cell 7: RuntimeError"}
    assert book.write_stability("smoke", [0], failed=failed, results=tmp_path) == 1
    entry = claims.load_stability(rec, tmp_path)
    assert entry["status"] == "not run" and entry["changes"]["precision"]["verdict"] == "not run"
    assert "its chapter failed in this build (cell 7: RuntimeError)" in entry["changes"]["precision"]["reason"]
    assert entry["changes"]["seeds"]["moved_verdict"] is False  # the seeds change still counts
    failed = {("seeds", "C1", None): "cell 3: ValueError"}
    book.write_stability("smoke", [0], failed=failed, results=tmp_path)
    assert "its chapter failed in this build (cell 3: ValueError)" in \
        claims.load_stability(rec, tmp_path)["changes"]["seeds"]["reason"]


def test_stability_jobs_follow_the_default_chapters_and_note_their_failures(monkeypatch):
    import threading
    import time
    from pathlib import Path

    from rote.build import book, driver

    params = driver.resolve_parameters("learning_dynamics", "smoke", {})
    failed = {}
    _, jobs = book.stability_jobs(Settings(profile="smoke", seeds=1), ["learning_dynamics"],
                                  {"learning_dynamics": params}, failed=failed)
    assert [j.waits for j in jobs] == [True] + [False] * (len(jobs) - 1)  # after every default chapter
    assert all(j.after is not None for j in jobs)
    log = []

    def fake(job, profile, settings=None):
        log.append(("start", job.label or job.name))
        time.sleep(0.2)
        log.append(("end", job.label or job.name))
        return driver.ChapterResult(job.name, job.label != jobs[1].label, 0.2, Path(), Path(), "cell 9: boom")

    monkeypatch.setattr(driver, "execute_job", fake)
    default = driver.ChapterJob("learning_dynamics", params)
    driver.execute_jobs([default] + jobs, "smoke", lambda: 4, threading.Event(), capacity=4)
    assert log.index(("start", jobs[0].label)) > log.index(("end", "learning_dynamics"))
    claim_task = ("C1", jobs[1].params["tasks"][0]) if "precision" in jobs[1].params.get("overrides", {}) else None
    expected = ("precision", *claim_task) if claim_task else ("seeds", "C1", None)
    assert failed == {expected: "cell 9: boom"}

"""What a claim chapter says it found, under its title (rote.report.finding_sentence): one sentence per task and
noise condition, read from planted C1 records (checks computed by rote.verdicts.c1 from planted learning curves):
a pass, a fail, a seed left unresolved by amendment 3's plateau check (with its reason and numbers), seeds that
differ, and a record that was not run."""

from types import SimpleNamespace

import numpy as np
import pandas as pd

from rote import claims, report, verdicts
from rote.verdicts import c1

STEPS = np.arange(0, 1001, 50)


def _curves(mem, gen=None) -> pd.DataFrame:
    gen = np.minimum(1.0, STEPS / 200) if gen is None else gen
    return pd.DataFrame({"step": STEPS, "gen": gen, "mem": mem, "rec": 1 - mem, "fit": gen})


MEMORIZES = np.clip((STEPS - 400) / 300, 0, 1)  # after gen, then flat: C1 passes
NEVER = np.zeros(len(STEPS))  # never memorizes: final mem fails
STILL_RISING = STEPS / 1000  # final mem 0.9, but 0.1 above its mean at 90% of the steps: not finished (12.3)


def _record(*mems, task="fda", condition="random") -> claims.ClaimRecord:
    results = []
    for seed, mem in enumerate(mems):
        metrics, checks = c1.checks(_curves(mem), _curves(NEVER), 50)
        unit = SimpleNamespace(task=task, condition=condition, seed=seed)
        results.append(verdicts.seed_result(unit, metrics, checks, []))
    return verdicts.records("C1", "smoke", results)[0]


def test_a_record_that_holds_names_every_part_as_holding():
    text = report.finding_sentence(_record(MEMORIZES))
    assert text == ("**FDA, random noise**, seed 0: **pass (1 seed)**. "
                    "What holds: ordering, final mem, final gen and benign gap.")


def test_a_failing_part_gives_its_value_against_its_threshold():
    text = report.finding_sentence(_record(NEVER, NEVER, task="thr", condition="-"))
    assert text.startswith("**THR**, seeds 0-1: **fails**. What fails: final mem (0 vs 0.9).")
    assert "What holds: ordering, final gen and benign gap." in text


def test_an_unresolved_part_says_why_with_the_records_numbers():
    rec = _record(STILL_RISING)
    text = report.finding_sentence(rec)
    assert text.startswith("**FDA, random noise**, seed 0: **unresolved (1 seed)**. What could not be decided: ")
    plateau = verdicts.find(rec.per_seed[0]["checks"], "c1.plateau")
    assert plateau["passed"] is False and round(plateau["value"], 3) == 0.1  # the planted rise
    assert ("final mem (0.9 vs 0.9; the noisy run has not finished memorizing: final mem 0.900 against 0.800 over "
            "the 5 evaluations (ending at step 900), a rise of 0.100 above 0.05)") in text
    assert "What holds: ordering." in text


def test_parts_that_differ_by_seed_name_the_seeds_of_each_outcome():
    text = report.finding_sentence(_record(MEMORIZES, NEVER, STILL_RISING))
    assert text.startswith("**FDA, random noise**, seeds 0-2: **mixed: 1 pass, 1 fail, 1 unresolved**. "
                           "What differs by seed: final mem (holds on seed 0, fails on seed 1, is unresolved on "
                           "seed 2; on seed 1: 0 vs 0.9; on seed 2: 0.9 vs 0.9; the noisy run has not finished "
                           "memorizing")
    assert text.endswith("What holds: ordering.")


def test_a_record_not_run_says_why_and_no_record_says_so():
    rec = claims.placeholder("X1", "fda", "random", "smoke", reason="X1's grid was not trained in this build")
    assert report.finding_sentence(rec) == ("**FDA, random noise**: not judged in this build: "
                                            "X1's grid was not trained in this build.")
    assert report.finding_sentences([]) == "- No record: this chapter judged nothing."
    two = report.finding_sentences([_record(MEMORIZES), rec]).splitlines()
    assert len(two) == 2 and all(line.startswith("- **FDA, random noise**") for line in two)


def test_a_reason_loses_the_protocol_section_it_opens_with():
    assert report.plain_reason("8.5: the intervention cannot run") == "the intervention cannot run"
    assert report.plain_reason("section 5: a fail") == "a fail"
    assert report.plain_reason("no memorized example (j*)") == "no memorized example (j*)"


def test_a_chapter_glues_its_finding_and_its_figure(monkeypatch, tmp_path):
    import myst_nb

    from rote import chapters

    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda key, value, display=True: glued.update({key: (value, display)}))
    records = [_record(MEMORIZES), _record(NEVER, task="thr", condition="-")]
    chapters.glue_finding("C1", records, "c1_checks", tmp_path)  # the page's figures folder, an argument
    text, shown = glued["c1_finding"]
    assert text.data == report.finding_sentences(records) and shown is False
    assert glued["c1_checks"][1] is False and (tmp_path / "c1_checks.png").exists()

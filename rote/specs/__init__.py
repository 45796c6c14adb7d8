"""One :class:`rote.spec.ClaimSpec` per claim, ``SPEC`` in ``rote/specs/<claim>.py``: adding a claim adds a
module here (:mod:`rote.spec` registers every one). :data:`AMENDMENTS`: every section the protocol added after
section 5, in protocol order (amendments, clarifications, registrations), as the book lists them and the
readings name them; adding an amendment adds an entry here."""

import importlib

importlib.import_module("..spec", __name__)  # the registry first: importing one spec module alone registers them all
from ..spec import Addition  # noqa: E402

AMENDMENTS = (
    Addition("7", "amendment", "2026-11-30", "after the first `quick` results",
             "every record carries two verdicts side by side, the **registered** one (section 5 exactly as "
             "written) and the **amended** one, which judges each claim across seeds, times C1 by interpolated "
             "crossings, uses the mean of the last evaluations as \"final\", adds the controls, nulls and ceilings "
             "a claim must also beat, and judges FDA in a second noise condition (`digit`, one answer digit "
             "changed) beside the primary `random`."),
    Addition("8", "amendment", "2026-12-01", "after the first 3-seed `quick` book",
             "a check of the instrument (`validity`) never decides a verdict; a seed passes, fails or is "
             "*unresolved*, and C5's heuristics are calibrated on an untrained model and its outliers read at the "
             "first noisy answer digit."),
    Addition("8.5", "clarification", "2026-12-01", "missing values and the units of 8.4",
             "a check whose value could not be computed (an intervention with no site to act on, a missing "
             "number) is unresolved with its reason, never failed by the missing value."),
    Addition("8.6", "clarification", "2026-12-02", "checks that can fail, and what each reads",
             "every deciding check can fail, and each reads the inputs the protocol names (chance on the "
             "examples it judges, erasure at the sites that C2's probes found)."),
    Addition("9", "registration", "2026-12-01", "beyond the paper: X1, when is memorization benign?",
             "a question beyond the paper, registered before its runs: does memorizing the noise cost less "
             "generalization as the model gets wider?", label="X1"),
    Addition("10", "registration", "2026-12-01", "how fragile is each verdict?",
             "every row's amended verdict is recomputed with the runs trained in the other precision and with "
             "two more seeds; a row whose verdict word moves is *fragile*. Stability is shown, never a verdict.",
             label="Stability"),
    Addition("11", "registration", "2026-12-02", "how close to its threshold is each deciding check?",
             "every deciding check on every seed states how far its value lies from its threshold, with a "
             "sampling interval where it has one; a check whose interval contains its threshold is *near*, which "
             "is shown and changes no verdict.", label="Margins"),
    Addition("12", "amendment", "2026-12-04",
             "after the first GPU runs and a read of the verdict code against 8.6 and 9",
             "a chance threshold a probe can reach (C2); a noise-free twin that trained and a noisy run that "
             "finished memorizing, checked before C1's and X1's final values count; X1's learning rate chosen "
             "per width. The amended reading is the checks as of this amendment."),
)

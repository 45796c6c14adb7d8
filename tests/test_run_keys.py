"""Run keys and drawn labels pinned as literals (computed on b9c8e51), so that a refactor of the noise kinds,
the configuration or the plan that changes what a run hashes or what its data holds fails here.

The keys are taken with the code fingerprint held constant (it moves with every edit of a training source, by
design: :func:`rote.config.code_fingerprint`); what is pinned is what the key hashes besides it. If a value here
changes, stored runs mean something new or miss the cache: undo the change, or bump SCHEMA_VERSION on purpose
and say why there. Never update a value alone.
"""

import hashlib

import numpy as np
import pytest

import rote.config as config_module
from rote import plan
from rote.tasks import build_task

# (profile, task, condition) -> (noisy run's key, noise-free twin's key); fp32 given, so that THR's "auto"
# precision (which follows the machine) does not move the key
PINNED_KEYS = {
    ("smoke", "fda", "random"): ("cef142238852fdf0", "a0fdfd2e353b3a93"),
    ("smoke", "fda", "digit"): ("9e6d53ebe7511e9c", "a0fdfd2e353b3a93"),
    ("smoke", "thr", "-"): ("01d58f7e1c54466c", "10b152cd70a76561"),
    ("quick", "fda", "random"): ("8b47b0901f379375", "c98041b153a9f853"),
    ("quick", "fda", "digit"): ("a6dbfc48309f787b", "c98041b153a9f853"),
    ("quick", "thr", "-"): ("66357c868b87b6a1", "993318ade9afa96b"),
}
# sha256 (first 16 hex digits) of the smoke FDA training labels of seed 0, per noise kind
PINNED_LABELS = {"random": "b75e3368a352051c", "digit": "decee35dc73aad59"}


@pytest.fixture
def fixed_fingerprint(monkeypatch):
    monkeypatch.setattr(config_module, "code_fingerprint", lambda: "f" * 12)


@pytest.mark.parametrize("profile", ["smoke", "quick"])
def test_the_planned_run_keys_are_pinned(profile, fixed_fingerprint):
    units = plan.units(profile, seeds=[0], overrides={"precision": "fp32"})
    found = {(profile, u.task, u.condition): (u.noisy.key, u.clean.key) for u in units}
    assert found == {k: v for k, v in PINNED_KEYS.items() if k[0] == profile}


@pytest.mark.parametrize("kind", sorted(PINNED_LABELS))
def test_the_drawn_fda_labels_are_pinned(kind):
    data = build_task(plan.with_seed(config_module.make_config("fda", "smoke", noise_kind=kind), 0))
    labels = np.ascontiguousarray(data.train.label.numpy().astype(np.int64))
    assert hashlib.sha256(labels.tobytes()).hexdigest()[:16] == PINNED_LABELS[kind]

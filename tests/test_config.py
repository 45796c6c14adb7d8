import dataclasses
import json

import numpy as np
import pytest

import rote.config as config_module
from rote.config import (DATA_CONFIGS, PROFILE_PARAMS, PROFILES, TASKS, ConfigError, ModelConfig, RunConfig,
                         TrainConfig, make_config, param_names)

# The cache key of one fixed configuration, with the code fingerprint held constant. If this test
# fails, a change altered what the key hashes (a field, a default, the schema number, the JSON
# layout), so every stored run now misses the cache. That is right only when stored runs mean
# something new: then bump SCHEMA_VERSION in rote/config.py on purpose, saying why next to it,
# and put the new key here. Otherwise undo the change. Never update the value alone.
FIXED_CONFIG = {
    "task": "fda",
    "data": dict(n_train=400, n_test=100, noise_ratio=0.2, noise_kind="digit", answer_order="msb", data_seed=1,
                 noise_seed=2),
    "model": dict(n_layers=1, d_model=32, n_heads=2, model_seed=3),
    "train": dict(steps=60, batch_size=64, lr=2e-3, weight_decay=0.1, warmup_steps=10, lr_schedule="cosine",
                  min_lr_ratio=0.1, eval_every=10, checkpoint_every=30, fit_eval_size=2000, precision="fp32"),
}
EXPECTED_KEY = "dc6d6646e7c2bac3"  # schema 3
FINGERPRINT = "f" * 12


@pytest.fixture
def fixed_fingerprint(monkeypatch):
    """The key without the code fingerprint's contribution (which changes with every code edit)."""
    if hasattr(config_module, "code_fingerprint"):
        monkeypatch.setattr(config_module, "code_fingerprint", lambda: FINGERPRINT)


def test_key_of_a_fixed_configuration(fixed_fingerprint):
    cfg = RunConfig(task=FIXED_CONFIG["task"], data=DATA_CONFIGS[FIXED_CONFIG["task"]](**FIXED_CONFIG["data"]),
                    model=ModelConfig(**FIXED_CONFIG["model"]), train=TrainConfig(**FIXED_CONFIG["train"]))
    assert cfg.key == EXPECTED_KEY, (
        f"RunConfig.key changed to {cfg.key}: bump SCHEMA_VERSION if stored runs mean something new, "
        "then update EXPECTED_KEY (see the comment above it)")


def test_key_includes_code_fingerprint(monkeypatch):
    cfg = make_config("fda", "smoke")
    monkeypatch.setattr(config_module, "code_fingerprint", lambda: "a" * 12)
    first = cfg.key
    monkeypatch.setattr(config_module, "code_fingerprint", lambda: "b" * 12)
    assert cfg.key != first
    monkeypatch.setattr(config_module, "code_fingerprint", lambda: "a" * 12)
    assert cfg.key == first


@pytest.mark.parametrize("task", TASKS)
def test_flat_parameter_names_are_unique_across_parts(task):
    parts = [DATA_CONFIGS[task], ModelConfig, TrainConfig]
    names = [f.name for part in parts for f in dataclasses.fields(part)]
    duplicates = {n for n in names if names.count(n) > 1}
    assert not duplicates, f"{task}: {sorted(duplicates)} appear in more than one config part"
    assert param_names(task) == names
    cfg = make_config(task, "smoke")
    assert list(cfg.flat()) == names  # flat() loses no field to a name clash


def _numeric_changes(cfg: RunConfig):
    """(part, name, new value) for every numeric field: ints doubled (0 -> 1), floats halved (all stay valid)."""
    for part_name in ("data", "model", "train"):
        part = getattr(cfg, part_name)
        for f in dataclasses.fields(part):
            value = getattr(part, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            yield part_name, f.name, (value * 2 or 1) if isinstance(value, int) else value / 2


@pytest.mark.parametrize("task", TASKS)
def test_each_flat_override_reaches_its_own_field_and_the_key(task, fixed_fingerprint):
    cfg = make_config(task, "smoke")
    assert cfg.key == make_config(task, "smoke").key and len(cfg.key) == 16
    keys = {cfg.key}
    changes = list(_numeric_changes(cfg))
    assert len(changes) >= 15
    for part_name, name, new in changes:
        changed = cfg.replace(**{name: new})
        assert getattr(getattr(changed, part_name), name) == new, name
        assert {k: v for k, v in changed.flat().items() if k != name} == \
            {k: v for k, v in cfg.flat().items() if k != name}, name
        keys.add(changed.key)
    assert len(keys) == len(changes) + 1  # every field changes the key, each change differently


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("profile", PROFILES)
def test_profiles_are_valid_and_round_trip(task, profile):
    cfg = make_config(task, profile)
    assert set(PROFILE_PARAMS[profile][task]) <= set(param_names(task))
    for name, value in PROFILE_PARAMS[profile][task].items():
        assert cfg.flat()[name] == value, name
    again = RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg and again.key == cfg.key


def test_stored_config_of_another_schema_is_refused():
    d = make_config("fda", "smoke").to_dict()
    d["schema"] = d["schema"] - 1
    with pytest.raises(ConfigError, match="schema"):
        RunConfig.from_dict(d)


def test_config_validation():
    with pytest.raises(ConfigError, match="noise_ratio"):
        make_config("fda", "smoke", noise_ratio=1.0)
    with pytest.raises(ConfigError, match="noise_ratio"):
        make_config("thr", "smoke", noise_ratio=-0.1)
    with pytest.raises(ConfigError, match="graph too small"):
        make_config("thr", "quick", n_entities=10)
    with pytest.raises(ConfigError, match="unknown task"):
        make_config("abc")
    with pytest.raises(ConfigError, match="unknown parameter"):
        make_config("fda", "smoke", n_entities=3)
    with pytest.raises(ConfigError, match="expects int"):
        make_config("fda", "smoke", n_train="many")
    with pytest.raises(ConfigError, match="warmup_steps"):
        make_config("fda", "smoke", warmup_steps=60)  # smoke: steps=60
    assert make_config("fda", "smoke", n_train="123").data.n_train == 123
    assert make_config("fda", "smoke", lr="1e-3").train.lr == 1e-3
    assert np.isclose(make_config("fda", "quick").train.lr_at(0), 2e-3 / 100)


def test_learning_rate_schedule():
    tc = make_config("fda", "smoke", lr=1e-3, warmup_steps=10, steps=110, min_lr_ratio=0.1).train
    assert tc.lr_at(0) == pytest.approx(1e-4) and tc.lr_at(9) == pytest.approx(1e-3)
    assert tc.lr_at(10) == pytest.approx(1e-3)  # cosine starts at the peak
    assert tc.lr_at(60) == pytest.approx(0.55e-3)  # half way: (0.1 + 0.9 * 0.5) * lr
    assert tc.lr_at(110) == pytest.approx(1e-4) and tc.lr_at(500) == pytest.approx(1e-4)
    const = dataclasses.replace(tc, lr_schedule="constant")
    assert const.lr_at(10) == const.lr_at(109) == 1e-3

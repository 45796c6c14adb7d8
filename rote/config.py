"""Configurations (frozen, validated dataclasses) and the three profiles.

A run is described by a :class:`RunConfig`: the task's data and noise (:class:`FDAConfig` or
:class:`THRConfig`), the model (:class:`ModelConfig`) and the training (:class:`TrainConfig`).
Every field has a unique name, so a flat ``NAME=VALUE`` override (from the command line or a
papermill parameter) finds its place: :func:`make_config`.

The profile values below were measured on the 2-core CI-class machine; the measurements are
written next to each profile and in ``book/calibration.md``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import io
import json
import math
import tokenize
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .noise import kind_names, kinds_text, primary_kind

PROJECT_ROOT = Path(__file__).resolve().parents[1]  # the checkout: book/, _build/ (ignored), ...
# Bump when the meaning of a stored run changes: old entries then miss the cache.
#   3: training pins 1 intra-op thread (was 2); TrainConfig.precision; a noise-free FDA run has
#      noise_kind "random" whatever was asked (both noise conditions share one twin); the key
#      includes the code fingerprint (code_fingerprint below).
SCHEMA_VERSION = 3

TASKS = ("fda", "thr")
PROFILES = ("smoke", "quick", "paper")
PRECISIONS = ("fp32", "bf16")
# "auto" (the default) resolves when a configuration is built: bf16 where the device that will
# train computes bfloat16 natively, else fp32 (native_precision). The resolved value is what the
# run key, the record and every page carry.
AUTO_PRECISION = "auto"


def cpu_has_native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes bfloat16 matmuls natively (AVX-512 BF16 or AMX-BF16), read from
    the flags of ``/proc/cpuinfo`` (Linux). Elsewhere, or when the file cannot be read: False."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


# Tasks whose verdicts moved with precision stay fp32 under "auto" (issue 21: "where a task's verdicts
# move with precision, that task stays fp32"). Measured on quick, seeds 0 and 1, fp32 against bf16 on
# one machine (benchmarks/RESULTS.md): THR agreed on every check of both seeds; FDA `random` seed 1
# memorized 0.83 in bf16 against 0.97 in fp32, and C2, C3 and C4 changed verdict with it.
FP32_TASKS = ("fda",)


def precision_for(task: str) -> str:
    """What "auto" resolves to for a run of ``task`` on this machine: fp32 for FP32_TASKS, else the
    machine's native_precision()."""
    return "fp32" if task in FP32_TASKS else native_precision()


@functools.lru_cache(maxsize=None)
def native_precision() -> str:
    """The precision "auto" resolves to on this machine: bf16 on a CUDA device with bf16 (the
    device training picks first) or on a CPU with native bf16, else fp32. Measured on a 2-core
    CPU with AMX (benchmarks/RESULTS.md): quick FDA 108 -> 56 ms per step. On an AVX2-only CPU
    bf16 runs ~12x slower than fp32, so it is never chosen there."""
    import torch

    if torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_native_bf16() else "fp32"


# -- code fingerprint ---------------------------------------------------------------------------
# A run's key includes a hash of the code that produces it, so that editing the tasks, the model
# or the training never silently reuses runs trained by the old code. The sources are rote/train.py
# and every module of the package it imports, transitively (rote/config.py, rote/model.py,
# rote/tasks/*.py, and whatever scorer training calls). Each file counts by its tokens, without
# comments, docstrings and layout (indentation kept as marks), so formatting does not change the key
# and the key is the same on every Python from 3.11 on; any change to the code does, even a pure
# refactor (then the runs retrain: the price of safety).
FINGERPRINT_ROOTS = ("train.py",)
_PACKAGE_DIR = Path(__file__).resolve().parent


def _module_file(package_dir: Path, module: str) -> Path | None:
    base = package_dir.joinpath(*module.split(".")) if module else package_dir
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


# Names whose module-level assignment does not count: profile values reach a run only through its
# configuration, which the key already holds in full, so retuning a profile keeps the other runs.
FINGERPRINT_IGNORED_NAMES = ("PROFILE_PARAMS",)


def _skipped_lines(tree: ast.Module) -> set[int]:
    """Lines that do not count: docstrings, and module-level assignments of FINGERPRINT_IGNORED_NAMES."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id in FINGERPRINT_IGNORED_NAMES
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


# Token types that carry no meaning for the fingerprint (comments, blank and continuation lines) and the
# marks that stand for the layout tokens that do (a statement's end, a block's start and end).
_DROPPED_TOKENS = {tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER}
_LAYOUT_MARKS = {tokenize.NEWLINE: "\\n", tokenize.INDENT: "\\t", tokenize.DEDENT: "\\b"}
_FSTRING_START, _FSTRING_END = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)


def _normalized_source(source: str, tree: ast.Module) -> str:
    """The source as its tokens, one per line, without comments, docstrings, blank lines or layout; indentation
    and statement ends as marks. The same on every Python: an f-string is one token (its text), as Python 3.11
    reads it, although Python 3.12 splits it into parts; ``ast.dump`` (used before) gains fields between
    versions, so keys computed on 3.12 differed from 3.11's."""
    skipped, lines = _skipped_lines(tree), source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out: list[str] = []
    depth, fstring_at = 0, None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == _FSTRING_START:
            depth, fstring_at = depth + 1, fstring_at if depth else tok.start
            continue
        if depth:
            if tok.type == _FSTRING_END:
                depth -= 1
                if not depth:  # the whole f-string, as the 3.11 tokenizer gives it
                    text = source[starts[fstring_at[0] - 1] + fstring_at[1]:starts[tok.end[0] - 1] + tok.end[1]]
                    out.append(text)
            continue
        if tok.type in _DROPPED_TOKENS or tok.start[0] in skipped:
            continue
        out.append(_LAYOUT_MARKS.get(tok.type, tok.string))
    return "\n".join(out)


def fingerprint_sources(package_dir: Path = _PACKAGE_DIR, roots=FINGERPRINT_ROOTS) -> dict[str, str]:
    """Relative path -> normalized source of every module that training depends on."""
    todo = [package_dir / r for r in roots]
    seen: dict[str, str] = {}
    while todo:
        path = todo.pop()
        rel = path.relative_to(package_dir).as_posix()
        if rel in seen:
            continue
        source = path.read_text()
        tree = ast.parse(source, filename=str(path))
        here = path.parent.relative_to(package_dir).parts  # the package this module belongs to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and 0 < node.level <= len(here) + 1:
                base = list(here[:len(here) - (node.level - 1)])
                module = ".".join(base + ([node.module] if node.module else []))
                targets = [module] if node.module else []
                targets += [f"{module}.{a.name}" if module else a.name for a in node.names]
                for target in targets:
                    found = _module_file(package_dir, target)
                    if found is not None:
                        todo.append(found)
        seen[rel] = _normalized_source(source, tree)
    return dict(sorted(seen.items()))


@functools.lru_cache(maxsize=None)
def _fingerprint() -> str:
    h = hashlib.sha256()
    for rel, source in fingerprint_sources().items():
        h.update(rel.encode() + b"\0" + source.encode() + b"\0")
    return h.hexdigest()[:12]


def code_fingerprint() -> str:
    """Hash of the training-relevant sources (computed once per process). Tests may patch this."""
    return _fingerprint()


class ConfigError(ValueError):
    """Invalid configuration or parameter; the message names the problem."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _check_ratio(name: str, value: float) -> None:
    _check(0.0 <= value < 1.0, f"{name} must be in [0, 1), got {value}")


@dataclass(frozen=True)
class FDAConfig:
    """Four-digit addition: operands uniform in [1000, 9999], answer a + b as five digits."""

    n_train: int = 5000
    n_test: int = 1000
    noise_ratio: float = 0.1
    noise_kind: str = "random"  # one of rote.noise.NOISE_KINDS: "random" (primary), "digit"
    answer_order: str = "msb"  # "msb": most significant digit first; "lsb": reversed
    data_seed: int = 0
    noise_seed: int = 0

    def __post_init__(self):
        # A noise-free run has no noise kind (protocol 7.3): every FDA noise condition shares one
        # noise-free twin, so its noise_kind is canonicalized to the primary kind and the keys agree.
        if self.noise_ratio == 0 and self.noise_kind in kind_names():
            object.__setattr__(self, "noise_kind", primary_kind())
        _check(self.n_train >= 1, f"n_train must be >= 1, got {self.n_train}")
        _check(self.n_test >= 1, f"n_test must be >= 1, got {self.n_test}")
        _check(self.n_train + self.n_test <= 9000 * 9000 // 2,
               f"n_train + n_test = {self.n_train + self.n_test} is more than the distinct operand pairs allow")
        _check_ratio("noise_ratio", self.noise_ratio)
        _check(self.noise_kind in kind_names(), f"noise_kind must be {kinds_text()}, got {self.noise_kind!r}")
        _check(self.answer_order in ("msb", "lsb"), f"answer_order must be 'msb' or 'lsb', got {self.answer_order!r}")


@dataclass(frozen=True)
class THRConfig:
    """Two-hop relational reasoning over a random knowledge graph (after Wang et al. 2024)."""

    n_entities: int = 50
    n_relations: int = 25
    out_degree: int = 20
    phi: float = 19.0  # two-hop training facts per atomic fact
    n_test: int = 1000
    atomic_repeat: int = 3  # how often each atomic fact appears in the training stream
    noise_ratio: float = 0.1
    data_seed: int = 0
    noise_seed: int = 0

    @property
    def n_atomic(self) -> int:
        return self.n_entities * self.out_degree

    @property
    def n_two_hop(self) -> int:
        return self.n_entities * self.out_degree ** 2

    @property
    def n_train_two_hop(self) -> int:
        return round(self.phi * self.n_atomic)

    def __post_init__(self):
        _check(self.n_entities >= 2, f"n_entities must be >= 2, got {self.n_entities}")
        _check(self.n_relations >= 1, f"n_relations must be >= 1, got {self.n_relations}")
        _check(1 <= self.out_degree <= self.n_relations,
               f"out_degree must be in [1, n_relations={self.n_relations}], got {self.out_degree}")
        _check(self.phi > 0, f"phi must be > 0, got {self.phi}")
        _check(self.n_test >= 1, f"n_test must be >= 1, got {self.n_test}")
        _check(self.atomic_repeat >= 1, f"atomic_repeat must be >= 1, got {self.atomic_repeat}")
        _check_ratio("noise_ratio", self.noise_ratio)
        _check(self.n_train_two_hop + self.n_test <= self.n_two_hop,
               f"graph too small for the split: {self.n_entities} entities x out_degree {self.out_degree}^2 give "
               f"{self.n_two_hop} two-hop facts, but phi={self.phi} x {self.n_atomic} atomic facts "
               f"= {self.n_train_two_hop} training facts plus n_test={self.n_test} need "
               f"{self.n_train_two_hop + self.n_test}")


@dataclass(frozen=True)
class ModelConfig:
    n_layers: int = 2
    d_model: int = 128
    n_heads: int = 4
    model_seed: int = 0

    def __post_init__(self):
        _check(self.n_layers >= 1, f"n_layers must be >= 1, got {self.n_layers}")
        _check(self.d_model >= 1 and self.n_heads >= 1, "d_model and n_heads must be >= 1")
        _check(self.d_model % self.n_heads == 0,
               f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 4000
    batch_size: int = 256
    lr: float = 2e-3
    weight_decay: float = 0.1
    warmup_steps: int = 100
    lr_schedule: str = "cosine"  # "constant" after warmup, or "cosine" decay to min_lr_ratio * lr
    min_lr_ratio: float = 0.1
    eval_every: int = 50
    checkpoint_every: int = 500
    fit_eval_size: int = 2000  # fit is measured on this many clean training examples (0: all of them)
    # "fp32", or "bf16": bfloat16 autocast on the training forward pass only (evaluation stays fp32);
    # "auto" resolves when the run's configuration is built (RunConfig, precision_for its task).
    precision: str = AUTO_PRECISION

    def __post_init__(self):
        _check(self.steps >= 1, f"steps must be >= 1, got {self.steps}")
        _check(self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}")
        _check(self.lr > 0, f"lr must be > 0, got {self.lr}")
        _check(self.weight_decay >= 0, f"weight_decay must be >= 0, got {self.weight_decay}")
        _check(0 <= self.warmup_steps < self.steps, f"warmup_steps must be in [0, steps), got {self.warmup_steps}")
        _check(self.lr_schedule in ("constant", "cosine"),
               f"lr_schedule must be 'constant' or 'cosine', got {self.lr_schedule!r}")
        _check(0 <= self.min_lr_ratio <= 1, f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        _check(self.eval_every >= 1, f"eval_every must be >= 1, got {self.eval_every}")
        _check(self.checkpoint_every >= 1, f"checkpoint_every must be >= 1, got {self.checkpoint_every}")
        _check(self.fit_eval_size >= 0, f"fit_eval_size must be >= 0, got {self.fit_eval_size}")
        # "auto" stays until the run's task is known (RunConfig resolves it: precision_for)
        _check(self.precision in PRECISIONS + (AUTO_PRECISION,),
               f"precision must be 'fp32', 'bf16' or 'auto', got {self.precision!r}")

    def lr_at(self, step: int) -> float:
        """Learning rate for optimizer step ``step`` (0-based): linear warmup, then the schedule."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if self.lr_schedule == "constant":
            return self.lr
        progress = (step - self.warmup_steps) / max(1, self.steps - self.warmup_steps)
        cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * cosine)


DataConfig = typing.Union[FDAConfig, THRConfig]
DATA_CONFIGS: dict[str, type] = {"fda": FDAConfig, "thr": THRConfig}


@dataclass(frozen=True)
class RunConfig:
    task: str
    data: DataConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self):
        _check(self.task in TASKS, f"unknown task {self.task!r}; choose one of {', '.join(TASKS)}")
        _check(isinstance(self.data, DATA_CONFIGS[self.task]),
               f"task {self.task!r} needs a {DATA_CONFIGS[self.task].__name__}")
        if self.train.precision == AUTO_PRECISION:  # resolved here, so that the key holds the real precision
            object.__setattr__(self, "train", dataclasses.replace(self.train, precision=precision_for(self.task)))

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunConfig":
        _check(d.get("schema") == SCHEMA_VERSION, f"schema {d.get('schema')} != {SCHEMA_VERSION}")
        task = d["task"]
        _check(task in TASKS, f"unknown task {task!r}")
        return cls(task=task, data=DATA_CONFIGS[task](**d["data"]), model=ModelConfig(**d["model"]),
                   train=TrainConfig(**d["train"]))

    @property
    def key(self) -> str:
        """Content hash of the full configuration, the schema version and the code fingerprint."""
        blob = json.dumps({**self.to_dict(), "code": code_fingerprint()}, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def seeds(self) -> dict[str, int]:
        return {"data_seed": self.data.data_seed, "noise_seed": self.data.noise_seed,
                "model_seed": self.model.model_seed}

    def flat(self) -> dict[str, Any]:
        """All parameters in one flat dict (the names that overrides use)."""
        return {**dataclasses.asdict(self.data), **dataclasses.asdict(self.model), **dataclasses.asdict(self.train)}

    def replace(self, **overrides: Any) -> "RunConfig":
        """A copy with flat-named fields replaced (validated)."""
        return _apply(self, overrides)


# -- profiles ----------------------------------------------------------------------------------
# Flat overrides of the dataclass defaults, measured on the 2-core machine (torch 2.13 CPU).
#   quick/fda: 5,000 examples never reached gen 0.9 with this model (peak 0.89); 10,000 examples
#     reach gen 0.98 before memorizing. Steps 7,000 (protocol 12.3, stop 44): at 5,000 FDA `random` was still
#     memorizing at the last step on 3 of 4 seeds; at 7,000 its mem rose at most 0.013 over the last 1,000 steps
#     on seeds 0-4.
#   quick/thr: the starting point of shared/replication/calibration.md carried over unchanged.
# Screens, curves and timings: book/calibration.md and benchmarks/RESULTS.md.
PROFILE_PARAMS: dict[str, dict[str, dict[str, Any]]] = {
    "smoke": {  # seconds per task; no claim is expected to hold
        "fda": dict(n_train=400, n_test=100, n_layers=1, d_model=32, n_heads=2, steps=60, batch_size=64,
                    warmup_steps=10, eval_every=10, checkpoint_every=30),
        "thr": dict(n_entities=20, n_relations=8, out_degree=4, phi=2.0, n_test=50, n_layers=1, d_model=32,
                    n_heads=2, steps=60, batch_size=64, warmup_steps=10, eval_every=10, checkpoint_every=30),
    },
    "quick": {  # minutes on a 2-core CPU; every claim is evaluated and expected to hold
        "fda": dict(n_train=10000, n_test=1000, n_layers=2, d_model=128, n_heads=4, steps=7000, batch_size=256,
                    lr=2e-3, weight_decay=0.1, warmup_steps=100, lr_schedule="cosine", eval_every=50,
                    checkpoint_every=500),
        "thr": dict(n_entities=50, n_relations=25, out_degree=20, phi=19.0, n_test=1000, atomic_repeat=3,
                    n_layers=4, d_model=128, n_heads=4, steps=4000, batch_size=512, lr=2e-3, weight_decay=0.3,
                    warmup_steps=200, lr_schedule="cosine", eval_every=50, checkpoint_every=500),
    },
    "paper": {  # our guess at a GPU-scale configuration (the paper's sizes are unknown); not run on CPU
        "fda": dict(n_train=50000, n_test=5000, n_layers=4, d_model=256, n_heads=8, steps=30000, batch_size=512,
                    lr=1e-3, weight_decay=0.1, warmup_steps=500, lr_schedule="cosine", eval_every=300,
                    checkpoint_every=3000),
        "thr": dict(n_entities=200, n_relations=40, out_degree=20, phi=18.0, n_test=3000, atomic_repeat=3,
                    n_layers=8, d_model=384, n_heads=6, steps=30000, batch_size=512, lr=1e-3, weight_decay=0.3,
                    warmup_steps=1000, lr_schedule="cosine", eval_every=300, checkpoint_every=3000),
    },
}


def _fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def param_names(task: str) -> list[str]:
    _check(task in TASKS, f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    return [*_fields(DATA_CONFIGS[task]), *_fields(ModelConfig), *_fields(TrainConfig)]


def _convert(name: str, value: Any, target: Any) -> Any:
    """Convert ``value`` (possibly a command-line string) to the field's type, or fail clearly."""
    kind = {"int": int, "float": float, "str": str, "bool": bool}.get(target, target)
    if isinstance(value, str) and kind is not str:
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(f"parameter {name} expects {kind.__name__}, got {value!r}") from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"parameter {name} expects {kind.__name__}, got {value!r}")
    return value


def _apply(config: RunConfig, overrides: Mapping[str, Any]) -> RunConfig:
    parts = {"data": config.data, "model": config.model, "train": config.train}
    changes: dict[str, dict[str, Any]] = {k: {} for k in parts}
    for name, value in overrides.items():
        for part, obj in parts.items():
            fields = _fields(type(obj))
            if name in fields:
                changes[part][name] = _convert(name, value, fields[name].type)
                break
        else:
            raise ConfigError(f"unknown parameter {name!r} for task {config.task!r}; "
                              f"known: {', '.join(param_names(config.task))}")
    return RunConfig(task=config.task, **{p: dataclasses.replace(obj, **changes[p]) for p, obj in parts.items()})


def make_config(task: str, profile: str = "quick", **overrides: Any) -> RunConfig:
    """The profile's configuration for ``task`` with flat-named ``overrides`` applied."""
    _check(task in TASKS, f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    _check(profile in PROFILES, f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    base = _apply(RunConfig(task=task, data=DATA_CONFIGS[task]()), {})
    # The profile and the overrides are applied together, so validation sees the final values only.
    return _apply(base, {**PROFILE_PARAMS[profile][task], **overrides})

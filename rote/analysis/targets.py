"""The intermediate results of each task, as labels that probes, erasure and attributions read.

Each :class:`Target` holds the class of every example (``labels``), ``n_classes``, the model input
``position`` where the result is expected (below), and ``differs``: None, or for the true answer
(digits, tail) the examples whose noisy label disagrees with it at that token, which is where
reading the true answer inside a model that outputs the noisy label means something. Labels come
from the examples' ``info`` (operands, bridge) and ``true_label``, never from the model.

Position conventions
--------------------
Every analysis feeds the model ``examples.sequences("label")[:, :-1]``: the prompt followed by all
answer tokens but the last (teacher forcing on the trained label, as in training; for a memorized
example this is exactly what the model itself generates). Position p of this input predicts the
token at p + 1.

FDA. The prompt ``1234+5678=`` is 10 tokens: positions 0-3 are the digits of a (most significant
first), 4 is ``+``, 5-8 the digits of b, 9 is ``=``. Answer token j (j = 0..4, in answer order) is
predicted at position 9 + j. With ``data.meta["answer_order"] == "msb"`` answer token j is the
digit of column 4 - j (column i = the 10^i place; column 4 is the final carry); with ``"lsb"`` the
answer is reversed and answer token j is the digit of column j.

- ``carry_i`` (i = 0..3): carry out of column i (units column first), 2 classes, at the position
  that predicts the digit of column i + 1 (the first place the carry is needed).
- ``carry_pattern``: the four carries as one 16-class label c0 + 2 c1 + 4 c2 + 8 c3, at position 9
  (``=``): with msb order the first answer digit already depends on every carry.
- ``colsum_i`` (i = 0..3): a_i + b_i, 19 classes, at the position that predicts column i's digit.
- ``digit_j`` (j = 0..4): the true answer token j (answer order), 10 classes, at position 9 + j;
  ``differs`` marks label[:, j] != true_label[:, j].

THR. The prompt ``h r1 r2`` is 3 tokens; the single answer token (the tail) is predicted at
position 2.

- ``bridge``: the bridge entity b = f(h, r1), ``n_entities`` classes, at position 1 (r1).
- ``tail``: the true tail entity, ``n_entities`` classes, at position 2; ``differs`` = is_noisy.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..tasks import Examples, TaskData
from ..tasks import fda as fda_task

FDA_PROMPT_LEN = 10  # "1234+5678="
FDA_EQUALS = 9  # position of "="
THR_R1, THR_LAST = 1, 2
# C2's probe sweep (chapter 03's default ``extra_positions``): every THR target is also read at r1 and r2
EXTRA_PROBE_POSITIONS = {"thr": [THR_R1, THR_LAST]}


class Target(NamedTuple):
    labels: torch.Tensor  # [N] long
    n_classes: int
    position: int
    differs: torch.Tensor | None = None  # [N] bool, only for the true answer


def fda_answer_index(column: int, order: str) -> int:
    """The answer token index (0..4) that holds the digit of ``column`` (0 = units, 4 = 10^4)."""
    return 4 - column if order == "msb" else column


def fda_targets(examples: Examples, order: str) -> dict[str, Target]:
    a, b = examples.info["a"], examples.info["b"]
    carries = fda_task.carries(a, b)  # [N, 4], units column first
    sums = fda_task.column_sums(a, b)
    out: dict[str, Target] = {}
    for i in range(4):
        out[f"carry_{i}"] = Target(carries[:, i], 2, FDA_EQUALS + fda_answer_index(i + 1, order))
    out["carry_pattern"] = Target((carries * torch.tensor([1, 2, 4, 8])).sum(1), 16, FDA_EQUALS)
    for i in range(4):
        out[f"colsum_{i}"] = Target(sums[:, i], 19, FDA_EQUALS + fda_answer_index(i, order))
    for j in range(fda_task.ANSWER_LEN):
        out[f"digit_{j}"] = Target(examples.true_label[:, j].clone(), 10, FDA_EQUALS + j,
                                   examples.label[:, j] != examples.true_label[:, j])
    return out


def thr_targets(examples: Examples, n_entities: int) -> dict[str, Target]:
    return {
        "bridge": Target(examples.info["bridge"].clone(), n_entities, THR_R1),
        "tail": Target(examples.true_label[:, 0].clone(), n_entities, THR_LAST, examples.is_noisy),
    }


def intermediate_targets(examples: Examples, data: TaskData) -> dict[str, Target]:
    """Every intermediate result of ``data.task`` for ``examples`` (a split of ``data``)."""
    if data.task == "fda":
        return fda_targets(examples, data.meta.get("answer_order", "msb"))
    if data.task == "thr":
        return thr_targets(examples, int(data.meta["graph"].shape[0]))
    raise ValueError(f"unknown task {data.task!r}")


def joint_targets(task: str) -> dict[str, list[str]]:
    """Results read by several targets at once (each at its own position, one layer): an example counts only
    when every member is right (FDA ``carries``; chance: the most frequent carry pattern)."""
    return {"carries": [f"carry_{i}" for i in range(4)]} if task == "fda" else {}


def headline_targets(task: str) -> dict[str, list[str]]:
    """The results C2 checks (section 5), each a group of pooled targets: FDA carries and answer digits,
    THR bridge and true tail."""
    if task == "fda":
        return {"carries": ["carries"], "answer digits": [f"digit_{j}" for j in range(fda_task.ANSWER_LEN)]}
    if task == "thr":
        return {"bridge": ["bridge"], "true tail": ["tail"]}
    raise ValueError(f"unknown task {task!r}")


def probe_positions(task: str, extra: dict | None = None) -> tuple[int, ...]:
    """The positions C2's sweep reads every target at besides its own: ``extra``'s, plus r2 for THR (7.4)."""
    extra = EXTRA_PROBE_POSITIONS if extra is None else extra
    return tuple(sorted(set(extra.get(task, [])) | ({THR_LAST} if task == "thr" else set())))


def masked_class(target: Target, examples: Examples, answer_index: int = 0, seed: int = 0) -> torch.Tensor:
    """The class a masked read of ``target`` hides (7.4): a noisy example's trained label at
    ``answer_index``, a clean one's a random wrong class. [N] long."""
    labels, k = target.labels, target.n_classes
    gen = torch.Generator().manual_seed(seed)
    draw = torch.randint(0, k - 1, (len(labels),), generator=gen)
    wrong = draw + (draw >= labels).long()  # uniform over the k - 1 classes other than the true one
    trained = examples.label[:, answer_index]
    return torch.where(trained != labels, trained, wrong)

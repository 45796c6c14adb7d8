"""Stacked training (rote.stack): the same math as solo training, the same numbers twice, each run of a
stack stored, resumed and verified on its own."""

import json

import pandas as pd
import pytest
import torch

from rote.config import make_config
from rote.runs import get_or_train, lookup, status, verify
from rote.stack import StackedAdamW, get_or_train_stack, group_stacks, shape_of, train_stack
from rote.tasks import build_task
from rote.train import train


class Interrupt(Exception):
    pass


def _smoke(seed: int, **overrides):
    return make_config("fda", "smoke", model_seed=seed, steps=40, eval_every=10, checkpoint_every=20, **overrides)


CONFIGS = [_smoke(0), _smoke(1), _smoke(2, noise_kind="digit", lr=3e-3)]


@pytest.fixture(scope="module")
def stacked():
    datas = [build_task(c) for c in CONFIGS]
    return train_stack(CONFIGS, datas, device="cpu"), datas


def _frame(rows):
    return pd.DataFrame(rows).drop(columns="seconds")


def test_a_stack_follows_its_runs_solo(stacked):
    """Each run of a stack takes the steps its solo twin takes: the same batches, schedule and update, so
    the train losses agree closely over the first steps (they are not bit-equal: reductions differ)."""
    trained, datas = stacked
    for config, data, (_, rows) in zip(CONFIGS, datas, trained):
        _, solo = train(config, data, device="cpu", progress=False)
        assert [r["step"] for r in rows] == [r["step"] for r in solo]
        assert [r["lr"] for r in rows] == [r["lr"] for r in solo]
        diff = (_frame(rows)["train_loss"] - _frame(solo)["train_loss"]).abs().dropna()
        assert len(diff) == 4 and diff.max() < 1e-4, diff.tolist()


def test_a_stack_gives_the_same_numbers_twice(stacked):
    trained, datas = stacked
    again = train_stack(CONFIGS, datas, device="cpu")
    for (model, rows), (model2, rows2) in zip(trained, again):
        pd.testing.assert_frame_equal(_frame(rows), _frame(rows2), check_exact=True)
        for name, tensor in model.state_dict().items():
            assert torch.equal(tensor, model2.state_dict()[name]), name


def test_a_runs_numbers_do_not_depend_on_its_stack_mates(stacked):
    """On the CPU a run trained in a stack of one or of two equals the same run in the stack of three."""
    trained, datas = stacked
    for size in (1, 2):
        alone = train_stack(CONFIGS[:size], datas[:size], device="cpu")
        for (_, rows), (_, rows_in_three) in zip(alone, trained):
            pd.testing.assert_frame_equal(_frame(rows), _frame(rows_in_three), check_exact=True)


def test_runs_of_other_shapes_do_not_stack():
    with pytest.raises(ValueError, match="one shape"):
        train_stack([CONFIGS[0], _smoke(1, batch_size=32)], [build_task(CONFIGS[0])] * 2)


def test_stacked_adamw_is_torch_adamw_per_run():
    """One update of the stacked AdamW equals torch.optim.AdamW's on each run, with its own lr and decay."""
    configs = [_smoke(0, lr=1e-3, weight_decay=0.1), _smoke(1, lr=5e-3, weight_decay=0.3)]
    data = build_task(configs[0])
    from rote.stack import Member, Stack

    members = [Member.start(c, data, torch.device("cpu"), None) for c in configs]
    stack = Stack(members, torch.device("cpu"))
    optimizer = StackedAdamW(stack, members, 0)
    for _ in range(2):
        grads = torch.randn_like(stack.flat)
        for index, member in enumerate(members):
            for name, view in stack.layout.views(grads[index]).items():
                member.model.get_parameter(name).grad = view.clone()
            for group in member.optimizer.param_groups:
                group["lr"] = member.config.train.lr
            member.optimizer.step()
        stack.flat.grad = grads
        optimizer.step(torch.tensor([c.train.lr for c in configs]))
    for index, member in enumerate(members):
        params = stack.layout.views(stack.flat.detach()[index])
        for name, param in member.model.named_parameters():
            torch.testing.assert_close(params[name], param.detach(), rtol=1e-5, atol=1e-7)


def test_group_stacks_by_shape_and_split_for_workers():
    fda = [_smoke(s) for s in range(4)]
    other = _smoke(0, batch_size=32)
    assert group_stacks(fda + [other]) == [fda, [other]]
    assert shape_of(_smoke(0, lr=1e-3, weight_decay=0.3)) == shape_of(fda[0])  # rates differ inside a stack
    assert group_stacks(fda + [other], slots=3) == [fda[:2], fda[2:], [other]]
    assert group_stacks(fda[:1], slots=4) == [fda[:1]]


def test_each_run_of_a_stack_is_stored_on_its_own(tmp_path):
    runs = get_or_train_stack(CONFIGS, root=tmp_path, device="cpu")
    assert [r.cached for r in runs] == [False] * 3
    for run, config in zip(runs, CONFIGS):
        verify(run.path, config)
        manifest = json.loads((run.path / "manifest.json").read_text())
        assert (manifest["stacked"], manifest["device"], manifest["precision"]) == (3, "cpu", "fp32")
        assert run.checkpoint_steps == [20, 40]
    assert [r.cached for r in get_or_train_stack(CONFIGS, root=tmp_path)] == [True] * 3
    solo = get_or_train(_smoke(5), root=tmp_path, progress=False)
    assert json.loads((solo.path / "manifest.json").read_text())["stacked"] == 1


def _interrupted(tmp_path, stop_run: int, stop_step: int):
    def stop(config, step):
        if config == CONFIGS[stop_run] and step == stop_step:
            raise Interrupt

    with pytest.raises(Interrupt):
        get_or_train_stack(CONFIGS, root=tmp_path, device="cpu", on_checkpoint=stop)


def test_an_interrupted_stack_resumes_each_run_from_its_checkpoint(tmp_path, stacked, capsys):
    """Stopped when all runs had checkpointed step 20: the stack resumes from 20, its numbers those of the
    stack that never stopped."""
    _interrupted(tmp_path, stop_run=2, stop_step=20)
    assert [status(c, tmp_path) for c in CONFIGS] == ["partial 20"] * 3
    resumed = get_or_train_stack(CONFIGS, root=tmp_path, device="cpu")
    assert capsys.readouterr().err.count("resuming") == 3
    for run, (_, rows) in zip(resumed, stacked[0]):
        pd.testing.assert_frame_equal(run.metrics.drop(columns="seconds"), _frame(rows), check_exact=True)


def test_a_stack_stopped_between_runs_resumes_by_step(tmp_path, stacked):
    """Stopped after run 0 had checkpointed step 20 and before the others: run 0 resumes from 20 and the
    others train from 0, each group a stack of its own; each run is stored and follows the unbroken stack."""
    _interrupted(tmp_path, stop_run=0, stop_step=20)
    assert [status(c, tmp_path) for c in CONFIGS] == ["partial 20", "missing", "missing"]
    resumed = get_or_train_stack(CONFIGS, root=tmp_path, device="cpu")
    for run, config, (_, rows) in zip(resumed, CONFIGS, stacked[0]):
        assert lookup(config, tmp_path) is not None
        assert json.loads((run.path / "manifest.json").read_text())["stacked"] == (1 if config == CONFIGS[0] else 2)
        diff = (run.metrics["train_loss"] - _frame(rows)["train_loss"]).abs().dropna()
        assert diff.max() < 1e-5


def test_a_stacked_checkpoint_resumes_solo(tmp_path, stacked):
    """The resume state of a stacked run is the solo format: the run finishes alone, from step 20."""
    _interrupted(tmp_path, stop_run=2, stop_step=20)
    steps = []
    run = get_or_train(CONFIGS[1], root=tmp_path, progress=False, on_checkpoint=steps.append)
    assert steps == [40]
    diff = (run.metrics["train_loss"] - _frame(stacked[0][1][1])["train_loss"]).abs().dropna()
    assert diff.max() < 1e-4



@pytest.mark.parametrize("task", ["fda", "thr"])
def test_the_batched_evaluation_of_a_stack_is_each_runs_evaluation(task):
    """evaluate_stack (a stack's evaluation on CUDA) gives each run's rote.train.evaluate numbers: the same
    shares, the test loss to float rounding; planted with a noise-free twin (no noisy rows) in the stack."""
    from rote.stack import Member, Stack, evaluate_stack
    from rote.train import evaluate

    configs = [make_config(task, "smoke", model_seed=0), make_config(task, "smoke", model_seed=1, noise_ratio=0.0)]
    datas = [build_task(c) for c in configs]
    trained = train_stack(configs, datas, device="cpu")  # trained a little: not every answer wrong
    members = [Member.start(c, d, torch.device("cpu"), None) for c, d in zip(configs, datas)]
    for member, (model, _) in zip(members, trained):
        member.model.load_state_dict(model.state_dict())
    for member, batched in zip(members, evaluate_stack(Stack(members, torch.device("cpu")))):
        solo = evaluate(member.model, member.data, member.config.train.fit_eval_size)
        assert batched.keys() == solo.keys()
        for key in solo:
            if key == "test_loss":
                assert abs(batched[key] - solo[key]) < 1e-5
            else:
                assert batched[key] == solo[key] or (batched[key] != batched[key] and solo[key] != solo[key]), key


def test_a_stack_evaluated_in_one_pass_logs_the_same_rows(stacked, monkeypatch):
    """The training loop with the batched evaluation (CUDA's, forced on the CPU here) logs each run's rows as
    the run-by-run evaluation does: the same shares, the same losses, the test loss to float rounding."""
    import rote.stack as stack_module

    trained, datas = stacked
    monkeypatch.setattr(stack_module, "BATCHED_EVALUATION", ("cpu",))
    for (_, rows), (_, batched_rows) in zip(trained, train_stack(CONFIGS, datas, device="cpu")):
        ours, theirs = _frame(batched_rows), _frame(rows)
        pd.testing.assert_frame_equal(ours.drop(columns="test_loss"), theirs.drop(columns="test_loss"),
                                      check_exact=True)
        assert (ours["test_loss"] - theirs["test_loss"]).abs().max() < 1e-5

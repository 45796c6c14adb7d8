import io
import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch

import rote.train as train_module
from rote import scoring
from rote.config import make_config
from rote.model import HookedTransformer, ModelShape
from rote.runs import get_or_train, lookup, verify
from rote.tasks import Examples, build_task
from rote.train import METRICS, accuracy, evaluate, exact_match, first_step, train


class Interrupt(Exception):
    pass


def test_smoke_training_lowers_loss_and_logs_metrics(smoke_runs):
    for task, run in smoke_runs.items():
        m = run.metrics
        for column in ("step", "lr", "train_loss", "test_loss", "seconds", *METRICS):
            assert column in m, column
        assert m["step"].iloc[0] == 0 and m["step"].iloc[-1] == run.config.train.steps
        assert len(m) == run.config.train.steps // run.config.train.eval_every + 1
        assert m["test_loss"].iloc[-1] < m["test_loss"].iloc[0], task
        assert m["train_loss"].iloc[-1] < m["train_loss"].iloc[1], task
        tc = run.config.train
        assert m["lr"].tolist() == [tc.lr_at(max(int(step) - 1, 0)) for step in m["step"]]


def test_logged_metrics_are_the_checkpoints_evaluated(smoke_runs):
    """Each logged row is the evaluation of the model at that step: re-evaluating the stored
    checkpoint gives the same accuracies, and each is a count of examples over the split size."""
    for task, run in smoke_runs.items():
        data, tc = run.data, run.config.train
        sizes = {"gen": len(data.test), "fit": min(tc.fit_eval_size or len(data.train_clean), len(data.train_clean)),
                 "mem": len(data.train_noisy), "rec": len(data.train_noisy)}
        assert len(run.checkpoint_steps) >= 2 and min(sizes.values()) > 0
        threads = torch.get_num_threads()
        torch.set_num_threads(train_module.TRAIN_THREADS)  # evaluate as training did
        try:
            for step in run.checkpoint_steps:
                row = run.metrics.set_index("step").loc[step]
                again = evaluate(run.load_model(step, device="cpu"), data, tc.fit_eval_size)
                for k in METRICS:
                    assert again[k] == row[k], (task, step, k)
                    assert row[k] == round(row[k] * sizes[k]) / sizes[k], (task, step, k)  # count / size
                assert again["test_loss"] == pytest.approx(row["test_loss"], rel=1e-6)
        finally:
            torch.set_num_threads(threads)


def test_teacher_forced_exact_match_equals_greedy_decoding(smoke_runs):
    for run in smoke_runs.values():
        model, data = run.model, run.data
        examples = data.train[:200]
        generated = model.generate(examples.prompt, data.answer_len)
        assert torch.equal((generated == examples.label).all(1), exact_match(model, examples, "label"))
        assert torch.equal((generated == examples.true_label).all(1), exact_match(model, examples, "true_label"))


def test_final_metrics_match_stored_model(smoke_runs):
    run = smoke_runs["thr"]
    again = evaluate(run.model, run.data)
    for k in METRICS:
        assert again[k] == pytest.approx(run.final[k], abs=1e-6)


def test_evaluation_equals_the_full_pass_with_one_pass_per_answer(smoke_runs):
    """evaluate() reads the last block at the answer positions only and scores mem and rec in one pass
    where their inputs agree (THR); a no-op hook forces full passes, and rec is scored on its own."""
    for run in smoke_runs.values():
        model, data = run.model, run.data
        fast = evaluate(model, data, 100)
        noop = [(model.hook_name("resid_post", 0), lambda act, point: None)]
        with model.hooks(noop):
            full = evaluate(model, data, 100)
            rec_alone = scoring.accuracy(model, data.train_noisy, "true_label", hooks=noop)
            full_logits = scoring.answer_logits(model, data.test, "true_label")
        assert fast == full  # test_loss too, a float that any change in a logit would move
        assert fast["rec"] == rec_alone
        assert torch.allclose(scoring.answer_logits(model, data.test, "true_label"), full_logits, atol=1e-6)


# The final losses of the smoke runs on fp32 (given explicitly: the default precision depends on the
# hardware), one intra-op thread, torch 2.13 CPU. If this test fails, what training produces changed
# (data, initialization, model, optimizer, schedule, loss): right only on purpose, and then the code
# fingerprint has already retired the old runs; put the new values here. The tolerance is tight on
# purpose: 60 smoke steps move the loss little (weight decay 0.09 for 0.1 shifts it by 3e-5, bf16 by
# 3.5e-6, relative), while fp32 on one thread repeats to the last bit on one machine.
PINNED_SMOKE_LOSSES = {"fda": {"test_loss": 2.0295324325561523, "train_loss": 2.0186899423599245},
                       "thr": {"test_loss": 2.7883293628692627, "train_loss": 2.5341052532196047}}


@pytest.mark.parametrize("task", ["fda", "thr"])
def test_smoke_final_loss_is_pinned(tmp_path, task):
    run = get_or_train(make_config(task, "smoke", precision="fp32"), root=tmp_path, progress=False, device="cpu")
    assert run.config.train.precision == "fp32"
    for column, value in PINNED_SMOKE_LOSSES[task].items():
        assert run.final[column] == pytest.approx(value, rel=1e-6), column


def test_first_step():
    m = pd.DataFrame({"step": [0, 10, 20, 30], "gen": [0.1, 0.95, 0.5, 0.99]})
    assert first_step(m, "gen", 0.9) == 10 and first_step(m, "gen", 0.999) is None


def test_cache_hit_and_miss(tmp_path):
    cfg = make_config("fda", "smoke", steps=20, eval_every=10)
    first = get_or_train(cfg, root=tmp_path, progress=False)
    assert not first.cached
    second = get_or_train(cfg, root=tmp_path, progress=False)
    assert second.cached and second.path == first.path
    pd.testing.assert_frame_equal(first.metrics, second.metrics)
    assert torch.equal(first.model.unembed.weight, second.model.unembed.weight)
    other = get_or_train(cfg.replace(noise_ratio=0.2), root=tmp_path, progress=False)
    assert not other.cached and other.path != first.path
    # checkpoints are plain dicts of tensors
    ckpt = torch.load(first.path / "checkpoints" / "step_000020.pt", weights_only=True)
    assert set(ckpt) == {"shape", "state_dict"}
    assert first.checkpoint_steps == [20]


@pytest.mark.parametrize("damage", ["flip", "delete", "manifest"])
def test_corrupted_entry_is_detected_moved_aside_and_retrained(tmp_path, capsys, damage):
    cfg = make_config("thr", "smoke", steps=20, eval_every=10)
    run = get_or_train(cfg, root=tmp_path, progress=False)
    target = run.path / "final.pt"
    if damage == "flip":
        blob = bytearray(target.read_bytes())
        blob[len(blob) // 2] ^= 0xFF
        target.write_bytes(bytes(blob))
    elif damage == "delete":
        target.unlink()
    else:
        (run.path / "manifest.json").write_text("{not json")
    assert lookup(cfg, root=tmp_path) is None
    assert "damaged" in capsys.readouterr().err
    assert len(list((tmp_path / ".corrupt").iterdir())) == 1  # kept, not deleted
    again = get_or_train(cfg, root=tmp_path, progress=False)
    assert not again.cached
    verify(again.path, cfg)


def _interrupted_at_step_20(cfg, tmp_path):
    """Train ``cfg`` uninterrupted into tmp_path/ref (returned), then into tmp_path, stopped at step 20."""
    reference = get_or_train(cfg, root=tmp_path / "ref", progress=False)

    def stop_at_20(step):
        if step == 20:
            raise Interrupt

    with pytest.raises(Interrupt):
        get_or_train(cfg, root=tmp_path, progress=False, on_checkpoint=stop_at_20)
    return reference


def test_interrupted_training_resumes(tmp_path, capsys):
    cfg = make_config("fda", "smoke", steps=40, eval_every=10, checkpoint_every=10)
    reference = _interrupted_at_step_20(cfg, tmp_path)
    assert lookup(cfg, root=tmp_path) is None  # no half entry under the key
    assert (tmp_path / ".partial" / f"fda-{cfg.key}" / "resume.pt").exists()
    resumed = get_or_train(cfg, root=tmp_path, progress=False)
    assert "resuming" in capsys.readouterr().err and not resumed.cached
    pd.testing.assert_frame_equal(resumed.metrics.drop(columns="seconds"), reference.metrics.drop(columns="seconds"),
                                  check_exact=True)
    _assert_same_tensors(resumed.model.state_dict(), reference.model.state_dict(), "model")
    assert not (tmp_path / ".partial" / f"fda-{cfg.key}").exists()


def test_damaged_resume_state_falls_back_to_training_from_scratch(tmp_path, capsys):
    """A truncated resume.pt (a crash mid-write on a filesystem without atomic rename, a bad disk) is
    reported and ignored: the run trains from step 0 and equals an uninterrupted one."""
    cfg = make_config("fda", "smoke", steps=40, eval_every=10, checkpoint_every=10)
    reference = _interrupted_at_step_20(cfg, tmp_path)
    resume = tmp_path / ".partial" / f"fda-{cfg.key}" / "resume.pt"
    resume.write_bytes(resume.read_bytes()[:100])
    capsys.readouterr()
    steps = []
    again = get_or_train(cfg, root=tmp_path, progress=False, on_checkpoint=steps.append)
    err = capsys.readouterr().err
    assert "unreadable" in err and "training from scratch" in err and "resuming" not in err
    assert steps == [10, 20, 30, 40]  # from the start, not from step 20
    pd.testing.assert_frame_equal(again.metrics.drop(columns="seconds"), reference.metrics.drop(columns="seconds"),
                                  check_exact=True)
    _assert_same_tensors(again.model.state_dict(), reference.model.state_dict(), "model")
    verify(again.path, cfg)


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGKILL, -9), (signal.SIGTERM, 130)])
def test_killed_process_leaves_no_entry(tmp_path, sig, code):
    """A training process killed mid-run leaves only the .partial folder; the key stays empty. SIGTERM
    (a scheduler's or CI's timeout) stops it like Ctrl-C: exit code 130 and a resumable run."""
    env = {**os.environ, "ROTE_RUNS": str(tmp_path)}
    cmd = [sys.executable, "-m", "rote", "train", "--task", "fda", "--profile", "smoke", "--quiet",
           "-p", "steps", "100000", "-p", "checkpoint_every", "20"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    partial = tmp_path / ".partial"
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not list(partial.glob("*/checkpoints/step_000040.pt")):
            time.sleep(0.2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:  # never leave a 100,000-step training behind
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    if sig == signal.SIGTERM:
        assert "interrupted" in err and "Traceback" not in err
    assert list(partial.glob("*/resume.pt"))
    assert [p for p in tmp_path.iterdir() if p.name.startswith("fda-")] == []


def run_cli(*args, env_root):
    env = {**os.environ, "ROTE_RUNS": str(env_root)}
    return subprocess.run([sys.executable, "-m", "rote", *args], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("args, message", [
    (["train", "--task", "xyz"], "unknown task"),
    (["train", "--task", "fda", "--profile", "huge"], "unknown profile"),
    (["train", "--task", "fda", "-p", "colour", "red"], "unknown parameter 'colour'"),
    (["train", "--task", "fda", "-p", "n_train", "lots"], "expects int"),
    (["train", "--task", "fda", "-p", "noise_ratio", "1.5"], "noise_ratio must be in [0, 1)"),
    (["train", "--task", "thr", "-p", "n_entities", "10"], "graph too small"),
    (["train"], "required"),
    (["train", "--task", "fda", "-p", "steps", "10", "-p", "steps", "20"], "parameter steps given twice"),
])
def test_cli_errors(tmp_path, args, message):
    result = run_cli(*args, env_root=tmp_path / "runs")
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "runs").exists()


def test_cli_train_prints_json(tmp_path):
    result = run_cli("train", "--task", "thr", "--profile", "smoke", "--quiet", "-p", "steps", "20",
                     env_root=tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    for key in ("gen", "fit", "mem", "rec", "t_gen", "t_mem", "steps", "cached", "run_dir"):
        assert key in out
    assert out["steps"] == 20 and out["cached"] is False
    again = json.loads(run_cli("train", "--task", "thr", "--profile", "smoke", "--quiet", "-p", "steps", "20",
                               env_root=tmp_path).stdout)
    assert again["cached"] is True and again["run_dir"] == out["run_dir"]


def constant_model(token: int, vocab_size: int = 13, n_ctx: int = 14) -> HookedTransformer:
    """A network that predicts ``token`` at every position: the final LayerNorm's weight is zero,
    so its output is its bias, which the unembedding reads as ``token`` only."""
    model = HookedTransformer(ModelShape(n_layers=1, d_model=16, n_heads=2, vocab_size=vocab_size, n_ctx=n_ctx))
    with torch.no_grad():
        model.ln_final.weight.zero_()
        model.ln_final.bias.copy_(torch.eye(16)[0])
        model.unembed.weight.zero_()
        model.unembed.weight[token, 0] = 1.0
    return model.eval()


def test_accuracy_is_an_exact_fraction():
    """900 exact answers of 1000 score exactly 0.9 (a float32 mean gives 0.8999..., which misses a
    0.9 threshold); an answer with one wrong digit of five is a miss; 1000 rows span two batches."""
    model = constant_model(7)
    n, answer_len = 1000, 5
    prompt = torch.randint(0, 10, (n, 10), generator=torch.Generator().manual_seed(0))
    label = torch.full((n, answer_len), 7)
    wrong = torch.arange(0, n, 10)  # every tenth example: 100 misses, one digit off each
    label[wrong, torch.arange(len(wrong)) % answer_len] = 3
    examples = Examples(prompt, label, torch.full((n, answer_len), 7))
    assert torch.equal(model.generate(prompt[:3], answer_len), torch.full((3, answer_len), 7))
    assert exact_match(model, examples, "label").sum().item() == 900
    assert accuracy(model, examples, "label") == 0.9
    assert accuracy(model, examples, "true_label") == 1.0
    assert accuracy(model, examples[wrong], "label") == 0.0


# -- resuming --------------------------------------------------------------------------------------


def _stored(model, optimizer, step, metrics, loss_window) -> dict:
    """The resume state as rote.runs stores resume.pt, through a torch.save/load round trip."""
    state = {"model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
             "optimizer": optimizer.state_dict(), "step": step, "metrics": metrics, "loss_window": list(loss_window)}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, map_location="cpu", weights_only=True)


def _train_recording(cfg, data, *, stop_at=None, resume=None):
    """Train; return the state at the last step (model, optimizer) and at ``stop_at`` if given."""
    states = {}

    def checkpoint(step, model, optimizer, metrics, loss_window):
        states[step] = _stored(model, optimizer, step, metrics, loss_window)
        if step == stop_at:
            raise Interrupt

    try:
        _, metrics = train(cfg, data, device="cpu", resume=resume, on_checkpoint=checkpoint, progress=False)
    except Interrupt:
        return states[stop_at], None
    return states[cfg.train.steps], metrics


def _assert_same_tensors(a, b, where=""):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same_tensors(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same_tensors(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


RESUME_CASES = [  # (checkpoint_every, stop at): at an evaluation step, and between evaluations
    pytest.param(10, 20, id="stop-at-eval-step"),
    pytest.param(15, 15, id="stop-between-evals"),
]


@pytest.fixture(scope="module")
def resume_runs():
    """FDA smoke runs of 40 steps (eval every 10): uninterrupted, and stopped then resumed."""
    out = {}
    for checkpoint_every, stop_at in (case.values for case in RESUME_CASES):
        cfg = make_config("fda", "smoke", steps=40, eval_every=10, checkpoint_every=checkpoint_every)
        data = build_task(cfg)
        reference, ref_metrics = _train_recording(cfg, data)
        stopped, _ = _train_recording(cfg, data, stop_at=stop_at)
        assert stopped["step"] == stop_at
        resumed, metrics = _train_recording(cfg, data, resume=stopped)
        out[checkpoint_every, stop_at] = reference, ref_metrics, resumed, metrics
    return out


@pytest.mark.parametrize("checkpoint_every, stop_at", RESUME_CASES)
def test_resumed_run_equals_uninterrupted_in_weights_and_optimizer_state(resume_runs, checkpoint_every, stop_at):
    reference, _, resumed, _ = resume_runs[checkpoint_every, stop_at]
    _assert_same_tensors(resumed["model"], reference["model"], "model")
    _assert_same_tensors(resumed["optimizer"], reference["optimizer"], "optimizer")
    assert resumed["optimizer"]["state"]  # AdamW moments are there to compare


@pytest.mark.parametrize("checkpoint_every, stop_at", RESUME_CASES)
def test_resumed_run_logs_the_same_metrics(resume_runs, checkpoint_every, stop_at):
    _, ref_metrics, _, metrics = resume_runs[checkpoint_every, stop_at]
    frame = lambda rows: pd.DataFrame(rows).drop(columns="seconds")  # noqa: E731
    assert [r["step"] for r in metrics] == [r["step"] for r in ref_metrics]
    pd.testing.assert_frame_equal(frame(metrics), frame(ref_metrics), check_exact=True)


def test_thread_count_is_restored_after_training():
    cfg = make_config("fda", "smoke", steps=4, warmup_steps=1, eval_every=2, checkpoint_every=2)
    data = build_task(cfg)
    before = torch.get_num_threads()
    outside = train_module.TRAIN_THREADS + 2
    during = []

    def record(step, *_):
        during.append(torch.get_num_threads())

    def fail(step, *_):
        raise Interrupt

    try:
        torch.set_num_threads(outside)
        train(cfg, data, device="cpu", on_checkpoint=record, progress=False)
        assert torch.get_num_threads() == outside
        with pytest.raises(Interrupt):  # also when training stops with an error
            train(cfg, data, device="cpu", on_checkpoint=fail, progress=False)
        assert torch.get_num_threads() == outside
    finally:
        torch.set_num_threads(before)
    assert during == [train_module.TRAIN_THREADS] * 2

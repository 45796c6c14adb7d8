"""The scorer (rote.scoring) and the hook names of the model (HOOK_KINDS, hook_scale, hook_normalized)."""

import math

import pytest
import torch

from rote import scoring
from rote.model import HOOK_KINDS, HookedTransformer, ModelShape
from rote.tasks import Examples


def _examples(n: int, prompt_len: int = 6, answer_len: int = 3, vocab: int = 13, seed: int = 0) -> Examples:
    g = torch.Generator().manual_seed(seed)
    label = torch.randint(0, vocab, (n, answer_len), generator=g)
    return Examples(torch.randint(0, vocab, (n, prompt_len), generator=g), label,
                    torch.randint(0, vocab, (n, answer_len), generator=g))


def test_answer_logits_equal_a_plain_forward_pass(tiny_model, monkeypatch):
    monkeypatch.setattr(scoring, "BATCH", 7)  # several batches, the last one short
    ex = _examples(20)
    got = scoring.answer_logits(tiny_model, ex, "label")
    with torch.no_grad():
        expected = tiny_model(ex.sequences("label")[:, :-1])[:, ex.answer_positions]
    assert got.shape == (20, 3, 13) and not got.requires_grad
    torch.testing.assert_close(got, expected, atol=0, rtol=0)
    lp = scoring.label_logprob(tiny_model, ex, "true_label")
    full = tiny_model(ex.sequences("true_label")[:, :-1])[:, ex.answer_positions].log_softmax(-1)
    torch.testing.assert_close(lp, full.gather(-1, ex.true_label[..., None]).squeeze(-1).sum(-1))
    assert scoring.answer_logits(tiny_model, ex[:0]).shape == (0, 3, 13)
    assert math.isnan(scoring.accuracy(tiny_model, ex[:0]))


def test_exact_match_equals_greedy_decoding(tiny_model):
    """Teacher forcing on the greedy output itself matches everywhere; on any other target it
    matches exactly when decoding would produce it."""
    ex = _examples(40, answer_len=4)
    greedy = tiny_model.generate(ex.prompt, 4)
    decoded = Examples(ex.prompt, greedy, ex.true_label)
    assert scoring.exact_match(tiny_model, decoded, "label").all()
    # targets that agree with the greedy output on a prefix only, or everywhere
    mixed = greedy.clone()
    mixed[::2, 2] = (mixed[::2, 2] + 1) % 13
    mixed_ex = Examples(ex.prompt, mixed, ex.true_label)
    assert torch.equal(scoring.exact_match(tiny_model, mixed_ex, "label"), (greedy == mixed).all(1))
    assert torch.equal(scoring.exact_match(tiny_model, ex, "label"), (greedy == ex.label).all(1))
    assert scoring.accuracy(tiny_model, mixed_ex, "label") == 0.5


def test_hooks_are_applied_and_removed_even_on_error(tiny_model, monkeypatch):
    monkeypatch.setattr(scoring, "BATCH", 4)
    ex = _examples(10)
    zero = [(tiny_model.hook_name("post", 1), lambda act, hook: act * 0)]
    clean = scoring.answer_logits(tiny_model, ex)
    patched = scoring.answer_logits(tiny_model, ex, hooks=zero)
    with torch.no_grad(), tiny_model.hooks(zero):
        expected = tiny_model(scoring.model_inputs(ex))[:, ex.answer_positions]
    torch.testing.assert_close(patched, expected, atol=0, rtol=0)
    assert not torch.allclose(patched, clean) and not tiny_model.has_hooks()
    # per-batch hooks see the rows of their batch
    seen = []

    def per_batch(rows):
        seen.append((rows.start, rows.stop))
        return zero

    torch.testing.assert_close(scoring.answer_logits(tiny_model, ex, hooks=per_batch), patched)
    assert seen == [(0, 4), (4, 8), (8, 12)]

    def boom(act, hook):
        raise RuntimeError("boom")

    for fn in (scoring.answer_logits, scoring.exact_match, scoring.label_logprob, scoring.accuracy):
        with pytest.raises(RuntimeError, match="boom"):
            fn(tiny_model, ex, "label", hooks=[("hook_embed", boom)])
        assert not tiny_model.has_hooks()


def test_gradients_flow_only_when_asked(tiny_model):
    ex = _examples(5)
    assert not scoring.label_logprob(tiny_model, ex).requires_grad
    lp = scoring.label_logprob(tiny_model, ex, grad=True)
    lp.sum().backward()
    assert tiny_model.unembed.weight.grad is not None
    with torch.no_grad():  # the caller's grad mode is restored after every batch
        scoring.label_logprob(tiny_model, ex, grad=True)
        assert not torch.is_grad_enabled()


def test_answer_activations_match_the_cache(tiny_model, monkeypatch):
    monkeypatch.setattr(scoring, "BATCH", 3)
    ex = _examples(8)
    names = [tiny_model.hook_name("post", 0), tiny_model.hook_name("scale")]
    acts = scoring.answer_activations(tiny_model, ex, names, "true_label")
    _, cache = tiny_model.run_with_cache(scoring.model_inputs(ex, "true_label"), names)
    for name in names:
        torch.testing.assert_close(acts[name], cache[name][:, ex.answer_positions])
    assert acts[names[1]].shape == (8, 3, 1)
    assert scoring.answer_activations(tiny_model, ex[:0], names)[names[0]].shape == (0, 3, 64)
    assert not tiny_model.has_hooks()


# -- hook names ---------------------------------------------------------------------------------
def test_every_hook_name_exists_and_every_hook_point_has_a_name(tiny_model):
    named = set()
    for kind, template in HOOK_KINDS.items():
        layers = range(tiny_model.shape.n_layers) if "{layer}" in template else [None]
        for layer in layers:
            name = tiny_model.hook_name(kind, layer)
            assert name in tiny_model.hook_points, name
            named.add(name)
    assert named == set(tiny_model.hook_names)  # the function reaches every hook point
    assert tiny_model.hook_name("resid_post", 1) == "blocks.1.hook_resid_post"
    assert tiny_model.hook_name("post", 0) == "blocks.0.mlp.hook_post"
    assert tiny_model.hook_name("z", 1) == "blocks.1.attn.hook_z"
    assert tiny_model.hook_name("normalized") == "ln_final.hook_normalized"
    for bad in [("post", 2), ("post", None), ("scale", 0), ("no_such_kind", 0)]:
        with pytest.raises(KeyError):
            tiny_model.hook_name(*bad)


def test_final_layernorm_hooks_mean_what_they_mean_in_transformerlens(tiny_model):
    with torch.no_grad():
        tiny_model.ln_final.weight.normal_(1.0, 0.3)  # a gain and bias that are not the identity
        tiny_model.ln_final.bias.normal_(0.0, 0.3)
    tokens = torch.randint(0, 13, (4, 9))
    logits, cache = tiny_model.run_with_cache(tokens)
    x = cache["blocks.1.hook_resid_post"]
    normalized, scale = cache["ln_final.hook_normalized"], cache["ln_final.hook_scale"]
    assert scale.shape == (4, 9, 1)
    # before the weight and bias: zero mean and unit variance per position
    torch.testing.assert_close(normalized.mean(-1), torch.zeros(4, 9), atol=1e-5, rtol=0)
    var = x.var(-1, unbiased=False)
    torch.testing.assert_close(normalized.var(-1, unbiased=False), var / (var + tiny_model.ln_final.eps))
    seen = {}
    with tiny_model.hooks([("ln_final.hook_normalized", lambda act, hook: seen.__setitem__("n", act))]):
        tiny_model.ln_final(100 * torch.randn(4, 9, 16))  # var >> eps: unit variance
    torch.testing.assert_close(seen["n"].var(-1, unbiased=False), torch.ones(4, 9), atol=1e-4, rtol=0)
    torch.testing.assert_close(scale * normalized, x - x.mean(-1, keepdim=True), atol=1e-5, rtol=1e-5)
    ln = tiny_model.ln_final
    torch.testing.assert_close(tiny_model.unembed(normalized * ln.weight + ln.bias), logits, atol=1e-5, rtol=1e-5)
    # the hooked path computes what the plain forward pass computes
    with torch.no_grad():
        torch.testing.assert_close(tiny_model(tokens), logits, atol=1e-5, rtol=1e-5)
    # and patching the normalized stream changes the output through the weight and bias
    doubled = tiny_model.run_with_hooks(tokens, [("ln_final.hook_normalized", lambda act, hook: 2 * act)])
    torch.testing.assert_close(doubled, tiny_model.unembed(2 * normalized * ln.weight + ln.bias), atol=1e-5, rtol=1e-5)
    assert not tiny_model.has_hooks()


def test_unhooked_layernorm_is_the_fused_kernel():
    """Without hooks on ln_final the forward pass is F.layer_norm bit for bit (trained runs used it)."""
    torch.manual_seed(1)
    model = HookedTransformer(ModelShape(n_layers=1, d_model=32, n_heads=2, vocab_size=11, n_ctx=8)).eval()
    x = torch.randn(5, 7, 32) * 3
    expected = torch.nn.functional.layer_norm(x, (32,), model.ln_final.weight, model.ln_final.bias,
                                              model.ln_final.eps)
    assert torch.equal(model.ln_final(x), expected)


def test_hook_names_are_spelled_only_in_the_model():
    """Outside rote/model.py no code builds a hook name from a string (docstrings may mention them)."""
    import ast
    import pathlib
    import re

    import rote

    offenders = []
    for path in pathlib.Path(rote.__file__).parent.rglob("*.py"):
        if path.name == "model.py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and re.search(r"(^|\.)hook_[a-z]|^blocks\.", node.value)):
                offenders.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert not offenders, offenders

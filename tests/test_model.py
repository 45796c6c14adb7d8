import pytest
import torch

from rote.model import HookedTransformer, ModelShape

EXPECTED_HOOKS = [
    "hook_embed", "hook_pos_embed", "ln_final.hook_scale", "ln_final.hook_normalized",
    *[f"blocks.{l}.{h}" for l in range(2) for h in (
        "hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out", "hook_mlp_out",
        "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_z", "attn.hook_pattern",
        "mlp.hook_pre", "mlp.hook_post")],
]


def test_hook_names_and_shapes(tiny_model):
    assert set(tiny_model.hook_names) == set(EXPECTED_HOOKS)
    tokens = torch.randint(0, 13, (3, 7))
    logits, cache = tiny_model.run_with_cache(tokens)
    assert logits.shape == (3, 7, 13)
    assert cache["blocks.0.hook_resid_post"].shape == (3, 7, 16)
    assert cache["blocks.1.attn.hook_pattern"].shape == (3, 2, 7, 7)
    assert cache["blocks.1.attn.hook_z"].shape == (3, 7, 2, 8)
    assert cache["blocks.0.mlp.hook_post"].shape == (3, 7, 64)
    # causal: attention to future positions is zero
    assert torch.all(cache["blocks.0.attn.hook_pattern"].triu(1) == 0)
    # the residual decomposes: resid_post = resid_pre + attn_out + mlp_out
    c = cache
    assert torch.allclose(c["blocks.1.hook_resid_post"],
                          c["blocks.1.hook_resid_pre"] + c["blocks.1.hook_attn_out"] + c["blocks.1.hook_mlp_out"],
                          atol=1e-5)
    assert torch.allclose(tiny_model.unembed_residual(c["blocks.1.hook_resid_post"]), logits, atol=1e-5)


def test_hooks_removed_after_error(tiny_model):
    tokens = torch.randint(0, 13, (2, 5))

    def boom(act, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        tiny_model.run_with_hooks(tokens, [("blocks.0.hook_resid_post", boom)])
    assert not tiny_model.has_hooks()
    with pytest.raises(ZeroDivisionError):
        with tiny_model.hooks([("hook_embed", lambda a, h: None)]):
            assert tiny_model.has_hooks()
            1 / 0
    assert not tiny_model.has_hooks()
    with pytest.raises(KeyError):
        with tiny_model.hooks([("hook_embed", lambda a, h: None), ("no.such.hook", lambda a, h: None)]):
            pass
    assert not tiny_model.has_hooks()


def test_patching_own_activations_changes_nothing(tiny_model):
    tokens = torch.randint(0, 13, (4, 9))
    logits, cache = tiny_model.run_with_cache(tokens)
    for name in tiny_model.hook_names:
        patched = tiny_model.run_with_hooks(tokens, [(name, lambda act, hook: cache[hook.name])])
        assert torch.allclose(patched, logits, atol=1e-6), name


def test_patching_changes_output(tiny_model):
    tokens = torch.randint(0, 13, (4, 9))
    clean = tiny_model(tokens)
    patched = tiny_model.run_with_hooks(tokens, [("blocks.0.mlp.hook_post", lambda act, hook: act * 0)])
    assert not torch.allclose(patched, clean)


def successor_model(vocab_size: int = 13, n_ctx: int = 8) -> HookedTransformer:
    """A network whose greedy next token is (last token + 1) mod vocab_size, by construction: the
    blocks write nothing to the residual stream (all their weights are zero), the embedding is
    one-hot, positions add nothing, and the unembedding maps the direction of token t to t + 1."""
    model = HookedTransformer(ModelShape(n_layers=1, d_model=16, n_heads=2, vocab_size=vocab_size, n_ctx=n_ctx))
    with torch.no_grad():
        for p in model.blocks.parameters():
            p.zero_()
        model.pos_embed.weight.zero_()
        model.embed.weight.copy_(torch.eye(vocab_size, 16))
        model.unembed.weight.copy_(torch.eye(vocab_size, 16).roll(1, dims=0))  # row t + 1 reads t
    return model.eval()


def test_generate_decodes_greedily():
    model = successor_model()
    prompts = torch.tensor([[3, 1, 4, 1], [5, 9, 2, 6], [11, 0, 0, 12], [7, 7, 7, 0], [2, 7, 1, 8]])
    out = model.generate(prompts, 3, batch_size=2)  # three batches, the last one short
    expected = torch.stack([(prompts[:, -1] + k) % 13 for k in (1, 2, 3)], dim=1)
    assert torch.equal(out, expected), out
    assert out[2].tolist() == [0, 1, 2]  # wraps around the vocabulary
    assert model.generate(prompts[:0], 3).shape == (0, 3)


def test_generate_feeds_back_the_whole_sequence():
    model = successor_model(n_ctx=8)
    prompts = torch.zeros(2, 5, dtype=torch.long)
    assert model.generate(prompts, 4).shape == (2, 4)  # the last input holds 5 + 3 = 8 tokens
    with pytest.raises(ValueError, match="n_ctx"):
        model.generate(prompts, 5)  # would need an input of 9 tokens


def test_shape_validation():
    with pytest.raises(ValueError, match="divisible"):
        ModelShape(n_layers=1, d_model=10, n_heads=3, vocab_size=5, n_ctx=4)
    model = HookedTransformer(ModelShape(1, 8, 2, 5, 4))
    with pytest.raises(ValueError, match="n_ctx"):
        model(torch.zeros(1, 5, dtype=torch.long))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_runs_on_cuda(tiny_model):
    model = tiny_model.to("cuda")
    tokens = torch.randint(0, 13, (2, 5), device="cuda")
    assert model(tokens).device.type == "cuda"


@pytest.mark.parametrize("read", [[4, 5, 6], [0], [6], [1, 3]])
def test_reading_some_positions_equals_the_full_pass_there(tiny_model, read):
    """The fast path (the last block at ``read`` only) gives the full pass's logits at those positions."""
    tokens = torch.randint(0, 13, (5, 7))
    read = torch.tensor(read)
    with torch.no_grad():
        fast, full = tiny_model(tokens, read), tiny_model(tokens)[:, read]
    assert fast.shape == (5, len(read), 13)
    assert torch.allclose(fast, full, atol=1e-6)
    assert torch.equal(fast.argmax(-1), full.argmax(-1))


def test_reading_some_positions_with_a_hook_runs_the_full_pass(tiny_model):
    """A hook point never sees a truncated activation: with a hook attached, every position is computed."""
    tokens, read, seen = torch.randint(0, 13, (2, 7)), torch.tensor([5, 6]), {}
    name = "blocks.1.mlp.hook_post"
    with torch.no_grad(), tiny_model.hooks([(name, lambda act, point: seen.update({name: act.shape}))]):
        logits = tiny_model(tokens, read)
    assert seen[name] == (2, 7, 64)
    assert logits.shape == (2, 2, 13)

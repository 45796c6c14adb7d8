"""A GPT-2-style decoder with TransformerLens-named hook points.

One readable file in the spirit of nanoGPT: learned token and position embeddings, pre-LayerNorm
blocks, multi-head causal attention written out (so the attention pattern can be hooked), a GELU
MLP of width 4 * d_model, a final LayerNorm and an unembedding.

Every activation passes through a :class:`HookPoint`, an identity module named after the
TransformerLens convention (``blocks.0.mlp.hook_post`` and so on); :meth:`HookedTransformer.hook_name`
builds these names (``model.hook_name("post", 0)``), so no other module spells them out.
:meth:`HookedTransformer.hooks`
attaches temporary forward hooks that are removed in ``finally``, also on error;
:meth:`HookedTransformer.run_with_cache` records activations with such hooks.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

HookFn = Callable[[torch.Tensor, "HookPoint"], "torch.Tensor | None"]


@dataclass(frozen=True)
class ModelShape:
    """Everything needed to build the network (the task fixes vocab_size and n_ctx)."""

    n_layers: int
    d_model: int
    n_heads: int
    vocab_size: int
    n_ctx: int

    def __post_init__(self):
        for name in ("n_layers", "d_model", "n_heads", "vocab_size", "n_ctx"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def d_mlp(self) -> int:
        return 4 * self.d_model


# Short names of the hook points (TransformerLens's ``get_act_name`` vocabulary) -> full names.
HOOK_KINDS = {
    "embed": "hook_embed", "pos_embed": "hook_pos_embed",
    "resid_pre": "blocks.{layer}.hook_resid_pre", "resid_mid": "blocks.{layer}.hook_resid_mid",
    "resid_post": "blocks.{layer}.hook_resid_post", "attn_out": "blocks.{layer}.hook_attn_out",
    "mlp_out": "blocks.{layer}.hook_mlp_out",
    "q": "blocks.{layer}.attn.hook_q", "k": "blocks.{layer}.attn.hook_k", "v": "blocks.{layer}.attn.hook_v",
    "pattern": "blocks.{layer}.attn.hook_pattern", "z": "blocks.{layer}.attn.hook_z",
    "pre": "blocks.{layer}.mlp.hook_pre", "post": "blocks.{layer}.mlp.hook_post",
    "scale": "ln_final.hook_scale", "normalized": "ln_final.hook_normalized",
}


class HookPoint(nn.Module):
    """Identity module: the place where a forward hook can read or replace an activation."""

    def __init__(self):
        super().__init__()
        self.name = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Attention(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.n_heads, self.d_head = shape.n_heads, shape.d_head
        self.W_qkv = nn.Linear(shape.d_model, 3 * shape.d_model)
        self.W_O = nn.Linear(shape.d_model, shape.d_model)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_pattern, self.hook_z = HookPoint(), HookPoint()
        mask = torch.tril(torch.ones(shape.n_ctx, shape.n_ctx, dtype=torch.bool))
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, x: torch.Tensor, read: torch.Tensor | None = None) -> torch.Tensor:
        """The attention output at every position, or only at the positions ``read`` (queries
        there, keys and values everywhere: see :meth:`HookedTransformer.forward`)."""
        B, T, D = x.shape
        q, k, v = self.W_qkv(x).view(B, T, 3, self.n_heads, self.d_head).unbind(dim=2)
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)  # [B, T, H, d_head]
        mask = self.causal_mask[:T, :T]
        if read is not None:
            q, mask = q[:, read], self.causal_mask[read, :T]
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.d_head)
        scores = scores.masked_fill(~mask, float("-inf"))
        pattern = self.hook_pattern(scores.softmax(dim=-1))  # [B, H, Tq, Tk]
        z = self.hook_z(torch.einsum("bhqk,bkhd->bqhd", pattern, v))  # [B, Tq, H, d_head]
        return self.W_O(z.reshape(B, z.shape[1], D))


class MLP(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.W_in = nn.Linear(shape.d_model, shape.d_mlp)
        self.W_out = nn.Linear(shape.d_mlp, shape.d_model)
        self.hook_pre, self.hook_post = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.W_out(self.hook_post(F.gelu(self.hook_pre(self.W_in(x)))))


class Block(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(shape.d_model), nn.LayerNorm(shape.d_model)
        self.attn, self.mlp = Attention(shape), MLP(shape)
        self.hook_resid_pre, self.hook_resid_mid, self.hook_resid_post = HookPoint(), HookPoint(), HookPoint()
        self.hook_attn_out, self.hook_mlp_out = HookPoint(), HookPoint()

    def forward(self, resid: torch.Tensor, read: torch.Tensor | None = None) -> torch.Tensor:
        resid = self.hook_resid_pre(resid)
        attn_out = self.hook_attn_out(self.attn(self.ln1(resid), read))
        if read is not None:
            resid = resid[:, read]
        resid = self.hook_resid_mid(resid + attn_out)
        return self.hook_resid_post(resid + self.hook_mlp_out(self.mlp(self.ln2(resid))))


class FinalLayerNorm(nn.LayerNorm):
    """LayerNorm with TransformerLens's hook points: ``hook_scale`` is sqrt(var + eps) [..., 1] and
    ``hook_normalized`` is (x - mean) / scale, before the weight and bias are applied.

    Without a hook on either point the forward pass is ``F.layer_norm`` itself: the fused kernel
    rounds differently from the written-out formula (by ~1e-6), and trained runs were made with it.
    """

    def __init__(self, d_model: int):
        super().__init__(d_model)
        self.hook_scale, self.hook_normalized = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.hook_scale._forward_hooks or self.hook_normalized._forward_hooks):
            return super().forward(x)
        scale = self.hook_scale((x.var(dim=-1, unbiased=False, keepdim=True) + self.eps).sqrt())
        normalized = self.hook_normalized((x - x.mean(dim=-1, keepdim=True)) / scale)
        return normalized * self.weight + self.bias


class HookedTransformer(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.shape = shape
        self.embed = nn.Embedding(shape.vocab_size, shape.d_model)
        self.pos_embed = nn.Embedding(shape.n_ctx, shape.d_model)
        self.hook_embed, self.hook_pos_embed = HookPoint(), HookPoint()
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.n_layers))
        self.ln_final = FinalLayerNorm(shape.d_model)
        self.unembed = nn.Linear(shape.d_model, shape.vocab_size, bias=False)
        self.apply(self._init_weights)
        self.hook_points: dict[str, HookPoint] = {}
        for name, module in self.named_modules():
            if isinstance(module, HookPoint):
                module.name = name
                self.hook_points[name] = module

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    # -- forward --------------------------------------------------------------------------
    def residual(self, tokens: torch.Tensor, read: torch.Tensor | None = None) -> torch.Tensor:
        """The final residual stream (before ln_final), shape [batch, pos, d_model] (with ``read``:
        at those positions only, see :meth:`forward`)."""
        if tokens.shape[1] > self.shape.n_ctx:
            raise ValueError(f"sequence of {tokens.shape[1]} tokens exceeds n_ctx={self.shape.n_ctx}")
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        resid = self.hook_embed(self.embed(tokens)) + self.hook_pos_embed(self.pos_embed(positions))
        for layer, block in enumerate(self.blocks):
            resid = block(resid, read if layer == len(self.blocks) - 1 else None)
        return resid

    def unembed_residual(self, resid: torch.Tensor) -> torch.Tensor:
        """Final LayerNorm plus unembedding: the logit lens applies this to any layer's stream."""
        return self.unembed(self.ln_final(resid))

    def forward(self, tokens: torch.Tensor, read: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of shape [batch, pos, vocab], or [batch, len(read), vocab] at the positions ``read``.

        ``read`` is evaluation's fast path: no later position reads the last block's output, so
        that block computes its queries, MLP, final LayerNorm and unembedding at ``read`` only
        (keys and values everywhere). The logits agree with the full pass's at those positions to
        ~1e-7 (bit for bit on the quick shapes; tests/test_model.py). With a hook attached the full
        pass runs and is indexed: hook points always see every position.
        """
        if read is not None and self.has_hooks():
            return self(tokens)[:, read]
        return self.unembed_residual(self.residual(tokens, read))

    # -- hooks ----------------------------------------------------------------------------
    @property
    def hook_names(self) -> list[str]:
        return list(self.hook_points)

    def hook_name(self, kind: str, layer: int | None = None) -> str:
        """The name of a hook point, like TransformerLens's ``utils.get_act_name``.

        ``kind`` is a short name from :data:`HOOK_KINDS` (``"resid_post"``, ``"z"``, ``"post"``,
        ``"normalized"``, ...); ``layer`` is the block index for block hooks and None otherwise.
        Raises KeyError for a name the model does not have (an unknown kind or a layer out of range).
        """
        if kind not in HOOK_KINDS:
            raise KeyError(f"unknown hook kind {kind!r}; known: {sorted(HOOK_KINDS)}")
        template = HOOK_KINDS[kind]
        if ("{layer}" in template) != (layer is not None):
            raise KeyError(f"hook kind {kind!r} {'needs' if '{layer}' in template else 'takes no'} layer")
        name = template.format(layer=layer)
        if name not in self.hook_points:
            raise KeyError(f"no hook point {name!r} in a {self.shape.n_layers}-layer model")
        return name

    @contextlib.contextmanager
    def hooks(self, fwd_hooks: Iterable[tuple[str, HookFn]]) -> Iterator["HookedTransformer"]:
        """Attach ``(hook_name, fn)`` pairs for the duration of the block.

        ``fn(activation, hook_point)`` may return a tensor that replaces the activation. The hooks
        are removed when the block exits, also when it raises.
        """
        handles = []
        try:
            for name, fn in fwd_hooks:
                if name not in self.hook_points:
                    raise KeyError(f"unknown hook point {name!r}")
                point = self.hook_points[name]
                handles.append(point.register_forward_hook(lambda mod, inp, out, fn=fn: fn(out, mod)))
            yield self
        finally:
            for handle in handles:
                handle.remove()

    def run_with_hooks(self, tokens: torch.Tensor, fwd_hooks: Iterable[tuple[str, HookFn]]) -> torch.Tensor:
        with self.hooks(fwd_hooks):
            return self(tokens)

    def run_with_cache(
        self, tokens: torch.Tensor, names: Sequence[str] | Callable[[str], bool] | None = None,
        detach: bool = True,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Logits and a dict of the activations at the chosen hook points (all by default)."""
        if names is None:
            wanted = self.hook_names
        elif callable(names):
            wanted = [n for n in self.hook_names if names(n)]
        else:
            wanted = list(names)
        cache: dict[str, torch.Tensor] = {}

        def save(act: torch.Tensor, hook: HookPoint) -> None:
            cache[hook.name] = act.detach() if detach else act

        logits = self.run_with_hooks(tokens, [(n, save) for n in wanted])
        return logits, cache

    def has_hooks(self) -> bool:
        return any(p._forward_hooks for p in self.hook_points.values())

    # -- decoding -------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompts: torch.Tensor, n_tokens: int, batch_size: int = 4096) -> torch.Tensor:
        """Batched greedy decoding: the ``n_tokens`` tokens that follow each prompt."""
        outputs = []
        for start in range(0, len(prompts), batch_size):
            seq = prompts[start:start + batch_size]
            for _ in range(n_tokens):
                next_token = self(seq)[:, -1].argmax(dim=-1, keepdim=True)
                seq = torch.cat([seq, next_token], dim=1)
            outputs.append(seq[:, prompts.shape[1]:])
        return torch.cat(outputs) if outputs else prompts.new_zeros((0, n_tokens))

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The caller's choice, else CUDA when available, else CPU."""
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")

"""Tiny models with planted answers, shared by the C5 tests."""

import torch

from rote.model import HookedTransformer, ModelShape


def outlier_model(planted: dict) -> HookedTransformer:
    """A 1-layer FDA-shaped model whose MLP neurons ``planted`` ({name: (neuron, token)}) are silent on
    clean inputs (bias -8) and, when pushed on, write their token (output along its unembedding)."""
    torch.manual_seed(0)
    model = HookedTransformer(ModelShape(n_layers=1, d_model=16, n_heads=2, vocab_size=13, n_ctx=14)).eval()
    with torch.no_grad():
        mlp = model.blocks[0].mlp
        for neuron, token in planted.values():
            mlp.W_in.bias[neuron] = -8.0
            u = model.unembed.weight[token]
            mlp.W_out.weight[:, neuron] = 50 * u / u.norm()
    return model


def recording_job(started: list):
    """A stand-in for ``rote.build.engine._LocalJob`` that finishes at once and records the configs it was
    started with, in order (tests of the pool's scheduling)."""

    class RecordingJob:
        def __init__(self, config, root, device):
            self.config, self.log = config, root / "x.log"
            started.append(config)

        def poll(self):
            return True, ""

    return RecordingJob

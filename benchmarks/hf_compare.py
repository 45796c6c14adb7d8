"""Training throughput of our HookedTransformer against Hugging Face's GPT2LMHeadModel at the same
shape, batch and optimizer (quick profile, 1 intra-op thread, the same batches and loss).

Usage: .venv/bin/python benchmarks/hf_compare.py [--task fda|thr] [--steps 100] [--rounds 5]

transformers is not one of rote's requirements: on first use this script makes its own venv in
_build/bench-venv (ignored by git), which sees .venv's packages through a .pth file and adds only
transformers, and reruns itself there. The two models train in alternating blocks of steps, so that
other load on the machine slows both alike; the ratio is ours / theirs in steps per second.
Both use the same pre-LayerNorm block layout, GELU MLP of width 4 x d_model, learned positions and
untied unembedding (GPT-2 ties it; we untie it for the comparison), and no dropout.
Results: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_VENV = ROOT / "_build" / "bench-venv"


def ensure_transformers() -> None:
    try:
        import transformers  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("ROTE_BENCH_VENV"):
        sys.exit("transformers did not install in the benchmark venv")
    python = BENCH_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        # .venv's packages, with their own .pth files (rote's editable install among them)
        Path(site, "rote-venv.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "transformers"], check=True)
    os.execve(str(python), [str(python), __file__, *sys.argv[1:]], {**os.environ, "ROTE_BENCH_VENV": "1"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="fda")
    parser.add_argument("--steps", type=int, default=50, help="steps per block")
    parser.add_argument("--rounds", type=int, default=4, help="alternating blocks per model")
    args = parser.parse_args()
    ensure_transformers()

    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    from rote import make_config
    from rote.tasks import IGNORE, build_task
    from rote.train import TRAIN_THREADS, build_model, make_optimizer

    torch.set_num_threads(TRAIN_THREADS)
    config = make_config(args.task, "quick")
    data = build_task(config)
    ours = build_model(config, data)
    m = config.model
    hf = GPT2LMHeadModel(GPT2Config(
        vocab_size=len(data.vocab), n_positions=data.n_ctx, n_embd=m.d_model, n_layer=m.n_layers, n_head=m.n_heads,
        n_inner=4 * m.d_model, activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        tie_word_embeddings=False, use_cache=False))
    hf.train()
    ours.train()
    inputs, targets = data.training_sequences()

    def stepper(model, logits_of):
        optimizer = make_optimizer(model, config)  # the same AdamW, groups and betas for both
        generator = torch.Generator().manual_seed(0)

        def step():
            batch = torch.randint(len(inputs), (config.train.batch_size,), generator=generator)
            logits = logits_of(inputs[batch])
            loss = F.cross_entropy(logits.flatten(0, 1), targets[batch].flatten(), ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return step

    steps = {"ours": stepper(ours, ours), "hf": stepper(hf, lambda x: hf(input_ids=x).logits)}
    seconds = {"ours": 0.0, "hf": 0.0}
    for name, step in steps.items():  # warm up
        for _ in range(5):
            step()
    for _ in range(args.rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                step()
            seconds[name] += time.perf_counter() - start
    total = args.steps * args.rounds
    rate = {k: total / v for k, v in seconds.items()}
    print(json.dumps({"task": args.task, "transformers": transformers.__version__, "torch": torch.__version__,
                      "threads": TRAIN_THREADS, "attn_implementation": hf.config._attn_implementation,
                      "params_ours": sum(p.numel() for p in ours.parameters()),
                      "params_hf": sum(p.numel() for p in hf.parameters()),
                      "steps_per_s_ours": round(rate["ours"], 2), "steps_per_s_hf": round(rate["hf"], 2),
                      "ours_over_hf": round(rate["ours"] / rate["hf"], 2),
                      "load_average": round(os.getloadavg()[0], 1)}))


if __name__ == "__main__":
    main()

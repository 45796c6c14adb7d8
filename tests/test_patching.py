"""Replace activations, then score (rote.analysis.patching), the C3 circuit experiment and the
stored erasure sites."""

import json
from types import SimpleNamespace

import pytest
import torch

from rote import analysis_cache, scoring
from rote.analysis import attribution as A
from rote.analysis import erasure as E
from rote.analysis import inlp
from rote.analysis import patching as P
from rote.analysis.probes import ProbeSettings, ProbeTargets, probe_sweep
from rote.analysis.targets import probe_positions
from rote.config import make_config
from rote.tasks import build_task


@pytest.fixture(scope="module")
def fda_data():
    return build_task(make_config("fda", "smoke"))


def _patched(model, edits):
    """``edits`` applied to every forward pass in the block."""
    return model.hooks(P.edit_hooks(edits)(slice(None)))


def _all_component_edits(model, source_cache):
    edits = []
    for c in range(sum(A.n_components(model))):
        name, unit = P.component_unit(model, c)
        edits.append((name, P.set_from(source_cache[name], (slice(None), slice(None), unit))))
    return edits


def test_patching_the_clean_activations_themselves_changes_nothing(tiny_model, fda_data, monkeypatch):
    monkeypatch.setattr(scoring, "BATCH", 5)  # the setters see several batches of rows
    ex = fda_data.test[:12]
    clean = scoring.answer_logits(tiny_model, ex)
    _, cache = tiny_model.run_with_cache(scoring.model_inputs(ex))
    every_unit = _all_component_edits(tiny_model, cache)
    torch.testing.assert_close(scoring.answer_logits(tiny_model, ex, hooks=P.edit_hooks(every_unit)), clean,
                               atol=0, rtol=0)
    positions = ex.answer_positions
    post = tiny_model.hook_name("post", 1)
    own = cache[post][:, positions]
    same = [(post, P.set_where(positions, torch.ones_like(own, dtype=torch.bool), own))]
    torch.testing.assert_close(scoring.answer_logits(tiny_model, ex, hooks=P.edit_hooks(same)), clean, atol=0, rtol=0)
    embed = [(tiny_model.hook_name("embed"), P.set_token_embedding(tiny_model, 3, ex.prompt[:, 3]))]
    torch.testing.assert_close(scoring.answer_logits(tiny_model, ex, hooks=P.edit_hooks(embed)), clean, atol=0, rtol=0)
    nothing = inlp.Erasure({(1, 9): torch.zeros(16, 0)}, {(1, 9): torch.zeros(16)})  # rank 0
    assert P.patched_accuracy(tiny_model, {"t": (ex, "true_label")}, P.erasure_edits(tiny_model, nothing)) == \
        {"t": scoring.accuracy(tiny_model, ex, "true_label")}
    # activation patching against the examples themselves: no effect anywhere
    effects = P.patching_effects(tiny_model, ex, "label", ex, components=[0, 3, 4, 70, 131])
    assert effects.shape == (12, 5) and effects.abs().max() < 1e-5
    assert not tiny_model.has_hooks()


def test_setters_write_what_they_say(tiny_model, fda_data):
    ex = fda_data.test[:6]
    tokens = scoring.model_inputs(ex)
    means = A.component_means(tiny_model, fda_data.train_clean[:50])
    post, z = tiny_model.hook_name("post", 0), tiny_model.hook_name("z", 0)
    with _patched(tiny_model, [(post, P.set_units([2, 5], means[post]))]):
        _, cache = tiny_model.run_with_cache(tokens, [post])
    torch.testing.assert_close(cache[post][:, :, [2, 5]], means[post][:, [2, 5]].expand(6, -1, -1))
    with _patched(tiny_model, [(z, P.set_units([1], means[z]))]):
        _, cache = tiny_model.run_with_cache(tokens, [z])
    torch.testing.assert_close(cache[z][:, :, 1], means[z][:, 1].expand(6, -1, -1))
    positions = ex.answer_positions
    values = torch.randn(6, len(positions), 64)
    mask = torch.zeros(6, len(positions), 64, dtype=torch.bool)
    mask[2, 1, 7] = True
    _, before = tiny_model.run_with_cache(tokens, [post])
    with _patched(tiny_model, [(post, P.set_where(positions, mask, values))]):
        _, after = tiny_model.run_with_cache(tokens, [post])
    changed = (after[post] != before[post]).nonzero().tolist()
    assert changed == [[2, int(positions[1]), 7]] and after[post][2, positions[1], 7] == values[2, 1, 7]
    assert not tiny_model.has_hooks()


def test_hooks_are_gone_after_an_exception(tiny_model, fda_data):
    ex = fda_data.test[:6]

    def broken(act, rows):
        raise RuntimeError("broken setter")

    edits = [(tiny_model.hook_name("post", 0), P.set_units([0], torch.zeros(14, 64))),
             (tiny_model.hook_name("resid_post", 1), broken)]
    with pytest.raises(RuntimeError, match="broken setter"):
        P.patched_accuracy(tiny_model, {"t": (ex, "label")}, edits)
    assert not tiny_model.has_hooks()
    with pytest.raises(RuntimeError, match="broken setter"):
        P.label_probability(tiny_model, ex, "label", edits)
    assert not tiny_model.has_hooks()
    with pytest.raises(ZeroDivisionError):
        with _patched(tiny_model, edits[:1]):
            assert tiny_model.has_hooks()
            1 / 0
    assert not tiny_model.has_hooks()
    with pytest.raises(KeyError):
        P.patched_accuracy(tiny_model, {"t": (ex, "label")}, [("no.such.hook", broken)])
    assert not tiny_model.has_hooks()


def test_label_probability_is_the_product_of_token_probabilities(tiny_model, fda_data):
    ex = fda_data.train_noisy[:9]
    p = P.label_probability(tiny_model, ex, "label")
    probs = scoring.answer_logits(tiny_model, ex, "label").softmax(-1)
    torch.testing.assert_close(p, probs.gather(-1, ex.label[..., None]).squeeze(-1).prod(-1), rtol=1e-5, atol=1e-7)
    assert P.label_probability(tiny_model, ex[:0]).shape == (0,)


def test_circuits_experiment(tiny_model, fda_data):
    ref, C, M = fda_data.train_clean, fda_data.test[:20], fda_data.train_noisy[:20]
    sets = {"mem": (M, "label"), "gen": (C, "true_label")}
    settings = A.CircuitSettings(fraction=0.05, max_examples=10, max_fit=100, n_controls=2, seed=3)
    out = A.circuits(tiny_model, C, M, ref, sets, settings)
    torch.testing.assert_close(out["scores"]["C"],
                               A.mean_importance(A.example_importance(tiny_model, C[:10], "true_label", ref, seed=3)))
    torch.testing.assert_close(out["scores"]["M"],
                               A.mean_importance(A.example_importance(tiny_model, M[:10], "label", ref, seed=4)))
    assert out["overlap"] == A.overlap(tiny_model, out["scores"]["C"], out["scores"]["M"], 0.05)
    ab = out["ablations"]
    assert list(ab.index) == ["none", "top generalization neurons", "random neurons (matched)"]
    assert list(ab.columns) == ["mem", "gen"]
    assert ab.loc["none", "gen"] == scoring.accuracy(tiny_model, C, "true_label")
    means = A.component_means(tiny_model, ref[:100])
    top = out["overlap"]["neurons"]["top_a"]
    assert ab.loc["top generalization neurons"].to_dict() == \
        P.patched_accuracy(tiny_model, sets, P.component_edits(tiny_model, top, means))
    assert not tiny_model.has_hooks()


def test_erasure_sites_are_computed_once_per_run_and_stored(tiny_model, fda_data, tmp_path, monkeypatch):
    """8.6: the sites come from C2's probe sweep of the run, cached once; C2's sweep read on C alone, without
    the cache, gives the same sites."""
    run = SimpleNamespace(config=SimpleNamespace(task="fda", key="0123abcd"), model=tiny_model, data=fda_data)
    kw = dict(min_over_chance=0.0, settings=ProbeSettings(max_train=200, seed=0))
    sites = analysis_cache.erasure_sites_cached(run, root=tmp_path, **kw)
    from rote.analysis.sets import correct
    sweep = probe_sweep(tiny_model, fda_data, fda_data.train_clean, {"C": correct(tiny_model, fda_data.test)},
                        ProbeTargets(positions=probe_positions("fda")), ProbeSettings(max_train=200, seed=0))
    expected = E.sites_from_sweep(sweep, "fda", 0.0)
    assert sites == expected
    files = list(tmp_path.rglob("*"))
    stored = [f for f in files if f.is_file()]
    assert len(stored) == 1 and stored[0].parent.name == "fda-0123abcd" and stored[0].suffix == ".json"
    assert stored[0].name.startswith("probe_sweep-")  # C2's sweep, from which the sites are read

    def fail(*args, **kwargs):
        raise AssertionError("recomputed")

    monkeypatch.setattr(analysis_cache, "sweep_probes", fail)
    assert analysis_cache.erasure_sites_cached(run, root=tmp_path, **kw) == sites  # read back, not recomputed
    assert analysis_cache.erasure_sites_cached(run, root=tmp_path, **{**kw, "min_over_chance": 5.0})["positions"] == \
        sites["positions"]  # another multiple of chance: the same sweep, no new fit
    with pytest.raises(AssertionError, match="recomputed"):  # other probe settings: another entry
        analysis_cache.erasure_sites_cached(run, root=tmp_path, min_over_chance=0.0, settings=ProbeSettings(max_train=200, seed=1))
    monkeypatch.setenv("ROTE_ANALYSIS", str(tmp_path / "elsewhere"))  # the library never reads it: a root is passed
    assert analysis_cache.analysis_root() != tmp_path / "elsewhere"


def test_an_erasure_rerun_from_its_prefix_is_the_whole_pass_bit_for_bit(fda_data, monkeypatch):
    from rote.model import HookedTransformer, ModelShape

    monkeypatch.setattr(scoring, "BATCH", 5)  # several batches of rows
    torch.manual_seed(1)
    model = HookedTransformer(ModelShape(n_layers=3, d_model=16, n_heads=2, vocab_size=13, n_ctx=14)).eval()
    ex, g = fda_data.test[:12], torch.Generator().manual_seed(0)
    sites = [(layer, p) for layer in (2, 3) for p in (9, 11)]  # the first edit at block 1's output
    erase = inlp.Erasure({s: torch.linalg.qr(torch.randn(16, 4, generator=g))[0] for s in sites},
                         {s: torch.randn(16, generator=g) for s in sites})
    edits = P.erasure_edits(model, erase)
    prefix = P.residual_prefix(model, ex, "label", 2)
    assert len(prefix.batches) == 3 and not model.has_hooks()
    whole = scoring.answer_logits(model, ex, "label", hooks=P.edit_hooks(edits))
    assert not torch.equal(whole, scoring.answer_logits(model, ex, "label"))  # the erasure moves the logits
    assert torch.equal(P.prefix_logits(model, prefix, ex, edits), whole)
    assert torch.equal(P.label_probability(model, ex, "label", edits, prefix),
                       P.label_probability(model, ex, "label", edits))
    # the sweep and the removal start from it: the scorer's outcomes and probabilities
    sets = {"mem": (ex, "label"), "gen": (ex, "true_label")}
    assert set(P.erasure_prefixes(model, sets, erase)) == {"mem", "gen"}
    sweep = P.erasure_outcomes(model, erase, sets, P.ErasureSweepSettings(ranks=[2, 4], n_controls=2))
    for rank in (2, 4):
        by_hand = P.erasure_edits(model, erase.truncate(rank))
        want = scoring.exact_match(model, ex, "true_label", hooks=P.edit_hooks(by_hand)).double().numpy()
        assert (sweep.correct[rank, "INLP", "gen"] == want).all()
    removal = P.intermediate_removal(model, ex, erase, [inlp.random_erasure(erase, 0)], matched=[erase])
    by_hand = P.label_probability(model, ex, "label", edits)
    assert (removal[removal.method == "INLP"].p_ablated.to_numpy() == by_hand.numpy()).all()
    assert (removal[removal.method == "matched"].p_ablated.to_numpy() == by_hand.numpy()).all()
    early = P.erasure_edits(model, inlp.Erasure({(1, 9): erase.bases[2, 9]}, {(1, 9): torch.zeros(16)}))
    with pytest.raises(ValueError):  # an edit before the prefix's layer cannot start from it
        P.prefix_logits(model, prefix, ex, early)
    with pytest.raises(ValueError):  # teacher-forced on another answer
        P.label_probability(model, ex, "true_label", edits, prefix)
    assert P.erasure_prefixes(model, sets, inlp.Erasure({(0, 9): erase.bases[2, 9]}, {(0, 9): torch.zeros(16)})) is None
    assert not model.has_hooks()

"""Whisper-large-v3 in the zoo: its graphs against transformers' WhisperForConditionalGeneration.

Tolerance (float32): relative L2 1e-5. The graphs run the same float32 ops as transformers; what differs
is only the shape some ops see (a decode step attends over a masked cache of CACHE_LEN slots where the
model attends over the T tokens it was given; a rewritten graph multiplies merged projections), so BLAS
sums in another order: ~1e-7 per op, 3e-7 observed over 2 + 2 layers. A wrong cache slot, mask, scale
or position is an O(1) error.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

import hoid
from hoid.models import empty_cache, generate, whisper
from tests.oracle import rel_error

pytest.importorskip("transformers")

TINY, CACHE_LEN, TOL = "whisper-large-v3-tiny", 32, 1e-5


@functools.cache
def zoo():
    """(model, encoder graph, cross K/V graph, decode-step graph) of the tiny model, built once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = whisper.build_model(TINY)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # hoid's import warns of nothing the user cannot act on
        return (model, whisper.encoder_graph(model), whisper.cross_kv_graph(model),
                whisper.decode_step_graph(model, CACHE_LEN))


def features(seed: int = 1) -> torch.Tensor:
    model = zoo()[0]
    shape = (1, model.config.num_mel_bins, whisper.mel_frames(model))
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def cross_of(x: torch.Tensor) -> list[torch.Tensor]:
    _, enc, kv, _ = zoo()
    (states,) = hoid.run(enc, x)
    return list(hoid.run(kv, states))


def test_the_config_has_the_published_sizes():
    cfg = whisper.config("whisper-large-v3")
    assert type(cfg).__name__ == "WhisperConfig"
    assert (cfg.d_model, cfg.num_mel_bins, cfg.vocab_size) == (1280, 128, 51866)
    assert (cfg.encoder_layers, cfg.encoder_attention_heads, cfg.encoder_ffn_dim) == (32, 20, 5120)
    assert (cfg.decoder_layers, cfg.decoder_attention_heads, cfg.decoder_ffn_dim) == (32, 20, 5120)
    assert (cfg.max_source_positions, cfg.max_target_positions) == (1500, 448)
    assert cfg.activation_function == "gelu" and cfg.tie_word_embeddings and not cfg.scale_embedding
    tiny = whisper.config(TINY)
    assert (tiny.encoder_layers, tiny.decoder_layers, tiny.d_model, tiny.num_mel_bins) == (2, 2, 64, 128)
    assert tiny.decoder_start_token_id < tiny.vocab_size and tiny.eos_token_id < tiny.vocab_size


def test_the_zoo_builds_whisper_by_name_but_keeps_it_out_of_the_decoder_names():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = hoid.models.build_model(TINY, seed=3), hoid.models.build_model(TINY, seed=3)
    assert type(a).__name__ == "WhisperForConditionalGeneration" and not a.training
    assert torch.equal(a.model.encoder.layers[0].fc1.weight, b.model.encoder.layers[0].fc1.weight)
    assert type(hoid.models.config(TINY)).__name__ == "WhisperConfig"
    assert not set(whisper.NAMES) & set(hoid.models.NAMES)
    with pytest.raises(KeyError, match="whisper-large-v3"):
        whisper.config("whisper-tiny.en")


def test_the_encoder_graph_matches_transformers():
    model, enc, _, _ = zoo()
    x = features()
    (got,) = hoid.run(enc, x)
    with torch.no_grad():
        want = model.model.encoder(x).last_hidden_state
    assert got.shape == want.shape == (1, 64, 64)
    assert rel_error(got, want) < TOL
    assert enc.op_counts()["conv"] == 2 and enc.op_counts()["sdpa"] == 2  # the stem and attention kept whole


def test_cross_kv_graph_gives_the_keys_and_values_transformers_caches():
    model, _, _, _ = zoo()
    x = features()
    cross = cross_of(x)
    with torch.no_grad():
        out = model(input_features=x, decoder_input_ids=torch.tensor([[254]]), use_cache=True)
    layers = out.cache.cross_attention_cache.layers
    want = [t for layer in layers for t in (layer.keys, layer.values)]
    assert len(cross) == len(want) == 4
    for got, ref in zip(cross, want, strict=True):
        assert got.shape == ref.shape == (1, 4, 64, 16)
        assert rel_error(got, ref) < TOL


def test_decode_steps_reproduce_the_logits_of_the_whole_sequence():
    """Token by token through the step (self cache written at the right slot, cross K/V read), each
    position's logits are transformers' on the whole decoder sequence."""
    model, _, _, step = zoo()
    x = features(2)
    cross = cross_of(x)
    sequence = torch.randint(0, 256, (1, 10), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(input_features=x, decoder_input_ids=sequence, use_cache=False).logits
    cache = empty_cache(step)
    for i in range(sequence.shape[1]):
        logits, *cache = hoid.run(step, sequence[:, i:i + 1], torch.tensor([i]), *cross, *cache)
        assert rel_error(logits[:, 0], want[:, i]) < TOL, f"position {i}"
    assert torch.count_nonzero(cache[0][:, :, sequence.shape[1]:]) == 0  # nothing written past the tokens


@functools.cache
def steered():
    """The tiny model with 10x the published init scale (init_std 0.2): at 0.02 the random decoder's
    greedy tokens hardly depend on the audio (one token repeated), which would make generation a weak test."""
    from transformers import WhisperForConditionalGeneration

    cfg = whisper.config(TINY)
    cfg.init_std = 0.2
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(cfg).eval()
    return model, whisper.encoder_graph(model), whisper.cross_kv_graph(model), whisper.decode_step_graph(model, 16)


@pytest.mark.parametrize("seed", [4, 5])
def test_greedy_generation_gives_transformers_tokens(seed):
    model, enc, kv, step = steered()
    x = features(seed)
    cross = hoid.run(kv, hoid.run(enc, x)[0])
    prompt = torch.tensor([[254, 17, 99]])
    ours = generate(step, prompt, 12, run=lambda g, ids, pos, *cache: hoid.run(g, ids, pos, *cross, *cache))
    ids, past = prompt, None
    with torch.no_grad():
        encoded = model.model.encoder(x)
        for _ in range(12):  # transformers' own cache (dynamic), one token at a time
            out = model(encoder_outputs=encoded, decoder_input_ids=ids if past is None else ids[:, -1:],
                        cache=past, use_cache=True)
            past = out.cache
            ids = torch.cat([ids, out.logits[:, -1:].argmax(-1)], dim=1)
    assert ours.shape == (1, 15)
    assert torch.equal(ours, ids)
    assert len(set(ours[0, 3:].tolist())) >= 4  # a real sequence, not one token repeated


def test_decode_step_inputs_and_outputs_are_in_the_documented_order():
    _, _, _, step = zoo()
    caches = [f"cache.{i}.{kv}" for i in range(2) for kv in "kv"]
    assert [v.name for v in step.runtime_inputs] == ["input_ids", "position", *whisper.cross_names(2), *caches]
    assert [v.type.shape for v in step.inputs_of_kind("input")[2:]] == [(1, 4, 64, 16)] * 4
    assert [v.type.shape for v in step.inputs_of_kind("state")] == [(1, 4, CACHE_LEN, 16)] * 4
    assert step.outputs[0].type.shape == (1, 1, 256)
    assert [v.name for v in step.outputs[1:]] == [step.state_updates[c] for c in caches]
    # one self- and one cross-attention per layer; the cross one never re-projects encoder states
    assert step.op_counts()["sdpa"] == 4 and step.op_counts()["index_copy"] == 4
    assert "model.decoder.layers.0.encoder_attn.k_proj.weight" not in step.weights
    assert "model.decoder.embed_tokens.weight" in step.weights and "proj_out.weight" not in step.weights  # tied


def test_a_cache_longer_than_the_decoder_positions_is_refused():
    with pytest.raises(ValueError, match="exceeds the decoder's 64 positions"):
        whisper.decode_step_graph(zoo()[0], cache_len=65)


def test_full_size_graphs_have_the_published_shapes():
    """Whisper-large-v3 itself on the meta device: 1.54B parameters; its graphs, imported at full width over
    2 of its 32 encoder and 32 decoder layers (each layer the same: torch.export of all of them takes a
    minute on the CI's 2 cores): 30 s of audio in, 1500 states of 1280 out; the step attends over 448
    cache slots and 1500 encoder positions in 20 heads of 64."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = whisper.build_model("whisper-large-v3", device="meta", dtype=torch.bfloat16)
        assert sum(p.numel() for p in model.parameters()) == 1_543_490_560
        model.model.encoder.layers = model.model.encoder.layers[:2]
        model.model.decoder.layers = model.model.decoder.layers[:2]
        model.config.encoder_layers = model.config.decoder_layers = 2
        enc = whisper.encoder_graph(model)
        step = whisper.decode_step_graph(model, cache_len=448)
    assert enc.runtime_inputs[0].type == hoid.TensorType((1, 128, 3000), "bf16")
    assert enc.outputs[0].type == hoid.TensorType((1, 1500, 1280), "bf16")
    ops = enc.op_counts()
    # per layer: q, k, v, out, fc1, fc2 matmuls, two norms and one attention; plus the stem and final norm
    assert (ops["conv"], ops["gelu"], ops["sdpa"], ops["matmul"], ops["layer_norm"]) == (2, 2 + 2, 2, 6 * 2, 2 * 2 + 1)
    assert step.outputs[0].type == hoid.TensorType((1, 1, 51866), "bf16")
    assert [v.type.shape for v in step.inputs_of_kind("state")] == [(1, 20, 448, 64)] * 4
    assert [v.type.shape for v in step.inputs_of_kind("input")[2:]] == [(1, 20, 1500, 64)] * 4
    ops = step.op_counts()
    # per layer: self q, k, v, out, cross q, out, fc1, fc2; and the head
    assert (ops["sdpa"], ops["index_copy"], ops["matmul"], ops["layer_norm"]) == (4, 4, 8 * 2 + 1, 3 * 2 + 1)
    # every parameter is in one of the two graphs (cross K/V projections: in cross_kv_graph's)
    cross_kv = 2 * 2 * (1280 * 1280) + 2 * 1280  # k_proj has no bias, v_proj has
    assert enc.weight_bytes() / 2 + step.weight_bytes() / 2 + cross_kv == sum(p.numel() for p in model.parameters())


def _same(a, b) -> float:
    return max(rel_error(x, y) for x, y in zip(a, b, strict=True))


def test_rewritten_graphs_compute_the_same():
    _, enc, kv, step = zoo()
    x = features(5)
    for graph, inputs in ((enc, (x,)), (kv, (hoid.run(enc, x)[0],))):
        rewritten = hoid.search.rewrite(graph, device="h200")
        assert _same(hoid.run(rewritten, *inputs), hoid.run(graph, *inputs)) < TOL
    rewritten = hoid.search.rewrite(step, device="h200")
    inputs = (torch.tensor([[7]]), torch.tensor([5]), *cross_of(x), *[torch.randn(c.shape) for c in empty_cache(step)])
    assert _same(hoid.run(rewritten, *inputs), hoid.run(step, *inputs)) < TOL


def test_compiled_graphs_match_the_interpreter():
    """hoid.compile on the CPU of the rewritten graphs: the encoder, then four steps whose cache stays in
    the compiled step's own state buffers."""
    _, enc, kv, step = zoo()
    x = features(6)
    compiled_enc = hoid.compile(hoid.search.rewrite(enc, device="h200"), device="cpu")
    assert rel_error(compiled_enc(x)[0], hoid.run(enc, x)[0]) < TOL
    cross = cross_of(x)
    compiled = hoid.compile(hoid.search.rewrite(step, device="h200"), device="cpu")
    cache = empty_cache(step)
    for i, token in enumerate((254, 3, 80, 41)):
        ids, position = torch.tensor([[token]]), torch.tensor([i])
        want, *cache = hoid.run(step, ids, position, *cross, *cache)
        got, *_ = compiled(ids, position, *cross, *compiled.state)
        assert rel_error(got, want) < TOL, f"step {i}"


def test_the_step_passes_its_cache_by_the_keyword_the_decoder_takes():
    """transformers 5.17 (the H200's, 12-05) names the decoder's cache `past_key_values`, later ones `cache`;
    the other name vanished into the decoder's **kwargs and the step ran uncached, projecting an empty
    stand-in for the encoder states ("mat1 and mat2 shapes cannot be multiplied (1x0 and 1280x1280)")."""
    from types import SimpleNamespace

    from torch import nn

    model = zoo()[0]

    class OlderDecoder(nn.Module):  # 5.17's signature: what it does not name, it ignores
        def __init__(self, decoder):
            super().__init__()
            self.decoder = decoder

        def forward(self, input_ids=None, encoder_hidden_states=None, past_key_values=None, position_ids=None,
                    use_cache=None, **ignored):
            return self.decoder(input_ids=input_ids, encoder_hidden_states=encoder_hidden_states,
                                cache=past_key_values, position_ids=position_ids, use_cache=use_cache)

    older = SimpleNamespace(config=model.config, model=SimpleNamespace(decoder=OlderDecoder(model.model.decoder)),
                            proj_out=model.proj_out, dtype=model.dtype, device=model.device)
    cross = cross_of(features(4))
    token, position = torch.tensor([[7]]), torch.tensor([0])
    with torch.no_grad():
        want = whisper.WhisperDecodeStep(model, CACHE_LEN)(token, position, *cross)
        got = whisper.WhisperDecodeStep(older, CACHE_LEN)(token, position, *cross)
    assert rel_error(got, want) < TOL


def test_a_decoder_that_takes_no_cache_keyword_is_an_error():
    from torch import nn

    from hoid.models.llm import cache_keyword

    class Uncached(nn.Module):
        def forward(self, input_ids=None, **kwargs):
            return input_ids

    with pytest.raises(TypeError, match="neither `cache` nor `past_key_values`"):
        cache_keyword(Uncached())

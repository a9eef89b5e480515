"""The importer is general: tiny random-weight transformers models of five other kinds import and
run exactly (float32, relative L2 error < 1e-5), and one that cannot import says everything it lacks."""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

import hoid
from hoid.ir.from_torch import flatten_outputs
from tests.oracle import rel_error

transformers = pytest.importorskip("transformers")  # a dev dependency (pyproject: [dev])

# hoid's own calls into torch.export must not warn about torch's internals (a user can do nothing about them).
pytestmark = pytest.mark.filterwarnings("error::FutureWarning")



def vit():
    cfg = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=128, image_size=32, patch_size=8, num_labels=10)
    return transformers.ViTForImageClassification(cfg), (torch.randn(1, 3, 32, 32),), {}


def whisper_encoder():
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    cfg = transformers.WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=4,
                                     encoder_ffn_dim=128, num_mel_bins=16, max_source_positions=16,
                                     vocab_size=100, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                     decoder_start_token_id=1)
    return WhisperEncoder(cfg), (torch.randn(1, 16, 32),), {}


def qwen3_moe(experts_implementation="batched_mm"):
    cfg = transformers.Qwen3MoeConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                      moe_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=16, num_experts=4,
                                      num_experts_per_tok=2)
    model = transformers.Qwen3MoeForCausalLM(cfg)
    # batched_mm gathers each token's expert weights and multiplies them (bmm): static shapes.
    # The default (grouped_mm) sorts tokens by expert and calls a transformers custom op.
    model.set_experts_implementation(experts_implementation)
    return model, (torch.randint(0, 128, (1, 8)),), {"use_cache": False}


def resnet():
    cfg = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                    layer_type="basic", num_labels=10)
    return transformers.ResNetForImageClassification(cfg), (torch.randn(2, 3, 32, 32),), {}


def t5_encoder():
    cfg = transformers.T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)
    return transformers.T5EncoderModel(cfg), (torch.randint(0, 128, (1, 8)),), {}


MODELS = {"vit": vit, "whisper_encoder": whisper_encoder, "qwen3_moe": qwen3_moe, "resnet": resnet,
          "t5_encoder": t5_encoder}


@functools.cache
def imported(kind: str):
    """(model, args, kwargs, graph), exported once per test module run."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' notes on tiny configs
        model, args, kwargs = MODELS[kind]()
        model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the import itself: no warning the user cannot act on
        return model, args, kwargs, hoid.from_torch(model, args, kwargs)


@pytest.mark.parametrize("kind", list(MODELS))
def test_tiny_model_imports_and_runs_exactly(kind):
    model, args, kwargs, g = imported(kind)
    with torch.no_grad():
        want = flatten_outputs(model(*args, **kwargs))
    got = hoid.run(g, *args)
    assert len(got) == len(want) >= 1
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert rel_error(a, b) < 1e-5


def test_qwen3_moe_router_is_a_topk_node():
    g = imported("qwen3_moe")[-1]
    assert g.op_counts()["topk"] == 2  # one router per layer


def test_a_model_with_missing_ops_lists_all_of_them():
    """Qwen3-MoE's default experts path needs three things hoid lacks; one error names all three."""
    torch.manual_seed(0)
    model, args, kwargs = qwen3_moe(experts_implementation="grouped_mm")
    with pytest.raises(hoid.UnsupportedOpError) as info:
        hoid.from_torch(model.eval(), args, kwargs)
    missing = {"aten.sort.default", "aten.histc.default", "transformers.grouped_mm_fallback.default"}
    assert set(info.value.ops) == missing
    assert info.value.ops["aten.sort.default"] == 2  # once per layer
    assert str(info.value).count("first used at") == 3
    assert "set_experts_implementation('batched_mm')" in str(info.value)  # the way out

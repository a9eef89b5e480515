"""The fusible regions of the imported tiny ViT, Whisper encoder, ResNet and T5 encoder: each region's
generated kernel is verified against the interpreter (hoid.verify), the shapes the issue names are fused
(layer norms with their residual add, GELU chains, batch norm + ReLU + residual, T5's RMSNorm and its
integer position buckets, views read through: Whisper's permuted conv output, T5's expanded mask), and what
is refused says why."""

from __future__ import annotations

import functools

import pytest

from hoid.kernels.codegen import find_regions
from tests.ir.test_from_torch_models import imported

from .helpers import assert_verified

pytest.importorskip("transformers")

MODELS = ("vit", "whisper_encoder", "resnet", "t5_encoder")


@functools.cache
def found(kind: str):
    return find_regions(imported(kind)[3])


def _ops(fused) -> list[str]:
    return [n.op for n in fused.region.nodes]


@pytest.mark.parametrize("kind", MODELS)
def test_every_generated_kernel_of_the_model_passes_verify(kind):
    result = found(kind)
    assert result.regions
    seen = set()
    for fused in result.regions:
        if fused.generated.spec.id in seen:  # the same region of another layer: the same kernel
            continue
        seen.add(fused.generated.spec.id)
        assert_verified(fused.generated, trials=3)


def test_vit_fuses_residual_add_into_layer_norm_and_bias_into_gelu():
    regions = [_ops(f) for f in found("vit").regions]
    assert ["add", "add", "layer_norm"] in regions  # the bias add of the projection, the residual, the norm
    assert ["add", "gelu"] in regions


def test_whisper_fuses_its_layer_norms_and_gelus():
    regions = [_ops(f) for f in found("whisper_encoder").regions]
    assert ["add", "add", "layer_norm"] in regions and ["gelu"] in regions
    # the second conv's gelu, permuted to [B, T, C], plus the positions, into the first layer norm: one kernel
    assert ["gelu", "permute", "add", "layer_norm"] in regions


def test_resnet_fuses_batch_norm_relu_and_the_residual():
    regions = [_ops(f) for f in found("resnet").regions]
    assert any(ops[-2:] == ["add", "relu"] and ops.count("mul") >= 1 for ops in regions), regions


def test_t5_fuses_rmsnorm_and_the_integer_bucket_chain():
    regions = [_ops(f) for f in found("t5_encoder").regions]
    assert any(ops[:3] == ["pow", "mean", "add"] and "rsqrt" in ops for ops in regions)
    buckets = max(regions, key=len)
    assert {"cast", "gt", "lt", "where", "log", "minimum", "abs"} <= set(buckets)


def test_t5_reads_its_mask_and_position_bias_through_their_views():
    """T5's attention mask is expanded once and read by every layer, its position bias permuted and reshaped:
    the kernels read through those views (the mask before its expand), and no refusal is for a view."""
    regions = [_ops(f) for f in found("t5_encoder").regions]
    assert any({"expand", "permute", "reshape", "where"} <= set(ops) for ops in regions), regions
    reasons = [r.reason for r in found("t5_encoder").refusals]
    assert all(reasons) and not any("view" in r for r in reasons), reasons

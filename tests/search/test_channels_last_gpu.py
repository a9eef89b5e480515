"""On the GPU (marked gpu): the tiny UNet's channels-last extraction, with the library's kernels (cuDNN's NHWC
convolutions, the NHWC group norm + SiLU), compiled under a CUDA graph, computes the interpreter's prediction."""

from __future__ import annotations

import pytest
import torch

import hoid

from .test_channels_last import _CheaperChannelsLast, _extract, _unet

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _needs_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


def test_the_channels_last_unet_runs_under_a_cuda_graph_and_predicts_the_same():
    from hoid.models import diffusion
    from tests.oracle import rel_error

    graph = _unet()
    rewritten = _extract(graph, _CheaperChannelsLast)
    kernels = {n.attrs["kernel"] for n in rewritten.nodes if n.op == "kernel"}
    assert "triton.group_norm_nhwc_silu" in kernels and rewritten.op_counts()["conv_nhwc"] == 25
    compiled = hoid.compile(rewritten, device="cuda")
    assert not compiled.fallbacks, compiled.fallbacks
    inputs = diffusion.unet_inputs(graph, seed=8)
    got = compiled(*[t.cuda() for t in inputs])[0]
    assert compiled.captured, compiled.cuda_graph_reason
    want = hoid.run(graph, *inputs)[0]
    # float32 throughout; cuDNN may take TF32 for the convolutions, Triton's norms reduce in another order
    assert rel_error(got.cpu(), want) < 1e-2

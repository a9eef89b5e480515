"""`torch.linear_bias_gelu`: GELU(x @ weight.T + bias) as one `torch._addmm_activation` (on NVIDIA GPUs the GELU
runs in cuBLASLt's GEMM epilogue, on the accumulator before it is rounded and stored).

An encoder's MLP widens to 4x its hidden size and applies GELU there: BGE-M3 at 32 x 512 tokens writes a
[16384, 4096] bf16 intermediate (128 MiB), and GELU as its own pass reads and writes it again: 2.34 ms of a
22.8 ms step on the H100 (12-05), as its own kernel in Inductor's max-autotune step too (2.30 ms). In the
epilogue the pass is gone.

The pattern is the exact (erf) GELU, as BERT-family encoders, ViT and Whisper write it. On CUDA the kernel
computes the tanh form: cuBLASLt's GELU epilogue is that approximation, and where torch cannot use the
epilogue it applies `gelu(..., "tanh")` after the GEMM to match it (aten/src/ATen/native/cuda/Blas.cpp,
`addmm_out_cuda_impl`). The tanh form differs from erf's by at most 4.7e-4 in value (at x = 2.70; less than
a bf16 ulp for outputs above 0.06 in magnitude, more for small negative outputs): whether that passes is the
numerical check's call on the GPU, at the region's dtype, and an f32 region, where it is many ulps, fails
its check there and is recorded so. On the CPU torch applies the erf form: the kernel is exact there.
"""

from __future__ import annotations

import sys

import torch

from ...ir import GraphBuilder, Value
from ..pattern import Pattern
from ._torch_vendor import source_of, vendor_spec
from .torch_linear_bias import CONSTRAINTS, LINEAR_BIAS
from .torch_linear_bias import examples as _linear_bias_examples


def _linear_bias_gelu(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    return b.gelu(LINEAR_BIAS.build(b, ins, attrs), approximate="none")


LINEAR_BIAS_GELU = Pattern("linear_bias_gelu", ("x", "weight", "bias"), _linear_bias_gelu,
                           doc="gelu(x @ weight.T + bias), erf GELU: an encoder MLP's widening half")


def launch(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> None:
    """out [..., N] <- gelu(x [..., K] @ weight.T + bias), the leading dims folded into the GEMM's rows."""
    torch._addmm_activation(bias, x.reshape(-1, x.shape[-1]), weight.t(), use_gelu=True,
                            out=out.view(-1, out.shape[-1]))


SPEC = vendor_spec(
    "torch.linear_bias_gelu", LINEAR_BIAS_GELU, launch,
    source=source_of(sys.modules[__name__], torch._addmm_activation),
    constraints=CONSTRAINTS,  # the operands are torch.linear_bias's, by the same names
    deterministic=False,  # cuBLAS may split K across blocks (see torch.matmul): not bitwise run to run
    # torch.linear_bias's f32 calls (in 16 bits the pattern rounds the product and the sum before the GELU, the
    # epilogue only its result); on CUDA an f32 check sees the tanh form and rejects the kernel (so it is no
    # Triton kernel of tests/kernels/library/test_gpu.py), and a model's 16-bit regions are checked at their
    # own dtype where they occur (the GPU test of this kernel)
    examples=_linear_bias_examples,
    doc="gelu(x @ weight.T + bias) through torch._addmm_activation (GELU in cuBLASLt's epilogue on NVIDIA GPUs)",
)

"""`torch.linear_bias`: `x @ weight.T + bias` as one `torch.addmm` (cuBLASLt's bias epilogue on NVIDIA GPUs).

An encoder's projections all carry a bias (BGE-M3: Q, K, V, the output and both MLP matmuls), which the
import writes as matmul + add: the add alone reads and writes the whole output once more (at batch 32 x 512
tokens, 32 MiB per 1024-wide projection). addmm adds the bias in the GEMM's epilogue, before the one
rounding to the output dtype, so it is at least as accurate as the two ops it replaces.
"""

from __future__ import annotations

import random
import sys

import torch

from ...ir import GraphBuilder, TensorType, Value
from ..pattern import Pattern
from . import _constraints as C
from ._torch_vendor import source_of, vendor_spec


def _linear_bias(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    x, weight, bias = ins
    return b.add(b.matmul(x, b.transpose(weight, dim0=0, dim1=1)), bias)


LINEAR_BIAS = Pattern("linear_bias", ("x", "weight", "bias"), _linear_bias,
                      doc="x @ weight.T + bias: a linear layer with bias (weight [N, K], bias [N])")


def launch(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> None:
    """out [..., N] <- x [..., K] @ weight.T + bias, the leading dims folded into addmm's rows."""
    torch.addmm(bias, x.reshape(-1, x.shape[-1]), weight.t(), out=out.view(-1, out.shape[-1]))


def _shapes_fit(t) -> bool:
    x, weight, bias = t
    return (x.rank >= 2 and weight.rank == 2 and bias.rank == 1 and x.shape[-1] == weight.shape[1]
            and bias.shape[0] == weight.shape[0])


def examples(rng: random.Random):
    """f32 calls: in 16 bits the pattern rounds the matmul before adding the bias and addmm only after, so
    where the bias cancels the product they differ by an ulp of the product (tests/kernels/library/
    test_torch_linear_bias.py bounds that against float64)."""
    lead = tuple(rng.randint(1, 5) for _ in range(rng.randint(1, 2)))
    k, n = rng.choice((8, 64, 96)), rng.choice((16, 48, 128))
    return [TensorType(lead + (k,), "f32"), TensorType((n, k), "f32"), TensorType((n,), "f32")], {}


# what addmm asks of a linear layer's operands (x, weight, bias), its GELU form's too (`torch_linear_bias_gelu`)
CONSTRAINTS = (C.float_dtype(LINEAR_BIAS.operands, "x", "weight", "bias"),
               C.shape_holds("x [..., K] (rank 2 or more), weight [N, K], bias [N]", _shapes_fit),
               C.contiguous(LINEAR_BIAS.operands, "bias"))

SPEC = vendor_spec(
    "torch.linear_bias", LINEAR_BIAS, launch,
    source=source_of(sys.modules[__name__], torch.addmm),
    constraints=CONSTRAINTS,
    # cuBLAS may split K across blocks (see torch.matmul): not bitwise run to run
    deterministic=False,
    examples=examples,
    doc="x @ weight.T + bias through torch.addmm (the bias in cuBLASLt's epilogue on NVIDIA GPUs)",
)

"""The built-in ops: every op's torch reference agrees with its inference, plus semantics easy to get wrong.

The sweep draws each op's own samples (seeded), runs the reference on random tensors laid out as the
sampled types say, and checks shapes, dtypes and layouts against inference: the contract every other
package (importer, rules, kernels, checker) builds on.
"""

from __future__ import annotations

import random
import zlib

import pytest
import torch

from hoid.ir.dtypes import FLOAT_DTYPES
from hoid.ir.registry import all_ops, get_op, infer_node
from hoid.ir.types import TensorType

SAMPLES_PER_OP = 8
# Known bugs outside this family, kept visible: strict xfail fails as soon as they are fixed.
KNOWN_BUGS = {
    name: "elementwise.py passes scalar= to torch.%s as a Python number; torch wants a tensor" % name
    for name in ("logical_and", "logical_or")
}
SWEPT_OPS = [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[name])) if name in KNOWN_BUGS else name
    for name in sorted(all_ops()) if name != "kernel"  # kernel has its own tests
]


def random_tensor(t: TensorType, gen: torch.Generator, bound: int | None = None) -> torch.Tensor:
    """Random contents in `t`'s exact layout: floats normal, integers in [0, bound) (or 1..5), bools fair."""
    if t.numel == 0:
        return torch.empty(t.shape, dtype=t.torch_dtype)
    storage_size = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.layout(), strict=True))
    if t.dtype == "bool":
        storage = torch.rand(storage_size, generator=gen) < 0.5
    elif t.dtype in FLOAT_DTYPES:
        storage = torch.randn(storage_size, generator=gen, dtype=torch.float64).to(t.torch_dtype)
    else:  # non-index integers stay positive and non-zero: integer division by zero raises in torch
        low, high = (0, bound) if bound is not None else (1, 6)
        storage = torch.randint(low, high, (storage_size,), generator=gen).to(t.torch_dtype)
    return storage.as_strided(t.shape, t.layout())


def strided_dims(t: TensorType) -> list[tuple[int, int]]:
    """(size, stride) of the dims that have a layout: size-1 dims may carry any stride in torch."""
    if t.numel == 0:
        return []
    return [(size, stride) for size, stride in zip(t.shape, t.layout(), strict=True) if size != 1]


def run_reference(name: str, types: list[TensorType], attrs: dict, gen: torch.Generator):
    """(inferred output types, reference outputs, normalized attrs) of one call on random inputs."""
    op = get_op(name)
    outs, attrs = infer_node(name, types, attrs)
    bounds = op.index_bounds(types, attrs) if op.index_bounds else {}
    tensors = [random_tensor(t, gen, bounds.get(i)) for i, t in enumerate(types)]
    result = op.reference(*tensors, **attrs)
    return outs, result if isinstance(result, tuple) else (result,), attrs


# --- the sweep over every op ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", SWEPT_OPS)
def test_reference_agrees_with_inference(name):
    op = get_op(name)
    assert op.sample is not None, f"{name} has no sampler: every built-in op needs one"
    seed = zlib.crc32(name.encode())
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    for _ in range(SAMPLES_PER_OP):
        types, attrs = op.sample(rng)
        call = f"{name}({', '.join(map(str, types))}, {attrs})"
        outs, results, attrs = run_reference(name, types, attrs, gen)
        assert len(results) == len(outs), f"{call}: reference gave {len(results)} outputs, infer {len(outs)}"
        for got, want in zip(results, outs, strict=True):
            got_type = TensorType.of(got)
            assert got_type.same_data_type(want), f"{call}: reference gave {got_type}, infer says {want}"
            assert strided_dims(got_type) == strided_dims(want), f"{call}: layout {got_type}, infer {want}"
        flops, moved = op.count_flops(types, outs, attrs), op.count_bytes(types, outs, attrs)
        assert isinstance(flops, int) and flops >= 0, f"{call}: flops {flops!r}"
        assert isinstance(moved, int) and moved >= 0, f"{call}: bytes {moved!r}"

"""The built-in ops: every op's torch reference agrees with its inference, plus semantics easy to get wrong.

The sweep draws each op's own samples (seeded), runs the reference on random tensors laid out as the
sampled types say, and checks shapes, dtypes and layouts against inference: the contract every other
package (importer, rules, kernels, checker) builds on.
"""

from __future__ import annotations

import itertools
import random
import zlib

import pytest
import torch

from hoid.errors import GraphError
from hoid.ir.dtypes import FLOAT_DTYPES
from hoid.ir.registry import all_ops, get_op, infer_node
from hoid.ir.types import TensorType

SAMPLES_PER_OP = 8
SWEPT_OPS = [name for name in sorted(all_ops()) if name != "kernel"]  # kernel has its own tests


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


# --- inference errors name the problem ------------------------------------------------------------------

def T(shape, dtype="f32", strides=None) -> TensorType:
    return TensorType(shape, dtype, strides)


INFER_ERRORS = [
    ("add", [T((3, 4)), T((5,))], {}, r"shapes \[3, 4\], \[5\] do not broadcast"),
    ("matmul", [T((2, 64)), T((32, 3))], {}, r"inner dims differ: a is \[\.\.\., 64\], b is \[32, \.\.\.\]"),
    ("matmul", [T((2, 3, 4)), T((5, 4, 2))], {}, r"batch dims \[2\] and \[5\] do not broadcast"),
    ("matmul", [T((2, 4), "f16"), T((4, 3))], {}, r"a is f16, b is f32"),
    ("softmax", [T((3, 4))], {"dim": 2}, r"dim 2 is out of range for rank 2"),
    ("softmax", [T((3, 4), "i32")], {"dim": 0}, r"x must be a floating-point tensor, got i32"),
    ("sum", [T((3, 4))], {"dim": (0, -2)}, r"repeat a dim"),
    ("sum", [T((3, 4))], {"dim": ()}, r"dim is empty"),
    ("gather", [T((3, 4)), T((3, 4))], {"dim": 0}, r"index must be i64, got f32"),
    ("gather", [T((3, 4)), T((3, 5), "i64")], {"dim": 0}, r"no larger in any dim \(but dim 0\)"),
    ("index_copy", [T((1, 2, 8, 4)), T((1,), "i64"), T((1, 2, 2, 4))], {"dim": 2},
     r"expected \[1, 2, 1, 4\]"),
    ("embedding", [T((10, 4)), T((3,), "f32")], {}, r"indices must be i64 or i32, got f32"),
    ("reshape", [T((3, 4))], {"shape": (5, 2)}, r"x has 12 elements, shape \[5, 2\] has 10"),
    ("reshape", [T((3, 4))], {"shape": (-1, 4)}, r"negative size; reshape needs every size written out"),
    ("permute", [T((3, 4))], {"dims": (0, 0)}, r"not a permutation of 0\.\.1"),
    ("expand", [T((3, 1))], {"shape": (4, 2)}, r"cannot expand dim 0 of size 3 to 4"),
    ("slice", [T((3, 4))], {"dim": 1, "start": 0, "end": 4, "step": 0}, r"step must be >= 1"),
    ("concat", [T((3, 4)), T((2, 5))], {"dim": 0}, r"operand 1 is \[2, 5\], operand 0 is \[3, 4\]"),
    ("split", [T((3, 4))], {"sizes": (1, 2), "dim": 1}, r"sum to 4"),
    ("split", [T(())], {"sizes": (1,), "dim": 0}, r"x must have rank 1 or more"),
    ("group_norm", [T((1, 1, 1))], {"num_groups": 1}, r"one value per group"),
    # torch.sub raises for a bool tensor (hypothesis drew sub(clamp(eq(..)), 0.5) in the codegen property test)
    ("sub", [T((2, 3), "bool")], {"scalar": 0.5}, r"a bool operand is not supported"),
    ("sub", [T((2, 3)), T((2, 3), "bool")], {}, r"a bool operand is not supported"),
    ("rmsnorm", [T((2, 8)), T((4,))], {}, r"weight is \[4\], expected \[8\] \(the last dim of x\)"),
    ("rope", [T((1, 2, 3, 5)), T((3, 5)), T((3, 5))], {}, r"last dim of x must be even"),
    ("sdpa", [T((1, 8, 3, 4)), T((1, 2, 5, 4)), T((1, 2, 5, 4))], {},
     r"8 heads, k and v have 2: set enable_gqa"),
    ("sdpa", [T((1, 6, 3, 4)), T((1, 4, 5, 4)), T((1, 4, 5, 4))], {"enable_gqa": True},
     r"multiple of the kv"),
    ("sdpa", [T((1, 2, 3, 4)), T((1, 2, 5, 8)), T((1, 2, 5, 4))], {}, r"head dims differ"),
    ("sdpa", [T((1, 2, 3, 4)), T((1, 2, 5, 4)), T((1, 2, 5, 4)), T((3, 5), "i32")], {}, r"mask must be bool"),
    ("sdpa", [T((1, 2, 3, 4)), T((1, 2, 5, 4)), T((1, 2, 5, 4)), T((3, 5), "bool")], {"is_causal": True},
     r"either a mask or is_causal"),
    ("conv", [T((1, 3, 8)), T((4, 2, 3))], {"stride": (1,), "padding": (0,), "dilation": (1,)},
     r"x has 3 channels"),
    ("conv", [T((1, 3, 8)), T((4, 3, 3))], {"stride": (1, 1), "padding": (0,), "dilation": (1,)},
     r"stride \[1, 1\] needs 1 entries"),
    ("max_pool", [T((1, 3, 2))], {"kernel_size": (5,), "stride": (1,), "padding": (0,)},
     r"smaller than the window 5"),
    ("arange", [], {"start": 5, "end": 0}, r"inconsistent with step sign"),
    ("arange", [], {"start": 0, "end": 2, "step": 0.5}, r"step must be nonzero, got 0.5"),
    ("full", [], {"shape": (2,), "value": 300, "dtype": "i8"}, r"value 300 does not fit i8"),
]


@pytest.mark.parametrize("name, types, attrs, message", INFER_ERRORS,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(INFER_ERRORS)])
def test_inference_error_names_the_problem(name, types, attrs, message):
    with pytest.raises(GraphError, match=message) as info:
        infer_node(name, types, attrs)
    assert str(info.value).startswith(f"{name}("), "the message starts with the op and its input types"


# --- semantics that are easy to get wrong ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rmsnorm_is_transformers_form_and_close_to_exact(dtype):
    gen = torch.Generator().manual_seed(0)
    x = (3 * torch.randn(4, 16, generator=gen)).to(dtype)
    weight = (1 + torch.randn(16, generator=gen)).to(dtype)
    got = get_op("rmsnorm").reference(x, weight, eps=1e-6)
    # transformers' LlamaRMSNorm.forward, step for step: the pattern rules need bit equality with it.
    hidden = x.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + 1e-6)
    assert torch.equal(got, weight * hidden.to(dtype))
    x64, w64 = x.double(), weight.double()
    exact = w64 * x64 / torch.sqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6)
    tolerance = {torch.float32: 1e-5, torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
    torch.testing.assert_close(got.double(), exact, rtol=tolerance, atol=tolerance)


def test_rmsnorm_promotes_to_the_weight_dtype():
    (out,), _ = infer_node("rmsnorm", [T((2, 8), "bf16"), T((8,), "f32")], {})
    assert out.dtype == "f32"
    x, w = torch.randn(2, 8).bfloat16(), torch.randn(8)
    assert get_op("rmsnorm").reference(x, w, eps=1e-6).dtype == torch.float32


def test_rope_rotates_pairs_half_a_dim_apart():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 5, 8, generator=gen, dtype=torch.float64)
    angle = torch.randn(5, 8, generator=gen, dtype=torch.float64)
    cos, sin = angle.cos(), angle.sin()
    got = get_op("rope").reference(x, cos, sin)
    half = 4
    # rotate_half pairs element i with element i + D/2: (a, b) -> (a cos - b sin, b cos + a sin).
    a, b = x[..., :half], x[..., half:]
    first = a * cos[:, :half] - b * sin[:, :half]
    second = b * cos[:, half:] + a * sin[:, half:]
    torch.testing.assert_close(got, torch.cat((first, second), dim=-1))


def _plain_attention(q, k, v, scale, mask=None, causal=False):
    """Attention written out in float64, with kv heads repeated for each group of query heads."""
    group = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)
    scores = (q @ k.transpose(-1, -2)) * scale
    if causal:  # top-left aligned: query i sees keys 0..i
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        scores = scores + mask
    return scores.softmax(-1) @ v


@pytest.mark.parametrize("mask_kind", ["none", "causal", "bool", "float"])
@pytest.mark.parametrize("heads", [(4, 4), (4, 2), (6, 1)])
def test_sdpa_matches_plain_attention_with_grouped_heads(mask_kind, heads):
    hq, hkv = heads
    gen = torch.Generator().manual_seed(hq * 10 + hkv)
    q = torch.randn(2, hq, 3, 8, generator=gen, dtype=torch.float64)
    k = torch.randn(2, hkv, 5, 8, generator=gen, dtype=torch.float64)
    v = torch.randn(2, hkv, 5, 6, generator=gen, dtype=torch.float64)
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(3, 5, generator=gen) < 0.7
        mask[:, 0] = True  # every query attends somewhere: an all-masked row is NaN in torch
    elif mask_kind == "float":
        mask = torch.randn(2, 1, 3, 5, generator=gen, dtype=torch.float64)
    types = [TensorType.of(t) for t in (q, k, v, mask) if t is not None]
    attrs = {"is_causal": mask_kind == "causal", "scale": 0.3, "enable_gqa": hq != hkv}
    (out_type,), attrs = infer_node("sdpa", types, attrs)
    got = get_op("sdpa").reference(*(t for t in (q, k, v, mask) if t is not None), **attrs)
    assert TensorType.of(got) == out_type == TensorType((2, hq, 3, 6), "f64")
    torch.testing.assert_close(got, _plain_attention(q, k, v, 0.3, mask, mask_kind == "causal"))


def test_sdpa_default_scale_is_one_over_sqrt_head_dim():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 4, 16, generator=gen, dtype=torch.float64) for _ in range(3))
    got = get_op("sdpa").reference(q, k, v, is_causal=False, scale=None, enable_gqa=False)
    torch.testing.assert_close(got, _plain_attention(q, k, v, 16 ** -0.5))


def test_causal_sdpa_counts_only_the_scores_it_computes():
    q, kv = T((1, 1, 4, 8)), T((1, 1, 6, 8))
    sdpa = get_op("sdpa")
    flops = {causal: sdpa.count_flops([q, kv, kv], [q], {"is_causal": causal}) for causal in (False, True)}
    per_score = 2 * 8 + 2 * 8 + 5
    assert flops[False] == 4 * 6 * per_score
    assert flops[True] == (1 + 2 + 3 + 4) * per_score  # query i sees i + 1 keys


# --- views: layouts, bytes -----------------------------------------------------------------------------

def test_chained_views_declare_torch_strides():
    from hoid.ir import GraphBuilder, run

    b = GraphBuilder("views")
    x = b.input("x", (2, 3, 4, 5), "f32")
    y = b.permute(x, dims=(3, 1, 0, 2))                 # [5, 3, 2, 4]
    y = b.transpose(y, dim0=0, dim1=-1)                 # [4, 3, 2, 5]
    y = b.slice(y, dim=3, start=-4, end=100, step=2)    # [4, 3, 2, 2]
    y = b.slice(y, dim=1, start=1, end=3)               # [4, 2, 2, 2]
    y = b.expand(y, shape=(3, -1, -1, -1, -1))          # [3, 4, 2, 2, 2]
    g = b.build(y)
    checked = []

    def check_layout(node, outs):
        got, want = TensorType.of(outs[0]), node.outputs[0].type
        assert got.shape == want.shape, f"{node.op}: {got} vs {want}"
        assert strided_dims(got) == strided_dims(want), f"{node.op}: {got} vs {want}"
        checked.append(node.op)

    run(g, torch.randn(2, 3, 4, 5), on_node=check_layout)
    assert checked == ["permute", "transpose", "slice", "slice", "expand"]
    assert not g.outputs[0].type.is_contiguous and g.bytes_moved() == 0


def test_reshape_is_free_on_contiguous_input_and_copies_otherwise():
    reshape = get_op("reshape")
    flat, transposed = T((4, 6)), T((4, 6), strides=(1, 4))
    (out,), attrs = infer_node("reshape", [transposed], {"shape": (24,)})
    assert out.is_contiguous
    assert reshape.count_bytes([flat], [out], attrs) == 0
    assert reshape.count_bytes([transposed], [out], attrs) == 2 * 24 * 4
    got = reshape.reference(torch.randn(6, 4).t(), shape=(2, 12))
    assert got.is_contiguous() and got.shape == (2, 12)


def test_reshape_of_a_strided_input_is_a_view_where_torch_can_make_one():
    # the query heads of a merged QKV projection: a slice of the last dim, split into heads
    sliced = T((1, 128, 2048), "bf16", strides=(128 * 4096, 4096, 1))
    (heads,), attrs = infer_node("reshape", [sliced], {"shape": (1, 128, 16, 128)})
    assert heads.strides == (128 * 4096, 4096, 128, 1)
    assert get_op("reshape").count_bytes([sliced], [heads], attrs) == 0
    got = get_op("reshape").reference(torch.randn(1, 128, 4096)[..., :2048], shape=(1, 128, 16, 128))
    assert got.stride() == heads.strides
    # merging the sliced dim with the tokens cannot be a view: a contiguous copy, charged as one
    (flat,), attrs = infer_node("reshape", [sliced], {"shape": (128 * 2048,)})
    assert flat.is_contiguous and get_op("reshape").count_bytes([sliced], [flat], attrs) == 2 * 128 * 2048 * 2


@pytest.mark.parametrize("start, end, step",
                         [(0, 10, 1), (-3, 2**63 - 1, 1), (1, -1, 2), (8, 2, 1), (-20, 20, 3)])
def test_slice_follows_python_slicing(start, end, step):
    (out,), _ = infer_node("slice", [T((7, 5))], {"dim": 0, "start": start, "end": end, "step": step})
    assert out.shape == (len(range(7)[start:end:step]), 5)


# --- costs -----------------------------------------------------------------------------------------

def test_matmul_flops_are_two_batch_m_n_k():
    a, b = T((3, 4, 5)), T((5, 6))
    (out,), attrs = infer_node("matmul", [a, b], {})
    assert out.shape == (3, 4, 6)
    assert get_op("matmul").count_flops([a, b], [out], attrs) == 2 * 3 * 4 * 6 * 5


def test_lookups_and_cache_writes_move_only_the_rows_they_touch():
    table, ids = T((32000, 64), "f16"), T((1, 1), "i64")
    (rows,), attrs = infer_node("embedding", [table, ids], {})
    assert get_op("embedding").count_bytes([table, ids], [rows], attrs) == 8 + 2 * 64 * 2
    cache, pos, new = T((1, 8, 4096, 64), "bf16"), T((1,), "i64"), T((1, 8, 1, 64), "bf16")
    (updated,), attrs = infer_node("index_copy", [cache, pos, new], {"dim": 2})
    assert updated == cache
    assert get_op("index_copy").count_bytes([cache, pos, new], [updated], attrs) == 8 + 2 * new.nbytes


# --- constants ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["i64", "i32", "f32", "f16"])
def test_arange_length_follows_torch(dtype):
    """torch truncates the bounds of i64 ranges (not of other dtypes): arange(0, 2.5) has 2 or 3 elements."""
    bounds = (-2.5, 0, 0.5, 2.5, 7.25)
    for start, end, step in itertools.product(bounds, bounds, (-1.5, -1, 0.3, 1, 2)):
        attrs = {"start": start, "end": end, "step": step, "dtype": dtype}
        try:
            expected = torch.arange(start, end, step, dtype=TensorType((), dtype).torch_dtype).numel()
        except (RuntimeError, ValueError):  # torch's refusal; inference must refuse too
            with pytest.raises(GraphError):
                infer_node("arange", [], attrs)
            continue
        (out,), _ = infer_node("arange", [], attrs)
        assert out.shape == (expected,), attrs


def test_constants_build_and_run_without_operands():
    from hoid.ir import GraphBuilder, run

    b = GraphBuilder("constants")
    x = b.input("x", (4,), "i64")
    steps = b.mul(b.arange(start=0, end=4), b.full(shape=(4,), value=2, dtype="i64"))
    (out,) = run(b.build(b.add(steps, x)), torch.ones(4, dtype=torch.int64))
    assert torch.equal(out, torch.tensor([1, 3, 5, 7]))

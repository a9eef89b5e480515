"""Generated kernels for the region shapes the generator fuses, each checked by hoid.verify against the
interpreter; and the regions it refuses, each with its reason."""

from __future__ import annotations

import pytest

from hoid.ir import Region
from hoid.kernels.codegen import Refused, generate

from .helpers import assert_verified, builder


def test_bias_gelu_residual_is_one_elementwise_kernel():
    b = builder()
    x, h, bias = b.input("x", (6, 48), "f32"), b.input("h", (6, 48), "f32"), b.input("bias", (48,), "f32")
    g = b.build(b.add(b.gelu(b.add(h, bias), approximate="tanh"), x))
    gen = generate(g)
    assert not gen.layout.row_kernel and gen.layout.shape == (6, 48)
    assert "tl.sigmoid" in gen.source.text and "# %t0 = add(%in1, %in2)" in gen.source.text
    assert_verified(gen)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_layer_norm_decomposed_is_one_row_kernel(dtype):
    b = builder()
    x, w = b.input("x", (2, 5, 40), dtype), b.input("w", (40,), dtype)
    mean = b.mean(x, dim=[-1], keepdim=True)
    d = b.sub(x, mean)
    var = b.mean(b.mul(d, d), dim=[-1], keepdim=True)
    g = b.build(b.mul(b.mul(d, b.rsqrt(b.add(var, 1e-5))), w))
    gen = generate(g)
    assert gen.layout.row_kernel and (gen.layout.rows, gen.layout.cols) == (10, 40)
    assert_verified(gen)


def test_softmax_decomposed_with_a_per_row_output():
    """max, exp, sum, divide, and the row max itself as a second output (keepdim=False: one per row)."""
    b = builder()
    x = b.input("x", (3, 7, 33), "f32")
    m = b.amax(x, dim=[-1], keepdim=True)
    e = b.exp(b.sub(x, m))
    s = b.sum(e, dim=[2], keepdim=True)
    flat = b.amax(x, dim=[-1])
    g = b.build(b.div(e, s), b.mul(flat, 2.0))
    gen = generate(g)
    assert len(gen.body.outputs) == 2
    assert_verified(gen)


def test_residual_add_then_layer_norm_op_with_both_outputs():
    b = builder()
    x, r = b.input("x", (4, 64), "f16"), b.input("r", (4, 64), "f16")
    w, bias = b.input("w", (64,), "f16"), b.input("bias", (64,), "f16")
    s = b.add(x, r)
    g = b.build(s, b.layer_norm(s, w, bias, normalized_shape=[64]))
    assert_verified(generate(g))


def test_batch_norm_like_channel_broadcast_and_strided_input():
    """Per-channel [C,1,1] statistics over [N,C,H,W], from a transposed (strided) input."""
    b = builder()
    xt = b.input("xt", (2, 4, 5, 3), "f32")
    x = b.transpose(xt, dim0=2, dim1=3)  # [2,4,3,5], strided
    mean, scale = b.input("mean", (4, 1, 1), "f32"), b.input("scale", (4, 1, 1), "f32")
    y = b.relu(b.mul(b.sub(x, mean), scale))
    full = b.build(y)
    region = Region.of(full, [n for n in full.nodes if n.op != "transpose"])
    body = region.body()
    assert not body.inputs[0].value.type.is_contiguous
    gen = generate(body)
    assert "* 5" in gen.source.text  # the input's own strides, not a contiguous walk
    assert_verified(gen)


def test_integer_and_bool_ops_are_computed_in_their_dtypes():
    """T5's relative-position buckets: integer arithmetic, comparisons, casts both ways, where."""
    b = builder()
    i, j = b.input("i", (6, 1), "i64"), b.input("j", (1, 6), "i64")
    rel = b.sub(j, i)
    neg = b.cast(b.gt(rel, 0), dtype="i64")
    big = b.cast(b.mul(b.log(b.div(b.cast(b.abs(rel), dtype="f32"), 2.0)), 3.0), dtype="i64")
    g = b.build(b.add(b.mul(neg, 8), b.where(b.lt(b.abs(rel), 2), b.abs(rel), b.minimum(big, b.add(big, 1)))),
                b.logical_not(b.eq(rel, 0)))
    gen = generate(g)
    assert "tl.int64" not in gen.source.text.split("def launch")[0].split("# %t0")[0]  # loaded as is
    assert_verified(gen)


def test_a_bool_into_arithmetic_is_promoted_as_torch_does():
    # the property test's find: pow(bool, 0.5) is float in torch, and Triton's sqrt_rn takes no int1
    b = builder()
    x, y = b.input("x", (4,), "f32"), b.input("y", (4,), "i32")
    gen = generate(b.build(b.abs(b.pow(b.le(x, y), 0.5))))
    assert_verified(gen)


def test_python_floor_division_and_modulo_of_negative_integers():
    import torch

    from hoid.kernels.loader import load_entry

    b = builder()
    a, d = b.input("a", (8,), "i32"), b.input("d", (8,), "i32")
    gen = generate(b.build(b.floor_divide(a, d), b.remainder(a, d)))
    x = torch.tensor([7, -7, 7, -7, 0, 5, -1, 9], dtype=torch.int32)
    y = torch.tensor([2, 2, -2, -2, 3, -5, 4, -4], dtype=torch.int32)
    q, r = torch.empty(8, dtype=torch.int32), torch.empty(8, dtype=torch.int32)
    load_entry(gen.source)(x, y, q, r)
    assert q.tolist() == torch.floor_divide(x, y).tolist() and r.tolist() == torch.remainder(x, y).tolist()


def test_an_explicit_cast_down_is_kept():
    """Computing in float32 must not skip the cast to f16 the region asks for."""
    b = builder()
    x = b.input("x", (64,), "f32")
    gen = generate(b.build(b.mul(b.cast(b.mul(x, 1.0001), dtype="f16"), 3.0)))
    assert ".to(tl.float16)" in gen.source.text
    assert_verified(gen)


# --- refused, with the reason ------------------------------------------------------------------------

def _refusal(graph) -> str:
    with pytest.raises(Refused) as e:
        generate(graph)
    return str(e.value)


def test_a_reduction_over_another_dim_is_refused():
    b = builder()
    x = b.input("x", (4, 8), "f32")
    assert "not the last dim" in _refusal(b.build(b.exp(b.sum(x, dim=[0], keepdim=True))))


def test_a_per_row_value_broadcast_against_a_full_one_is_refused():
    b = builder()
    x = b.input("x", (4, 4), "f32")
    assert "value per row" in _refusal(b.build(b.add(b.sum(x, dim=[-1]), x)))


def test_an_op_without_a_template_is_refused_by_name():
    b = builder()
    x = b.input("x", (4, 8), "f32")
    assert "cumsum has no Triton template" in _refusal(b.build(b.cumsum(x, dim=1)))


def test_a_general_pow_is_refused_and_a_square_is_not():
    b = builder()
    x = b.input("x", (4,), "f32")
    assert "pow has no Triton template" in _refusal(b.build(b.pow(x, 2.5)))
    b = builder()
    x = b.input("x", (4,), "f32")
    assert_verified(generate(b.build(b.pow(x, 2))))


def test_rows_of_different_shapes_are_refused():
    b = builder()
    x, y = b.input("x", (4, 8), "f32"), b.input("y", (8,), "f32")
    why = _refusal(b.build(b.add(b.sum(x, dim=[-1], keepdim=True), b.sum(y, dim=[-1], keepdim=True))))
    assert "different shapes" in why


def test_the_same_region_in_two_layers_is_one_kernel():
    b = builder()
    x = b.input("x", (4, 8), "f32")
    h1 = b.relu(b.add(x, 1.0))
    h2 = b.relu(b.add(b.matmul(h1, b.input("w", (8, 8), "f32")), 1.0))
    g = b.build(h2)
    first = generate(Region.of(g, [n for n in g.nodes[:2]]).body())
    second = generate(Region.of(g, [n for n in g.nodes[3:]]).body())
    assert first.spec.id == second.spec.id and first.source.version == second.source.version

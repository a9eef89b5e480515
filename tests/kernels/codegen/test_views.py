"""Views fused into generated kernels: reshape (aligned or not), expand, transpose and permute, read through
by index arithmetic, of region inputs and of values the region computes; each kernel checked by hoid.verify
against the interpreter. And what cannot be fused: a view of a row op's result at other coordinates."""

from __future__ import annotations

import pytest

from hoid.ir import get_op
from hoid.kernels.codegen import Refused, find_regions, generate

from .helpers import assert_verified, builder


def _one_region(graph, **kw):
    found = find_regions(graph, **kw)
    assert len(found.regions) == 1, ([[n.op for n in f.region.nodes] for f in found.regions], found.refusals)
    return found.regions[0]


def _ops(fused) -> list[str]:
    return [n.op for n in fused.region.nodes]


def _loads(gen) -> list[str]:
    return [ln for ln in gen.source.text.splitlines() if "tl.load(" in ln]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_split_heads_reshape_of_an_input_reads_it_without_division(dtype):
    b = builder()
    x, scale = b.input("x", (2, 5, 12), dtype), b.input("scale", (4,), dtype)
    heads = b.reshape(x, shape=(2, 5, 3, 4))
    fused = _one_region(b.build(b.add(b.mul(heads, scale), 1.0)))
    assert _ops(fused) == ["reshape", "mul", "add"]
    assert [gi.value.type.shape for gi in fused.generated.body.inputs] == [(2, 5, 12), (4,)]
    assert all("//" not in ln.replace("rows //", "") for ln in _loads(fused.generated))
    assert_verified(fused.generated)


def test_merge_heads_reshape_of_a_computed_value():
    b = builder()
    x, bias = b.input("x", (2, 5, 3, 4), "f32"), b.input("bias", (12,), "f32")
    merged = b.reshape(b.gelu(x), shape=(2, 5, 12))
    fused = _one_region(b.build(b.add(merged, bias)))
    assert _ops(fused) == ["gelu", "reshape", "add"]
    assert_verified(fused.generated)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_whisper_gelu_permute_add_layer_norm_is_one_kernel(dtype):
    """Whisper's encoder input: gelu(conv) [B, C, T] -> permute to [B, T, C] -> + positions -> layer norm."""
    b = builder()
    x, pos, w = b.input("x", (2, 8, 6), dtype), b.input("pos", (6, 8), dtype), b.input("w", (8,), dtype)
    y = b.add(b.permute(b.gelu(x), dims=[0, 2, 1]), pos)
    fused = _one_region(b.build(y, b.layer_norm(y, w, normalized_shape=[8])))
    assert _ops(fused) == ["gelu", "permute", "add", "layer_norm"]
    assert "where a view reads it" in fused.generated.source.text  # gelu is computed where the permute reads
    assert_verified(fused.generated)


def test_expand_of_an_input_is_read_before_the_expand():
    """An additive mask [B, 1, 1, S] expanded over heads and queries, then softmax: the kernel takes the
    mask itself (an expanded input, stride 0, could not be drawn by any check)."""
    b = builder()
    scores, mask = b.input("scores", (2, 3, 6, 6), "f32"), b.input("mask", (2, 1, 1, 6), "f32")
    fused = _one_region(b.build(b.softmax(b.add(scores, b.expand(mask, shape=(2, 3, 6, 6))), dim=-1)))
    assert _ops(fused) == ["expand", "add", "softmax"]
    assert {gi.value.type.shape for gi in fused.generated.body.inputs} == {(2, 3, 6, 6), (2, 1, 1, 6)}
    assert_verified(fused.generated)


def test_a_transpose_of_the_last_dims_into_a_looped_row_op():
    """A transposed input is read through its strides inside every pass of a looped softmax."""
    b = builder()
    x = b.input("x", (2, 200, 3), "f32")
    g = b.build(b.softmax(b.mul(b.transpose(x, dim0=1, dim1=2), 2.0), dim=-1))
    gen = generate(g, max_row=64)
    assert gen.layout.looped and gen.body.inputs[0].value.type.shape == (2, 200, 3)
    assert_verified(gen)


def test_an_unaligned_reshape_of_a_transposed_value():
    """exp(x).T reshaped is a copy in torch: the kernel computes exp where each element comes from."""
    b = builder()
    x, y = b.input("x", (4, 6), "f32"), b.input("y", (8, 3), "f32")
    moved = b.reshape(b.transpose(b.exp(x), dim0=0, dim1=1), shape=(8, 3))
    fused = _one_region(b.build(b.add(moved, y)))
    assert _ops(fused) == ["exp", "transpose", "reshape", "add"]
    assert any("%" in ln for ln in _loads(fused.generated))
    assert_verified(fused.generated)


def test_a_per_row_result_through_a_reshape_that_keeps_its_place():
    b = builder()
    x = b.input("x", (5, 16), "f32")
    top = b.reshape(b.amax(x, dim=[-1]), shape=(5, 1))
    assert_verified(generate(b.build(b.exp(b.sub(x, top)))))


def test_a_view_reading_a_row_op_result_elsewhere_is_refused():
    b = builder()
    x, y = b.input("x", (6, 6), "f32"), b.input("y", (6, 6), "f32")
    g = b.build(b.add(b.transpose(b.softmax(x, dim=-1), dim0=0, dim1=1), y))
    with pytest.raises(Refused, match="exists once per row"):
        generate(g)
    found = find_regions(g)  # two kernels: the softmax, and the add reading its result through the transpose
    assert [_ops(f) for f in found.regions] == [["softmax"], ["transpose", "add"]]
    assert any("exists once per row" in r.reason for r in found.refusals)
    for fused in found.regions:
        assert_verified(fused.generated)


def test_a_view_read_outside_the_region_is_not_written_out():
    """gelu -> transpose, read by the add here and by a matmul outside: the kernel writes gelu's result (which
    the transpose outside views), never the transposed one, and computes gelu at both places it is read."""
    b = builder()
    x, r, w = b.input("x", (6, 6), "f32"), b.input("r", (6, 6), "f32"), b.input("w", (6, 4), "f32")
    p = b.transpose(b.gelu(x), dim0=0, dim1=1)
    fused = _one_region(b.build(b.add(p, r), b.matmul(p, w)))
    body = fused.generated.body
    views = {n.outputs[0].name for n in body.nodes if get_op(n.op).is_view}
    assert not views & {v.name for v in body.outputs} and len(body.outputs) == 2
    assert all(v.type.is_contiguous for v in body.outputs)
    assert fused.generated.source.text.count("tl.erf(") == 2
    assert_verified(fused.generated)


def test_a_view_of_another_shape_read_outside_leaves_two_kernels():
    """The same with x [4, 6]: gelu's result and the add's have no iteration space in common, so the
    transpose and the add are a kernel of their own (reading gelu's result), and the join is refused."""
    b = builder()
    x, r, w = b.input("x", (4, 6), "f32"), b.input("r", (6, 4), "f32"), b.input("w", (4, 4), "f32")
    p = b.transpose(b.gelu(x), dim0=0, dim1=1)
    found = find_regions(b.build(b.add(p, r), b.matmul(p, w)))
    assert [_ops(f) for f in found.regions] == [["gelu"], ["transpose", "add"]]
    assert any(r.kind == "not fused" and "does not broadcast" in r.reason for r in found.refusals)
    for fused in found.regions:
        assert_verified(fused.generated)


def test_an_expand_read_by_every_layer_joins_each_layers_region():
    """T5's mask, expanded once and added in each layer: each layer's kernel takes the mask before the expand."""
    b = builder()
    mask = b.input("mask", (2, 1, 1, 5), "f32")
    full = b.expand(mask, shape=(2, 3, 5, 5))
    h = b.input("h", (2, 3, 5, 5), "f32")
    for _ in range(2):
        h = b.matmul(b.softmax(b.add(h, full), dim=-1), b.input(f"v{_}", (2, 3, 5, 5), "f32"))
    found = find_regions(b.build(h))
    assert [_ops(f) for f in found.regions] == [["expand", "add", "softmax"]] * 2
    assert not found.refusals
    assert found.regions[0].generated.spec.id == found.regions[1].generated.spec.id
    assert_verified(found.regions[0].generated)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rope_tables_join_the_frequencies_to_themselves_in_one_kernel(dtype):
    """transformers' rotary tables: emb = cat(freqs, freqs) -> cos, sin -> cast; the frequencies a transpose of
    what came before (inv_freq [1, F, 1] @ positions, outside). One kernel reads each frequency twice."""
    b = builder()
    freqs = b.input("freqs", (1, 8, 3), "f32")  # [1, F, T]: the matmul's output
    emb = b.concat(*[b.transpose(freqs, dim0=1, dim1=2)] * 2, dim=-1)  # [1, T, 2F]
    fused = _one_region(b.build(b.cast(b.cos(emb), dtype=dtype), b.cast(b.sin(emb), dtype=dtype)))
    assert _ops(fused) == ["transpose", "concat", "cos", "cast", "sin", "cast"]
    assert [gi.value.type.shape for gi in fused.generated.body.inputs] == [(1, 8, 3)]
    assert "% 8" in "".join(_loads(fused.generated))  # the joined dim read modulo the frequencies' count
    assert_verified(fused.generated)


def test_a_join_of_distinct_tensors_is_refused_with_their_names():
    b = builder()
    x, y = b.input("x", (2, 4), "f32"), b.input("y", (2, 4), "f32")
    found = find_regions(b.build(b.exp(b.concat(b.neg(x), b.neg(y), dim=-1))))
    assert not any("concat" in _ops(f) for f in found.regions)
    assert any("concat joins distinct tensors (%" in r.reason for r in found.refusals), found.refusals

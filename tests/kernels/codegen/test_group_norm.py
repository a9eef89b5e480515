"""Group norm in generated kernels: x [N, C, ...] normalized in rows of C/num_groups channels with their
spatial dims (the iteration space [N, num_groups, rest]), its weight and bias read where each element's
channel is, and the SiLU after it in the same kernel, as every resnet of a diffusion UNet has it. Each kernel
is found by `find_regions` as one region and checked by hoid.verify against it, in float32 and float16; a
row longer than one tile (`max_row` made small) is looped."""

from __future__ import annotations

import pytest

from hoid.kernels.codegen import find_regions, generate

from .helpers import assert_verified, builder

TILE = 64  # the looped cases' max_row: their rows are several tiles


def _group_norm_silu(shape, groups: int, dtype: str, affine: int):
    """group_norm(x, weight?, bias?) -> silu; affine: how many of weight, bias."""
    b = builder()
    x = b.input("x", shape, dtype)
    per_channel = [b.input(name, shape[1:2], dtype) for name in ("w", "b")[:affine]]
    return b.build(b.silu(b.op("group_norm", x, *per_channel, num_groups=groups, eps=1e-5)))


def _one_region(graph, max_row: int | None = None):
    found = find_regions(graph, **({} if max_row is None else {"max_row": max_row}))
    assert [[n.op for n in f.region.nodes] for f in found.regions] == [[n.op for n in graph.nodes]], \
        [str(r) for r in found.refusals]
    return found.regions[0].generated


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("affine", [0, 1, 2])
@pytest.mark.parametrize(("shape", "groups"), [((2, 8, 3, 5), 4), ((1, 6, 4, 4), 1), ((2, 4, 7), 4)])
def test_group_norm_and_silu_are_one_row_kernel(shape, groups, dtype, affine):
    generated = _one_region(_group_norm_silu(shape, groups, dtype, affine))
    rest = shape[1] // groups * (shape[2] * (shape[3] if len(shape) > 3 else 1))
    assert generated.layout.shape == (shape[0], groups, rest) and generated.layout.value_shape == shape
    assert generated.layout.row_kernel and not generated.layout.looped
    assert_verified(generated, trials=2)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("affine", [0, 2])
def test_a_group_longer_than_one_tile_is_looped(dtype, affine):
    """4 channels of 7 x 7 a group: rows of 196, four tiles of 64 (the last ragged), a weight index that moves
    within a tile."""
    generated = _one_region(_group_norm_silu((2, 8, 7, 7), 2, dtype, affine), max_row=TILE)
    assert generated.layout.looped and generated.layout.cols == 196
    assert "for start in range(BLOCK_N, 196, BLOCK_N)" in generated.source.text
    assert_verified(generated, trials=2)


def test_the_weight_is_read_at_each_elements_channel_without_a_division_for_x():
    """x and the output are addressed as the rows they are (n * G * M + g * M + m folds back to rows * M + cols);
    the weight at channel g * C/G + m // (H * W)."""
    text = generate(_group_norm_silu((2, 8, 3, 5), 4, "f32", 2)).source.text
    assert "tl.load(p_in0 + (zero + (rows * 30 + cols))" in text
    assert "tl.load(p_in1 + (zero + ((rows % 4) * 2 + (cols // 15)))" in text
    assert "tl.store(p_t1 + (zero + (rows * 30 + cols))" in text


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_time_embedding_prologue_and_a_bias_only_affine_fuse_too(dtype):
    """A resnet's conv output + its time embedding [N, C, 1, 1], group norm, the bias alone (as the lowering
    writes torch's group_norm(x, g, None, bias): an add of the bias viewed [C, 1, 1]), then SiLU: one kernel."""
    b = builder()
    x, t = b.input("x", (2, 8, 4, 4), dtype), b.input("t", (2, 8, 1, 1), dtype)
    bias = b.input("bias", (8,), dtype)
    y = b.op("group_norm", b.add(x, t), num_groups=4, eps=1e-5)
    graph = b.build(b.silu(b.add(y, b.reshape(bias, shape=(8, 1, 1)))))
    assert_verified(_one_region(graph), trials=2)


def test_another_row_space_is_refused_with_the_reason():
    """A softmax over the last dim after a group norm reduces other rows: two kernels, and the refusal says so."""
    b = builder()
    x = b.input("x", (2, 8, 3, 5), "f32")
    graph = b.build(b.softmax(b.op("group_norm", x, num_groups=4, eps=1e-5), dim=-1))
    found = find_regions(graph, generate_kernels=False)
    assert [[n.op for n in f.region.nodes] for f in found.regions] == [["group_norm"], ["softmax"]]
    assert any(r.kind == "not fused" and "[2, 8, 3, 5] as [2, 4, 30], [2, 8, 3, 5]" in r.reason
               for r in found.refusals), [str(r) for r in found.refusals]


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_group_norm_kernels_build(arch):
    """The row kernel and the looped one build for the GPU, as every generated kernel must."""
    for generated in (generate(_group_norm_silu((2, 32, 8, 8), 8, "f16", 2)),
                      generate(_group_norm_silu((1, 32, 16, 16), 4, "f16", 2), max_row=1024)):
        built = generated.spec.compile(arch)
        assert built.arch == arch and built.ptx_target == arch + "a", built

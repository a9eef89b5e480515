"""Looped row kernels: rows longer than one tile, each pass of the row ops a loop over the row. The tile is
made small here (`max_row=64`, the loop's BLOCK_N 64), so a row of 200 is four tiles, the last ragged; each
kernel is checked by hoid.verify against the interpreter, in float32 and float16."""

from __future__ import annotations

import re

import pytest

from hoid.kernels.codegen import generate
from hoid.kernels.codegen.legality import MAX_ROW, check
from hoid.kernels.codegen.params import auto_params
from hoid.kernels.codegen.templates import unsplittable

from .helpers import assert_verified, builder

TILE = 64
ROW = 200  # 3 whole tiles and 8 columns of a fourth
# Two rows: a row offset bug shows in the second; under Triton's interpreter each row is a program run in
# turn, and 3 to 5 rows made these tests a tenth of CI's time
ROWS = 2


def _looped(graph, passes: int):
    gen = generate(graph, max_row=TILE)
    text = gen.source.text
    assert gen.layout.looped and gen.layout.cols == ROW and "for start in range(BLOCK_N, 200, BLOCK_N)" in text
    assert auto_params(gen.layout)["block_n"] == TILE
    found = sorted(int(p) for p in re.findall(r"def _pass(\d+)\(", text))
    assert found == list(range(1, passes + 1)), (found, text)
    return gen


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_softmax_op_two_passes(dtype):
    b = builder()
    x = b.input("x", (ROWS, ROW), dtype)
    assert_verified(_looped(b.build(b.softmax(x, dim=-1)), passes=2))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_log_softmax_with_a_prologue_and_epilogue(dtype):
    b = builder()
    x, bias = b.input("x", (2, 2, ROW), dtype), b.input("bias", (ROW,), dtype)
    y = b.log_softmax(b.mul(b.add(x, bias), 0.5), dim=-1)
    assert_verified(_looped(b.build(b.add(y, 1.0)), passes=2))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_layer_norm_op_with_residual_and_both_outputs(dtype):
    b = builder()
    x, r = b.input("x", (ROWS, ROW), dtype), b.input("r", (ROWS, ROW), dtype)
    w, bias = b.input("w", (ROW,), dtype), b.input("bias", (ROW,), dtype)
    s = b.add(x, r)
    assert_verified(_looped(b.build(s, b.layer_norm(s, w, bias, normalized_shape=[ROW])), passes=2))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rmsnorm_op_one_pass(dtype):
    b = builder()
    x, w = b.input("x", (ROWS, ROW), dtype), b.input("w", (ROW,), dtype)
    assert_verified(_looped(b.build(b.op("rmsnorm", x, w, eps=1e-6)), passes=1))


def test_layer_norm_decomposed_mean_then_variance():
    b = builder()
    x, w = b.input("x", (2, 3, ROW), "f32"), b.input("w", (ROW,), "f32")
    mean = b.mean(x, dim=[-1], keepdim=True)
    d = b.sub(x, mean)
    var = b.mean(b.mul(d, d), dim=[-1], keepdim=True)
    assert_verified(_looped(b.build(b.mul(b.mul(d, b.rsqrt(b.add(var, 1e-5))), w)), passes=2))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_sum_mean_var_amax_over_long_rows_with_per_row_outputs(dtype):
    """Four statistics of one row: sum, mean and amax share pass 1 (amax's NaN count too), var's second
    pass is pass 2; keepdim=False results are stored once per row."""
    b = builder()
    x = b.input("x", (ROWS, ROW), dtype)
    outs = (b.sum(x, dim=[-1]), b.mean(x, dim=[-1], keepdim=True), b.op("var", x, dim=[-1], correction=1),
            b.amax(x, dim=[-1]))
    gen = _looped(b.build(*outs), passes=2)
    assert len(re.findall(r"tl\.maximum\(", gen.source.text)) == 2  # amax's max and its NaN count, one loop
    assert_verified(gen)


def test_amin_and_a_statistic_of_a_statistic():
    """x - amin(x), then its sum: the sum's terms read the min, so it is pass 2."""
    b = builder()
    x = b.input("x", (2, ROW), "f32")
    shifted = b.sub(x, b.amin(x, dim=[-1], keepdim=True))
    assert_verified(_looped(b.build(b.sum(shifted, dim=[-1], keepdim=True)), passes=2))


def test_an_integer_sum_over_a_long_row_accumulates_in_its_dtype():
    b = builder()
    x = b.input("x", (ROWS, ROW), "i32")
    gen = _looped(b.build(b.sum(b.mul(x, 3), dim=[-1])), passes=1)
    assert "tl.int64" in gen.source.text
    assert_verified(gen)


def test_rows_of_one_tile_are_not_looped_and_the_default_tile_is_max_row():
    b = builder()
    x = b.input("x", (2, TILE), "f32")
    assert not generate(b.build(b.softmax(x, dim=-1)), max_row=TILE).layout.looped
    b = builder()
    x = b.input("x", (2, MAX_ROW + 1), "f32")
    layout = check(b.build(b.softmax(x, dim=-1)))
    assert layout.looped and layout.max_row == MAX_ROW


def test_a_looped_kernel_is_another_kernel_than_the_tile_one():
    b = builder()
    x = b.input("x", (2, ROW), "f32")
    g = b.build(b.softmax(x, dim=-1))
    assert generate(g).spec.id != generate(g, max_row=TILE).spec.id


def test_a_template_no_loop_can_split_says_why():
    assert "tl.cumsum" in unsplittable("_c = tl.cumsum({x}, axis=1)\n_c")
    assert "not a reduction over the row" in unsplittable("tl.sum(tl.where({mask}, {x}, 0), axis=0)")
    assert unsplittable("tl.max(tl.sum({x}, axis=1, keep_dims=True), axis=1, keep_dims=True)") is None


@pytest.mark.parametrize("block_m", [2, 4])
def test_several_rows_a_program_with_a_ragged_last_block(block_m):
    """"auto" takes one row a program at these sizes; the block sizes a sweep tries must be right too."""
    import torch

    import hoid
    from hoid.kernels.loader import load_entry

    b = builder()
    x, w = b.input("x", (5, ROW), "f32"), b.input("w", (ROW,), "f32")
    gen = generate(b.build(b.layer_norm(x, w, normalized_shape=[ROW])), max_row=TILE)
    gen_x, gen_w = torch.randn(5, ROW, generator=torch.Generator().manual_seed(0)), torch.rand(ROW) + 0.5
    out = torch.full((5, ROW), float("nan"))
    load_entry(gen.source)(gen_x, gen_w, out, block_m=block_m, block_n=128)
    (want,) = hoid.run(gen.body, gen_x, gen_w)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)

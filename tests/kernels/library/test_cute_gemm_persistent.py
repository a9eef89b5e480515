"""The persistent GEMM's launch shape (`cute_gemm_persistent.choose`): no CuTe DSL needed. Its builds are in
test_cute_compile.py, its GPU checks in test_cute_gpu.py."""

import pytest

from hoid.kernels.library import cute_gemm
from hoid.kernels.library.cute_gemm_persistent import LINEAR_ADD_SPEC, LINEAR_SPEC, WALK_TILES, choose


def walking_tile(m, n, tiles):
    """The oracle: the first 128-row tile of `tiles` (largest first) with more tiles than multiprocessors."""
    return next(((tm, tn) for tm, tn in tiles if tm == 128 and -(-m // tm) * -(-n // tn) > cute_gemm.SMS), None)


@pytest.mark.parametrize("m, n, k", [(4096, 4096, 4096), (1024, 12288, 2048), (1024, 4096, 2048),
                                     (1024, 2048, 2048), (128, 2048, 2048), (17, 64, 64)])
def test_the_largest_128_row_tile_that_walks_and_one_cta_a_multiprocessor_or_a_tile(m, n, k):
    cfg = choose(m, n, k)
    plain = cute_gemm.choose(m, n, k, split_k=1)
    # where a 128-row tile walks (more tiles than multiprocessors) it is taken, else the plain GEMM's tile
    assert (cfg["tile_m"], cfg["tile_n"]) == (walking_tile(m, n, WALK_TILES) or (plain["tile_m"], plain["tile_n"]))
    assert WALK_TILES == ((128, 256), (128, 128), (128, 64))  # the oracle's list, largest first
    assert cfg["stages"] == cute_gemm.choose(m, n, k, cfg["tile_m"], cfg["tile_n"], split_k=1)["stages"]
    tiles = -(-m // cfg["tile_m"]) * -(-n // cfg["tile_n"])  # counted here, not by cute_gemm.tile_count: the oracle
    assert cfg["ctas"] == min(tiles, cute_gemm.SMS)
    assert 1 <= cfg["ctas"] <= cute_gemm.SMS


def test_where_the_plain_gemm_fills_one_wave_the_persistent_one_takes_a_smaller_tile_that_walks():
    # Qwen3-1.7B's QKV at a prompt of 1024: 128 tiles of 128 x 256 (one a CTA, nothing to overlap), 256 of 128 x 128
    assert (cute_gemm.choose(1024, 4096, 2048)["tile_n"], choose(1024, 4096, 2048)["tile_n"]) == (256, 128)
    assert choose(1024, 4096, 2048)["ctas"] == 132
    # the o projection there: 128 tiles of 128 x 128, one a CTA; 256 of 128 x 64 walk (64-row tiles only where
    # given)
    cfg = choose(1024, 2048, 2048, epilogue="add")
    assert (cfg["tile_m"], cfg["tile_n"], cfg["ctas"]) == (128, 64, 132)


def test_at_4096_cubed_each_cta_walks_about_four_tiles():
    cfg = choose(4096, 4096, 4096)
    assert (cfg["tile_m"], cfg["tile_n"], cfg["ctas"]) == (128, 256, 132)  # 512 tiles over 132 CTAs


def test_given_tiles_stand_and_too_many_stages_are_refused_as_the_plain_gemm_refuses_them():
    assert choose(4096, 4096, 4096, tile_m=64, tile_n=128)["ctas"] == 132
    assert choose(200, 384, 1024, tile_m=64, tile_n=64)["ctas"] == 4 * 6
    with pytest.raises(ValueError, match="at most 4 stages"):
        choose(4096, 4096, 4096, tile_m=128, tile_n=256, stages=6)


def test_the_specs_take_the_plain_gemms_patterns_and_constraints_without_split_or_cluster():
    for mine, plain in ((LINEAR_SPEC, cute_gemm.LINEAR_SPEC), (LINEAR_ADD_SPEC, cute_gemm.LINEAR_ADD_SPEC)):
        assert mine.pattern == plain.pattern
        words = [c.description for c in plain.constraints]
        assert [c.description for c in mine.constraints][:len(words)] == words
    assert {p.name for p in LINEAR_SPEC.params} == {p.name for p in LINEAR_ADD_SPEC.params} == {
        "tile_m", "tile_n", "stages", "store"}
    assert LINEAR_SPEC.archs == ("sm_90",) and LINEAR_SPEC.workspace is None


def test_it_takes_only_shapes_whose_tiles_outnumber_the_multiprocessors():
    from hoid.ir import TensorType

    def refused(m, k, n):
        return LINEAR_SPEC.rejects([TensorType((m, k), "bf16"), TensorType((n, k), "bf16")], {})

    assert not refused(4096, 4096, 4096)   # 512 tiles of 128 x 256
    assert not refused(1024, 2048, 12288)  # Qwen3-1.7B's gate/up at a prompt of 1024: 384
    assert not refused(1024, 2048, 4096)   # its QKV there: 256 tiles of 128 x 128 (128 of the plain's 128 x 256)
    assert not refused(1024, 2048, 2048)   # its o there: 256 tiles of 128 x 64 (128 of 128 x 128, one a CTA)
    assert "more output tiles than the 132" in refused(128, 2048, 4096)  # its QKV at a prompt of 128: 64 of 128 x 64
    assert "more output tiles than the 132" in refused(512, 2048, 1024)  # 64 tiles of 128 x 64


def test_with_the_residual_bfloat16_only_and_the_plain_gemms_residual_tiles():
    from hoid.ir import TensorType

    def refused(dtype, m=4096, k=6144, n=2048):
        return LINEAR_ADD_SPEC.rejects([TensorType((m, k), dtype), TensorType((n, k), dtype),
                                        TensorType((m, n), dtype)], {})

    assert refused("bf16") is None  # 256 tiles of 128 x 128
    assert "bfloat16" in refused("f16")  # the shift that widens the rounded product is bfloat16's
    cfg = choose(4096, 2048, 6144, epilogue="add", store="direct")
    assert (cfg["tile_m"], cfg["tile_n"]) == (128, 128)  # 128 x 256 spilled with the residual (cute_gemm)
    # through the TMA store ("auto") it takes 128 x 256: 138.5 us against 174.9 at 128 x 128 (H100, 12-08)
    cfg = choose(4096, 2048, 6144, epilogue="add")
    assert (cfg["tile_m"], cfg["tile_n"], cfg["store"]) == (128, 256, "tma")
    assert choose(4096, 2048, 6144)["tile_n"] == 256


def test_the_tma_store_is_asked_for_and_its_slots_fit_beside_any_tiles_stages():
    from hoid.kernels.library.cute_gemm_persistent import EPI_N, EPI_STAGES

    assert choose(4096, 4096, 4096)["store"] == "tma"  # faster at every shape timed (H100, 12-08: the module)
    assert choose(4096, 4096, 4096, store="direct")["store"] == "direct"
    assert choose(4096, 2048, 6144, store="tma", epilogue="add")["store"] == "tma"
    for tile_m, tile_n in {*cute_gemm.TILES, *WALK_TILES}:
        cfg = choose(4096, 4096, 4096, tile_m=tile_m, tile_n=tile_n, store="tma")
        ring = cfg["stages"] * (tile_m + tile_n) * cute_gemm.TILE_K * 2
        slots = EPI_STAGES * tile_m * EPI_N * 2  # the TMA store's sub-tiles of 16-bit outputs
        # + 2048: the ring's barriers and split-K's arrival count, each padded to the next 1024-byte alignment
        # (the build is not checked against the launch's limit on the CPU: a launch past it fails on the GPU)
        assert ring + slots + 2048 <= cute_gemm.SMEM_BYTES, (tile_m, tile_n, cfg["stages"])
        assert tile_n % EPI_N == 0  # whole sub-tiles

"""The Hopper GEMM's launch shape (`cute_gemm.choose`): no CuTe DSL needed. Its builds are in
test_cute_compile.py, its GPU checks in test_cute_gpu.py."""

import pytest

from hoid.kernels.library.cute_gemm import SMEM_BYTES, SMS, TILE_K, TILES, choose


def tiles(cfg: dict, m: int, n: int) -> int:
    return -(-m // cfg["tile_m"]) * -(-n // cfg["tile_n"])


@pytest.mark.parametrize("m, n, k", [(4096, 4096, 4096), (1024, 4096, 2048), (1024, 2048, 2048),
                                     (128, 12288, 2048), (128, 2048, 6144), (128, 4096, 2048), (17, 64, 64)])
def test_the_largest_tile_with_half_a_wave_of_them_else_the_most_tiles(m, n, k):
    cfg = choose(m, n, k)
    area = cfg["tile_m"] * cfg["tile_n"]
    larger = [t for t in TILES if t[0] * t[1] > area]
    if tiles(cfg, m, n) * 2 >= SMS:  # no larger tile would also have made half a wave
        assert all(-(-m // tm) * -(-n // tn) * 2 < SMS for tm, tn in larger)
    else:  # none makes half a wave: the smallest tile, the most of them
        assert (cfg["tile_m"], cfg["tile_n"]) == TILES[-1]
    assert (cfg["tile_m"] + cfg["tile_n"]) * TILE_K * 2 * cfg["stages"] <= SMEM_BYTES and 2 <= cfg["stages"] <= 6


def test_the_tiles_the_h200_measured_faster():
    # kernels_cute, 12-04 (Qwen3-1.7B): 128 x 128 tiles gave the o projection at a prompt of 128 16 blocks
    # (29.7 us; 64 x 64 in two splits of K: 14.4); a second wave of 64-row tiles lost to 128-row ones at gate/up
    # there (96 tiles: 18.9 against 34.6) and at the o and down projections of a prompt of 1024 (128 tiles:
    # 31.4 and 56.4 against 41.9 and 98.2)
    assert tiles(choose(128, 2048, 2048), 128, 2048) == 64
    for m, n, k in ((128, 12288, 2048), (1024, 2048, 2048), (1024, 2048, 6144)):
        assert (choose(m, n, k)["tile_m"], choose(m, n, k)["tile_n"]) == (128, 128), (m, n, k)
    assert choose(4096, 4096, 4096) == {"tile_m": 128, "tile_n": 256, "stages": 4, "split_k": 1,
                                        "cluster_m": 1}  # as it was


def test_a_given_tile_side_is_kept_and_the_other_chosen_with_it():
    assert choose(128, 2048, 2048, tile_m=128)["tile_m"] == 128
    assert choose(128, 2048, 2048, tile_m=128)["tile_n"] == 128  # the smallest 128-row tile of TILES
    assert choose(4096, 4096, 4096, tile_n=64) == {"tile_m": 64, "tile_n": 64, "stages": 6, "split_k": 1,
                                                   "cluster_m": 1}
    assert choose(128, 2048, 2048, tile_m=128, tile_n=64)["tile_n"] == 64  # a pair TILES lacks, as given
    assert choose(128, 2048, 2048, stages=3)["stages"] == 3


def test_stages_that_do_not_fit_in_shared_memory_are_refused_with_the_most_that_do():
    with pytest.raises(ValueError, match="at most 4 stages"):
        choose(4096, 4096, 4096, tile_m=128, tile_n=256, stages=6)


def test_the_gemm_splits_k_where_its_tiles_leave_the_multiprocessors_idle():
    from hoid.ir import TensorType
    from hoid.kernels.library.cute_gemm import LINEAR_ADD_SPEC

    assert choose(128, 2048, 6144)["split_k"] == 2   # Qwen3-1.7B's down projection at a prompt of 128: 64 tiles
    # its o projection there: 64 tiles too, but 32 K tiles, where one split ran faster (SPLIT_MIN_K_TILES)
    assert choose(128, 2048, 2048)["split_k"] == 1
    assert choose(256, 512, 16384)["split_k"] == 4   # 32 tiles, 256 K tiles
    assert choose(256, 512, 8192)["split_k"] == 2    # 128 K tiles: two splits of 64, not four of 32
    assert choose(128, 4096, 2048)["split_k"] == 1   # its QKV: 128 tiles, a wave already
    assert choose(128, 2048, 256)["split_k"] == 1    # 4 K tiles: too few to split
    assert choose(1024, 2048, 2048, split_k=2)["split_k"] == 2  # given, it stands
    assert choose(128, 2048, 2048 + 64)["split_k"] == 1  # 33 K tiles: no even split (the count is built in)
    with pytest.raises(ValueError, match=r"does not divide the 2 K tiles .* \[1, 2\] do here"):
        choose(128, 2048, 128, split_k=4)
    types = [TensorType((128, 2048), "bf16"), TensorType((2048, 2048), "bf16"), TensorType((128, 2048), "bf16")]
    assert LINEAR_ADD_SPEC.workspace_types(types, {}, choose(128, 2048, 2048, split_k=2)) == (
        TensorType((2, 128, 2048), "f32"),)
    assert LINEAR_ADD_SPEC.workspace_types(types, {}, choose(128, 2048, 2048)) == ()


def test_clusters_of_two_m_tiles_only_where_given_and_over_an_even_count_of_them():
    # unmeasured on the H200: "auto" keeps the plain launch until kernels_cute.py's grid has timed them
    assert all(choose(m, n, k)["cluster_m"] == 1 for m, n, k in ((4096, 4096, 4096), (128, 2048, 2048)))
    assert choose(4096, 4096, 4096, cluster_m=2)["cluster_m"] == 2  # 32 M tiles of 128
    assert choose(128, 2048, 2048, cluster_m=2) == {**choose(128, 2048, 2048), "cluster_m": 2}  # 2 tiles of 64
    with pytest.raises(ValueError, match="3 tiles of 64, an odd count: cluster_m=1 here"):
        choose(150, 2048, 2048, tile_m=64, cluster_m=2)


def test_with_the_residual_auto_leaves_the_tile_that_spilled():
    # 128 x 256 with the residual epilogue spilled 86 bytes (ptxas, sm_90a, 12-07); the build test reads ptxas
    assert (choose(4096, 2048, 6144)["tile_m"], choose(4096, 2048, 6144)["tile_n"]) == (128, 256)
    with_residual = choose(4096, 2048, 6144, epilogue="add")
    assert (with_residual["tile_m"], with_residual["tile_n"]) == (128, 128)
    assert choose(4096, 2048, 6144, tile_n=256, epilogue="add")["tile_n"] == 256  # given, it stands
    assert choose(128, 2048, 2048, epilogue="add") == choose(128, 2048, 2048)  # where 128 x 256 was not picked

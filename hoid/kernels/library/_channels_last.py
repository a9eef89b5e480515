"""The tile of a channels-last kernel that copies or combines values pixel by pixel: [pixels, channels].

`triton_group_norm_nhwc` keeps its own copy of the rule (its `_tile`, with a row cap of its own): moving it here
would change that kernel's version, and every measurement of it, for no change in what it builds.
"""

from __future__ import annotations

from ._triton_compile import next_power_of_2


def channel_block(channels: int, widest: int = 128) -> int:
    """All of C up to `widest` channels (a power of two, at least 16), halved down to 32 while it does not
    divide C: SDXL's channel counts (128 to 2560) then waste no lane, and a pixel's run of channels is read
    in 16-byte pieces."""
    block = min(max(next_power_of_2(channels), 16), widest)
    while channels % block and block > 32:
        block //= 2
    return block


def pixel_tile(channels: int, block: int) -> tuple[int, int]:
    """(BLOCK_P, BLOCK_C): `channel_block`'s channels, and as many pixels (rows of C) as fill `block` values."""
    block_c = channel_block(channels)
    return max(1, block // block_c), block_c


def warps_for(block: int) -> int:
    """A warp per 1024 values of a program's tile, 4 to 8: 16 values a thread at 4096, two 16-byte accesses of
    bf16 (as `triton_group_norm_nhwc`'s write tiles)."""
    return max(4, min(8, block // 1024))

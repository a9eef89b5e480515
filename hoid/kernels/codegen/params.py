"""The tunable parameters of a generated kernel and what "auto" picks for them.

Row kernels hold a whole row in one tile (BLOCK_N is the row rounded up to a power of 2, fixed), so they tune
how many rows a program takes and its warps; elementwise kernels tune both block sizes and the warps. "auto"
aims at about 4096 elements a program (enough bytes in flight per multiprocessor on an H200 for a
bandwidth-bound kernel, few enough registers to keep occupancy), and never a block larger than the shape.
Looped row kernels tune the tile their passes walk the row with too: "auto" takes `LOOP_TILE` columns (at
most the layout's `max_row`, so that tests with a small `max_row` loop over several tiles), and as many rows
as make about 4096 elements, but fewer where that would leave under `MIN_PROGRAMS` programs (a looped program
is long: the H200's 132 multiprocessors want several each to keep its memory busy).
"""

from __future__ import annotations

from .legality import Layout

TILE_ELEMENTS = 4096
BLOCK_M_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128)
BLOCK_N_CHOICES = (64, 128, 256, 512, 1024)
LOOP_TILE = 2048
MIN_PROGRAMS = 4 * 132
LOOP_BLOCK_N_CHOICES = (64, 128, 256, 512, 1024, 2048, 4096)
WARPS_CHOICES = (1, 2, 4, 8, 16)


def next_power_of_2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def auto_params(layout: Layout) -> dict:
    """The concrete params "auto" stands for at this layout."""
    if layout.looped:
        block_n = min(LOOP_TILE, 1 << (layout.max_row.bit_length() - 1))  # a power of 2, at most max_row
    elif layout.row_kernel:
        block_n = next_power_of_2(layout.cols)
    else:
        block_n = min(next_power_of_2(layout.cols), 1024)
    block_m = max(1, min(TILE_ELEMENTS // block_n, next_power_of_2(layout.rows), 128))
    while layout.looped and block_m > 1 and -(-layout.rows // block_m) < MIN_PROGRAMS:
        block_m //= 2
    tile = block_m * block_n
    warps = 16 if tile >= 16384 else 8 if tile >= 8192 else 4
    return {"block_m": block_m, "block_n": block_n, "num_warps": warps}


def declared_choices(layout: Layout) -> dict:
    """PARAMS as the source declares them ("auto" first: the default)."""
    choices = {"block_m": ("auto", *BLOCK_M_CHOICES)}
    if layout.looped:
        choices["block_n"] = ("auto", *LOOP_BLOCK_N_CHOICES)
    elif not layout.row_kernel:
        choices["block_n"] = ("auto", *BLOCK_N_CHOICES)
    choices["num_warps"] = ("auto", *WARPS_CHOICES)
    return choices

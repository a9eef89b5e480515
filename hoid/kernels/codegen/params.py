"""The tunable parameters of a generated kernel, what "auto" picks for them, and the sweep tried around it.

Row kernels hold a whole row in one tile (BLOCK_N is the row rounded up to a power of 2, fixed), so they tune
how many rows a program takes and its warps; elementwise kernels tune both block sizes and the warps.
"auto" is modelled on what Inductor's heuristics pick for the same shape (torch/_inductor/runtime/
triton_heuristics.py), since that is what a generated kernel is measured against:

- elementwise: Inductor's pointwise default is XBLOCK=1024 with a warp per 256 elements (`triton_config`),
  so "auto" takes a tile of `POINTWISE_TILE` elements and `tile // 256` warps. Its columns are the power of
  2 that wastes the fewest lanes (768 columns: 256, not 1024, which left a quarter of every tile masked off);
- row kernel (a persistent reduction): Inductor takes one row a program once the row is 512 or wider
  (`_persistent_reduction_configs`: XBLOCK * RBLOCK <= 4096) and `RBLOCK // 128` warps, at least 2 and at most
  8 (`triton_config_reduction`, `_num_warps` with register_intensive); "auto" does the same, and for
  narrower rows packs rows up to `ROW_TILE` elements;
- looped row kernel: the tile its passes walk the row with is `LOOP_TILE` columns (at most the layout's
  `max_row`, so that tests with a small `max_row` loop over several tiles), and as many rows as make about
  4096 elements, but fewer where that would leave under `MIN_PROGRAMS` programs (a looped program is long: the
  H200's 132 multiprocessors want several each to keep its memory busy).

"auto" is a model, not a measurement: `sweep` lists its neighbours (half and twice the rows a program takes,
half and twice the warps, a longer loop tile) for `hoid.measure.tune` or the loop's executor to time.
"""

from __future__ import annotations

from .legality import Layout

POINTWISE_TILE = 1024
ROW_TILE = 2048
TILE_ELEMENTS = 4096  # a looped program's tile
BLOCK_M_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128)
BLOCK_N_CHOICES = (64, 128, 256, 512, 1024)
LOOP_TILE = 2048
MIN_PROGRAMS = 4 * 132
LOOP_BLOCK_N_CHOICES = (64, 128, 256, 512, 1024, 2048, 4096)
WARPS_CHOICES = (1, 2, 4, 8, 16)


def next_power_of_2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def _clamp_warps(n: int, low: int, high: int) -> int:
    return next_power_of_2(min(max(n, low), high))


def pointwise_block_n(cols: int) -> int:
    """The power of 2 (128 to 1024, or the row's own where shorter) whose tiles pad `cols` least, the longest
    among equals: 768 -> 256 (no lane idle), 3000 -> 1024 (3072 lanes), 197 -> 256."""
    if cols <= 128:
        return next_power_of_2(cols)
    return min((b for b in (1024, 512, 256, 128)), key=lambda b: (-(-cols // b) * b, -b))


def auto_params(layout: Layout) -> dict:
    """The concrete params "auto" stands for at this layout."""
    if layout.looped:
        block_n = min(LOOP_TILE, 1 << (layout.max_row.bit_length() - 1))  # a power of 2, at most max_row
        block_m = max(1, min(TILE_ELEMENTS // block_n, next_power_of_2(layout.rows), 128))
        while block_m > 1 and -(-layout.rows // block_m) < MIN_PROGRAMS:
            block_m //= 2
        tile = block_m * block_n
        return {"block_m": block_m, "block_n": block_n, "num_warps": 16 if tile >= 16384 else 8 if tile >= 8192
                else 4}
    if layout.row_kernel:
        block_n = next_power_of_2(layout.cols)
        block_m = 1 if block_n >= 512 else max(1, min(ROW_TILE // block_n, next_power_of_2(layout.rows)))
        # Inductor's persistent reductions stop at 8 warps (16 halved for register pressure); a row past
        # 8192 (which Inductor would loop) holds 64 floats a thread at 8 warps, so it takes 16
        warps = _clamp_warps(block_m * block_n // 128, 2, 16 if block_n > 8192 else 8)
        return {"block_m": block_m, "block_n": block_n, "num_warps": warps}
    block_n = pointwise_block_n(layout.cols)
    block_m = max(1, min(POINTWISE_TILE // block_n, next_power_of_2(layout.rows), 128))
    return {"block_m": block_m, "block_n": block_n, "num_warps": _clamp_warps(block_m * block_n // 256, 1, 8)}


def declared_choices(layout: Layout) -> dict:
    """PARAMS as the source declares them ("auto" first: the default)."""
    choices = {"block_m": ("auto", *BLOCK_M_CHOICES)}
    if layout.looped:
        choices["block_n"] = ("auto", *LOOP_BLOCK_N_CHOICES)
    elif not layout.row_kernel:
        choices["block_n"] = ("auto", *BLOCK_N_CHOICES)
    choices["num_warps"] = ("auto", *WARPS_CHOICES)
    return choices


def sweep(layout: Layout, size: int = 5) -> tuple[dict, ...]:
    """At most `size` param sets: "auto" first, then its neighbours, each within the declared choices and
    each a different kernel once resolved (a neighbour equal to "auto" at this shape is left out): for a looped
    kernel the tile its passes walk the row with doubled; then the rows a program takes halved and doubled (not
    past the rows there are), the warps halved and doubled; and where a slot is left, the rows quadrupled
    (BGE-M3's regions on the H200, 12-04, ran faster at two rows a program than at one, 6.07 -> 5.80 us for
    its add, and the sweep tried no more). Each candidate costs a compile and a timing on the GPU, so the
    sweep stays this small."""
    choices = declared_choices(layout)
    auto = auto_params(layout)
    base = {name: "auto" for name in choices}
    changes = [{"block_n": auto["block_n"] * 2}] if layout.looped else []
    changes += [{"block_m": auto["block_m"] // 2}]
    if auto["block_m"] < layout.rows:
        changes.append({"block_m": auto["block_m"] * 2})
    changes += [{"num_warps": auto["num_warps"] // 2}, {"num_warps": auto["num_warps"] * 2}]
    if auto["block_m"] * 2 < layout.rows:  # the 5th slot, where one is left (one row a program has no half)
        changes.append({"block_m": auto["block_m"] * 4})
    out, seen = [base], [auto]
    for change in changes:
        if len(out) == size:
            break
        (name, value), = change.items()
        resolved = {**auto, **change}
        if value not in choices.get(name, ()) or resolved in seen:
            continue
        seen.append(resolved)
        out.append({**base, **change})
    return tuple(out)

"""find_regions beyond the maximal regions: a region computing a table many nodes outside read is proposed
cut down to the table as well (RoPE's cos and sin, read by every layer, which the greedy growth joins to the
first layer's rotation)."""

from __future__ import annotations

from hoid.kernels.codegen import find_regions
from hoid.kernels.codegen.regions import SHARED_READERS

from .helpers import assert_verified, builder


def _layers(n: int):
    """A table cast(cos(x)) and `n` layers, each h <- (h * table) @ w: the matmuls (no template) keep the layers'
    products out of one region, so only the first layer's joins the table's."""
    b = builder()
    x, h = b.input("x", (4, 8), "f32"), b.input("h", (4, 8), "f32")
    table = b.cast(b.cos(x), dtype="f16")
    for i in range(n):
        h = b.matmul(b.mul(b.cast(h, dtype="f16"), table), b.input(f"w{i}", (8, 8), "f16"))
    return b.build(h)


def _ops(fused) -> list[str]:
    return [n.op for n in fused.region.nodes]


def test_a_table_many_layers_read_is_also_proposed_alone():
    found = find_regions(_layers(SHARED_READERS + 1))
    shapes = [_ops(f) for f in found.regions]
    assert ["cos", "cast", "cast", "mul"] in shapes  # the greedy region: the table and layer 0's product
    assert ["cos", "cast"] in shapes, shapes  # and the table alone, for every layer's kernels to read
    table = next(f for f in found.regions if _ops(f) == ["cos", "cast"])
    assert_verified(table.generated)


def test_a_value_few_nodes_read_proposes_no_cut():
    found = find_regions(_layers(SHARED_READERS - 1))
    assert ["cos", "cast"] not in [_ops(f) for f in found.regions]

"""`body_bytes`: what a kernel replacing a region moves, the roofline's byte count for kernel nodes."""

from hoid.ir import GraphBuilder, TensorType
from hoid.ir.ops.kernel import body_bytes
from hoid.ir.registry import get_op
from hoid.kernels import get


def _ops_count(body) -> int:
    return sum(get_op(n.op).count_bytes([v.type for v in n.inputs], [v.type for v in n.outputs], n.attrs)
               for n in body.nodes)


def test_a_moe_layers_selected_experts_are_read_once_not_three_times():
    experts, hidden, inter, top_k = 16, 256, 96, 4
    types = [TensorType((1, hidden), "bf16"), TensorType((1, top_k), "i64"), TensorType((1, top_k), "bf16"),
             TensorType((experts, 2 * inter, hidden), "bf16"), TensorType((experts, hidden, inter), "bf16")]
    body = get("triton.moe_experts").pattern.graph(types, {})
    selected = top_k * 3 * inter * hidden * 2  # gate/up and down rows of the chosen experts, bf16
    moved = body_bytes(body)
    assert selected <= moved < selected * 1.05  # plus the token, the ids and routing, the output
    assert _ops_count(body) > 2.5 * selected  # the ops alone: gathered (read, written), then read again
    assert moved < sum(t.nbytes for t in types)  # never every expert's weights


def test_a_weight_read_through_a_view_counts_once_and_a_gathered_table_by_its_rows():
    b = GraphBuilder("gemv")
    x, w = b.input("x", (1, 512), "bf16"), b.weight("w", (1024, 512), "bf16")
    gemv = b.build(b.matmul(x, b.transpose(w, dim0=0, dim1=1)))
    assert body_bytes(gemv) == (512 + 1024 * 512 + 1024) * 2
    b = GraphBuilder("embed")
    ids, table = b.input("ids", (1, 3), "i64"), b.weight("table", (50000, 64), "bf16")
    embed = b.build(b.op("embedding", table, ids))
    assert body_bytes(embed) <= 3 * 8 + 2 * 3 * 64 * 2  # its rows and ids read, its rows written

"""The analytic roofline: a node's time from the registry's flop and byte counts and the device table.

time = max(flops / peak(dtype), bytes / bandwidth) / efficiency + launch cost

`efficiency` is 1 for an ideal kernel; where a kernel's measured efficiency is cached, the caller scales
by it, so the model converges on what the device really does.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Graph, TensorType
from ..ir.registry import get_op
from .devices import Device


def op_floor(op_name: str, ins: Sequence[TensorType], outs: Sequence[TensorType], attrs: dict,
             device: Device) -> tuple[float, float]:
    """(compute time, memory time) lower bounds in seconds for one op, without launch cost."""
    op = get_op(op_name)
    flops = op.count_flops(ins, outs, attrs)
    nbytes = op.count_bytes(ins, outs, attrs)
    dtype = (list(ins) + list(outs))[0].dtype if (ins or outs) else "f32"
    return flops / device.flops_for(dtype), nbytes / device.copy_bandwidth


def op_time(op_name: str, ins: Sequence[TensorType], outs: Sequence[TensorType], attrs: dict, device: Device,
            *, efficiency: float = 1.0, in_graph: bool = True) -> float:
    """Estimated seconds for one launch of `op_name` (views cost nothing: they launch nothing)."""
    op = get_op(op_name)
    if op.is_view and op.count_bytes(ins, outs, attrs) == 0:
        return 0.0
    compute, memory = op_floor(op_name, ins, outs, attrs, device)
    launch = device.graph_launch_overhead if in_graph else device.launch_overhead
    return max(compute, memory) / max(efficiency, 1e-6) + launch


def memory_floor(nbytes: int, device: Device) -> float:
    """The fewest seconds in which `nbytes` can cross device memory."""
    return nbytes / device.copy_bandwidth


def graph_time(graph: Graph, device: Device, *, in_graph: bool = True) -> float:
    """Sum of per-node estimates: one launch per node, as the interpreter would run it."""
    return sum(op_time(n.op, [v.type for v in n.inputs], [v.type for v in n.outputs], n.attrs, device,
                       in_graph=in_graph) for n in graph.nodes)

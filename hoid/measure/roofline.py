"""The analytic roofline: a node's time from the registry's flop and byte counts and the device table.

time = max(flops / peak(dtype), bytes / bandwidth) / efficiency + launch cost

`efficiency` is 1 for an ideal kernel. Where a kernel's measured efficiency (analytic floor / measured
time) is in the measurement cache, `node_time`, `kernel_time` and `graph_time` scale by it, so the model
converges on what the device really does as measurements accumulate.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Graph, Node, TensorType
from ..ir.registry import get_op
from .cache import MeasureCache
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


def region_work(region: Graph) -> tuple[int, int]:
    """(flops, bytes) of a fused region: every node's arithmetic; memory traffic as a `kernel` node over the
    region counts it (`hoid.ir.ops.kernel.body_bytes`: inputs read once, outputs written once, no more than
    the region's ops move, so a gather reads its rows and a cache append writes its rows). An in-place
    kernel (`KernelSpec.aliases`) is priced so; one that copies more than its region needs is slower than
    this floor, which its measurement shows."""
    from ..ir.ops.kernel import body_bytes

    return region.flops(), body_bytes(region)


def region_floor(region: Graph, device: Device) -> float:
    """The fewest seconds a fused kernel can take for `region` (no launch cost)."""
    flops, nbytes = region_work(region)
    first = (region.inputs or [None])[0]
    dtype = first.value.type.dtype if first is not None else "f32"
    return max(flops / device.flops_for(dtype), nbytes / device.copy_bandwidth)


def kernel_time(spec, types: Sequence[TensorType], attrs: dict, device: Device, *,
                cache: MeasureCache | None = None, in_graph: bool = True) -> float:
    """Estimated seconds for one launch of kernel `spec` (a `hoid.kernels.KernelSpec`) at these input
    types: its pattern's region floor, scaled by the kernel's cached efficiency on `device` if any."""
    efficiency = cache.efficiency(device.name, spec.id, spec.version) if cache is not None else None
    launch = device.graph_launch_overhead if in_graph else device.launch_overhead
    return region_floor(spec.pattern.graph(types, attrs), device) / (efficiency or 1.0) + launch


def node_time(node: Node, device: Device, *, cache: MeasureCache | None = None,
              in_graph: bool = True) -> float:
    """Estimated seconds for one node; a `kernel` node is scaled by its kernel's cached efficiency."""
    ins, outs = [v.type for v in node.inputs], [v.type for v in node.outputs]
    efficiency = None
    if node.op == "kernel" and cache is not None:
        efficiency = cache.efficiency(device.name, node.attrs["kernel"], node.attrs["version"] or None)
    return op_time(node.op, ins, outs, node.attrs, device, efficiency=efficiency or 1.0, in_graph=in_graph)


def graph_time(graph: Graph, device: Device, *, in_graph: bool = True,
               cache: MeasureCache | None = None) -> float:
    """Sum of per-node estimates: one launch per node, as the interpreter would run it."""
    return sum(node_time(n, device, cache=cache, in_graph=in_graph) for n in graph.nodes)

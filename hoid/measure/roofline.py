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


def region_work(region: Graph, aliases: Sequence[tuple[int, int]] = ()) -> tuple[int, int]:
    """(flops, bytes) of a fused region: every node's arithmetic, but memory traffic only for the region's
    inputs (read once) and outputs (written once): a fused kernel keeps its intermediates on chip.

    aliases: (output, input) pairs a kernel updates in place (`KernelSpec.aliases`): such a pair costs
    what the node producing the output counts (the registry counts an update by the elements it writes:
    a cache append, its new rows), not the whole buffer read and written again."""
    updated_in, updated_out = {i for _, i in aliases}, {o for o, _ in aliases}
    nbytes = sum(gi.value.type.nbytes for k, gi in enumerate(region.inputs)
                 if gi.kind in ("input", "weight", "state") and k not in updated_in)
    nbytes += sum(v.type.nbytes for k, v in enumerate(region.outputs) if k not in updated_out)
    producers = region.producers() if aliases else {}
    for o in updated_out:
        node = producers.get(region.outputs[o].name)
        if node is not None:
            nbytes += get_op(node.op).count_bytes([v.type for v in node.inputs], [v.type for v in node.outputs],
                                                  node.attrs)
    return region.flops(), nbytes


def region_floor(region: Graph, device: Device, aliases: Sequence[tuple[int, int]] = ()) -> float:
    """The fewest seconds a fused kernel can take for `region` (no launch cost); `aliases` as in
    `region_work`."""
    flops, nbytes = region_work(region, aliases)
    first = (region.inputs or [None])[0]
    dtype = first.value.type.dtype if first is not None else "f32"
    return max(flops / device.flops_for(dtype), nbytes / device.copy_bandwidth)


def kernel_time(spec, types: Sequence[TensorType], attrs: dict, device: Device, *,
                cache: MeasureCache | None = None, in_graph: bool = True) -> float:
    """Estimated seconds for one launch of kernel `spec` (a `hoid.kernels.KernelSpec`) at these input
    types: its pattern's region floor, scaled by the kernel's cached efficiency on `device` if any."""
    efficiency = cache.efficiency(device.name, spec.id, spec.version) if cache is not None else None
    launch = device.graph_launch_overhead if in_graph else device.launch_overhead
    return region_floor(spec.pattern.graph(types, attrs), device, spec.aliases) / (efficiency or 1.0) + launch


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

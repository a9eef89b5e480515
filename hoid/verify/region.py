"""A graph as a reference a check can call, and the index bounds of its integer inputs.

Regions are cut by `hoid.ir.region.extract_region` (re-exported here): the one cut that verification,
the search and the agent share.

`graph_reference(graph)` runs a graph with the interpreter on tensors of other float dtypes than it
declares, by rebuilding it for them: that is how the reference runs in float64.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..ir import Graph, GraphBuilder, TensorType, get_op, run
from ..ir.region import extract_region  # noqa: F401  (re-exported: hoid.verify.extract_region)
from .verdict import VerifyError

# Ops that pass an integer value's range through unchanged (views and a same-kind cast), and the offsets
# whose range is known from the graph alone: what a decode step does to its position before indexing with it
_SAME_RANGE = {"reshape", "slice", "expand", "transpose", "permute", "contiguous", "cast"}


def index_bounds(graph: Graph) -> dict[int, int]:
    """{input position: exclusive upper bound} for integer inputs the graph's ops use as indices, directly
    or through views and additions of a known non-negative offset (`position + arange(T)` indexing a cache
    of S slots bounds the position by S - T + 1: random inputs drawn past it would index out of range)."""
    position = {v.name: i for i, v in enumerate(graph.runtime_inputs)}
    producer = {v.name: n for n in graph.nodes for v in n.outputs}
    ranges = _known_ranges(graph)
    bounds: dict[int, int] = {}

    def bound(name: str, limit: int, depth: int = 0) -> None:
        if name in position:
            if graph.runtime_inputs[position[name]].type.dtype.startswith(("i", "u")):  # integers index
                bounds[position[name]] = min(limit, bounds.get(position[name], limit))
            return
        node = producer.get(name)
        if node is None or depth > 32:
            return
        if node.op in _SAME_RANGE and node.inputs:
            bound(node.inputs[0].name, limit, depth + 1)
        elif node.op == "add" and len(node.inputs) == 2 and node.attrs.get("scalar") is None:
            for mine, other in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
                known = ranges.get(other.name)
                if known is not None and known[0] >= 0:
                    bound(mine.name, limit - known[1], depth + 1)

    for node in graph.nodes:
        op = get_op(node.op)
        if op.index_bounds is None:
            continue
        for operand, limit in op.index_bounds([v.type for v in node.inputs], node.attrs).items():
            bound(node.inputs[operand].name, limit)
    return {i: max(b, 1) for i, b in bounds.items()}


def _known_ranges(graph: Graph) -> dict[str, tuple[int, int]]:
    """[lo, hi] of the integer values the graph computes from constants alone (aranges and their views)."""
    ranges: dict[str, tuple[int, int]] = {}
    for node in graph.nodes:
        out = node.outputs[0].name
        if node.op == "arange" and all(isinstance(node.attrs.get(k), int) for k in ("start", "end", "step")):
            values = range(node.attrs["start"], node.attrs["end"], node.attrs["step"])
            if len(values):
                ranges[out] = (min(values), max(values))
        elif node.op in _SAME_RANGE and node.inputs and node.inputs[0].name in ranges:
            ranges[out] = ranges[node.inputs[0].name]
    return ranges


def _rebuilt(graph: Graph, types: list[TensorType]) -> Graph:
    """`graph` rebuilt op by op for inputs of `types` (inference recomputes every type on the way)."""
    b = GraphBuilder(graph.name)
    env = {
        gi.value.name: b.input(gi.value.name, t.shape, t.dtype)
        for gi, t in zip(graph.inputs, types, strict=True)
    }
    for node in graph.nodes:
        out = b.op(node.op, *(env[v.name] for v in node.inputs), **node.attrs)
        for value, new in zip(node.outputs, out if isinstance(out, tuple) else (out,), strict=True):
            env[value.name] = new
    return b.build(*(env[v.name] for v in graph.outputs))


def graph_reference(graph: Graph) -> Callable[..., tuple[torch.Tensor, ...]]:
    """A callable running `graph` with the interpreter on tensors of its declared shapes, in the declared
    dtypes or others (float64): the graph is rebuilt once per dtype signature. A graph that cannot be
    rebuilt for them (a cast to an integer type that float64 would change, a kernel node whose body
    expects its dtypes) raises, and the check runs the reference in the declared dtypes instead."""
    if graph.weight_inputs or graph.inputs_of_kind("state"):
        raise VerifyError(
            f"graph {graph.name!r}: a reference graph takes plain inputs only (cut it with "
            "extract_region, which turns weights and state into inputs)"
        )
    rebuilt: dict[tuple, Graph] = {}

    def reference(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        types = [TensorType.of(t).contiguous() for t in tensors]
        key = tuple(types)
        if key not in rebuilt:
            declared = [gi.value.type.contiguous() for gi in graph.inputs]
            rebuilt[key] = graph if types == declared else _rebuilt(graph, types)
        return run(rebuilt[key], *tensors)

    return reference

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


def index_bounds(graph: Graph) -> dict[int, int]:
    """{input position: exclusive upper bound} for integer inputs the graph's ops use as indices."""
    position = {v.name: i for i, v in enumerate(graph.runtime_inputs)}
    bounds: dict[int, int] = {}
    for node in graph.nodes:
        op = get_op(node.op)
        if op.index_bounds is None:
            continue
        for operand, bound in op.index_bounds([v.type for v in node.inputs], node.attrs).items():
            name = node.inputs[operand].name
            if name in position:
                bounds[position[name]] = min(bound, bounds.get(position[name], bound))
    return bounds


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

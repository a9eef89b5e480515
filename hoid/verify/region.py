"""A region of a graph as a graph of its own, and a graph as a reference a check can call.

`extract_region(graph, region)` cuts the nodes of `region` out of `graph`: its inputs are the values the
region consumes from outside (graph inputs of any kind, weights included, or values of other nodes), in
order of first use; its outputs are the values it produces that are used outside it or are outputs of
the graph. That is the reference semantics a kernel replacing the region must reproduce.

`graph_reference(graph)` runs a graph with the interpreter on tensors of other float dtypes than it
declares, by rebuilding it for them: that is how the reference runs in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from ..ir import Graph, GraphBuilder, GraphInput, Node, TensorType, get_op, run
from .verdict import VerifyError


def _selected_nodes(graph: Graph, region: Iterable[Node | str]) -> list[Node]:
    producers = graph.producers()
    wanted: set[int] = set()
    for item in region:
        if isinstance(item, Node):
            if not any(node is item for node in graph.nodes):
                raise VerifyError(
                    f"region: node {item.name} ({item.op}) is not a node of graph {graph.name!r}"
                )
            wanted.add(id(item))
        elif isinstance(item, str):
            name = item.lstrip("%")
            if name not in producers:
                raise VerifyError(
                    f"region: no node of graph {graph.name!r} produces %{name} (graph inputs are not "
                    "nodes: name the nodes that consume them)"
                )
            wanted.add(id(producers[name]))
        else:
            raise VerifyError(f"region: expected nodes or value names, got {type(item).__name__}")
    if not wanted:
        raise VerifyError("region: no nodes given")
    return [node for node in graph.nodes if id(node) in wanted]


def extract_region(graph: Graph, region: Iterable[Node | str]) -> Graph:
    """The region (nodes, or names of values they produce) as a graph with plain inputs."""
    nodes = _selected_nodes(graph, region)
    produced = {v.name for node in nodes for v in node.outputs}
    inputs, seen = [], set()
    for node in nodes:
        for v in node.inputs:
            if v.name not in produced and v.name not in seen:
                seen.add(v.name)
                inputs.append(GraphInput(v, "input"))
    inside = {id(node) for node in nodes}
    used_outside = {v.name for node in graph.nodes if id(node) not in inside for v in node.inputs}
    used_outside |= {v.name for v in graph.outputs}
    outputs = [v for node in nodes for v in node.outputs if v.name in used_outside] or list(nodes[-1].outputs)
    return Graph(f"{graph.name}.region", inputs, nodes, outputs).validate()


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

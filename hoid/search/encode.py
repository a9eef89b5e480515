"""Graph -> egglog: every value becomes a handle `(N i)` unioned with its node's term, plus type facts.

Encoding emits flat commands against the handles instead of building one nested term: a decode step
shares the residual stream across every layer, and nested terms (or one huge program) make egglog's
parsing super-linear, while small batches of flat actions stay linear (`_egglog.Engine.act`).

A `kernel` node already in the graph is expanded: its body is encoded inline over the node's operands,
and the kernel's e-node is joined to the body's outputs, so extraction can keep or drop the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import GraphError
from ..ir import Graph, Node, TensorType
from ..ir.ops.kernel import KernelImpl
from ..ir.registry import get_op
from . import language as L


@dataclass
class Encoding:
    """A graph as egglog actions (`commands`, for `Engine.act`), and the tables to map e-classes back: value
    names to handles, kernel keys to implementations."""

    graph: Graph
    handles: dict[str, int] = field(default_factory=dict)  # value name (top level) -> handle index
    kernels: dict[str, KernelImpl] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    _next_handle: int = 0
    _key_of: dict = field(default_factory=dict, repr=False)  # KernelImpl.identity() -> its key


    # --- public --------------------------------------------------------------------------------
    def kernel_key(self, impl: KernelImpl) -> str:
        """The key under which a kernel implementation is known to the e-graph (one per identity)."""
        identity = impl.identity()
        if identity not in self._key_of:
            key = f"{impl.kernel}#{len(self.kernels)}"
            self.kernels[key] = impl
            self._key_of[identity] = key
        return self._key_of[identity]

    # --- building: `env` maps value names to their handle indexes -------------------------------------
    def define(self, term: str, vtype: TensorType) -> int:
        """A new handle unioned with `term`, with its shape and dtype facts; returns its index."""
        index = self._next_handle
        self._next_handle += 1
        self.commands.append(f"(union {_handle(index)} {term})")
        self.commands.append(f"(set (shape {_handle(index)}) {L.int_vec(vtype.shape)})")
        self.commands.append(f"(set (dtype {_handle(index)}) {L.string(vtype.dtype)})")
        return index

    def encode_nodes(self, nodes: list[Node], env: dict[str, int]) -> None:
        """Encode nodes whose operands are in `env`; adds their outputs to it."""
        for node in nodes:
            operands = [_handle(env[v.name]) for v in node.inputs]
            if node.op == "kernel":
                self._encode_kernel(node, operands, env)
                continue
            op = get_op(node.op)
            if not L.encodable(op):
                raise GraphError(f"node {node.name}: op {node.op} has graph or params attrs and cannot be "
                                 "encoded for the search; only `kernel` may carry a body")
            term = L.op_term(op, operands, node.attrs)
            if len(node.outputs) == 1:
                env[node.outputs[0].name] = self.define(term, node.outputs[0].type)
            else:
                for i, value in enumerate(node.outputs):
                    env[value.name] = self.define(f"(Out {term} {i})", value.type)

    def _encode_kernel(self, node: Node, operands: list[str], env: dict[str, int]) -> None:
        """The body over the node's operands, then the kernel e-node joined to each body output."""
        body: Graph = node.attrs["body"]
        inner = {v.name: env[u.name] for v, u in zip(body.inputs_of_kind("input"), node.inputs, strict=True)}
        self.encode_nodes(body.nodes, inner)
        impl = KernelImpl.from_node(node.attrs)
        kernel = f"(Kernel {L.string(self.kernel_key(impl))} {L.tensor_list(operands)})"
        for i, (outer, inner_value) in enumerate(zip(node.outputs, body.outputs, strict=True)):
            self.commands.append(f"(union {_handle(inner[inner_value.name])} (Out {kernel} {i}))")
            env[outer.name] = inner[inner_value.name]


def _handle(index: int) -> str:
    return f"(N {index})"


def encode(graph: Graph) -> Encoding:
    """The commands that put `graph` into an e-graph declared with `language.declarations()`."""
    enc = Encoding(graph)
    weight_ids = {v.name: i for i, v in enumerate(graph.weight_inputs)}
    for gi in graph.inputs:
        index = enc.define(f"(Input {L.string(gi.value.name)})", gi.value.type)
        enc.handles[gi.value.name] = index
        if gi.value.name in weight_ids:
            enc.commands.append(f"(set (weight-id {_handle(index)}) {weight_ids[gi.value.name]})")
    enc.encode_nodes(graph.nodes, enc.handles)
    return enc

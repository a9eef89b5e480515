"""`Value`, `Node`, `Graph`: a static DAG in SSA form.

A graph has typed inputs of three kinds (activations; weights, referenced by name and optionally bound
to tensors; state, such as a KV cache, that declares the output updating it), nodes in topological
order, and outputs. Equality is structural (bound weight tensors are not compared).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from ..errors import GraphError, NotAGraphError
from .types import TensorType

InputKind = Literal["input", "weight", "state"]
INPUT_KINDS = ("input", "weight", "state")


@dataclass(frozen=True)
class Value:
    """A named, typed SSA value."""

    name: str
    type: TensorType

    def __str__(self) -> str:
        return f"%{self.name}"


@dataclass(frozen=True)
class GraphInput:
    """One input of a graph: its value and its kind (an activation "input", a bound "weight", or "state"
    that a step reads and writes back)."""
    value: Value
    kind: InputKind = "input"


def attr_key(value: Any) -> Any:
    """A hashable key under which attr values compare exactly (floats by their bits, NaN == NaN)."""
    if isinstance(value, float):
        return ("f", value.hex())
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (list, tuple)):
        return ("t", tuple(attr_key(v) for v in value))
    if isinstance(value, dict):
        return ("d", tuple(sorted((k, attr_key(v)) for k, v in value.items())))
    if isinstance(value, Graph):
        return ("g", value.structure_key())
    return value


@dataclass(eq=False)
class Node:
    """One op applied to values: `op` names a registered op (`hoid.ir.get_op`), `attrs` its attributes,
    `outputs` the values it defines (the first one's name is the node's name)."""
    op: str
    inputs: tuple[Value, ...]
    attrs: dict[str, Any]
    outputs: tuple[Value, ...]

    @property
    def output(self) -> Value:
        if len(self.outputs) != 1:
            raise GraphError(f"node {self.name} ({self.op}) has {len(self.outputs)} outputs; use .outputs")
        return self.outputs[0]

    @property
    def name(self) -> str:
        return "%" + ", %".join(v.name for v in self.outputs)

    def key(self) -> tuple:
        return (self.op, tuple(self.inputs), attr_key(self.attrs), tuple(self.outputs))

    def __eq__(self, other) -> bool:
        return isinstance(other, Node) and self.key() == other.key()

    def __hash__(self):
        return hash((self.op, tuple(self.outputs)))

    def __repr__(self) -> str:
        ins = ", ".join(str(v) for v in self.inputs)
        return f"Node({self.name} = {self.op}({ins}))"


@dataclass(eq=False)
class Graph:
    """A static dataflow graph. Build one with `hoid.GraphBuilder`, `hoid.from_torch` or `hoid.loads`."""

    name: str
    inputs: list[GraphInput]
    nodes: list[Node]
    outputs: list[Value]
    state_updates: dict[str, str] = field(default_factory=dict)  # state input name -> output value name
    weights: dict[str, torch.Tensor] = field(default_factory=dict)  # bound weight tensors, by name

    # --- views of the inputs --------------------------------------------------------------------
    def inputs_of_kind(self, *kinds: str) -> list[Value]:
        return [i.value for i in self.inputs if i.kind in kinds]

    @property
    def runtime_inputs(self) -> list[Value]:
        """What `hoid.run` takes positionally: activation and state inputs in declaration order."""
        return self.inputs_of_kind("input", "state")

    @property
    def weight_inputs(self) -> list[Value]:
        return self.inputs_of_kind("weight")

    def kind_of(self, name: str) -> str | None:
        for i in self.inputs:
            if i.value.name == name:
                return i.kind
        return None

    # --- lookups -------------------------------------------------------------------------------
    def values(self) -> dict[str, Value]:
        out = {i.value.name: i.value for i in self.inputs}
        for node in self.nodes:
            out.update((v.name, v) for v in node.outputs)
        return out

    def producers(self) -> dict[str, Node]:
        return {v.name: node for node in self.nodes for v in node.outputs}

    def users(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for node in self.nodes:
            for v in node.inputs:
                out.setdefault(v.name, []).append(node)
        return out

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
        return counts

    # --- equality ------------------------------------------------------------------------------
    def structure_key(self) -> tuple:
        return (
            self.name,
            tuple((i.value, i.kind) for i in self.inputs),
            tuple(n.key() for n in self.nodes),
            tuple(self.outputs),
            tuple(sorted(self.state_updates.items())),
        )

    def __eq__(self, other) -> bool:
        return isinstance(other, Graph) and self.structure_key() == other.structure_key()

    def __hash__(self):
        return hash((self.name, len(self.nodes)))

    def __str__(self) -> str:
        from .text import dumps

        return dumps(self)

    def __repr__(self) -> str:
        sizes = f"{len(self.inputs)} inputs, {len(self.nodes)} nodes, {len(self.outputs)} outputs"
        return f"<hoid.Graph {self.name!r}: {sizes}>"

    # --- validation ----------------------------------------------------------------------------
    def validate(self) -> Graph:
        """Check the whole graph; raises `hoid.GraphError` naming the node and the problem. Returns self."""
        from .registry import infer_node

        seen: dict[str, Value] = {}

        def define(value: Value, where: str) -> None:
            if value.name in seen:
                raise GraphError(f"{where}: duplicate value name %{value.name}")
            seen[value.name] = value

        for gi in self.inputs:
            if gi.kind not in INPUT_KINDS:
                raise GraphError(f"input %{gi.value.name}: unknown kind {gi.kind!r}; expected one of {INPUT_KINDS}")
            define(gi.value, f"input %{gi.value.name}")
        for node in self.nodes:
            for v in node.inputs:
                if v.name not in seen:
                    raise GraphError(f"node {node.name} ({node.op}): uses %{v.name} before its definition")
                if seen[v.name] != v:
                    raise GraphError(
                        f"node {node.name} ({node.op}): operand %{v.name} has type {v.type} but is defined "
                        f"as {seen[v.name].type}"
                    )
            try:
                types, attrs = infer_node(node.op, [v.type for v in node.inputs], node.attrs)
            except GraphError as e:
                raise GraphError(f"node {node.name}: {e}") from None
            if len(types) != len(node.outputs):
                raise GraphError(
                    f"node {node.name} ({node.op}): declares {len(node.outputs)} outputs, the op gives {len(types)}"
                )
            for v, t in zip(node.outputs, types):
                if v.type != t:
                    raise GraphError(
                        f"node {node.name} ({node.op}): output %{v.name} is declared {v.type}, inferred {t}"
                    )
            if attr_key(attrs) != attr_key(node.attrs):
                raise GraphError(f"node {node.name} ({node.op}): attrs are not normalized (defaults missing?)")
            for v in node.outputs:
                define(v, f"node {node.name} ({node.op})")
        for v in self.outputs:
            if v.name not in seen or seen[v.name] != v:
                raise GraphError(f"output %{v.name}: not defined in the graph (or defined with another type)")
        states = {v.name: v for v in self.inputs_of_kind("state")}
        out_names = {v.name for v in self.outputs}
        for state, update in self.state_updates.items():
            if state not in states:
                raise GraphError(f"state update of %{state}: %{state} is not a state input")
            if update not in out_names:
                raise GraphError(f"state %{state}: its update %{update} is not a graph output")
            if not seen[update].type.same_data_type(states[state].type):
                raise GraphError(
                    f"state %{state}: declared {states[state].type} but its update %{update} is {seen[update].type}"
                )
        missing = [s for s in states if s not in self.state_updates]
        if missing:
            raise GraphError(f"state input %{missing[0]} declares no update: add `output %<new> updates %{missing[0]}`")
        weight_types = {v.name: v.type for v in self.weight_inputs}
        for name, tensor in self.weights.items():
            if name not in weight_types:
                raise GraphError(f"bound weight {name!r} is not a weight input of the graph")
            t = weight_types[name]
            if tuple(tensor.shape) != t.shape or TensorType.of(tensor).dtype != t.dtype:
                raise GraphError(f"weight %{name}: bound tensor is {TensorType.of(tensor).contiguous()}, declared {t}")
        return self

    # --- derived facts --------------------------------------------------------------------------
    def flops(self) -> int:
        from .registry import get_op

        return sum(get_op(n.op).count_flops([v.type for v in n.inputs], [v.type for v in n.outputs], n.attrs)
                   for n in self.nodes)

    def bytes_moved(self) -> int:
        from .registry import get_op

        return sum(get_op(n.op).count_bytes([v.type for v in n.inputs], [v.type for v in n.outputs], n.attrs)
                   for n in self.nodes)

    def weight_bytes(self) -> int:
        return sum(v.type.nbytes for v in self.weight_inputs)


def expect_graph(obj, where: str) -> Graph:
    """`obj` if it is a `Graph`; else `hoid.NotAGraphError` saying what `where` (the public function
    refusing it, e.g. "hoid.run") was given and how to get a graph from it. Every public entry point
    that takes a graph calls this first, so that a model passed as it is fails with the fix, not with
    an AttributeError from deep inside."""
    if isinstance(obj, Graph):
        return obj
    given = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if isinstance(obj, torch.nn.Module):
        fix = ("import the module first: graph = hoid.from_torch(model, args), with args example inputs "
               "of the shapes and dtypes to run, then pass the graph")
    elif isinstance(obj, (str, bytes)) or hasattr(obj, "__fspath__"):
        fix = "to read a .hoid document, use hoid.load(path) (or hoid.loads(text)), then pass the graph"
    else:
        fix = ("build one with hoid.from_torch(model, args), hoid.load(path), hoid.loads(text) or "
               "hoid.GraphBuilder")
    raise NotAGraphError(f"{where} takes a hoid.Graph, but was given {given}; {fix}")

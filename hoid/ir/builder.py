"""`GraphBuilder`: build a graph op by op, with inference (and its errors) as you go.

    b = hoid.GraphBuilder("mlp")
    x = b.input("x", (4, 64), "f32")
    w = b.weight("w", (64, 64), "f32")
    y = b.silu(b.matmul(x, w))          # any registered op is a method; b.op("silu", ...) is the same
    g = b.build(y)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..errors import GraphError
from .graph import Graph, GraphInput, Node, Value
from .registry import get_op, has_op, infer_node
from .types import TensorType

# Binary ops whose operands may be swapped, so that `b.mul(2.0, x)` can become `mul(%x, scalar=2.0)`.
_COMMUTATIVE = {"add", "mul", "maximum", "minimum", "eq", "ne", "logical_and", "logical_or"}


class GraphBuilder:
    def __init__(self, name: str = "main"):
        self.name = name
        self._inputs: list[GraphInput] = []
        self._nodes: list[Node] = []
        self._names: set[str] = set()
        self._weights: dict[str, torch.Tensor] = {}
        self._counter = 0

    # --- inputs --------------------------------------------------------------------------------
    def _add_input(self, name: str, shape: Sequence[int], dtype, kind: str) -> Value:
        value = Value(self._claim(name), TensorType(shape, dtype))
        self._inputs.append(GraphInput(value, kind))  # type: ignore[arg-type]
        return value

    def input(self, name: str, shape: Sequence[int], dtype) -> Value:
        """An activation input: passed to `hoid.run` positionally, in declaration order."""
        return self._add_input(name, shape, dtype, "input")

    def weight(self, name: str, shape: Sequence[int], dtype, tensor: torch.Tensor | None = None) -> Value:
        """A weight referenced by `name`; bind its tensor here or pass it to `hoid.run(weights=...)`."""
        value = self._add_input(name, shape, dtype, "weight")
        if tensor is not None:
            self._weights[name] = tensor
        return value

    def state(self, name: str, shape: Sequence[int], dtype) -> Value:
        """State (a KV cache, ...): an input whose update is declared in `build(updates=...)`."""
        return self._add_input(name, shape, dtype, "state")

    # --- ops -----------------------------------------------------------------------------------
    def op(self, op_name: str, *operands, name: str | None = None, **attrs) -> Value | tuple[Value, ...]:
        """Add a node; returns its output value, or a tuple for ops with several outputs. A Python number
        given as an operand of a binary op becomes its `scalar=` attr."""
        op_name, operands, attrs = self._scalars(op_name, list(operands), attrs)
        for i, v in enumerate(operands):
            if not isinstance(v, Value):
                raise GraphError(f"{op_name}: operand {i} is a {type(v).__name__}, expected a value of this builder")
        types, attrs = infer_node(op_name, [v.type for v in operands], attrs)
        base = name or f"t{self._counter}"
        self._counter += 1
        if len(types) == 1:
            outputs = (Value(self._claim(base), types[0]),)
        else:
            outputs = tuple(Value(self._claim(f"{base}.{i}"), t) for i, t in enumerate(types))
        self._nodes.append(Node(op_name, tuple(operands), attrs, outputs))
        return outputs[0] if len(outputs) == 1 else outputs

    def _scalars(self, op_name: str, operands: list, attrs: dict) -> tuple[str, list, dict]:
        """(op, operands, attrs) with a Python number operand of a binary op turned into `scalar=`."""
        if len(operands) == 2 and "scalar" in get_op(op_name).attr_map:
            a, b = operands
            if isinstance(b, (int, float)) and not isinstance(b, bool):
                return op_name, [a], {**attrs, "scalar": b}
            if isinstance(a, (int, float)) and not isinstance(a, bool):
                if op_name == "sub":  # c - x == (-x) + c exactly
                    return "add", [self.op("neg", b)], {**attrs, "scalar": a}
                if op_name in _COMMUTATIVE:
                    return op_name, [b], {**attrs, "scalar": a}
                raise GraphError(f"{op_name}: a number as first operand is not supported; make it a `full` constant")
        return op_name, operands, attrs

    def __getattr__(self, op_name: str):
        if op_name.startswith("_") or not has_op(op_name):
            raise AttributeError(f"GraphBuilder has no method or op {op_name!r}")
        return lambda *operands, **attrs: self.op(op_name, *operands, **attrs)

    # --- result ---------------------------------------------------------------------------------
    def build(self, *outputs: Value, updates: dict[Value, Value] | None = None) -> Graph:
        """The graph with these outputs; `updates` maps each state input to the value that updates it
        (those values are appended to the outputs if not already among them)."""
        outs = list(outputs)
        state_updates = {}
        for state, new in (updates or {}).items():
            state_updates[state.name] = new.name
            if new not in outs:
                outs.append(new)
        g = Graph(self.name, list(self._inputs), list(self._nodes), outs, state_updates, dict(self._weights))
        return g.validate()

    def _claim(self, name: str) -> str:
        if name in self._names:
            raise GraphError(f"duplicate value name %{name}")
        self._names.add(name)
        return name

"""Printing a `Graph` as a `.hoid` document (the format is described in `hoid.ir.text`).

The printer is deterministic: the same graph always gives the same text, byte for byte, so that
documents diff cleanly and `dumps(loads(text)) == text` holds for every text it wrote.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import GraphError
from .graph import Graph, Node
from .registry import get_op, has_op

FORMAT_VERSION = 1

# Names made of these characters are printed bare (`%model.norm.weight`); any other name is printed
# JSON-quoted (`%"my value"`), so that every name a Python string can hold survives a round trip.
BARE_NAME = re.compile(r"[A-Za-z0-9_.]+")


def quote_name(sigil: str, name: str) -> str:
    """`%x` or `@body` when the name is bare-safe, else the sigil and the JSON-quoted name."""
    return sigil + (name if BARE_NAME.fullmatch(name) else json.dumps(name))


def format_attr_value(value: Any, labels: GraphLabels, *, dtype: bool = False) -> str:
    """One attr value as the parser reads it back: the same Python value, bit for bit.

    Floats use `repr` (shortest text that reads back to the same bits; `inf`, `-inf`, `nan` spelled
    out; an integral float keeps its `.0`, so `2.0` and `2` stay distinct). Dtypes are bare words
    (`bf16`): the caller says when a string is a dtype, since only the op's schema knows.
    """
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return float.__repr__(float(value))
    if isinstance(value, str):
        return value if dtype else json.dumps(value)
    if isinstance(value, Graph):
        return quote_name("@", labels.label_of(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr_value(v, labels) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}: {format_attr_value(v, labels)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise GraphError(f"attr value {value!r} ({type(value).__name__}) cannot be written to a .hoid document; "
                     "attrs hold numbers, bools, strings, lists, dicts, dtypes, graphs or none")


class GraphLabels:
    """The `@label` of every distinct graph of a document: the main graph and the bodies it uses.

    Structurally equal bodies share one label (printed once). A label is the graph's own name unless
    another, different graph of the document already took that name; then it is `name_2`, `name_3`...
    and the header carries the real name (`graph @body_2 name="body"`).
    """

    def __init__(self, main: Graph):
        self.bodies: list[Graph] = []  # distinct bodies, each after the bodies it uses
        self._keys: dict[int, tuple] = {}  # id(graph) -> structure key, so each key is computed once
        self._labels: dict[tuple, str] = {self._key(main): main.name}
        self._collect(main)
        names = {main.name, *(body.name for body in self.bodies)}
        taken = {main.name}
        for body in self.bodies:
            label, n = body.name, 1
            while label in taken or (n > 1 and label in names):  # never take another graph's real name
                n += 1
                label = f"{body.name}_{n}"
            taken.add(label)
            self._labels[self._key(body)] = label

    def _key(self, graph: Graph) -> tuple:
        if id(graph) not in self._keys:
            self._keys[id(graph)] = graph.structure_key()
        return self._keys[id(graph)]

    def _collect(self, graph: Graph) -> None:
        """Post-order walk: a body's own bodies are listed before it."""
        for node in graph.nodes:
            for value in node.attrs.values():
                if isinstance(value, Graph) and self._key(value) not in self._labels:
                    self._collect(value)
                    self._labels[self._key(value)] = value.name  # marks it seen; __init__ gives the final label
                    self.bodies.append(value)

    def label_of(self, graph: Graph) -> str:
        return self._labels[self._key(graph)]


def format_node(node: Node, labels: GraphLabels) -> str:
    """`%a, %b = op(%x, %y, attr=value, ...) : type_a, type_b`; attrs in the node's (schema) order.

    An optional attr whose value and default are both none is left out (`add(%x, %y)`, not
    `add(%x, %y, scalar=none)`): none means absent. Every other attr is printed, defaults included,
    so a document keeps its meaning if an op's default changes.
    """
    if not node.outputs:
        raise GraphError(f"node {node.op}({', '.join(map(str, node.inputs))}) has no outputs; "
                         "a .hoid document only holds nodes that define values")
    schema = get_op(node.op).attr_map if has_op(node.op) else {}
    args = [quote_name("%", v.name) for v in node.inputs]
    for name, value in node.attrs.items():
        attr = schema.get(name)
        if value is None and attr is not None and attr.default is None:
            continue
        is_dtype = attr is not None and attr.kind == "dtype"
        args.append(f"{name}={format_attr_value(value, labels, dtype=is_dtype)}")
    outs = ", ".join(quote_name("%", v.name) for v in node.outputs)
    types = ", ".join(str(v.type) for v in node.outputs)
    return f"{outs} = {node.op}({', '.join(args)}) : {types}"


def format_graph(graph: Graph, labels: GraphLabels) -> list[str]:
    """The lines of one graph, from `graph @label` to `end`."""
    label = labels.label_of(graph)
    header = f"graph {quote_name('@', label)}"
    if label != graph.name:
        header += f" name={json.dumps(graph.name)}"
    lines = [header]
    lines += [f"{gi.kind} {quote_name('%', gi.value.name)} : {gi.value.type}" for gi in graph.inputs]
    lines += [format_node(node, labels) for node in graph.nodes]
    lines += _format_outputs(graph)
    lines.append("end")
    return lines


def _format_outputs(graph: Graph) -> list[str]:
    """`output %v`, with `updates %state, ...` on the first line that outputs each state's update."""
    out_names = {v.name for v in graph.outputs}
    stray = [s for s, v in graph.state_updates.items() if v not in out_names]
    if stray:
        raise GraphError(f"graph {graph.name!r}: state %{stray[0]} is updated by "
                         f"%{graph.state_updates[stray[0]]}, which is not an output of the graph")
    lines, done = [], set()
    for value in graph.outputs:
        line = f"output {quote_name('%', value.name)}"
        if value.name not in done:
            done.add(value.name)
            states = [s for s, v in graph.state_updates.items() if v == value.name]
            if states:
                line += " updates " + ", ".join(quote_name("%", s) for s in states)
        lines.append(line)
    return lines


def format_document(graph: Graph, *, weights_file: str | None = None) -> str:
    """The whole document: the header, the bodies (each before its first use), the main graph last.

    `weights_file` (written by `hoid.save`) names the safetensors file holding the bound weights.
    """
    labels = GraphLabels(graph)
    lines = [f"hoid {FORMAT_VERSION}"]
    if weights_file is not None:
        lines.append(f"weights {json.dumps(weights_file)}")
    for i, g in enumerate([*labels.bodies, graph]):
        if i:
            lines.append("")
        lines += format_graph(g, labels)
    return "\n".join(lines) + "\n"

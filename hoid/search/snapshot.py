"""A read-only view of a saturated e-graph, from egglog's serialized JSON, in hoid's terms.

egglog serializes every row: op constructors, the `(N i)` handles, the `shape`/`dtype` facts, attr
values and primitives, each node naming its children by node id. `Snapshot` turns that into what the
cost models, the extractors and the decoder need: tensor e-classes with their `TensorType`, and for each
class the e-nodes that compute it, as `ENode`s with a hoid op name, operand classes and decoded attrs.
Handles and facts are not e-nodes here: they can never be extracted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..ir import TensorType
from . import language as L

# Kinds of ENode.op that are not registry ops.
INPUT, ABSENT, OUT, KERNEL = "input", "absent", "out", "kernel"
FACTS = ("shape", "dtype", "weight-id")  # functions of the language: rows that are facts, not values


@dataclass(frozen=True)
class ENode:
    """One way to compute an e-class. `op` is a registry op name, or one of INPUT (attrs: name),
    ABSENT (a missing optional operand), OUT (attrs: index; its child is a multi-output node's class)
    and KERNEL (attrs: key into the encoding's kernel table). `children` are operand classes, in order."""

    id: str
    op: str
    eclass: str
    children: tuple[str, ...]
    attrs: dict = field(hash=False, compare=False)


class Snapshot:
    """Tensor e-classes, their types, their e-nodes, and the class of every handle."""

    def __init__(self, serialized: dict):
        self._raw = serialized["nodes"]
        self._class_type = {cid: data["type"] for cid, data in serialized["class_data"].items()}
        self._values: dict[str, object] = {}
        # the row that holds each value class's value (the facts' rows sit in their value's class too)
        self._value_row: dict[str, str] = {}
        for nid, raw in self._raw.items():
            if raw["op"] not in FACTS:
                self._value_row.setdefault(raw["eclass"], nid)
        self._ops = L.op_by_constructor()
        self.nodes: dict[str, ENode] = {}
        self.classes: dict[str, list[str]] = {}  # tensor class -> e-node ids
        self.handles: dict[int, str] = {}  # handle index -> class
        self.types: dict[str, TensorType] = {}
        shapes: dict[str, tuple] = {}
        dtypes: dict[str, str] = {}
        for nid, raw in self._raw.items():
            op, cls = raw["op"], raw["eclass"]
            if op in ("shape", "dtype"):
                target = self._class_of(raw["children"][0])
                (shapes if op == "shape" else dtypes)[target] = self.value(cls)
            elif self._class_type.get(cls) == "Tensor":
                if op == "N":
                    self.handles[int(self._raw[raw["children"][0]]["op"])] = cls
                else:
                    node = self._tensor_node(nid, raw)
                    self.nodes[nid] = node
                    self.classes.setdefault(cls, []).append(nid)
        for cls, shape in shapes.items():
            if cls in dtypes:
                self.types[cls] = TensorType(shape, dtypes[cls])
        self.absent = {n.eclass for n in self.nodes.values() if n.op == ABSENT}  # the (Absent) class
        self.outputs_of: dict[str, dict[int, str]] = {}  # multi-output class -> {index: Out class}
        for node in self.nodes.values():
            if node.op == OUT:
                self.outputs_of.setdefault(node.children[0], {})[node.attrs["index"]] = node.eclass

    def enodes(self, cls: str) -> Iterator[ENode]:
        return (self.nodes[n] for n in self.classes.get(cls, ()))

    def operands(self, node: ENode) -> list[str]:
        """The node's operand classes without absent optionals."""
        return [c for c in node.children if c not in self.absent]

    # --- decoding egglog's rows ------------------------------------------------------------------
    def _class_of(self, node_id: str) -> str:
        return self._raw[node_id]["eclass"]

    def value(self, cls: str):
        """The Python value of a non-tensor class: a primitive, a vec (tuple), an Attr, a TensorList
        (a list of tensor classes)."""
        if cls not in self._values:
            self._values[cls] = self._compute_value(cls)
        return self._values[cls]

    def _compute_value(self, cls: str):
        raw = self._raw[self._value_row[cls]]
        kind, op, children = self._class_type[cls], raw["op"], [self._class_of(c) for c in raw["children"]]
        if kind == "i64":
            return int(op)
        if kind == "f64":
            return float(op)
        if kind == "bool":
            return op == "true"
        if kind == "String":
            return json.loads(op)
        if kind in ("IntVec", "FloatVec"):
            return tuple(self.value(c) for c in children)
        if kind == "Attr":
            return None if op == "NoAttr" else self.value(children[0])
        if kind == "TensorList":
            return [] if op == "TNil" else [children[0], *self.value(children[1])]
        raise ValueError(f"no value for e-class {cls} of sort {kind}")

    def _tensor_node(self, nid: str, raw: dict) -> ENode:
        op, cls = raw["op"], raw["eclass"]
        kids = [self._class_of(c) for c in raw["children"]]
        if op == "Input":
            return ENode(nid, INPUT, cls, (), {"name": self.value(kids[0])})
        if op == "Absent":
            return ENode(nid, ABSENT, cls, (), {})
        if op == "Out":
            return ENode(nid, OUT, cls, (kids[0],), {"index": self.value(kids[1])})
        if op == "Kernel":
            return ENode(nid, KERNEL, cls, tuple(self.value(kids[1])), {"key": self.value(kids[0])})
        opdef = self._ops[op]
        operands: list[str] = []
        for spec, kid in zip(opdef.operands, kids, strict=False):
            operands.extend(self.value(kid) if spec.startswith("*") else [kid])
        attr_classes = kids[len(opdef.operands):]
        attrs = {a.name: self.value(c) for a, c in zip(opdef.attrs, attr_classes, strict=False)}
        return ENode(nid, opdef.name, cls, tuple(operands), attrs)

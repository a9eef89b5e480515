"""A read-only view of a saturated e-graph, from egglog's rows, in hoid's terms.

egglog holds every row: op constructors, the `(N i)` handles, the `shape`/`dtype` facts, attr values and
tensor lists, each naming its arguments by e-class (or by value, for primitives and vecs). `Snapshot` turns
that into what the cost models, the extractors and the decoder need: tensor e-classes with their
`TensorType`, and for each class the e-nodes that compute it, as `ENode`s with a hoid op name, operand
classes and decoded attrs.
Handles and facts are not e-nodes here: they can never be extracted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..ir import TensorType
from . import language as L
from ._egglog import Table

# Kinds of ENode.op that are not registry ops.
INPUT, ABSENT, OUT, KERNEL = "input", "absent", "out", "kernel"


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
    """Tensor e-classes, their types, their e-nodes, and the class of every handle. Built from the rows of
    every egglog function (`_egglog.Engine.tables`), in egglog's order: the same e-graph gives the same
    snapshot, with the ids egglog's serializer would give (node `function-<row>-<function>`, class
    `<Sort>-<n>`)."""

    def __init__(self, tables: list[Table]):
        self._ops = L.op_by_constructor()
        self._values: dict[str, object] = {}
        self._value_row: dict[str, tuple[str, tuple]] = {}  # Attr or TensorList class -> its first row
        self.nodes: dict[str, ENode] = {}
        self.classes: dict[str, list[str]] = {}  # tensor class -> e-node ids
        self.handles: dict[int, str] = {}  # handle index -> class
        self.types: dict[str, TensorType] = {}
        shapes: dict[str, tuple] = {}
        dtypes: dict[str, str] = {}
        tensor_tables = []
        for table in tables:  # the facts and the values of attrs and tensor lists first
            name = table.name
            if name in ("shape", "dtype"):
                (shapes if name == "shape" else dtypes).update(zip(table.columns[0], table.outputs, strict=True))
            elif table.output == "Tensor":
                tensor_tables.append(table)
            elif table.output in ("Attr", "TensorList"):
                for inputs, cls in table.rows():
                    self._value_row.setdefault(cls, (name, inputs))
        for table in tensor_tables:
            name = table.name
            if name == "N":
                self.handles.update(zip(table.columns[0], table.outputs, strict=True))
                continue
            for row, (inputs, cls) in enumerate(table.rows()):
                nid = f"function-{row}-{name}"
                self.nodes[nid] = self._tensor_node(nid, name, inputs, cls)
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
    def value(self, cls: str):
        """The Python value of an Attr class (a primitive, a tuple, None) or a TensorList class (a list of
        tensor classes)."""
        if cls not in self._values:
            name, inputs = self._value_row[cls]
            if name == "TCons":
                self._values[cls] = [inputs[0], *self.value(inputs[1])]
            else:  # TNil, NoAttr, or an Attr of one primitive or vec
                self._values[cls] = inputs[0] if inputs else ([] if name == "TNil" else None)
        return self._values[cls]

    def _tensor_node(self, nid: str, op: str, kids: tuple, cls: str) -> ENode:
        if op == "Input":
            return ENode(nid, INPUT, cls, (), {"name": kids[0]})
        if op == "Absent":
            return ENode(nid, ABSENT, cls, (), {})
        if op == "Out":
            return ENode(nid, OUT, cls, (kids[0],), {"index": kids[1]})
        if op == "Kernel":
            return ENode(nid, KERNEL, cls, tuple(self.value(kids[1])), {"key": kids[0]})
        opdef = self._ops[op]
        operands: list[str] = []
        for spec, kid in zip(opdef.operands, kids, strict=False):
            operands.extend(self.value(kid) if spec.startswith("*") else [kid])
        attr_classes = kids[len(opdef.operands):]
        attrs = {a.name: self.value(c) for a, c in zip(opdef.attrs, attr_classes, strict=False)}
        return ENode(nid, opdef.name, cls, tuple(operands), attrs)

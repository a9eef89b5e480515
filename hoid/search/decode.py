"""Extracted e-graph choice -> a valid `Graph`: one node per chosen e-class, in topological order.

The decoder walks from the graph's outputs over the chosen e-nodes (depth first, children before
parents) and re-runs every op's inference, so the result is checked by the same code that checks any
graph; a type that disagrees with the e-class's facts means an unsound rule, and is reported as one.
Values keep the names of the original values they are equal to, where there is one, so a diff of the
two documents shows what changed.

The e-graph knows shapes and dtypes, not layouts: a kernel is matched on contiguous types, and the way
back may hand it a strided view instead (the slice of a merged matmul that its e-class also holds). Where
its spec rejects that layout and accepts the contiguous one, the decoder puts a `contiguous` copy in front
of it (the one node it adds that no e-class chose); a spec that rejects both is left for `bind` to name. A
plain op gets the layout of the torch kernel that prices it (`cost.measured_as`): a channels-last
convolution's permuted weight is copied (once, when weights are bound), as it was when that kernel was timed.
"""

from __future__ import annotations

from ..errors import GraphError
from ..ir import Graph, Node, Value
from ..ir.registry import infer_node
from .cost import torch_kernel_for
from .encode import Encoding
from .snapshot import ABSENT, INPUT, KERNEL, OUT, Snapshot


class _Decoder:
    def __init__(self, snapshot: Snapshot, encoding: Encoding, choice: dict[str, str]):
        self.snapshot, self.encoding, self.choice = snapshot, encoding, choice
        graph = encoding.graph
        self.inputs = {gi.value.name: gi.value for gi in graph.inputs}
        self.values: dict[str, tuple[Value, ...] | Value | None] = {}
        self.nodes: list[Node] = []
        # prefer output names, then every other original name, in graph order
        names = [v.name for v in graph.outputs] + [v.name for n in graph.nodes for v in n.outputs]
        self.preferred: dict[str, str] = {}
        for name in names:
            cls = snapshot.handles.get(encoding.handles.get(name, -1))
            if cls is not None:
                self.preferred.setdefault(cls, name)
        self.taken = set(self.inputs) | set(self.preferred.values())  # never invent these names
        self.used = set(self.inputs)  # names given to emitted values
        self.counter = 0

    def fresh(self, cls: str | None) -> str:
        """The class's original name if it is still free, else a new `s<n>`."""
        name = self.preferred.get(cls)
        if name is None or name in self.used:
            while f"s{self.counter}" in self.taken or f"s{self.counter}" in self.used:
                self.counter += 1
            name = f"s{self.counter}"
        self.used.add(name)
        return name

    def value(self, cls: str):
        """The decoded value(s) of a class, decoding what it needs first (iteratively: models are deep)."""
        stack = [cls]
        while stack:
            top = stack[-1]
            if top in self.values:
                stack.pop()
                continue
            node = self.snapshot.nodes[self.choice[top]]
            missing = [c for c in node.children if c not in self.values]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            self.values[top] = self.emit(top, node)
        return self.values[cls]

    def emit(self, cls: str, node):
        if node.op == INPUT:
            return self.inputs[node.attrs["name"]]
        if node.op == ABSENT:
            return None
        if node.op == OUT:
            return self.values[node.children[0]][node.attrs["index"]]
        operands = [self.values[c] for c in node.children]
        operands = [v for v in operands if v is not None]  # absent optionals are trailing
        if node.op == KERNEL:
            impl = self.encoding.kernels[node.attrs["key"]]
            op, attrs = "kernel", impl.node_attrs()
            operands = self.laid_out_for(self.spec_of(impl.kernel), impl.attrs, operands)
        else:
            op, attrs = node.op, dict(node.attrs)
            # a plain op is priced by its torch kernel's measurement (`cost.measured_as`): it runs on the
            # layout that kernel was measured on (a channels-last convolution's permuted weight copied once);
            # looked up only for strided operands, which few plain ops have
            if not all(v.type.is_contiguous for v in operands):
                operands = self.laid_out_for(torch_kernel_for(op, len(operands)), attrs, operands)
        types, attrs = infer_node(op, [v.type for v in operands], attrs)
        multi = cls in self.snapshot.outputs_of
        if multi:
            outs = self.snapshot.outputs_of[cls]
            outputs = tuple(Value(self.fresh(outs.get(i)), t) for i, t in enumerate(types))
        else:
            if len(types) != 1:
                raise GraphError(f"decoding {op}: it returns {len(types)} values but its e-class is a tensor")
            outputs = (Value(self.fresh(cls), types[0]),)
        for i, v in enumerate(outputs):
            expected_cls = self.snapshot.outputs_of[cls].get(i) if multi else cls
            expected = self.snapshot.types.get(expected_cls)
            if expected is not None and not expected.same_data_type(v.type):
                raise GraphError(f"decoding {op}: it computes {v.type} but its e-class holds {expected}; a "
                                 "rewrite rule is unsound (it joined values of different types)")
        self.nodes.append(Node(op, tuple(operands), attrs, outputs))
        return outputs if multi else outputs[0]


    @staticmethod
    def spec_of(kernel_id: str):
        from ..kernels.registry import get

        try:
            return get(kernel_id)
        except Exception:  # noqa: BLE001  a kernel unknown here: `bind` names it where it is run
            return None

    def laid_out_for(self, spec, attrs: dict, operands: list[Value]) -> list[Value]:
        """`operands` as `spec` takes them: strided ones copied contiguous where it asks so."""
        types = [v.type for v in operands]
        if spec is None or all(t.is_contiguous for t in types) or spec.rejects(types, attrs) is None or \
                spec.rejects([t.contiguous() for t in types], attrs) is not None:
            return operands
        laid = []
        for v in operands:
            if not v.type.is_contiguous:
                copy = Value(self.fresh(None), v.type.contiguous())
                self.nodes.append(Node("contiguous", (v,), {}, (copy,)))
                v = copy
            laid.append(v)
        return laid


def decode(snapshot: Snapshot, encoding: Encoding, choice: dict[str, str]) -> Graph:
    """The graph that the chosen e-nodes compute; same inputs, outputs and state updates as the encoded
    graph, and validated."""
    graph = encoding.graph
    dec = _Decoder(snapshot, encoding, choice)
    out_of = {}
    for value in graph.outputs:
        out_of[value.name] = dec.value(snapshot.handles[encoding.handles[value.name]])
    outputs = [out_of[v.name] for v in graph.outputs]
    updates = {state: out_of[new].name for state, new in graph.state_updates.items()}
    result = Graph(graph.name, list(graph.inputs), dec.nodes, outputs, updates, dict(graph.weights))
    return result.validate()

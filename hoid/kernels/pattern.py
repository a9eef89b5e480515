"""`Pattern`: what a kernel implements, as a hoid subgraph over its inputs.

A pattern builds the region a kernel replaces for any input types it is given: a single op
(`op_pattern("rmsnorm")`) or a fused composition (a residual add feeding an RMSNorm, two outputs). The
built graph is the kernel's reference semantics (run by the interpreter), the body of the `kernel` node
that replaces the region, and, abstracted over its inputs, the rule the search adds for every match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..ir import Graph, GraphBuilder, TensorType, Value
from ..ir.registry import Attr, get_op


@dataclass(frozen=True)
class Pattern:
    """name: unique; build(b, inputs, attrs) emits the region with GraphBuilder `b` and returns its
    output value(s); operands: names of the inputs; attrs: the attrs the pattern takes (eps, dim, ...)."""

    name: str
    operands: tuple[str, ...]
    build: Callable[[GraphBuilder, list[Value], dict], Value | tuple[Value, ...]]
    attrs: tuple[Attr, ...] = ()
    doc: str = ""

    def graph(self, types: Sequence[TensorType], attrs: dict | None = None) -> Graph:
        """The region for these input types: inputs named after the operands, outputs in order."""
        if len(types) != len(self.operands):
            raise ValueError(f"pattern {self.name} takes {len(self.operands)} inputs "
                             f"({', '.join(self.operands)}), got {len(types)}")
        b = GraphBuilder(self.name)
        ins = [b.input(n, t.shape, t.dtype) for n, t in zip(self.operands, types, strict=True)]
        out = self.build(b, ins, dict(attrs or {}))
        return b.build(*(out if isinstance(out, tuple) else (out,)))

    def output_types(self, types: Sequence[TensorType], attrs: dict | None = None) -> tuple[TensorType, ...]:
        return tuple(v.type for v in self.graph(types, attrs).outputs)


def op_pattern(op_name: str, arity: int | None = None) -> Pattern:
    """The pattern of one registered op: the region is that op alone.

    `arity` leaves out trailing optional operands: `op_pattern("sdpa", 3)` is attention without a mask,
    `op_pattern("sdpa")` with one. Kernels of both register under the pattern name "sdpa"; a kernel
    whose operand count differs from a region's is rejected for it (`KernelSpec.rejects`).
    """
    op = get_op(op_name)
    operands = tuple(o.strip("*?") for o in op.operands)
    if arity is not None:
        required = len([o for o in op.operands if not o.endswith("?") and not o.startswith("*")])
        if not required <= arity <= len(operands):
            raise ValueError(f"op {op_name} takes {required} to {len(operands)} operands "
                             f"({', '.join(op.operands)}); a pattern of {arity} is not one of its calls")
        operands = operands[:arity]

    def build(b: GraphBuilder, ins: list[Value], attrs: dict):
        return b.op(op_name, *ins, **attrs)

    return Pattern(op_name, operands, build, op.attrs, doc=op.doc)


def graph_pattern(graph: Graph, name: str, doc: str = "") -> Pattern:
    """The pattern of a region given as a graph (a `.hoid` body document: `Region.body()`, plain inputs
    only): its nodes replayed op by op over new inputs, so that the search can match it and the
    interpreter can run it at the types it is built for. It takes no attrs: the region's own (an eps, a
    reshape's shape) are part of it. Built at other input types, shape inference recomputes every type on
    the way, and a node whose attrs do not fit those types fails to build (no match)."""
    kinds = {gi.kind for gi in graph.inputs}
    if kinds - {"input"}:
        raise ValueError(f"pattern {name}: a region's inputs are all plain inputs (Region.body() makes them so), "
                         f"this graph has {sorted(kinds - {'input'})} inputs")
    operands = tuple(gi.value.name for gi in graph.inputs)

    def build(b: GraphBuilder, ins: list[Value], attrs: dict):
        env = {name_: v for name_, v in zip(operands, ins, strict=True)}
        for node in graph.nodes:
            # the region's own value names: they cannot clash with its inputs', which fresh names could
            first = node.outputs[0].name
            base = first if len(node.outputs) == 1 else first[:-2] if first.endswith(".0") else f"{first}_"
            out = b.op(node.op, *(env[v.name] for v in node.inputs), name=base, **node.attrs)
            for value, new in zip(node.outputs, out if isinstance(out, tuple) else (out,), strict=True):
                env[value.name] = new
        outs = tuple(env[v.name] for v in graph.outputs)
        return outs if len(outs) > 1 else outs[0]

    return Pattern(name, operands, build, (), doc=doc)

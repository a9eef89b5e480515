"""`kernel`: a region of the graph replaced by an implementation.

The node holds the region it replaced as its *body* (a graph whose inputs are the node's operands, in
order): the reference semantics, which the interpreter runs. It also names the implementation: the
kernel id, the version hash of its source, and its parameters. A graph with kernel nodes can always be
re-verified and run without the kernels.

`attrs` holds the pattern's attrs at this region (eps, dim, ...): with the operands and `params`, all that
launching the implementation takes (`launch(*inputs, *outputs, **attrs, **params)`), so a runtime never has
to dig them out of the body.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..graph import Graph, attr_key
from ..registry import Attr, InferError, OpDef, register_op


@dataclass(frozen=True)
class KernelImpl:
    """The typed view of a `kernel` node: the implementation (id, version, params), the pattern's `attrs` at
    this region (eps, dim...: what launches take and measurements are keyed by), and the `body` it replaces.

    Every reader of a kernel node (the launcher, the search, the runtime, export) goes through this view, so
    the node's attr names are known in this one module."""

    kernel: str
    version: str
    params: dict
    body: Graph
    attrs: dict = field(default_factory=dict)

    @classmethod
    def from_node(cls, node_or_attrs) -> KernelImpl:
        """From a `kernel` node, or its attrs (the inverse of `node_attrs`)."""
        attrs = node_or_attrs if isinstance(node_or_attrs, dict) else node_or_attrs.attrs
        return cls(attrs["kernel"], attrs["version"], dict(attrs["params"]), attrs["body"], dict(attrs["attrs"]))

    def node_attrs(self) -> dict:
        """The attrs of a `kernel` node running this implementation."""
        return {"body": self.body, "kernel": self.kernel, "version": self.version, "params": dict(self.params),
                "attrs": dict(self.attrs)}

    def identity(self):
        """Equal for implementations that are the same kernel node (a body by its structure)."""
        return attr_key(self.node_attrs())


def _infer(types, attrs):
    body = attrs["body"]
    ins = body.inputs_of_kind("input")
    if len(body.inputs) != len(ins):
        raise InferError(f"body @{body.name} may only have plain inputs (no weights or state)")
    if len(ins) != len(types):
        raise InferError(f"body @{body.name} takes {len(ins)} inputs, the node gives {len(types)}")
    for i, (v, t) in enumerate(zip(ins, types)):
        if not v.type.same_data_type(t):
            raise InferError(f"operand {i} is {t}, body @{body.name} expects {v.type} for %{v.name}")
    return tuple(v.type for v in body.outputs)


def _reference(*tensors, body, kernel, version, attrs, params):
    from ..interpreter import run

    return run(body, *tensors)


def body_bytes(body: Graph) -> int:
    """The bytes a kernel replacing `body` moves: each input read once, and no more of it than the body's
    ops read of it; intermediates kept on chip; each output written once; and never more than the body's
    own ops count.

    Gathers and in-place updates are why the reads and the bound exist: `embedding` reads the rows it
    gathers, not its table, and `index_copy` into a cache writes the new rows, not the cache (each op's own
    count says so). A kernel that embeds such an op moves no more than the op does, so it is priced by what
    it touches, not by the size of the tensors it is handed (a whole vocabulary, a whole KV cache, every
    expert of a MoE layer). The body's own count alone is not enough where a gather feeds a matmul: it
    charges the gathered experts three times (read, written out, read again), which the kernel reads once."""
    from ..registry import get_op

    consumers: dict[str, list] = {}
    for n in body.nodes:
        for v in n.inputs:
            consumers.setdefault(v.name, []).append(n)

    def read(value) -> int:  # what the ops computing from `value` read of it, through views
        total = 0
        for n in consumers.get(value.name, ()):
            op = get_op(n.op)
            if op.is_view:
                total += sum(read(o) for o in n.outputs)
            else:
                outs = [o.type for o in n.outputs]
                total += max(0, op.count_bytes([i.type for i in n.inputs], outs, n.attrs) - sum(t.nbytes for t in outs))
        return min(value.type.nbytes, total)

    through = sum(read(v) for v in body.inputs_of_kind("input", "weight", "state")) + sum(
        v.type.nbytes for v in body.outputs)
    ops = sum(get_op(n.op).count_bytes([v.type for v in n.inputs], [v.type for v in n.outputs], n.attrs)
              for n in body.nodes)
    return min(through, ops)


def _count(what):
    def count(ins, outs, attrs):
        from ..registry import get_op

        nodes = attrs["body"].nodes
        return sum(getattr(get_op(n.op), what)([v.type for v in n.inputs], [v.type for v in n.outputs], n.attrs)
                   for n in nodes)
    return count


register_op(OpDef(
    name="kernel",
    operands=("*inputs",),
    attrs=(
        Attr("body", "graph", doc="the region this node replaced (its reference semantics)"),
        Attr("kernel", "str", doc="the implementation's id in the kernel registry"),
        Attr("version", "str", "", doc="hash of the implementation's source"),
        Attr("attrs", "params", {}, doc="the pattern's attrs the implementation is launched with (eps, dim...)"),
        Attr("params", "params", {}, doc="the implementation's tuned parameters"),
    ),
    infer=_infer,
    reference=_reference,
    flops=_count("count_flops"),
    bytes=lambda ins, outs, attrs: body_bytes(attrs["body"]),
    category="kernel",
    doc="a region replaced by an implementation; the body is the reference",
))

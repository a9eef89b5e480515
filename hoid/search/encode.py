"""Graph -> egglog: every value becomes a handle `(N i)` unioned with its node's term, plus type facts.

Encoding writes flat definitions against the handles instead of one nested term: a decode step shares the
residual stream across every layer, and nested terms (or one huge program) make egglog's parsing
super-linear. Each definition (the union of a handle with its term, and the handle's shape and dtype) is
written once as a *template* over its handles, a rule fired by the rows of a relation of its own, and
each value is one row: `(hoid-enc-3 12 7 9)`, its handle's index and its operands' (and, for a weight,
its weight id). egglog type-checks every action it runs, about 60 us
each, and the 28 layers of a model repeat the same few hundred templates: at 28 layers, 9k actions took
0.5-0.7 s, the templates and their 2.9k rows 0.2-0.3 s.

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
from ._egglog import HIDDEN, Engine


class Templates:
    """Definitions written once as rules over their parameters, each use one row of the rule's relation (see
    the module doc). `actions` are written over `i0`.. for ints (handles as `(N i0)`) and `s0`.. for names."""

    def __init__(self, ruleset: str):
        self.ruleset = ruleset  # a `HIDDEN` name: its relations are bookkeeping, not e-nodes
        self.relations: dict[tuple[str, int, int], str] = {}  # (actions, ints, names) -> relation
        self.rows: list[str] = []

    def add(self, actions: str, ints: list[int], names: tuple[str, ...] = ()) -> None:
        # the name ends in a letter: egglog names an action's value after its function and a counter, so
        # relation `-2`'s 12th action and `-21`'s 2nd were one variable of two sorts (Whisper's encoder, 12-04)
        relation = self.relations.setdefault((actions, len(ints), len(names)),
                                             f"{self.ruleset}-{len(self.relations)}-rows")
        self.rows.append(f"({relation} {' '.join([*map(str, ints), *map(L.string, names)])})")

    def program(self) -> list[str]:
        """The commands declaring each template: its relation (i64 params, then String ones) and its rule."""
        commands = [f"(ruleset {self.ruleset})"]
        for (actions, ints, names), relation in self.relations.items():
            params = [f"i{i}" for i in range(ints)] + [f"s{i}" for i in range(names)]
            sorts = ["i64"] * ints + ["String"] * names
            commands.append(f"(relation {relation} ({' '.join(sorts)}))")
            commands.append(f"(rule (({relation} {' '.join(params)})) ({actions}) :ruleset {self.ruleset})")
        return commands

    def run(self, engine: Engine) -> None:
        """Declare the templates, add every row, then fire each rule once on all its rows."""
        engine.run_each(self.program())
        engine.act(self.rows)
        engine.run(f"(run {self.ruleset} 1)")


@dataclass
class Encoding:
    """A graph as egglog templates and their rows (`templates`), and the tables to map e-classes back: value
    names to handles, kernel keys to implementations."""

    graph: Graph
    handles: dict[str, int] = field(default_factory=dict)  # value name (top level) -> handle index
    kernels: dict[str, KernelImpl] = field(default_factory=dict)
    templates: Templates = field(default_factory=lambda: Templates(f"{HIDDEN}encode"))
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
    def define(self, term: str, ints: list[int], vtype: TensorType, names: tuple[str, ...] = (),
               extra: str = "") -> int:
        """A new handle, `(N i0)`, unioned with `term` (written over `i1`.. for `ints`), with its shape and
        dtype facts and `extra` actions; returns its index."""
        index = self._next_handle
        self._next_handle += 1
        actions = (f"(union (N i0) {term}) (set (shape (N i0)) {L.int_vec(vtype.shape)}) "
                   f"(set (dtype (N i0)) {L.string(vtype.dtype)}){extra}")
        self.templates.add(actions, [index, *ints], names)
        return index

    def encode_nodes(self, nodes: list[Node], env: dict[str, int]) -> None:
        """Encode nodes whose operands are in `env`; adds their outputs to it."""
        for node in nodes:
            if node.op == "kernel":
                self._encode_kernel(node, env)
                continue
            op = get_op(node.op)
            if not L.encodable(op):
                raise GraphError(f"node {node.name}: op {node.op} has graph or params attrs and cannot be "
                                 "encoded for the search; only `kernel` may carry a body")
            operands = [env[v.name] for v in node.inputs]
            term = L.op_term(op, _vars(len(operands)), node.attrs)
            if len(node.outputs) == 1:
                env[node.outputs[0].name] = self.define(term, operands, node.outputs[0].type)
            else:
                for i, value in enumerate(node.outputs):
                    env[value.name] = self.define(f"(Out {term} {i})", operands, value.type)

    def _encode_kernel(self, node: Node, env: dict[str, int]) -> None:
        """The body over the node's operands, then the kernel e-node joined to each body output."""
        body: Graph = node.attrs["body"]
        inner = {v.name: env[u.name] for v, u in zip(body.inputs_of_kind("input"), node.inputs, strict=True)}
        self.encode_nodes(body.nodes, inner)
        impl = KernelImpl.from_node(node.attrs)
        kernel = f"(Kernel {L.string(self.kernel_key(impl))} {L.tensor_list(_vars(len(node.inputs)))})"
        operands = [env[u.name] for u in node.inputs]
        for i, (outer, inner_value) in enumerate(zip(node.outputs, body.outputs, strict=True)):
            self.templates.add(f"(union (N i0) (Out {kernel} {i}))", [inner[inner_value.name], *operands])
            env[outer.name] = inner[inner_value.name]


def _vars(count: int) -> list[str]:
    """The template's operand handles, after the defined one (`i0`)."""
    return [f"(N i{i + 1})" for i in range(count)]


def encode(graph: Graph) -> Encoding:
    """The templates and rows that put `graph` into an e-graph declared with `language.declarations()`."""
    enc = Encoding(graph)
    # 2-d weights first, in graph order: the layout merges join only consecutive ids, and a bias or a norm
    # weight between two projections would keep Q, K and V apart
    weights = sorted(graph.weight_inputs, key=lambda v: len(v.type.shape) != 2)
    weight_ids = {v.name: i for i, v in enumerate(weights)}
    for gi in graph.inputs:
        name = gi.value.name
        if name in weight_ids:  # the weight id is the row's second int
            enc.handles[name] = enc.define("(Input s0)", [weight_ids[name]], gi.value.type, (name,),
                                           " (set (weight-id (N i0)) i1)")
        else:
            enc.handles[name] = enc.define("(Input s0)", [], gi.value.type, (name,))
    enc.encode_nodes(graph.nodes, enc.handles)
    return enc

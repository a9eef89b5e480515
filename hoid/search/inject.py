"""Kernel injection: a verified kernel joins the e-classes of the region it replaces, and of every match.

    region = Region.of(graph, ["t12", "t13"])        # the nodes producing these values
    space.add_kernel(region, spec)                   # -> InjectedKernel(key, matches)

The region, abstracted over its inputs (and guarded on their exact types: a kernel is verified per input
type signature), becomes an egglog rule whose action is `(Kernel key inputs)`, joined through `Out` to
each region output's class. Run once, the rule gives the kernel to the region itself and to every other
match: the same layer 28 times is verified and measured once and injected 28 times.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import GraphError
from ..ir import Graph, Node, Value
from ..ir.registry import get_op
from . import language as L
from .budget import Budget
from .encode import KernelImpl
from .rules import Rule, RuleSet


@dataclass(frozen=True)
class Region:
    """Some nodes of a graph: `inputs` are the values they use and do not compute (in first-use order),
    `outputs` the values they compute that are used after them (or are graph outputs; the last node's
    when none is): those of `hoid.verify.region.extract_region`'s cut, which `body()` is."""

    graph: Graph
    nodes: tuple[Node, ...]

    @classmethod
    def of(cls, graph: Graph, values: Iterable[str]) -> Region:
        """The region of the nodes that produce these value names (`t12` or `%t12`), in graph order: the
        cut `hoid.verify.region.extract_region` makes, which a kernel is verified against."""
        from ..verify.region import extract_region
        from ..verify.verdict import VerifyError

        try:
            return cls(graph, tuple(extract_region(graph, list(values)).nodes))
        except VerifyError as e:
            raise GraphError(str(e)) from e

    @property
    def inputs(self) -> list[Value]:
        return [gi.value for gi in self.body().inputs]

    @property
    def outputs(self) -> list[Value]:
        return list(self.body().outputs)

    def check_convex(self) -> None:
        """Refuse a region that an outside node both reads from and feeds (it cannot be one kernel)."""
        mine = {id(n) for n in self.nodes}
        produced = {v.name for n in self.nodes for v in n.outputs}
        tainted: set[str] = set()  # values computed outside the region from a region output
        for node in self.graph.nodes:
            reads = {v.name for v in node.inputs}
            if id(node) in mine:
                bad = reads & tainted
                if bad:
                    raise GraphError(f"region is not convex: %{sorted(bad)[0]} is computed outside the region "
                                     f"from one of its outputs and read by {node.name} inside it; add the nodes in "
                                     "between to the region, or split it")
            elif reads & (produced | tainted):
                tainted.update(v.name for v in node.outputs)

    def body(self) -> Graph:
        """The region as a graph over its inputs (the reference a kernel node carries): the same cut as
        `hoid.verify.region.extract_region`, so a kernel is injected for the region it was verified on."""
        from ..verify.region import extract_region

        return extract_region(self.graph, self.nodes)


def region_rule(body: Graph, key: str, name: str) -> Rule:
    """The rule that joins `(Kernel key inputs)` to every match of `body` whose inputs have its types."""
    inputs = body.inputs_of_kind("input")
    var = {v.name: f"x{i}" for i, v in enumerate(inputs)}
    facts = [f"(= (shape {var[v.name]}) {L.int_vec(v.type.shape)})" for v in inputs]
    facts += [f"(= (dtype {var[v.name]}) {L.string(v.type.dtype)})" for v in inputs]
    for j, node in enumerate(body.nodes):
        if node.op == "kernel":
            raise GraphError("a kernel's region may not itself contain kernel nodes; use their bodies")
        term = L.op_term(get_op(node.op), [var[v.name] for v in node.inputs], node.attrs)
        for i, value in enumerate(node.outputs):
            var[value.name] = f"v{j}_{i}"
            facts.append(f"(= {var[value.name]} {term if len(node.outputs) == 1 else f'(Out {term} {i})'})")
    kernel = f"(Kernel {L.string(key)} {L.tensor_list(var[v.name] for v in inputs)})"
    actions = [f"(union {var[v.name]} (Out {kernel} {i}))" for i, v in enumerate(body.outputs)]
    text = f"(rule ({' '.join(facts)}) ({' '.join(actions)}))"
    return Rule(name, text, f"kernel {key} for its region at {', '.join(str(v.type) for v in inputs)}")


@dataclass(frozen=True)
class InjectedKernel:
    """The key of the kernel in the e-graph and how many regions it was joined to."""

    key: str
    matches: int


def inject(space, impl: KernelImpl) -> InjectedKernel:
    """Join a kernel (implementation + body) to every match of its body in the space's e-graph."""
    key = space.encoding.kernel_key(impl)
    rule = region_rule(impl.body, key, f"kernel-{key}")
    ruleset = RuleSet(f"kernel-{key.replace('#', '-')}", (rule,))
    report = space.saturate([ruleset], Budget(iterations=1))
    return InjectedKernel(key, report.matches.get(rule.name, 0))


def add_kernel(space, region: Region, kernel, *, params: dict | None = None,
               attrs: dict | None = None) -> InjectedKernel:
    """Add `kernel` (a `hoid.kernels.KernelSpec`, or its id) with `params` for `region` of the space's
    graph, and for every other match of the region; `attrs` are its pattern's attrs there (what its
    measurements are keyed by). Refuses a region that is not convex or not of this graph."""
    if region.graph is not space.graph and region.graph != space.graph:
        raise GraphError("the region belongs to another graph than the search space's")
    region.check_convex()
    if isinstance(kernel, str):
        from ..kernels import get

        kernel = get(kernel)
    impl = KernelImpl(kernel.id, kernel.version, kernel.check_params(params or {}), region.body(), dict(attrs or {}))
    return inject(space, impl)

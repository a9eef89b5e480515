"""Kernel injection: a verified kernel joins the e-classes of the region it replaces, and of every match.

    region = Region.of(graph, ["t12", "t13"])        # the nodes producing these values
    space.add_kernel(region, spec)                   # -> InjectedKernel(key, matches)

The region, abstracted over its inputs (and guarded on their exact types: a kernel is verified per input
type signature), becomes an egglog rule whose action is `(Kernel key inputs)`, joined through `Out` to
each region output's class. Run once, the rule gives the kernel to the region itself and to every other
match: the same layer 28 times is verified and measured once and injected 28 times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import GraphError
from ..ir import Graph
from ..ir.ops.kernel import KernelImpl
from ..ir.region import Region
from ..ir.registry import get_op
from . import language as L
from .encode import Templates
from .limits import Limits
from .rules import Rule, RuleSet


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


def pinned_union(templates: Templates, key: str, inputs: Sequence[int], outputs: Sequence[int]) -> None:
    """Join `(Kernel key inputs)` to one match, named by the handles of its input and output classes (a row of
    `templates`: the matches of one kernel share a template). For a region whose outputs do not all reach
    one another's inputs (the attention prelude: q's rotation and each cache append): as a rule matched by
    types alone, the q of one layer would pair with the caches of every other layer (`hoid.search.joint`
    finds the one convex match per layer)."""
    handles = [*outputs, *inputs]
    kernel = f"(Kernel {L.string(key)} {L.tensor_list(f'(N i{len(outputs) + j})' for j in range(len(inputs)))})"
    templates.add(" ".join(f"(union (N i{i}) (Out {kernel} {i}))" for i in range(len(outputs))), handles)


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
    report = space.saturate([ruleset], Limits(iterations=1))
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

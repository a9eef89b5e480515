"""A region -> a generated kernel: its source (`KernelSource`, checked like any untrusted source) and its
`KernelSpec` (pattern: the region's body; one constraint: exactly the region's input types; params with a
`resolve` for "auto"; examples: the region's own types; a build for sm_90 and sm_100).

    generated = generate(Region.of(graph, nodes).body())
    generated.spec          # a KernelSpec, as any proposer's
    generated.source.text   # the readable Triton module (what the journal saves, what the version hashes)

A region the generator cannot handle raises `Refused` with the reason (see `legality.py`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ...ir import Graph, GraphBuilder, TensorType, Value
from ...ir.text import dumps
from ..loader import KernelSource
from ..pattern import Pattern
from ..spec import Constraint, KernelSpec
from .emit import emit
from .legality import MAX_ROW, Layout, Refused, check
from .params import auto_params

__all__ = ["Generated", "Refused", "generate", "body_pattern"]


@dataclass(frozen=True)
class Generated:
    spec: KernelSpec
    source: KernelSource
    layout: Layout
    body: Graph
    facts: dict

    @property
    def types(self) -> tuple[TensorType, ...]:
        return tuple(gi.value.type for gi in self.body.inputs)


def body_pattern(name: str, body: Graph) -> Pattern:
    """The region's body as a `Pattern`: the same nodes replayed over any inputs (what the search matches
    structurally in the e-graph, and what a check runs as the reference)."""
    operands = tuple(f"in{i}" for i in range(len(body.inputs)))
    nodes = list(body.nodes)
    inputs = [gi.value.name for gi in body.inputs]
    outputs = [v.name for v in body.outputs]

    def build(b: GraphBuilder, ins: list[Value], attrs: dict):
        env = dict(zip(inputs, ins, strict=True))
        for node in nodes:
            made = b.op(node.op, *(env[v.name] for v in node.inputs), **node.attrs)
            made = made if isinstance(made, tuple) else (made,)
            env.update({o.name: m for o, m in zip(node.outputs, made, strict=True)})
        found = tuple(env[name] for name in outputs)
        return found if len(found) > 1 else found[0]

    ops = "+".join(dict.fromkeys(n.op for n in nodes))
    return Pattern(name, operands, build, doc=f"a generated fusion of {len(nodes)} ops ({ops})")


def canonical(body: Graph) -> Graph:
    """`body` with its values renamed by position (inputs in0.., nodes t0..): the same region in every layer
    gives the same text, so one kernel (one id, one version) serves them all."""
    from ...ir.graph import GraphInput, Node

    names: dict[str, Value] = {}
    for i, gi in enumerate(body.inputs):
        names[gi.value.name] = Value(f"in{i}", gi.value.type)
    nodes = []
    for node in body.nodes:
        outs = []
        for o in node.outputs:
            names[o.name] = Value(f"t{len(names) - len(body.inputs)}", o.type)
            outs.append(names[o.name])
        nodes.append(Node(node.op, tuple(names[v.name] for v in node.inputs), dict(node.attrs), tuple(outs)))
    return Graph("region", [GraphInput(names[gi.value.name], "input") for gi in body.inputs], nodes,
                 [names[v.name] for v in body.outputs]).validate()


def _exactly(types: tuple[TensorType, ...]) -> Constraint:
    shown = ", ".join(map(str, types))

    def holds(given, attrs) -> bool:
        return len(given) == len(types) and all(
            g.shape == t.shape and g.dtype == t.dtype and tuple(g.layout()) == tuple(t.layout())
            for g, t in zip(given, types, strict=True))

    return Constraint(f"inputs exactly {shown} (shapes, dtypes and strides are constants of the generated source)",
                      holds)


def generate(body: Graph, *, max_row: int = MAX_ROW) -> Generated:
    """The kernel for `body` (a region's body: `hoid.ir.Region.body()`, its values renamed by position: see
    `canonical`); raises `Refused` with the reason. Rows longer than `max_row` are looped."""
    body = canonical(body)
    layout = check(body, max_row=max_row)
    # another max_row is another kernel for the same region (looped or not): another id
    keyed = dumps(body) + (f"\nmax_row={max_row}" if max_row != MAX_ROW else "")
    digest = hashlib.sha256(keyed.encode()).hexdigest()[:10]
    kernel_id = f"codegen.{digest}"
    ops = "+".join(dict.fromkeys(n.op for n in body.nodes))
    text, facts = emit(body, layout, title=f"{kernel_id}, a fusion of {ops}")
    source = KernelSource(text, "launch")
    types = tuple(gi.value.type for gi in body.inputs)
    auto = auto_params(layout)
    pattern = body_pattern(kernel_id, body)

    def resolve(given, attrs, params, target) -> dict:
        return {k: (auto[k] if v == "auto" else v) for k, v in params.items()}

    def examples(rng):
        return list(types), {}

    def build(arch: str):
        from .build import build_generated

        return build_generated(source, facts, auto, arch)

    spec = source.to_spec(kernel_id, pattern, constraints=(_exactly(types),), deterministic=True,
                          doc=f"generated: {ops} over {list(layout.shape)}", examples=examples, resolve=resolve,
                          compile=build)
    return Generated(spec, source, layout, body, facts)

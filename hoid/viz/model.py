"""`GraphView`: what a picture of a graph draws, built from the graph (and its profile) alone.

The drawing code (DOT, HTML) only reads a `GraphView`, so what the tests assert about the view (its nodes
are the graph's, its times sum to the profile's total, repeated layers collapse to one with a count) holds
for every picture made from it.

Repeated layers: a node belongs to layer N when the highest `layers.N.` weight (or `cache.N.` state) among
its ancestors is N (transformers' module paths name every decoder layer's weights so); an input or an
output belongs to the layer its name or its producer says. Layers whose op sequence equals the
second layer's are drawn once, with the count and the sum of their times; the first and last layers are
always drawn, since the prelude and the tail make their edges differ from the middle's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..ir import Graph
from ..ir.text_print import GraphLabels, format_node

# `model.layers.3.mlp...` (transformers' module paths) and `cache.3.k` (hoid.models' KV-cache state)
LAYER = re.compile(r"(?:^|\.)(?:layers|cache)\.(\d+)(?:\.|$)")


@dataclass
class ViewNode:
    """One drawn box: a node of the graph (or an input, state or output), what it shows and its time."""

    id: str  # the first output's name: unique in the graph
    op: str
    label: str  # the op, or the kernel's id for a kernel node
    types: list[str]  # output types, as the document prints them
    line: str  # the node's line of the .hoid document
    kind: str  # "op", "kernel", "input", "state" or "output"
    weights: list[str] = field(default_factory=list)  # weight inputs, by name (not drawn as nodes)
    seconds: float | None = None  # per run; for a collapsed node, the sum over its layers
    share: float | None = None
    floor: float | None = None  # the roofline's fewest seconds
    source: str | None = None  # a kernel's source, or the region document it replaces
    replaced: bool = False  # a kernel the optimization loop put here (outlined)
    count: int = 1  # how many repeated layers this node stands for
    layer: int | None = None


@dataclass
class GraphView:
    """What a picture of a graph draws (`build_view`): its nodes and edges, the collapsed layers, the
    profile's evidence, device and total."""

    name: str
    nodes: list[ViewNode]
    edges: list[tuple[str, str]]  # (from id, to id), deduplicated
    graph_nodes: int  # nodes of the graph (op and kernel nodes; inputs and outputs are extra)
    collapsed: list[tuple[int, int, int]] = field(default_factory=list)  # (first, last, count) drawn once
    evidence: str | None = None  # "measured", "analytic" (modelled) or "in-context"
    device: str | None = None
    total: float | None = None  # the profile's total seconds

    @property
    def op_nodes(self) -> list[ViewNode]:
        return [n for n in self.nodes if n.kind in ("op", "kernel")]


def node_layers(graph: Graph) -> dict[str, int | None]:
    """Each node's layer (first output's name -> N, or None before any layer's weights)."""
    layer_of: dict[str, int | None] = {}
    for gi in graph.inputs:
        m = LAYER.search(gi.value.name)
        layer_of[gi.value.name] = int(m.group(1)) if m else None
    out = {}
    for node in graph.nodes:
        found = [layer_of.get(v.name) for v in node.inputs]
        found = [f for f in found if f is not None]
        layer = max(found) if found else None
        for v in node.outputs:
            layer_of[v.name] = layer
        out[node.name] = layer
    # a node of no layer whose every user is in layer N (a per-layer index or mask the exporter computes
    # up front) belongs to layer N: walk backwards so chains of such nodes move together
    users: dict[str, set] = {}
    for node in graph.nodes:
        for v in node.inputs:
            users.setdefault(v.name, set()).add(node.name)
    outputs = {v.name for v in graph.outputs}
    for node in reversed(graph.nodes):
        found = {out[u] for v in node.outputs for u in users.get(v.name, ())}
        if out[node.name] is None and len(found) == 1 and None not in found and \
                not any(v.name in outputs for v in node.outputs):
            out[node.name] = found.pop()
            for v in node.outputs:
                layer_of[v.name] = out[node.name]
    for gi in graph.inputs:
        found = {out[u] for u in users.get(gi.value.name, ())}
        if layer_of[gi.value.name] is None and gi.kind != "weight" and len(found) == 1 and None not in found:
            layer_of[gi.value.name] = found.pop()
    out.update({gi.value.name: layer_of[gi.value.name] for gi in graph.inputs if gi.kind != "weight"})
    out.update({f"output:{i}": layer_of.get(v.name) for i, v in enumerate(graph.outputs)})
    return out


def build_view(graph: Graph, profile=None, *, collapse: bool = False, replaced: set[str] | None = None,
               sources: dict[str, str] | None = None, device=None) -> GraphView:
    """The view of `graph`. `profile`: a `hoid.measure.profile.Profile` whose rows give each node's time;
    `replaced`: ids of kernel nodes the loop put in (outlined); `sources`: kernel id -> source text
    (default: the library's source where the kernel is a library kernel); `collapse`: draw repeated
    layers once; `device`: for roofline floors (default: the profile's, else the H200)."""
    from ..ir.text import dumps

    labels = GraphLabels(graph)
    kinds = {gi.value.name: gi.kind for gi in graph.inputs}
    layers = node_layers(graph)
    rows = {r.node: r for r in profile.rows} if profile is not None else {}
    floors = _floors(graph, device, profile)
    nodes: list[ViewNode] = []
    for gi in graph.inputs:
        if gi.kind != "weight":
            nodes.append(ViewNode(gi.value.name, "input", f"{gi.kind} %{gi.value.name}", [str(gi.value.type)],
                                  f"{gi.kind} %{gi.value.name} : {gi.value.type}",
                                  "state" if gi.kind == "state" else "input", layer=layers[gi.value.name]))
    for node in graph.nodes:
        kernel = node.attrs.get("kernel") if node.op == "kernel" else None
        row = rows.get(node.name)
        vn = ViewNode(node.name, node.op, kernel or node.op, [str(v.type) for v in node.outputs],
                      format_node(node, labels), "kernel" if kernel else "op",
                      [v.name for v in node.inputs if kinds.get(v.name) == "weight"],
                      row.seconds if row else None, row.share if row else None,
                      row.floor if row and row.floor is not None else floors.get(node.name),
                      layer=layers[node.name])
        if kernel:
            vn.source = (sources or {}).get(kernel) or _library_source(kernel) or dumps(node.attrs["body"])
            vn.replaced = replaced is not None and node.name in replaced
        nodes.append(vn)
    produced = {v.name: node.name for node in graph.nodes for v in node.outputs}
    produced.update({gi.value.name: gi.value.name for gi in graph.inputs if gi.kind != "weight"})
    for i, v in enumerate(graph.outputs):
        nodes.append(ViewNode(f"output:{i}", "output", f"output %{v.name}", [str(v.type)], f"output %{v.name}",
                              "output", layer=layers[f"output:{i}"]))
    edges = [(produced[v.name], node.name) for node in graph.nodes for v in node.inputs if v.name in produced]
    edges += [(produced[v.name], f"output:{i}") for i, v in enumerate(graph.outputs) if v.name in produced]
    view = GraphView(graph.name, nodes, list(dict.fromkeys(edges)), len(graph.nodes),
                     evidence=profile.mode if profile is not None else None,
                     device=profile.device if profile is not None else None,
                     total=profile.total if profile is not None else None)
    return _collapse(view) if collapse else view


def _floors(graph: Graph, device, profile) -> dict[str, float]:
    """Each node's roofline floor on `device` (the in-context profile carries its own; others do not)."""
    from ..ir.registry import get_op
    from ..measure.devices import get_device
    from ..measure.roofline import op_floor, region_floor

    try:
        device = device or get_device(profile.device if profile is not None else "h200")
    except (KeyError, ValueError):
        device = get_device("h200")
    out = {}
    for node in graph.nodes:
        try:
            if node.op == "kernel":
                out[node.name] = region_floor(node.attrs["body"], device)
            elif not get_op(node.op).is_view:
                out[node.name] = max(op_floor(node.op, [v.type for v in node.inputs], [v.type for v in node.outputs],
                                              node.attrs, device))
        except Exception:  # an op without counts has no floor: the picture says so (no floor) rather than fail
            continue
    return out


def _library_source(kernel_id: str) -> str | None:
    """The source of a library kernel's module (what the hover shows), or None for another kernel."""
    import inspect

    try:
        from ..kernels.registry import library_kernels

        spec = library_kernels().get(kernel_id)
        return inspect.getsource(inspect.getmodule(spec.launch)) if spec is not None else None
    except Exception:  # a kernel whose module cannot be read (a CuTe build missing): no source to show
        return None


def _collapse(view: GraphView) -> GraphView:
    """Layers 1 .. L-2 whose op sequence equals layer 1's drawn as layer 1, with the count and summed times."""
    by_layer: dict[int, list[ViewNode]] = {}
    for n in view.nodes:
        if n.layer is not None:
            by_layer.setdefault(n.layer, []).append(n)
    ids = sorted(by_layer)
    if len(ids) < 4:
        return view
    rep = ids[1]

    def shape(k):  # what must match for layer k to be drawn as the stand-in: ops, kinds and types in order
        return [(n.kind, n.label if n.kind in ("op", "kernel") else "", tuple(n.types)) for n in by_layer[k]]

    signature = shape(rep)
    same = [k for k in ids[1:-1] if shape(k) == signature]
    run = [k for i, k in enumerate(same) if k == rep + i]  # the contiguous run from layer 1
    if len(run) < 2:
        return view
    standin = {}
    for k in run[1:]:
        for n, r in zip(by_layer[k], by_layer[rep]):
            standin[n.id] = r.id
            r.count += 1
            if n.seconds is not None:
                r.seconds = (r.seconds or 0.0) + n.seconds
                r.share = (r.share or 0.0) + (n.share or 0.0)
    layer = {n.id: n.layer for n in view.nodes}
    edges = []
    for a, b in view.edges:
        a2, b2 = standin.get(a, a), standin.get(b, b)
        # an edge from one collapsed layer to the next would point backwards inside the stand-in: drop it
        if a2 == b2 or (layer[a2] == rep and layer[b2] == rep and layer[a] != layer[b]):
            continue
        edges.append((a2, b2))
    nodes = [n for n in view.nodes if n.id not in standin]
    return GraphView(view.name, nodes, list(dict.fromkeys(edges)), view.graph_nodes,
                     [(run[0], run[-1], len(run))], view.evidence, view.device, view.total)

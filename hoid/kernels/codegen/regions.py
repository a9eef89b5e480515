"""Finding the maximal fusible regions of a graph, cut with `hoid.ir.Region` (the one way to cut a region).

Greedy over the graph in order: a node whose op has a Triton template joins the regions of its producers
(all of them together if that is legal, else the latest one it legally can), else starts a region of its
own. A join is legal when the union is convex (no outside node between two of its nodes; a view counts as
each region's own copy) and the generator can compute it as one kernel (`legality.check`). Every refusal is
kept with its reason: a node the generator cannot compute alone is *skipped*; a join refused leaves two
kernels where one was wanted (*not fused*). Values computed from weights alone are left out: the runtime
folds them once.

A region that computes a value many nodes outside read (`SHARED_READERS` or more: a table every layer reads,
as RoPE's cos and sin) is also proposed cut down to what that value needs: grown greedily, the region took in
the first reader's ops too (layer 0's rotation of q), and such a kernel competes with the per-layer kernels
the other layers use; the table alone does not. Both go to the search, which keeps what is faster.

Views (reshape, permute, transpose, expand: ops whose template is a view's) join the region of the node that
reads them, with the chain of views behind them, so that the kernel reads through them instead of the
region breaking there; where that is refused, the node reads the view's result as an input instead. A view
moves no data, so it may join every region that reads it, and a kernel never writes one out: a view's result
that is also read outside its region stays the view's (over the region's output it views, when the region
computes that).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import GraphError
from ...ir import Graph, Region
from ...ir.analysis import weight_only_values
from ...ir.registry import get_op, has_op
from .generate import Generated, generate
from .legality import MAX_ROW, Refused, check

SHARED_READERS = 4  # a value read by this many nodes outside its region is a shared table (see the module doc)


@dataclass(frozen=True)
class FusedRegion:
    """A region of the graph and its generated kernel."""

    region: Region
    generated: Generated

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.region.nodes)


@dataclass(frozen=True)
class Refusal:
    """kind: "skipped" (these nodes get no generated kernel) or "not fused" (a join refused); nodes; why."""

    kind: str
    nodes: tuple[str, ...]
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} {', '.join(self.nodes)}: {self.reason}"


@dataclass
class Found:
    regions: list[FusedRegion] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    folded: int = 0  # nodes left out as weight-only


def _is_view(node) -> bool:
    return get_op(node.op).is_view and _templated(node)


def cut(graph: Graph, nodes: list) -> Graph:
    """`Region.of(graph, nodes).body()`, but no view's result is an output (see the module doc): one read
    outside is left to the view itself, which reads the region's input or the value it views, which the region
    then outputs instead."""
    body = Region.of(graph, nodes).body()
    views = {n.outputs[0].name: n for n in body.nodes if _is_view(n)}
    if not any(v.name in views for v in body.outputs):
        return body
    ins = {gi.value.name for gi in body.inputs}
    outputs: list = []
    for v in body.outputs:
        while v.name in views:
            v = views[v.name].inputs[0]
        if v.name not in ins and v not in outputs:
            outputs.append(v)
    if not outputs:
        raise Refused("the region computes nothing but views of its inputs")
    kept = list(body.nodes)
    while True:  # a view read only outside goes (and a view only it read)
        read = {v.name for n in kept for v in n.inputs} | {v.name for v in outputs}
        alive = [n for n in kept if n.outputs[0].name in read or n.outputs[0].name not in views]
        if len(alive) == len(kept):
            return Graph(body.name, body.inputs, kept, outputs).validate()
        kept = alive


def _check_convex(graph: Graph, nodes: list, order: dict[int, int]) -> None:
    """`Region.check_convex`, where a view in the region is its own copy (see the module doc): what reads the
    view outside depends on the region only when the view reads what the region computes. Only the nodes
    from the region's first to its last (`order`: a node's position in the graph) can lie between two of
    its nodes, so only they are read: a scan of the whole graph for every join made `find_regions`
    quadratic (42 s on Qwen3-1.7B's 2529-node decode step, on the 2-core CPU machine)."""
    mine = {id(n) for n in nodes}
    computed = {v.name for n in nodes if not _is_view(n) for v in n.outputs}
    tainted: set[str] = set()  # values computed outside the region from what it computes
    first, last = min(order[i] for i in mine), max(order[i] for i in mine)
    for node in graph.nodes[first:last + 1]:
        reads = {v.name for v in node.inputs}
        if id(node) in mine:
            if reads & tainted:
                raise GraphError(f"region is not convex: %{sorted(reads & tainted)[0]} is computed outside the "
                                 f"region from one of its outputs and read by {node.name} inside it")
            if _is_view(node) and reads & computed:
                computed.update(v.name for v in node.outputs)
        elif reads & (computed | tainted):
            tainted.update(v.name for v in node.outputs)


def _legal(graph: Graph, nodes: list, max_row: int, order: dict[int, int]) -> str | None:
    """None when `nodes` can be one generated kernel, else why not."""
    try:
        _check_convex(graph, nodes, order)
        check(cut(graph, nodes), max_row=max_row)
    except (Refused, GraphError) as e:
        return str(e)
    return None


def _templated(node) -> bool:
    return node.op != "kernel" and has_op(node.op) and get_op(node.op).triton is not None


def find_regions(graph: Graph, *, generate_kernels: bool = True, max_row: int = MAX_ROW) -> Found:
    """The maximal fusible regions of `graph` (each with its generated kernel) and every refusal. Rows longer
    than `max_row` are looped (see `legality`)."""
    found = Found()
    folded = weight_only_values(graph)
    producers = graph.producers()
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    groups: list[list] = []
    group_of: dict[int, int] = {}
    views: dict[int, object] = {}  # views outside any region's ownership: each joins whatever region reads it
    for node in graph.nodes:
        if not _templated(node):
            continue
        if all(v.name in folded for v in node.outputs):
            found.folded += 1
            continue
        if _is_view(node):  # a view alone would be an output, which a kernel writes contiguous
            views[id(node)] = node
            continue
        pulled = _views_read(node, producers, views, order)
        target, refusals = _place(graph, groups, group_of, producers, pulled, node, max_row, order)
        attempt = pulled
        if target is None and pulled:  # through its views refused: read their results instead
            found.refusals.append(Refusal("not fused", tuple(n.name for n in pulled) + (node.name,),
                                          refusals[-1].reason))
            attempt = []
            target, refusals = _place(graph, groups, group_of, producers, attempt, node, max_row, order)
        found.refusals.extend(refusals)
        if target is None:
            continue
        keep = target[0]
        for g in target[1:]:
            for n in groups[g]:
                if not _is_view(n):  # views belong to no region (each that reads one takes it in)
                    group_of[id(n)] = keep
            groups[keep].extend(groups[g])
            groups[g] = []
        groups[keep].extend(attempt)
        groups[keep].append(node)
        group_of[id(node)] = keep
    users = graph.users()
    for members in groups:
        if not members:
            continue
        for part in (members, _shared_tables(members, users)):
            if not part:
                continue
            region = Region.of(graph, part)
            why = _legal(graph, part, max_row, order)
            if why is not None:
                found.refusals.append(Refusal("skipped", tuple(n.name for n in region.nodes), why))
                continue
            if not generate_kernels:
                found.regions.append(FusedRegion(region, None))
                continue
            try:
                generated = generate(cut(graph, part), max_row=max_row)
            except Refused as e:  # legal above, so this is the generator's own limit: say so, never crash
                found.refusals.append(Refusal("skipped", tuple(n.name for n in region.nodes), str(e)))
                continue
            found.regions.append(FusedRegion(region, generated))
    return found


def _shared_tables(members: list, users: dict[str, list]) -> list:
    """The nodes of `members` that the values read by `SHARED_READERS` or more nodes outside them need (the
    module doc says why), in order; none where there is no such value or it needs every node."""
    inside = {id(n) for n in members}
    produced = {v.name: n for n in members for v in n.outputs}
    stack = [n for name, n in produced.items()
             if len({id(u) for u in users.get(name, ()) if id(u) not in inside}) >= SHARED_READERS]
    needed: set[int] = set()
    while stack:
        n = stack.pop()
        if id(n) not in needed:
            needed.add(id(n))
            stack.extend(produced[v.name] for v in n.inputs if v.name in produced)
    part = [n for n in members if id(n) in needed]
    computes = [n for n in part if not _is_view(n)]
    return part if 0 < len(computes) < len([n for n in members if not _is_view(n)]) else []


def _place(graph, groups, group_of, producers, pulled, node, max_row, order):
    """(the groups `node` with the views `pulled` joins: several merged into the first, or a new one at
    len(groups); or None) and the refusals met on the way."""
    refusals: list[Refusal] = []
    reach = [producers[v.name] for n in [*pulled, node] for v in n.inputs if v.name in producers]
    joinable = list(dict.fromkeys(group_of[id(p)] for p in reach if id(p) in group_of))
    if len(joinable) > 1:
        union = [n for g in joinable for n in groups[g]] + pulled + [node]
        if _legal(graph, union, max_row, order) is None:
            return joinable, refusals
    for g in sorted(joinable, reverse=True):  # the latest producer region first
        why = _legal(graph, groups[g] + pulled + [node], max_row, order)
        if why is None:
            return [g], refusals
        refusals.append(Refusal("not fused", (groups[g][-1].name, node.name), why))
    alone = _legal(graph, pulled + [node], max_row, order)
    if alone is not None:
        refusals.append(Refusal("skipped", (node.name,), alone))
        return None, refusals
    groups.append([])
    return [len(groups) - 1], refusals


def _views_read(node, producers, views, order) -> list:
    """The views (in no region of their own) that `node` reads, directly or through other such views, in order."""
    out, stack = [], [v.name for v in node.inputs]
    while stack:
        p = producers.get(stack.pop())
        if p is not None and id(p) in views and p not in out:
            out.append(p)
            stack.extend(v.name for v in p.inputs)
    return sorted(out, key=lambda n: order[id(n)])

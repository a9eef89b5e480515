"""A region cut from a graph as a body document (what a directory kernel brings: `graph_pattern`), with
several outputs none of which reaches every input, goes through the library's matcher like the fused
attention prelude: matched from all its outputs at once (`hoid.search.joint`), once per layer."""

from __future__ import annotations

import torch

from hoid.ir import GraphBuilder, Region, run
from hoid.kernels import KernelSet, KernelSpec
from hoid.kernels.pattern import graph_pattern
from hoid.search import SearchSpace, apply_library, default_rulesets
from hoid.search.cost import AnalyticCost
from hoid.search.joint import reaches_all
from hoid.search.library import _matches, _nodes_by_op

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, CACHE = 32, 2, 1, 16, 8


def layers(n: int, hidden: int = HIDDEN):
    """n decode layers (q/k/v projections, q/k norms, RoPE, cache appends, attention, o projection + residual)
    sharing cos, sin and the positions; and the names of the values of each layer's prelude."""
    gen = torch.Generator().manual_seed(0)
    b = GraphBuilder("layers")
    x = b.input("x", (1, 1, hidden), "f32")
    cos, sin = b.input("cos", (1, 1, HEAD_DIM), "f32"), b.input("sin", (1, 1, HEAD_DIM), "f32")
    positions = b.input("positions", (1,), "i64")
    mask = b.input("mask", (1, 1, 1, CACHE), "bool")
    caches = [(b.state(f"cache.{i}.k", (1, KV_HEADS, CACHE, HEAD_DIM), "f32"),
               b.state(f"cache.{i}.v", (1, KV_HEADS, CACHE, HEAD_DIM), "f32")) for i in range(n)]
    preludes, updates, new_caches = [], {}, []
    for i, (k_cache, v_cache) in enumerate(caches):
        made = []

        def op(name, *args, _made=made, **attrs):
            value = b.op(name, *args, **attrs)
            _made.append(value.name)
            return value

        def w(name, *shape, _i=i):
            return b.weight(f"l{_i}.{name}", shape, "f32", torch.randn(*shape, generator=gen) * 0.1)

        def linear(v, weight, _op=op):
            return _op("matmul", v, _op("transpose", weight, dim0=0, dim1=1))

        q = op("reshape", linear(x, w("q", HEADS * HEAD_DIM, hidden)), shape=(1, 1, HEADS, HEAD_DIM))
        k = op("reshape", linear(x, w("k", KV_HEADS * HEAD_DIM, hidden)), shape=(1, 1, KV_HEADS, HEAD_DIM))
        v = op("reshape", linear(x, w("v", KV_HEADS * HEAD_DIM, hidden)), shape=(1, 1, KV_HEADS, HEAD_DIM))
        q = op("rmsnorm", q, w("q_norm", HEAD_DIM), eps=1e-6)
        k = op("rmsnorm", k, w("k_norm", HEAD_DIM), eps=1e-6)
        cos4, sin4 = (op("reshape", t, shape=(1, 1, 1, HEAD_DIM)) for t in (cos, sin))
        q_rot = op("rope", op("transpose", q, dim0=1, dim1=2), cos4, sin4)
        k_rot = op("rope", op("transpose", k, dim0=1, dim1=2), cos4, sin4)
        new_k = op("index_copy", k_cache, positions, k_rot, dim=2)
        new_v = op("index_copy", v_cache, positions, op("transpose", v, dim0=1, dim1=2), dim=2)
        preludes.append(made)
        attn = b.sdpa(q_rot, new_k, new_v, mask, enable_gqa=True)
        attn = b.reshape(b.transpose(attn, dim0=1, dim1=2), shape=(1, 1, HEADS * HEAD_DIM))
        o = w("o", hidden, HEADS * HEAD_DIM)
        x = b.add(x, b.matmul(attn, b.transpose(o, dim0=0, dim1=1)))
        updates.update({k_cache: new_k, v_cache: new_v})
        new_caches += [new_k, new_v]
    return b.build(x, *new_caches, updates=updates), preludes


def _launch(*tensors, **params):  # never launched here: the interpreter runs a kernel node's body
    raise AssertionError("not launched")


def _spec(body) -> KernelSpec:
    types = [gi.value.type for gi in body.inputs]
    return KernelSpec("test.prelude", graph_pattern(body, "region:test.prelude"), "torch", _launch,
                      examples=lambda rng: (list(types), {}))


def _inputs(graph, seed):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for v in graph.runtime_inputs:
        if v.type.dtype == "i64":
            out.append(torch.tensor([3]))
        elif v.type.dtype == "bool":
            out.append(torch.arange(CACHE).reshape(1, 1, 1, CACHE) <= 3)
        else:
            out.append(torch.randn(v.type.shape, generator=gen))
    return out


class _FusedFree:
    """The analytic cost, with the region's kernel free: the extraction must take it wherever it is joined."""

    def __init__(self):
        self.inner = AnalyticCost()

    def __call__(self, call):
        return 0.0 if call.op == "kernel" else self.inner(call)


def test_a_cut_region_with_several_outputs_matches_once_per_layer_and_keeps_the_outputs():
    graph, preludes = layers(3)
    region = Region.of(graph, preludes[0])
    region.check_convex()
    body = region.body()
    assert len(body.outputs) == 3 and not any(reaches_all(body, out) for out in body.outputs)  # the joint path
    space = SearchSpace(graph)
    space.saturate(default_rulesets())
    snapshot = space.snapshot()
    matches = _matches(snapshot, _spec(body), _nodes_by_op(snapshot))
    # one match per layer, not q of one layer with the caches of another (cos, sin, positions are shared)
    assert len(matches) == 3 and all(pins is not None for _, _, pins in matches)
    outputs = [set(pins[1]) for _, _, pins in matches]
    assert all(len(o) == 3 for o in outputs) and len(set().union(*outputs)) == 9
    report = apply_library(space, KernelSet([_spec(body)]))
    assert report.injected == {"test.prelude": 3}, report.skipped
    fused = space.extract(_FusedFree()).graph
    kernels = [n for n in fused.nodes if n.op == "kernel"]
    assert len(kernels) == 3 and {n.inputs[8].name for n in kernels} == {"cache.0.k", "cache.1.k", "cache.2.k"}
    inputs = _inputs(graph, seed=1)
    for expected, got in zip(run(graph, *inputs), run(fused, *inputs), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_a_region_cut_from_one_layer_matches_every_layer_and_one_cut_elsewhere_at_the_graphs_types():
    graph, _ = layers(2)
    one, preludes = layers(1)
    same = Region.of(one, preludes[0]).body()
    wider_graph, wider_preludes = layers(1, hidden=48)
    wider = Region.of(wider_graph, wider_preludes[0]).body()
    space = SearchSpace(graph)
    snapshot = space.snapshot()
    by_op = _nodes_by_op(snapshot)
    assert len(_matches(snapshot, _spec(same), by_op)) == 2
    # the matcher reports the types it found, the graph's: a kernel claiming only the region's own types (a
    # directory kernel) refuses them, and says so
    found = _matches(snapshot, _spec(wider), by_op)
    region_types = tuple(gi.value.type for gi in wider.inputs)
    assert len(found) == 2 and {types for types, _, _ in found} == {tuple(gi.value.type for gi in same.inputs)}
    assert all(types != region_types for types, _, _ in found)

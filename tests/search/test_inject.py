"""Kernel injection: a region's kernel is extracted when cheaper and not when dearer, at every match;
multi-output regions work; non-convex regions are refused; graphs holding kernels re-encode."""

import pytest

import hoid
from hoid.errors import GraphError
from hoid.kernels import KernelSpec, Pattern
from hoid.search.cost import AnalyticCost, MeasuredCost
from hoid.search.inject import Region
from hoid.search.soundness import compare_graphs
from hoid.search.space import SearchSpace

from .graphs import block, rms_core


def _spec(kernel_id: str) -> KernelSpec:
    """A torch-backed kernel; injection needs its identity, the region gives the body."""
    def build(b, ins, attrs):
        x, w = ins
        return b.mul(w, b.cast(rms_core(b, b.cast(x, dtype="f32")), dtype=x.type.dtype))

    return KernelSpec(kernel_id, Pattern("test_rmsnorm", ("x", "w"), build), "torch", launch=lambda *a, **k: None)


def _cost(kernel_seconds: float):
    """Measured: the kernel takes `kernel_seconds`; everything else is priced by the roofline."""
    return MeasuredCost(lambda call: kernel_seconds if call.op == "kernel" else None, fallback=AnalyticCost())


def _first_norm_region(graph):
    """The decomposed RMSNorm of layer 0: every node up to the multiplication by its weight."""
    names = []
    for node in graph.nodes:
        names.append(node.outputs[0].name)
        if node.op == "mul" and any(v.name == "l0.norm" for v in node.inputs):
            return Region.of(graph, names)
    raise AssertionError("no norm in the graph")


def _kernels(graph, kernel_id):
    return [n for n in graph.nodes if n.op == "kernel" and n.attrs["kernel"] == kernel_id]


@pytest.fixture
def space():
    return SearchSpace(block(layers=2))


def test_kernel_joins_every_match_and_wins_when_cheaper(space):
    region = _first_norm_region(space.graph)
    injected = space.add_kernel(region, _spec("test.norm"))
    assert injected.matches == 2  # its own layer, and the other one (abstracted over x and the weight)
    cheap = space.extract(_cost(1e-9)).graph
    assert len(_kernels(cheap, "test.norm")) == 2
    assert compare_graphs(space.graph, cheap) is None


def test_kernel_is_not_extracted_when_dearer(space):
    space.add_kernel(_first_norm_region(space.graph), _spec("test.norm"))
    dear = space.extract(_cost(1.0)).graph
    assert _kernels(dear, "test.norm") == []
    assert len(dear.nodes) == len(space.graph.nodes)


def _fan_graph(dtype="f32"):
    b = hoid.GraphBuilder("fan")
    x = b.input("x", (3, 4), dtype)
    a = b.exp(x, name="a")
    n = b.neg(a, name="n")
    c = b.add(a, n, name="c")
    return b.build(b.mul(c, a, name="out"))


def test_multi_output_region():
    graph = _fan_graph()
    space = SearchSpace(graph)
    region = Region.of(graph, ["a", "n"])
    assert [v.name for v in region.outputs] == ["a", "n"]
    assert space.add_kernel(region, _spec("test.two")).matches == 1
    out = space.extract(_cost(1e-9)).graph
    (kernel,) = _kernels(out, "test.two")
    assert len(kernel.outputs) == 2
    assert compare_graphs(graph, out, exact=True) is None


def test_region_of_another_type_is_not_matched():
    # the same ops (no dtype in their attrs) in bf16 and in f32: a kernel is verified per input-type
    # signature, so the bf16 region's kernel joins nothing in the f32 graph; the f32 region's joins it
    from hoid.ir import KernelImpl
    from hoid.search.inject import inject

    space = SearchSpace(_fan_graph("f32"))
    bf16 = Region.of(_fan_graph("bf16"), ["a", "n"]).body()
    assert inject(space, KernelImpl("test.two", "v", {}, bf16)).matches == 0
    assert _kernels(space.extract(_cost(1e-9)).graph, "test.two") == []
    f32 = Region.of(space.graph, ["a", "n"]).body()
    assert inject(space, KernelImpl("test.two", "v", {}, f32)).matches == 1


def test_non_convex_region_is_refused():
    graph = _fan_graph()
    with pytest.raises(GraphError, match="not convex"):
        SearchSpace(graph).add_kernel(Region.of(graph, ["a", "c"]), _spec("test.bad"))


def test_region_of_unknown_values_is_refused():
    with pytest.raises(GraphError, match="no node"):
        Region.of(_fan_graph(), ["nope"])


def test_graph_holding_kernels_reencodes_with_its_bodies(space):
    space.add_kernel(_first_norm_region(space.graph), _spec("test.norm"))
    with_kernels = space.extract(_cost(1e-9)).graph
    again = SearchSpace(with_kernels)
    assert len(_kernels(again.extract(_cost(1e-9)).graph, "test.norm")) == 2
    expanded = again.extract(_cost(1.0)).graph  # the bodies are in the e-graph: the kernels can go
    assert _kernels(expanded, "test.norm") == [] and expanded.op_counts()["rsqrt"] == 2
    assert compare_graphs(space.graph, expanded) is None


def test_kernel_nodes_carry_their_pattern_attrs_through_extraction_and_reencoding(space):
    # what a runtime needs to launch the kernel: operands, attrs and params, all on the node
    space.add_kernel(_first_norm_region(space.graph), _spec("test.norm"), attrs={"eps": 1e-06})
    extracted = space.extract(_cost(1e-9)).graph
    assert [n.attrs["attrs"] for n in _kernels(extracted, "test.norm")] == [{"eps": 1e-06}] * 2
    again = SearchSpace(hoid.loads(hoid.dumps(extracted))).extract(_cost(1e-9)).graph
    assert [n.attrs["attrs"] for n in _kernels(again, "test.norm")] == [{"eps": 1e-06}] * 2


def test_region_is_the_cut_verify_makes():
    from hoid.ir import extract_region

    graph = _fan_graph()
    region = Region.of(graph, ["%a", "%n"])  # as verify names values
    assert region.nodes == Region.of(graph, ["a", "n"]).nodes
    reference = extract_region(graph, ["%a", "%n"])
    assert region.body().structure_key() == reference.structure_key()
    assert [v.name for v in region.inputs] == ["x"] and [v.name for v in region.outputs] == ["a", "n"]


def test_region_of_a_value_nothing_uses_still_has_an_output():
    b = hoid.GraphBuilder("dead")
    x = b.input("x", (3,), "f32")
    b.neg(x, name="unused")
    graph = b.build(b.exp(x))
    assert [v.name for v in Region.of(graph, ["unused"]).body().outputs] == ["unused"]

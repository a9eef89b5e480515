"""Encoding and decoding: a graph survives the round trip through egglog; egglog loads lazily."""

import subprocess
import sys

import pytest

import hoid
from hoid.errors import GraphError
from hoid.search import language
from hoid.search.encode import encode
from hoid.search.soundness import compare_graphs
from hoid.search.space import SearchSpace

from .graphs import block


def test_round_trip_without_rules_keeps_the_graph():
    graph = block(layers=2, dtype="bf16")
    out = SearchSpace(graph).extract().graph
    assert sorted(out.op_counts().items()) == sorted(graph.op_counts().items())
    assert {v.name for v in out.outputs} == {v.name for v in graph.outputs}
    assert compare_graphs(graph, out, exact=True) is None


def test_multi_output_ops_state_and_scalars_round_trip():
    b = hoid.GraphBuilder("mixed")
    x = b.input("x", (2, 6), "f32")
    cache = b.state("cache", (2, 6), "f32")
    first, second = b.split(x, sizes=[2, 4], dim=1)
    y = b.concat(b.mul(second, 0.5), b.add(first, float("-inf")), dim=1)
    g = b.build(b.sum(y, dim=[1]), updates={cache: b.where(b.gt(x, 0.0), x, cache)})
    out = SearchSpace(g).extract().graph
    assert out.state_updates == g.state_updates
    assert out.op_counts()["split"] == 1
    assert compare_graphs(g, out, exact=True) is None


def test_sharing_is_kept():
    b = hoid.GraphBuilder("shared")
    x = b.input("x", (4,), "f32")
    e = b.exp(x)
    g = b.build(b.add(b.mul(e, e), e))
    enc = encode(g)
    assert len(enc.templates.rows) == len(g.inputs) + len(g.nodes)  # one definition per value
    assert SearchSpace(g).extract().graph.op_counts() == {"exp": 1, "mul": 1, "add": 1}


def test_constructor_names_and_literals():
    assert language.constructor_name("index_copy") == "IndexCopy"
    assert language.f64(float("inf")) == "inf" and language.f64(float("nan")) == "NaN"
    assert language.f64(1e-06) == "1e-06"
    assert language.tensor_list(["a", "b"]) == "(TCons a (TCons b (TNil)))"


def test_reserved_op_names_are_refused():
    from hoid.ir.registry import OpDef

    op = OpDef("out", ("x",), infer=lambda t, a: t[0], reference=lambda x: x)
    with pytest.raises(GraphError, match="reserves"):
        language.op_declaration(op)


def test_importing_hoid_search_does_not_import_egglog():
    code = "import hoid, hoid.search, sys; assert 'egglog' not in sys.modules, 'egglog imported eagerly'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_kernel_impls_round_trip_through_node_attrs_and_share_a_key():
    from hoid.ir import KernelImpl

    def body():
        b = hoid.GraphBuilder("body")
        return b.build(b.exp(b.input("x", (3,), "f32")))

    impl = KernelImpl("k", "v1", {"block": 4}, body(), {"eps": 1e-6})
    assert KernelImpl.from_node(impl.node_attrs()) == impl
    enc = encode(body())
    key = enc.kernel_key(impl)
    assert enc.kernel_key(KernelImpl("k", "v1", {"block": 4}, body(), {"eps": 1e-6})) == key  # equal structure
    assert enc.kernel_key(KernelImpl("k", "v1", {"block": 4}, body(), {"eps": 1e-5})) != key
    assert len(enc.kernels) == 2


def test_templates_past_twenty_relations_keep_their_rows_apart():
    """egglog names each action's value after its function and a counter: relations named `-2` and `-21`
    once made `-2`'s 12th row and `-21`'s 2nd one variable of two sorts (Whisper's encoder was refused)."""
    from hoid.search._egglog import Engine
    from hoid.search.encode import Templates

    templates = Templates("hoid-test")
    for kind in range(22):  # 22 distinct templates, each over its own number of ints
        templates.add(f"(set (weight-id (N i0)) {kind})", [kind] + [0] * (kind % 3))
    for row in range(12):
        templates.add("(set (weight-id (N i0)) 2)", [100 + row, 0, 0])  # template 2's rows, then template 21's
    templates.add("(set (weight-id (N i0)) 21)", [200])
    engine = Engine()
    engine.run(language.PRELUDE)
    templates.run(engine)
    engine.run("(check (= (weight-id (N 200)) 21) (= (weight-id (N 111)) 2))")  # raises if either is not so

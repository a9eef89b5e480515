"""The `.hoid` text format round-trips every graph exactly: structure, attrs to the bit, names, bodies."""

from __future__ import annotations

import math
import random
import textwrap
import zlib

import pytest
import torch
from hypothesis import HealthCheck, given, settings

import hoid
from hoid.ir import Graph, GraphBuilder, Node, TensorType, Value, all_ops, get_op
from hoid.ir import text as text_module
from hoid.ir.graph import GraphInput
from hoid.ir.text import dumps, loads
from tests.ir.graph_strategies import RandomGraph, assert_same_outcome, graph_cases

ROUND_TRIP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_round_trip(graph: Graph) -> str:
    """Both directions: loads(dumps(g)) == g and dumps(loads(t)) == t. Returns the text."""
    text = dumps(graph)
    loaded = loads(text)
    assert loaded == graph, f"graph changed through the text:\n{text}"
    assert dumps(loaded) == text
    return text


# --- random graphs from the whole registry ------------------------------------------------------------

@ROUND_TRIP
@given(graph_cases())
def test_random_graphs_round_trip_and_run_the_same(case):
    loaded = loads(assert_round_trip(case.graph))
    assert_same_outcome(case.outcome(loaded), case.outcome(case.graph))


@pytest.mark.parametrize("name", sorted(all_ops()))
def test_every_registered_op_round_trips(name):
    """Deterministic coverage of each op (hypothesis may miss one): single-op graphs from its sampler."""
    rng = random.Random(zlib.crc32(name.encode()))
    for _ in range(4):
        builder = RandomGraph(rng, "main", ("input", "weight"), depth=2, bodies=[])
        if name == "kernel":  # no sampler: random bodies, nested
            builder.kernel_node()
        else:
            assert get_op(name).sample is not None, f"op {name} has no sampler: random graphs cannot cover it"
            builder.op_node(name)
        case = builder.build(0)
        assert any(n.op == name for n in case.graph.nodes)
        loaded = loads(assert_round_trip(case.graph))
        assert_same_outcome(case.outcome(loaded), case.outcome(case.graph))


def test_the_documented_example_round_trips():
    doc = text_module.__doc__
    example = textwrap.dedent(doc[doc.index("    hoid 1"):doc.index("The rules")]).strip() + "\n"
    graph = loads(example)
    assert dumps(graph) == example
    assert graph.state_updates == {"cache": "new"}
    assert [n.op for n in graph.nodes] == ["transpose", "split", "kernel", "cast", "add"]


# --- attrs: exact values ------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [1e-06, 0.1, 2.0, -0.0, 5e-324, 1.7976931348623157e308, 1 / 3,
                                   math.inf, -math.inf, math.nan, 3, -7, 2**62])
def test_scalar_attrs_survive_bit_for_bit(value):
    b = GraphBuilder()
    graph = b.build(b.mul(b.input("x", (2,), "f64"), value))
    text = assert_round_trip(graph)
    (got,) = [n.attrs["scalar"] for n in loads(text).nodes]
    assert type(got) is type(value)  # 2.0 stays a float and 3 an int: torch promotes them differently
    assert (got.hex() == value.hex()) if isinstance(value, float) else got == value
    assert f"scalar={value!r}" in text  # repr: inf, -inf and nan spelled out


def test_strings_and_params_with_awkward_characters_round_trip():
    b = GraphBuilder()
    body_builder = GraphBuilder("body")
    body = body_builder.build(body_builder.exp(body_builder.input("x", (3,), "f32")))
    kernel_id = 'tri"ton\n.é\\k # not a comment'
    params = {"BLOCK": 64, "ratio": 0.1, "on": True, "name": "a,b)", "gone": None}
    x = b.input("x", (3,), "f32")
    awkward = b.kernel(x, body=body, kernel=kernel_id, params=params)
    graph = b.build(awkward, b.kernel(x, body=body, kernel="k"))
    text = assert_round_trip(graph)
    plain_id, awkward_id = (line for line in text.splitlines() if "kernel(" in line)  # one node a line
    assert '\\n' in plain_id and "# not a comment" in plain_id and awkward_id.startswith("%t1 = kernel")
    node = loads(text).nodes[0]
    assert node.attrs["kernel"] == kernel_id and list(node.attrs["params"].items()) == list(params.items())


def test_attrs_print_in_schema_order_and_none_attrs_are_left_out():
    b = GraphBuilder()
    x = b.input("x", (4, 8), "f32")
    graph = b.build(b.clamp(x, max=0.5), b.add(x, x))
    text = dumps(graph)
    assert "clamp(%x, max=0.5)" in text and "add(%x, %x)" in text
    spelled_out = text.replace("clamp(%x, max=0.5)", "clamp(%x, max=0.5, min=none)")
    assert loads(spelled_out) == graph  # any order, explicit none: the same graph, printed canonically
    assert dumps(loads(spelled_out)) == text


def test_comments_and_blank_lines_are_ignored():
    b = GraphBuilder()
    graph = b.build(b.exp(b.input("x", (2,), "f32")))
    lines = dumps(graph).splitlines()
    commented = "\n".join(["# a comment", "", lines[0] + "  # version", *lines[1:], "", "# the end"])
    assert loads(commented) == graph


# --- names, layouts, state -----------------------------------------------------------------------------

def test_names_that_need_quoting_round_trip():
    b = GraphBuilder('my "graph"')
    x = b.input("", (2,), "f32")
    w = b.weight("model.layers.0.mlp.weight", (2,), "f32")
    y = b.op("add", x, w, name="sum (x, w)")
    text = assert_round_trip(b.build(b.op("exp", y, name="é")))
    assert 'graph @"my \\"graph\\""' in text and "%model.layers.0.mlp.weight" in text
    assert '%"" : f32[2]' in text and '%"sum (x, w)"' in text


def test_strided_types_are_printed_and_checked():
    b = GraphBuilder()
    x = b.input("x", (4, 64), "f32")
    graph = b.build(b.exp(b.transpose(x, dim0=0, dim1=1)))
    text = assert_round_trip(graph)
    assert "f32[64,4]{1,64}" in text
    strided_input = Graph("g", [GraphInput(Value("x", TensorType((2, 3), "f32", (1, 2))))], [],
                          [Value("x", TensorType((2, 3), "f32", (1, 2)))])
    assert "input %x : f32[2,3]{1,2}" in assert_round_trip(strided_input)


def test_one_output_can_update_several_states():
    b = GraphBuilder()
    k, v = b.state("k", (2, 3), "f32"), b.state("v", (2, 3), "f32")
    new = b.add(k, v)
    graph = b.build(updates={k: new, v: new})
    text = assert_round_trip(graph)
    assert "output %t0 updates %k, %v" in text


def test_dumps_refuses_a_state_update_that_is_not_an_output():
    x = Value("x", TensorType((2,), "f32"))
    graph = Graph("g", [GraphInput(x, "state")], [], [], {"x": "y"})
    with pytest.raises(hoid.GraphError, match="not an output"):
        dumps(graph)


# --- kernel bodies ----------------------------------------------------------------------------------

def _exp_body(name: str, size: int = 3) -> Graph:
    b = GraphBuilder(name)
    return b.build(b.exp(b.input("x", (size,), "f32")))


def test_equal_bodies_are_printed_once():
    b = GraphBuilder()
    x = b.input("x", (3,), "f32")
    y = b.kernel(x, body=_exp_body("body"), kernel="k")
    graph = b.build(b.kernel(y, body=_exp_body("body"), kernel="k"))  # equal bodies, distinct objects
    text = assert_round_trip(graph)
    assert text.count("graph @") == 2
    first, second = loads(text).nodes
    assert first.attrs["body"] is second.attrs["body"]


def test_different_bodies_with_one_name_get_distinct_labels():
    b = GraphBuilder("body")  # the main graph takes the name too
    x = b.input("x", (3,), "f32")
    y = b.kernel(x, body=_exp_body("body"), kernel="k")
    z = b.kernel(b.input("z", (5,), "f32"), body=_exp_body("body", 5), kernel="k")
    text = assert_round_trip(b.build(y, z))
    assert 'graph @body_2 name="body"' in text and 'graph @body_3 name="body"' in text
    headers = [line for line in text.splitlines() if line.startswith("graph ")]
    assert headers[-1] == "graph @body"  # the main graph keeps its own name


def test_nested_kernel_bodies_round_trip_and_run():
    inner = _exp_body("inner")
    mid_builder = GraphBuilder("outer")
    mx = mid_builder.input("x", (3,), "f32")
    outer = mid_builder.build(mid_builder.neg(mid_builder.kernel(mx, body=inner, kernel="k.inner")))
    b = GraphBuilder()
    graph = b.build(b.kernel(b.input("x", (3,), "f32"), body=outer, kernel="k.outer"))
    text = assert_round_trip(graph)
    assert text.index("graph @inner") < text.index("graph @outer") < text.index("graph @main")
    x = torch.randn(3)
    assert torch.equal(hoid.run(loads(text), x)[0], -torch.exp(x))


def test_str_of_a_graph_is_its_document():
    b = GraphBuilder()
    graph = b.build(b.exp(b.input("x", (2,), "f32")))
    assert str(graph) == dumps(graph) and dumps(graph).startswith(f"hoid {text_module.FORMAT_VERSION}\n")


def test_dumps_refuses_a_node_without_outputs():
    x = Value("x", TensorType((2,), "f32"))
    graph = Graph("g", [GraphInput(x)], [Node("exp", (x,), {}, ())], [x])
    with pytest.raises(hoid.GraphError, match="no outputs"):
        dumps(graph)


def test_a_kernel_node_s_attrs_hold_lists_of_numbers_as_tuples_and_round_trip():
    """A convolution's stride and padding ride a kernel node's `attrs` (the pattern's attrs it is launched
    with): lists become tuples (hashable, as node keys need) and come back so from the document."""
    b = GraphBuilder()
    body_builder = GraphBuilder("body")
    body = body_builder.build(body_builder.exp(body_builder.input("x", (3,), "f32")))
    x = b.input("x", (3,), "f32")
    graph = b.build(b.kernel(x, body=body, kernel="torch.conv", attrs={"stride": [2, 1], "scale": [0.5]}))
    assert graph.nodes[0].attrs["attrs"] == {"stride": (2, 1), "scale": (0.5,)}
    assert loads(assert_round_trip(graph)).nodes[0].attrs["attrs"] == {"stride": (2, 1), "scale": (0.5,)}
    with pytest.raises(hoid.GraphError, match="'nested' must be an int, float, bool, str, none or a list of numbers"):
        b.kernel(x, body=body, kernel="k", attrs={"nested": [[1]]})

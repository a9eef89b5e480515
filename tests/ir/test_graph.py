"""Graph.validate(): every malformation is refused with an error that names the node and the problem."""

import dataclasses

import pytest
import torch

import hoid
from hoid.ir import Graph, GraphInput, Node, TensorType, Value, expect_graph

F32 = TensorType((4, 8), "f32")


def small_graph() -> Graph:
    b = hoid.GraphBuilder("g")
    x = b.input("x", (4, 8), "f32")
    y = b.exp(x)
    return b.build(b.add(x, y))


def test_valid_graph_passes_and_is_equal_to_itself():
    g = small_graph()
    assert g.validate() is g
    assert g == small_graph()


def test_unknown_op_is_named_with_suggestion():
    g = small_graph()
    g.nodes[0] = dataclasses.replace(g.nodes[0], op="expp")
    with pytest.raises(hoid.GraphError, match=r"unknown op 'expp'.*did you mean exp"):
        g.validate()


def test_use_before_definition():
    g = small_graph()
    g.nodes.reverse()
    with pytest.raises(hoid.GraphError, match=r"uses %t0 before its definition"):
        g.validate()


def test_duplicate_names():
    g = small_graph()
    n = g.nodes[1]
    g.nodes[1] = Node(n.op, n.inputs, n.attrs, (Value("t0", F32),))
    with pytest.raises(hoid.GraphError, match=r"duplicate value name %t0"):
        g.validate()


def test_declared_type_must_match_inference():
    g = small_graph()
    n = g.nodes[0]
    g.nodes[0] = Node(n.op, n.inputs, n.attrs, (Value("t0", TensorType((4, 8), "f16")),))
    with pytest.raises(hoid.GraphError, match=r"declared f16\[4,8\], inferred f32\[4,8\]"):
        g.validate()


def test_wrong_arity_and_bad_attr():
    x = Value("x", F32)
    bad_arity = Graph("g", [GraphInput(x)], [Node("exp", (x, x), {}, (Value("y", F32),))], [Value("y", F32)])
    with pytest.raises(hoid.GraphError, match=r"exp: takes 1 operand"):
        bad_arity.validate()
    bad_attr = Graph("g", [GraphInput(x)], [Node("exp", (x,), {"dim": 1}, (Value("y", F32),))], [Value("y", F32)])
    with pytest.raises(hoid.GraphError, match=r"unknown attr 'dim'"):
        bad_attr.validate()


def test_state_needs_an_update_of_its_type():
    b = hoid.GraphBuilder("s")
    cache = b.state("cache", (2, 3), "f32")
    new = b.add(cache, 1.0)
    g = b.build(new, updates={cache: new})
    assert g.state_updates == {"cache": new.name}
    g.state_updates = {}
    with pytest.raises(hoid.GraphError, match=r"state input %cache declares no update"):
        g.validate()


def test_bound_weight_must_match_its_declaration():
    b = hoid.GraphBuilder("w")
    w = b.weight("w", (3,), "f32", torch.zeros(4))
    with pytest.raises(hoid.GraphError, match=r"weight %w: bound tensor is f32\[4\], declared f32\[3\]"):
        b.build(b.neg(w))


def test_flops_and_bytes_add_up_over_nodes():
    g = small_graph()
    assert g.bytes_moved() == 2 * (32 * 4) * 2 + (32 * 4)  # exp: read+write; add: 2 reads + write
    assert g.flops() == 4 * 32 + 32


class _Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


@pytest.mark.parametrize("where, call", [
    ("hoid.run", lambda m: hoid.run(m, torch.ones(2))),
    ("hoid.dumps", lambda m: hoid.dumps(m)),
    ("hoid.save", lambda m: hoid.save(m, "never-written.hoid")),
    ("hoid.search.rewrite", lambda m: hoid.search.rewrite(m)),
])
def test_a_module_where_a_graph_is_expected_says_how_to_get_one(where, call):
    with pytest.raises(hoid.NotAGraphError) as info:
        call(_Model())
    message = str(info.value)
    assert message.startswith(f"{where} takes a hoid.Graph, but was given ") and "_Model" in message
    assert "hoid.from_torch(model, args)" in message
    assert isinstance(info.value, TypeError)


def test_a_path_where_a_graph_is_expected_points_at_load():
    with pytest.raises(hoid.NotAGraphError, match=r"hoid\.load\(path\)"):
        expect_graph("model.hoid", "hoid.run")

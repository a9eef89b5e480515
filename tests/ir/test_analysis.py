"""`hoid.ir.analysis.made_contiguous`: where generated code gives a value its declared contiguous layout."""

import hoid
from hoid.ir.analysis import made_contiguous

from .blocks import attention_block


def test_the_attention_keeps_torchs_layout_and_the_merge_is_made_contiguous():
    graph, attended, merged = attention_block()
    made = made_contiguous(graph.nodes, {v.name for v in graph.outputs})
    assert attended.name not in made and merged.name in made


def test_the_models_own_contiguous_ends_a_path_as_a_contiguous_view_does():
    graph, attended, merged = attention_block(own_contiguous=True)
    made = made_contiguous(graph.nodes, {v.name for v in graph.outputs})
    assert attended.name not in made


def test_a_value_any_op_but_a_view_reads_is_made_contiguous_where_it_is_made():
    for graph, attended, merged in (attention_block(also_added=True), attention_block(returned=True)):
        made = made_contiguous(graph.nodes, {v.name for v in graph.outputs})
        assert attended.name in made and merged.name not in made


def test_an_op_without_a_strided_operand_needs_nothing():
    b = hoid.GraphBuilder("plain")
    x = b.input("x", (4, 4), "f32")
    y = b.reshape(b.exp(x), shape=(16,))
    graph = b.build(y)
    assert made_contiguous(graph.nodes, {y.name}) == set()

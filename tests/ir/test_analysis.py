"""`hoid.ir.analysis.made_contiguous`: where generated code gives a value its declared contiguous layout."""

import torch

import hoid
from hoid.ir.analysis import made_contiguous


def attention_block(*, also_added: bool = False, returned: bool = False, own_contiguous: bool = False):
    """Heads transposed out of [B, T, H, D], attention, transposed back and merged: a BERT layer's middle."""
    b = hoid.GraphBuilder("attention")
    x = b.input("x", (2, 8, 32), "f32")
    w = b.weight("w", (32, 32), "f32", torch.randn(32, 32))
    heads = b.transpose(b.reshape(x, shape=(2, 8, 4, 8)), dim0=1, dim1=2)
    attended = b.sdpa(heads, heads, heads)
    back = b.transpose(attended, dim0=1, dim1=2)
    merged = b.reshape(b.contiguous(back) if own_contiguous else back, shape=(2, 8, 32))  # Whisper's, BERT's
    out = [b.matmul(merged, w)]
    if also_added:
        out.append(b.add(attended, 1.0))
    if returned:
        out.append(attended)
    return b.build(*out), attended, merged


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

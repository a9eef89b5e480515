"""The interpreter: references run in any dtype, inputs are checked, state is functional, kernels run bodies."""

import pytest
import torch

import hoid
from hoid.ir import GraphBuilder


def affine_graph(dtype="f32"):
    b = GraphBuilder("affine")
    x = b.input("x", (2, 3), dtype)
    w = b.weight("w", (3,), dtype)
    return b.build(b.add(b.mul(x, w), 1.0))


def test_matches_torch_and_takes_weights_by_name():
    g = affine_graph()
    x, w = torch.randn(2, 3), torch.randn(3)
    (out,) = hoid.run(g, x, weights={"w": w})
    torch.testing.assert_close(out, x * w + 1.0, rtol=0, atol=0)


def test_missing_weight_is_named():
    with pytest.raises(hoid.InputError, match=r"no tensor for weight\(s\) w"):
        hoid.run(affine_graph(), torch.randn(2, 3))


def test_input_type_mismatch_names_input_and_both_types():
    g = affine_graph()
    with pytest.raises(hoid.InputError, match=r"input %x: declared f32\[2,3\], got a tensor of type f16\[2,3\]"):
        hoid.run(g, torch.randn(2, 3, dtype=torch.float16), weights={"w": torch.randn(3)})
    with pytest.raises(hoid.InputError, match=r"takes 1 inputs \(%x: f32\[2,3\]\), got 2"):
        hoid.run(g, torch.randn(2, 3), torch.randn(2, 3))


def test_state_is_not_modified_and_its_update_is_returned():
    b = GraphBuilder("step")
    cache = b.state("cache", (4,), "f32")
    x = b.input("x", (4,), "f32")
    new = b.add(cache, x)
    g = b.build(new, updates={cache: new})
    c = torch.zeros(4)
    (out,) = hoid.run(g, c, torch.ones(4))
    assert torch.equal(c, torch.zeros(4)) and torch.equal(out, torch.ones(4))


def test_kernel_node_runs_its_body():
    body = affine_graph()
    # the body's weight becomes a plain input of the region
    rb = GraphBuilder("region")
    x, w = rb.input("x", (2, 3), "f32"), rb.input("w", (3,), "f32")
    region = rb.build(rb.add(rb.mul(x, w), 1.0))
    b = GraphBuilder("main")
    x, w = b.input("x", (2, 3), "f32"), b.input("w", (3,), "f32")
    k = b.kernel(x, w, body=region, kernel="test.affine", version="0", params={"BLOCK": 4})
    g = b.build(k)
    xt, wt = torch.randn(2, 3), torch.randn(3)
    assert torch.equal(hoid.run(g, xt, wt)[0], hoid.run(body, xt, weights={"w": wt})[0])
    with pytest.raises(hoid.GraphError, match=r"operand 1 is f32\[4\], body @region expects f32\[3\]"):
        b.kernel(x, b.input("w2", (4,), "f32"), body=region, kernel="test.affine")


def test_runs_in_half_precision_on_any_device():
    g = affine_graph("f16")
    x, w = torch.randn(2, 3, dtype=torch.float16), torch.randn(3, dtype=torch.float16)
    (out,) = hoid.run(g, x, weights={"w": w})
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, x * w + 1.0)


def test_on_node_sees_what_later_nodes_read():
    """The profiler times each node on the tensors `on_node` hands it: they must be the values the graph
    goes on with (a constant moved to the inputs' device, a layout made contiguous), not the raw results;
    on the H200 the raw CPU `arange` met a CUDA operand in the profile."""
    import hoid

    b = hoid.GraphBuilder("g")
    x = b.input("x", (4, 3), "f32")
    t = b.transpose(b.mul(x, 2.0), dim0=0, dim1=1)
    y = b.add(b.exp(t), 1.0)
    g = b.build(y)
    seen = {}
    out = hoid.run(g, torch.randn(4, 3), on_node=lambda node, outs: seen.update({node.outputs[0].name: outs[0]}))
    assert seen[g.outputs[0].name] is out[0]
    assert all(v.is_contiguous() or g.values()[k].type.strides is not None for k, v in seen.items())


def test_each_value_is_freed_after_its_last_reader():
    """A model's intermediates held until the run's end took 50 GB of an H100 for a 3 GB BGE-M3 batch (12-05):
    when a node runs, every value whose last reader ran before it is gone (CPython frees it at once)."""
    import weakref

    b = hoid.GraphBuilder("chain")
    x = b.input("x", (64, 64), "f32")
    h = x
    for _ in range(6):
        h = b.exp(b.mul(h, 0.5))
    g = b.build(h)
    made: dict[str, weakref.ref] = {}
    alive_at: dict[str, set[str]] = {}

    def watch(node, outs):
        alive_at[node.outputs[0].name] = {name for name, ref in made.items() if ref() is not None}
        made.update((v.name, weakref.ref(t)) for v, t in zip(node.outputs, outs, strict=True))

    (out,) = hoid.run(g, torch.randn(64, 64), on_node=watch)
    reads = {v.name: i for i, n in enumerate(g.nodes) for v in n.inputs}
    for i, node in enumerate(g.nodes):
        # alive as this node runs: only what it or a later node reads (its own inputs, made just before)
        assert alive_at[node.outputs[0].name] <= {name for name, last in reads.items() if last >= i}
    assert len(alive_at[g.nodes[-1].outputs[0].name]) == 1  # the last node's input alone

"""The layout rules merge runs of consecutive projections of one input, never every subset of them."""

import torch

import hoid
from hoid.search.rules.layout import LAYOUT
from hoid.search.space import SearchSpace


def _projections(count: int, *, bias_between: bool = False, shared: bool = True):
    """`count` projections x @ w_i^T (of one input, or each of its own); with `bias_between`, each adds a
    1-d bias, whose weight sits between two projections' weights in graph order."""
    gen = torch.Generator().manual_seed(0)
    b = hoid.GraphBuilder("projections")
    x = b.input("x", (1, 2, 8), "f32")
    outs = []
    for i in range(count):
        src = x if shared else b.input(f"x{i}", (1, 2, 8), "f32")
        w = b.weight(f"w{i}", (4, 8), "f32", torch.randn(4, 8, generator=gen))
        y = b.matmul(src, b.transpose(w, dim0=0, dim1=1))
        outs.append(b.add(y, b.weight(f"b{i}", (4,), "f32", torch.randn(4, generator=gen))) if bias_between else y)
    return b.build(*outs)


def test_n_projections_of_one_input_merge_in_runs_not_subsets():
    for n in (2, 3, 6):
        report = SearchSpace(_projections(n)).saturate([LAYOUT])
        # each run of at least two consecutive weights is built once, by one match: n(n-1)/2, not 2^n - n - 1
        assert report.stop_reason == "saturated" and report.matches["merge-projections"] == n * (n - 1) // 2


def test_biases_between_projections_do_not_keep_them_apart():
    report = SearchSpace(_projections(3, bias_between=True)).saturate([LAYOUT])
    assert report.matches["merge-projections"] == 3  # {0,1}, {1,2}, {0,1,2}, as without the biases


def test_projections_of_different_inputs_never_merge():
    report = SearchSpace(_projections(3, shared=False)).saturate([LAYOUT])
    assert report.matches.get("merge-projections", 0) == 0


def test_a_merged_graph_extracts_one_launch_for_the_run():
    from hoid.search import rewrite

    graph = _projections(3)
    out = rewrite(graph)
    assert [n.op for n in out.nodes].count("matmul") == 1  # the concat of the weights folds at bind time
    x = torch.randn(1, 2, 8)
    want, got = hoid.run(graph, x), hoid.run(out, x)
    for w, g in zip(want, got, strict=True):
        assert (w - g).abs().max() < 1e-5

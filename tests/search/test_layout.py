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



def _chunked(sizes: tuple[int, ...], dim: int):
    """x @ w^T cut into `sizes` along `dim`, each piece read by an elementwise op: GEGLU's chunk with two."""
    gen = torch.Generator().manual_seed(0)
    b = hoid.GraphBuilder("chunked")
    x = b.input("x", (2, 3, 8), "f32")
    h = b.matmul(x, b.transpose(b.weight("w", (sum(sizes), 8), "f32", torch.randn(sum(sizes), 8, generator=gen)),
                                dim0=0, dim1=1))
    if dim != -1:
        h = b.transpose(h, dim0=1, dim1=2)
    pieces = b.split(h, sizes=sizes, dim=dim)
    if len(sizes) == 2 and sizes[0] == sizes[1]:
        return b.build(b.mul(pieces[0], b.gelu(pieces[1])))
    return b.build(*(b.gelu(p) for p in pieces))


def test_a_split_read_only_by_elementwise_ops_extracts_as_views():
    """The split copies its input whole, the slices move nothing: the rules' rewrite keeps the views, with
    the split's values (no library kernels: `triton.geglu_merged` would take the first graph whole)."""
    from hoid.kernels import KernelSet
    from hoid.search import rewrite

    for sizes, dim in (((6, 6), -1), ((4, 3, 2), -1), ((5, 7), 1), ((1, 2), 1)):
        graph = _chunked(sizes, dim)
        out = rewrite(graph, kernels=KernelSet.empty())
        ops = [n.op for n in out.nodes]
        assert "split" not in ops and ops.count("slice") == len(sizes), (sizes, ops)
        x = torch.randn(2, 3, 8)
        for want, got in zip(hoid.run(graph, x), hoid.run(out, x), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)  # the GEMM may take another path

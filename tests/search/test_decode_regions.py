"""The decode regions issue 11 found unreached: the fused attention prelude (b), linear + residual written
residual first (c), grouped-query attention over expanded caches (d). Each test fails without its fix."""


from hoid.ir import GraphBuilder
from hoid.kernels import KernelSet, get
from hoid.search import SearchSpace, apply_library, default_rulesets


def _library(graph, *kernel_ids):
    space = SearchSpace(graph)
    space.saturate(default_rulesets())
    return space, apply_library(space, KernelSet([get(k) for k in kernel_ids]))


def test_residual_plus_linear_gets_the_linear_add_kernel():
    b = GraphBuilder("residual")
    residual, x = b.input("residual", (1, 1, 64), "bf16"), b.input("x", (1, 1, 128), "bf16")
    w = b.weight("w", (64, 128), "bf16")
    graph = b.build(b.add(residual, b.matmul(x, b.transpose(w, dim0=0, dim1=1))))  # as the model adds it
    _, report = _library(graph, "triton.linear_add")
    assert report.injected.get("triton.linear_add") == 1, report.skipped

"""`benchmarks/forward_loop.py`'s pieces that need no model: what the forward workloads print, and (on a GPU)
what a row's peak memory counts."""

import pytest
import torch
from forward_loop import SharedPlan, forward_row, launched_lines  # benchmarks/ is on the path (conftest.py)


def test_the_best_stock_rows_and_hoids_kernels_are_listed_slowest_first():
    def kernel(name, n, seconds):
        return {"kernel": name, "launches": n, "seconds": seconds}

    rows = [{"key": "eager", "launched": [kernel("sm90_gemm", 144, 9e-3)]},
            {"key": "compile-max-autotune",
             "launched": [kernel("sm90_gemm", 144, 9e-3), kernel("triton_red", 48, 1e-3)]},
            {"key": "hoid", "launched": [kernel("sm90_gemm", 144, 9e-3), kernel("direct_copy", 48, 8e-4),
                                         kernel("layer_norm", 49, 7e-4)]}]
    lines = launched_lines(rows, {"key": "compile-max-autotune", "latency_s": 0.02}, limit=2)
    assert lines[0] == "compile-max-autotune: 192 launches, 10.00 ms of kernels (its 2 slowest kinds); the slowest:"
    assert lines[3].startswith("hoid: 241 launches, 10.50 ms") and len(lines) == 6
    assert lines[5] == "  x48      0.800 ms  direct_copy"
    assert launched_lines([{"key": "hoid"}], None) == []  # on the CPU no row records its kernels


def test_a_plan_that_failed_is_not_made_again_by_the_next_row():
    """The hoid and hoid-export rows share one plan: where its making raised (in the first row), the second
    fails at once naming that failure, rather than spending a GPU call's minutes on the same optimize."""
    calls = []

    def make_graph():
        calls.append(1)
        raise ValueError("the import found an op it lacks")

    plan = SharedPlan(make_graph, torch.device("cpu"), None)
    with pytest.raises(ValueError, match="lacks"):
        plan.get()
    with pytest.raises(RuntimeError, match="failed in an earlier row \\(ValueError: the import found an op"):
        plan.get()
    assert len(calls) == 1


@pytest.mark.gpu
def test_a_rows_peak_is_what_running_it_needs_not_what_building_it_took():
    """BGE-M3's hoid row said 33.4 GiB (H100, 12-05): its 4-minute optimize's, not its step's. Running the row
    holds cuBLAS's workspace, which torch takes from its caching allocator at the first matmul (32 MiB on
    Hopper: the H100 gave a peak of 33.4 MiB here, 12-06), so the bound is far below the build's 512 MiB but
    above that workspace."""
    device = torch.device("cuda")

    def build():
        scratch = torch.empty(512 * 2**20, dtype=torch.uint8, device=device)  # a plan's finalists, say
        del scratch
        weight = torch.randn(256, 256, device=device)
        return (lambda x: x @ weight), {}

    row, _ = forward_row("r", "a row", "stock", build, (torch.randn(64, 256, device=device),), device, repeat=3)
    assert row["status"] == "ok", row.get("reason")
    assert row["build_peak_bytes"] >= 512 * 2**20 > 128 * 2**20 > row["peak_bytes"] > 256 * 256 * 4

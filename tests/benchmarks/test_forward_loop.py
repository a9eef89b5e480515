"""`benchmarks/forward_loop.py`'s pieces that need no model: what the forward workloads print."""

from forward_loop import launched_lines  # benchmarks/ is on the path (conftest.py)


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

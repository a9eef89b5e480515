"""The analytic roofline for known shapes, and its scaling by a kernel's cached efficiency."""

import pytest

from hoid.ir import GraphBuilder, TensorType
from hoid.kernels import get
from hoid.measure.cache import MeasureCache, MeasureKey
from hoid.measure.devices import H200
from hoid.measure.roofline import kernel_time, memory_floor, node_time, op_time, region_floor, region_work
from hoid.measure.timing import Timing


def test_decode_gemv_is_memory_bound_at_the_copy_bandwidth():
    x, w, y = TensorType((1, 2048), "bf16"), TensorType((2048, 2048), "bf16"), TensorType((1, 2048), "bf16")
    nbytes = 2 * (2048 + 2048 * 2048 + 2048)
    t = op_time("matmul", [x, w], [y], {}, H200, in_graph=True)
    assert t == pytest.approx(nbytes / 4.24e12 + H200.graph_launch_overhead)
    assert memory_floor(nbytes, H200) == pytest.approx(nbytes / 4.24e12)


def test_large_bf16_matmul_is_compute_bound_at_the_measured_rate():
    a = TensorType((8192, 8192), "bf16")
    t = op_time("matmul", [a, a], [a], {}, H200, in_graph=False)
    assert t == pytest.approx(2 * 8192**3 / 790e12 + H200.launch_overhead)


def test_fused_region_counts_only_its_inputs_and_outputs():
    spec = get("torch.silu_mul")
    region = spec.pattern.graph([TensorType((4, 1024), "bf16")] * 2, {})
    flops, nbytes = region_work(region)
    assert nbytes == 3 * 4 * 1024 * 2  # gate, up read; out written: silu's result never leaves the chip
    assert flops == (5 + 1) * 4 * 1024
    assert region_floor(region, H200) == pytest.approx(nbytes / 4.24e12)


def test_kernel_time_and_kernel_nodes_scale_by_cached_efficiency(tmp_path):
    spec = get("torch.rmsnorm")
    types = [TensorType((8, 4096), "bf16"), TensorType((4096,), "bf16")]
    attrs = {"eps": 1e-6}
    floor = region_floor(spec.pattern.graph(types, attrs), H200)
    launch = H200.graph_launch_overhead
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        assert kernel_time(spec, types, attrs, H200, cache=cache) == pytest.approx(floor + launch)
        cache.put(MeasureKey.of(H200.name, spec.id, spec.version, {}, types, attrs), Timing.of(4 * floor),
                  floor=floor)
        assert kernel_time(spec, types, attrs, H200, cache=cache) == pytest.approx(4 * floor + launch)

        b = GraphBuilder("g")
        x, w = b.input("x", (8, 4096), "bf16"), b.input("w", (4096,), "bf16")
        y = b.op("kernel", x, w, body=spec.pattern.graph(types, attrs), kernel=spec.id, version=spec.version)
        node = b.build(y).nodes[0]
        assert node_time(node, H200, cache=cache) == pytest.approx(4 * floor + launch)
        assert node_time(node, H200) == pytest.approx(floor + launch)


def test_an_in_place_cache_append_costs_the_rows_it_writes_not_the_cache():
    spec = get("triton.rope_cache")

    def work(S: int) -> int:
        act = [TensorType((1, 1, h, 128), "bf16") for h in (32, 8, 8)]
        tables = [TensorType((1, 1, 128), "bf16")] * 2
        caches = [TensorType((1, 8, S, 128), "bf16")] * 2
        return region_work(spec.pattern.graph(act + tables + caches + [TensorType((1,), "i64")], {}))[1]

    assert spec.aliases  # it is priced as it runs: in the caches' own buffers
    assert work(32768) == work(1024)  # the same step, whatever the cache length
    types = [TensorType((1, 1, h, 128), "bf16") for h in (32, 8, 8)] + [TensorType((1, 1, 128), "bf16")] * 2 + [
        TensorType((1, 8, 32768, 128), "bf16")] * 2 + [TensorType((1,), "i64")]
    assert kernel_time(spec, types, {}, H200) < 1e-6 + H200.graph_launch_overhead  # not 134 MB of cache traffic

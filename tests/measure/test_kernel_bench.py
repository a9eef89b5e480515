import dataclasses

import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels import get
from hoid.measure import kernel_bench
from hoid.measure.cache import MeasureCache
from hoid.measure.cpu import calibrate_cpu
from hoid.measure.devices import H100
from hoid.measure.kernel_bench import measure_kernel
from hoid.measure.roofline import region_floor
from hoid.measure.timing import Timing

FAST = {"min_runs": 3, "min_seconds": 0.01}
TYPES = [TensorType((64, 256), "f32"), TensorType((256,), "f32")]


def test_measure_then_read_back_from_the_cache(tmp_path):
    spec = get("torch.rmsnorm")
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        first = measure_kernel(spec, TYPES, {"eps": 1e-6}, device=calibrate_cpu(), cache=cache, **FAST)
        assert not first.cached and first.timing.method == "cpu-wall" and first.median > 0
        assert first.sanity is None  # no roofline gate on the CPU: its caches beat DRAM bandwidth
        region = spec.pattern.graph(TYPES, {"eps": 1e-6})
        assert first.floor == pytest.approx(region_floor(region, calibrate_cpu()))
        again = measure_kernel(spec, TYPES, {"eps": 1e-6}, device=calibrate_cpu(), cache=cache)
        assert again.cached and again.median == first.median and again.key == first.key
        fresh = measure_kernel(spec, TYPES, {"eps": 1e-6}, device=calibrate_cpu(), cache=cache, refresh=True,
                               **FAST)
        assert not fresh.cached
        assert cache.efficiency(calibrate_cpu().name, spec.id, spec.version) is not None


def test_a_kernel_that_does_not_apply_is_refused_with_its_reason():
    with pytest.raises(ValueError, match="does not apply.*f32, f16 or bf16"):
        measure_kernel(get("torch.matmul"), [TensorType((2, 3), "i64"), TensorType((3, 2), "i64")], {})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_decode_rmsnorm_on_the_gpu_passes_the_roofline_gate(tmp_path):
    types = [TensorType((1, 4096), "bf16"), TensorType((4096,), "bf16")]
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        m = measure_kernel(get("torch.rmsnorm"), types, {"eps": 1e-6}, cache=cache)
        print(f"torch.rmsnorm decode: {m.timing}, floor {m.floor * 1e6:.2f} µs")
        assert m.sanity is not None and not m.suspect and m.median >= m.floor
        assert m.timing.method == "cuda-graph" and cache.get(m.key) is not None


def test_an_in_place_kernel_is_timed_writing_into_its_input_not_copying_it():
    # The library's RoPE + cache append: its cache outputs alias its cache inputs (KernelSpec.aliases).
    spec = get("triton.rope_cache")
    B, HKV, S, D = 1, 2, 4096, 64  # a cache of 2 MiB each for k and v, a 1-token step
    types = [TensorType((B, 1, h, D), "f32") for h in (2 * HKV, HKV, HKV)] + [TensorType((B, 1, D), "f32")] * 2 + [
        TensorType((B, HKV, S, D), "f32")] * 2 + [TensorType((1,), "i64")]
    given = []

    def launch(*tensors, **kwargs):
        given.append([t.data_ptr() for t in tensors])
        spec.launch(*tensors, **kwargs)

    m = measure_kernel(dataclasses.replace(spec, launch=launch), types, {}, device=calibrate_cpu(), **FAST)
    assert m.median > 0 and given
    # Every call writes k_cache_out and v_cache_out into k_cache and v_cache themselves: the launch copies a
    # cache only into a buffer that is not the cache, so no copy of the cache is in the time.
    for ptrs in given:
        assert ptrs[9:] == ptrs[5:7]
    # The floor counts the rows a step writes, not the caches read and written again.
    cpu = calibrate_cpu()
    assert m.floor == pytest.approx(region_floor(spec.pattern.graph(types, {}), cpu))
    assert m.floor < types[5].nbytes / cpu.copy_bandwidth / 10  # far less than one copy of one cache


def test_a_kernel_that_skips_what_its_region_discards_is_judged_by_its_own_work(monkeypatch, tmp_path):
    """The grouped MoE kernel runs only the selected pairs: on an H100, 0.86 ms for a 1024-token prompt is
    below the dense region's compute floor (1.24 TFLOP) but above its own work's (77 GFLOP), so the time
    is kept (12-07: --tune refused it against the region's); a time below its own floor is still suspect."""
    spec = get("triton.moe_experts_grouped")
    types = [TensorType((1024, 2048), "bf16"), TensorType((1024, 8), "i64"), TensorType((1024, 8), "bf16"),
             TensorType((128, 1536, 2048), "bf16"), TensorType((128, 2048, 768), "bf16")]
    seconds = []
    monkeypatch.setattr(kernel_bench, "random_inputs",  # 1.2 GB of experts: shapes only, nothing is launched
                        lambda types, **_: [torch.empty(t.shape, dtype=t.torch_dtype, device="meta") for t in types])
    monkeypatch.setattr(kernel_bench, "time_on", lambda *a, **k: Timing((seconds[-1],) * 3, "given"))
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        seconds.append(862e-6)
        kept = measure_kernel(spec, types, {}, device=H100, cache=cache)
        assert not kept.suspect and cache.get(kept.key) is not None
        assert kept.floor > kept.median  # the price's floor is the region's: an efficiency above 1, as measured
        seconds.append(20e-6)  # under 77 GFLOP's ~80 us at the H100's bf16 rate
        low = measure_kernel(spec, types, {}, device=H100, cache=cache, refresh=True)
        assert low.suspect and "compute floor" in low.sanity.reason

import dataclasses

import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels import get
from hoid.measure.cache import MeasureCache
from hoid.measure.cpu import calibrate_cpu
from hoid.measure.kernel_bench import measure_kernel
from hoid.measure.roofline import region_floor

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

"""Measure one kernel at one signature, through the cache and the roofline gate.

`measure_kernel(spec, types, attrs, params)` draws random inputs of `types`, allocates the outputs (the
kernel contract is destination-passing) except the in-place ones (`KernelSpec.aliases`: those get their
input's buffer, so a cache append is timed appending, not copying the cache), times the launch with this
machine's timer, and checks the time against the roofline: a GPU time below the memory or compute floor
is *suspect*, returned with its reason and never cached, so it can never become a cost. Good measurements
go to the cache with their analytic floor, from which the roofline learns the kernel's efficiency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..ir import TensorType
from .cache import MeasureCache, MeasureKey
from .devices import Device
from .inputs import random_inputs
from .local import local_device, tensor_device, time_on
from .roofline import region_floor, region_work
from .sanity import SanityVerdict, check_time
from .timing import Timing


@dataclass(frozen=True)
class KernelMeasurement:
    """median, spread: seconds; timing: the samples when measured now (None when read from the cache);
    floor: the analytic floor; sanity: the roofline verdict (None on the CPU, where caches make DRAM
    bandwidth no floor)."""

    key: MeasureKey
    median: float
    spread: float
    floor: float
    timing: Timing | None
    sanity: SanityVerdict | None

    @property
    def cached(self) -> bool:
        return self.timing is None

    @property
    def suspect(self) -> bool:
        return self.sanity is not None and self.sanity.suspect


def measure_kernel(spec, types: Sequence[TensorType], attrs: dict, params: dict | None = None, *,
                   device: Device | None = None, cache: MeasureCache | None = None, refresh: bool = False,
                   **timer_options) -> KernelMeasurement:
    """Time kernel `spec` (a `hoid.kernels.KernelSpec`) at input `types` and `attrs` with `params`
    (completed with defaults) on `device` (default: this machine's GPU, else its CPU). A cached
    measurement is returned unless `refresh`; `timer_options` go to the timer (`repeat`, `rotate`, ... on
    a GPU). `attrs` are the pattern's, complete (defaults filled in), as the launch receives them."""
    from ..kernels.launch import bind_spec

    call = bind_spec(spec, types, attrs, params)  # refuses types its constraints reject
    params = spec.check_params(params or {})
    device = device or local_device()
    key = MeasureKey.of(device.name, spec.id, spec.version, params, types, attrs)
    region = spec.pattern.graph(types, attrs)
    floor = region_floor(region, device)  # in place: the bytes it writes, not a cache copy
    if cache is not None and not refresh and (hit := cache.get(key)) is not None:
        return KernelMeasurement(key, hit.median, hit.spread, floor, None, None)
    where = tensor_device(device)
    bounds = spec.index_bounds(types, attrs) if spec.index_bounds else {}
    inputs = random_inputs(types, device=where, index_bounds=bounds)
    # an aliased output is its input's buffer, so no copy of a cache is timed
    timing = time_on(device, call.launch_flat, call.flat(inputs), **timer_options)
    sanity = None
    if device.arch != "cpu":
        # a kernel that skips what its region computes and discards (KernelSpec.work) is judged by what it needs
        flops, nbytes = spec.work(types, attrs) if spec.work is not None else region_work(region)
        sanity = check_time(timing, nbytes=nbytes, flops=flops, dtype=types[0].dtype, device=device)
    if cache is not None and not (sanity and sanity.suspect):
        cache.put(key, timing, floor=floor)
    return KernelMeasurement(key, timing.median, timing.spread, floor, timing, sanity)

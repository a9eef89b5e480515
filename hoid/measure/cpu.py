"""The CPU timer, and `calibrate_cpu()`: this machine's figures for the device table.

On the CPU there are no events: a run is timed with the wall clock (`perf_counter`). Runs shorter than
the clock can resolve well are batched (`number` calls per sample, chosen like `timeit`'s autorange), and
samples are taken until both `min_runs` and `min_seconds` are reached.

HOID_CPU_TIMER changes the defaults of the warm-up, `min_runs` and `min_seconds`, e.g.
`warmup=1,min_runs=3,min_seconds=0.01` (the test suite's: under Triton's interpreter one kernel call
costs tenths of a second, and the default's 7 calls per param set were most of a CPU optimize there).
"""

from __future__ import annotations

import functools
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch

from .devices import CPU, Device
from .timing import Timing

_SAMPLE_SECONDS = 2e-4  # each sample lasts at least this long, so perf_counter's resolution is noise-free
_DEFAULTS = {"warmup": 2, "min_runs": 5, "min_seconds": 0.05}


def timer_defaults() -> dict:
    """The CPU timer's defaults: `_DEFAULTS` with what HOID_CPU_TIMER ("name=value,...") sets."""
    out = dict(_DEFAULTS)
    for part in filter(None, (p.strip() for p in os.environ.get("HOID_CPU_TIMER", "").split(","))):
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in out or not value.strip():
            raise ValueError(f"HOID_CPU_TIMER: {part!r} is not one of {', '.join(f'{k}=N' for k in out)}")
        out[name] = type(out[name])(value)
    return out


def time_cpu(fn: Callable[..., object], args: Sequence = (), *, warmup: int | None = None,
             min_runs: int | None = None, min_seconds: float | None = None, max_runs: int = 1000) -> Timing:
    """Seconds per call of `fn(*args)` on the CPU: the samples of `min_runs` or more batches (defaults:
    `timer_defaults()`)."""
    defaults = timer_defaults()
    warmup = defaults["warmup"] if warmup is None else warmup
    min_runs = defaults["min_runs"] if min_runs is None else min_runs
    min_seconds = defaults["min_seconds"] if min_seconds is None else min_seconds
    for _ in range(warmup):
        fn(*args)
    number = 1
    while True:  # grow the batch until one sample is long enough to time
        start = time.perf_counter()
        for _ in range(number):
            fn(*args)
        elapsed = time.perf_counter() - start
        if elapsed >= _SAMPLE_SECONDS or number >= 1 << 16:
            break
        number *= 4
    samples = [elapsed / number]
    total = elapsed
    while len(samples) < max_runs and (len(samples) < min_runs or total < min_seconds):
        start = time.perf_counter()
        for _ in range(number):
            fn(*args)
        elapsed = time.perf_counter() - start
        samples.append(elapsed / number)
        total += elapsed
    note = f"{number} calls per sample" if number > 1 else ""
    return Timing(tuple(samples), "cpu-wall", note=note)


def cpu_name() -> str:
    """The processor's model name, so that caches from different CPUs never mix."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def calibrate_cpu(*, nbytes: int = 64 * 2**20, matmul_size: int = 256) -> Device:
    """Measure this CPU (about a second): copy and read bandwidth, matmul rate per float dtype, the cost
    of one small torch call. Returns the table's CPU entry with the measured figures; cached per process."""
    src = torch.randn(nbytes // 4)
    dst = torch.empty_like(src)
    copy = time_cpu(lambda: dst.copy_(src), min_runs=5).median
    read = time_cpu(lambda: src.sum(), min_runs=5).median
    flops = {}
    for name, dtype in (("f32", torch.float32), ("f64", torch.float64), ("bf16", torch.bfloat16),
                        ("f16", torch.float16)):
        a = torch.randn(matmul_size, matmul_size).to(dtype)
        b = torch.randn(matmul_size, matmul_size).to(dtype)
        flops[name] = 2 * matmul_size**3 / time_cpu(lambda a=a, b=b: a @ b, min_runs=3).median
    one = torch.randn(1)
    launch = time_cpu(lambda: torch.add(one, one), min_runs=5).median
    device = CPU.with_measurements(copy_bandwidth=2 * src.nbytes / copy, read_bandwidth=src.nbytes / read,
                                   peak_flops=flops, launch_overhead=launch, graph_launch_overhead=launch)
    return replace(device, name=f"cpu ({cpu_name()})")

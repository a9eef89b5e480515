"""Where measurements happen: the device this process runs on, and the timer that goes with it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .cpu import calibrate_cpu, time_cpu
from .cuda import time_cuda
from .devices import Device, get_device
from .timing import Timing


def has_cuda() -> bool:
    return torch.cuda.is_available()


def local_device() -> Device:
    """The table entry of the current GPU, or this CPU (measured by `calibrate_cpu`) where there is none."""
    if not has_cuda():
        return calibrate_cpu()
    name = torch.cuda.get_device_name(torch.cuda.current_device())
    try:
        return get_device(name)
    except KeyError:
        raise KeyError(f"GPU {name!r} is not in the device table (hoid.measure.devices): add an entry "
                       "with its bandwidth, flops and L2 (benchmarks/measure_calibration.py measures them)"
                       ) from None


def tensor_device() -> str:
    """Where measured tensors live: "cuda" when a GPU is present, else "cpu"."""
    return "cuda" if has_cuda() else "cpu"


def time_local(fn: Callable[..., object], args: Sequence = (), **options) -> Timing:
    """Time `fn(*args)` with the timer of this machine: the CUDA timer on a GPU, the CPU timer otherwise.
    `options` go to that timer (`rotate`, `repeat`... for CUDA; `min_runs`, `min_seconds`... for CPU)."""
    return time_cuda(fn, args, **options) if has_cuda() else time_cpu(fn, args, **options)

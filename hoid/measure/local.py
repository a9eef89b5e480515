"""Where measurements happen: the device this process runs on, and the timer and tensors that go with it.

A `Device` of arch "cpu" is timed with the wall clock on CPU tensors; any other with the CUDA timer on
the current GPU (asking for a GPU device's timer where there is none raises, naming the alternative).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..errors import UnknownDeviceError
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
    except UnknownDeviceError:
        raise UnknownDeviceError(f"GPU {name!r} is not in the device table (hoid.measure.devices): register a "
                                 "row with its bandwidth, flops and L2 (hoid.measure.register_device; "
                                 "benchmarks/measure_calibration.py measures them)") from None


def tensor_device(device: Device) -> str:
    """Where tensors measured on `device` live: "cpu" for the CPU, else "cuda"."""
    return "cpu" if device.arch == "cpu" else "cuda"


def time_on(device: Device, fn: Callable[..., object], args: Sequence = (), **options) -> Timing:
    """Time `fn(*args)` with `device`'s timer: the wall clock for the CPU, the CUDA timer otherwise.
    `options` go to that timer (`rotate`, `repeat`... for CUDA; `min_runs`, `min_seconds`... for CPU)."""
    if device.arch == "cpu":
        return time_cpu(fn, args, **options)
    return time_cuda(fn, args, **options)

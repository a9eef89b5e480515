"""The roofline sanity gate: a time below what the hardware allows is suspect, never a win.

No kernel moves `nbytes` through device memory faster than the best measured bandwidth, nor does `flops`
faster than the peak rate of its dtype. A measured time under either floor means the measurement is
wrong: the inputs were served from L2 (rotate them through copies larger than the cache), the kernel
skipped work, or it wrote nothing. `tolerance` leaves room for the floors themselves being measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from .devices import Device
from .timing import Timing, format_seconds


@dataclass(frozen=True)
class SanityVerdict:
    """suspect: the time is below a floor; memory_floor, compute_floor: seconds; reason: in words."""

    suspect: bool
    seconds: float
    memory_floor: float
    compute_floor: float
    reason: str

    @property
    def floor(self) -> float:
        return max(self.memory_floor, self.compute_floor)


def best_bandwidth(device: Device) -> float:
    """The fastest any kernel can stream device memory: the higher of the copy and read-only rates."""
    return max(device.copy_bandwidth, device.read_bandwidth)


def check_time(seconds: float | Timing, *, nbytes: int, device: Device, flops: int = 0, dtype: str = "f32",
               tolerance: float = 0.05) -> SanityVerdict:
    """Flag `seconds` (or a Timing's median) if it beats the memory or the compute floor by more than
    `tolerance` (a fraction)."""
    if isinstance(seconds, Timing):
        seconds = seconds.median
    memory = nbytes / best_bandwidth(device)
    compute = flops / device.flops_for(dtype) if flops else 0.0
    limit = (1 - tolerance) * max(memory, compute)
    if seconds >= limit:
        return SanityVerdict(False, seconds, memory, compute, "at or above the roofline floors")
    if memory >= compute:
        why = (f"{format_seconds(seconds)} is below the memory floor of {format_seconds(memory)} "
               f"({nbytes / 1e6:.3g} MB at {best_bandwidth(device) / 1e12:.3g} TB/s on {device.name}): "
               "the inputs were likely read from L2 (rotate them through copies totalling 4x the L2) "
               "or the kernel skipped work")
    else:
        why = (f"{format_seconds(seconds)} is below the compute floor of {format_seconds(compute)} "
               f"({flops / 1e9:.3g} GFLOP at {device.flops_for(dtype) / 1e12:.3g} TFLOP/s {dtype}): "
               "the kernel cannot have done all of its arithmetic")
    return SanityVerdict(True, seconds, memory, compute, why)

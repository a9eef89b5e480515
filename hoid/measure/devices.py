"""The one device table: bandwidth, peak flops per dtype, launch cost, L2.

Every figure says where it comes from. H200 entries are measured on the H200 we are lent
(`benchmarks/measure_calibration.py` re-measures them); the H100's on the H100 it lends in the H200's place
(one run); B200 entries are datasheet figures until someone measures one; the CPU entry is a rough
default that `calibrate_cpu()` replaces with a short measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import UnknownDeviceError


@dataclass(frozen=True)
class Device:
    name: str
    arch: str  # "sm_90", "sm_100", "cpu"
    copy_bandwidth: float  # bytes/s, read + write of a large device-to-device copy
    read_bandwidth: float  # bytes/s, read-only streaming
    peak_flops: dict[str, float]  # dtype name -> flop/s (dense, matrix units where the dtype uses them)
    launch_overhead: float  # s per kernel launched from the host
    graph_launch_overhead: float  # s per kernel replayed inside a CUDA graph
    l2_bytes: int
    multiprocessors: int = 1  # what kernels' parameter heuristics fill (split-K, split attention)
    sources: dict[str, str] = field(default_factory=dict)

    def flops_for(self, dtype: str) -> float:
        return self.peak_flops.get(dtype) or self.peak_flops["f32"]

    def target(self):
        """What `hoid.kernels` resolves "auto" params for (`hoid.kernels.Target`)."""
        from ..kernels.spec import Target

        return Target(self.arch, self.multiprocessors)

    def with_measurements(self, **figures) -> Device:
        """A copy with measured figures replaced (`sources` records where each came from)."""
        sources = dict(self.sources)
        for key in figures:
            sources[key] = "measured"
        return replace(self, sources=sources, **figures)


H200 = Device(
    name="NVIDIA H200",
    arch="sm_90",
    copy_bandwidth=4.24e12,
    # torch.sum over 4 GiB read 4.39 and 4.46 TB/s in two runs (2026-11-30): the higher one, since the
    # roofline gate takes the best bandwidth as the floor no honest kernel beats.
    read_bandwidth=4.46e12,
    # bf16/f16 on tensor cores measured ~790 TFLOP/s (8192^3, random data); f32 without tf32 is the SIMT rate.
    peak_flops={"bf16": 790e12, "f16": 790e12, "f32": 67e12, "f64": 34e12},
    # One-element kernels back to back: from Python through torch 6.4 and 9.5 µs each in two runs (host-
    # bound, so it varies), replayed in a CUDA graph 0.85-0.88 µs each (benchmarks/results/
    # measure_calibration.json, 2026-11-30).
    launch_overhead=8.0e-6,
    graph_launch_overhead=0.85e-6,
    l2_bytes=60 * 2**20,
    multiprocessors=132,
    sources={"copy_bandwidth": "measured here 2026-11", "read_bandwidth": "measured here 2026-11-30",
             "peak_flops.bf16": "measured here 2026-11", "peak_flops.f32": "datasheet",
             "launch_overhead": "measured here 2026-11-30", "graph_launch_overhead": "measured here 2026-11-30",
             "l2_bytes": "torch properties"},
)

# The H100 SXM (80 GB HBM3) the device tool lends when no H200 comes (its GPU tests need a row here).
# Measured on one 2026-12-05 (benchmarks/results/h100/measure_calibration.json, one run); f32/f64 datasheet.
H100 = Device(
    name="NVIDIA H100 80GB HBM3",
    arch="sm_90",
    copy_bandwidth=3.03e12,
    read_bandwidth=3.11e12,
    peak_flops={"bf16": 803e12, "f16": 803e12, "f32": 67e12, "f64": 34e12},
    launch_overhead=12.1e-6,
    graph_launch_overhead=0.99e-6,
    l2_bytes=50 * 2**20,
    multiprocessors=132,
    sources={"copy_bandwidth": "measured 2026-12-05", "read_bandwidth": "measured 2026-12-05",
             "peak_flops.bf16": "measured 2026-12-05", "peak_flops.f32": "datasheet",
             "launch_overhead": "measured 2026-12-05", "graph_launch_overhead": "measured 2026-12-05",
             "l2_bytes": "torch properties"},
)

B200 = Device(
    name="NVIDIA B200",
    arch="sm_100",
    copy_bandwidth=8.0e12,
    read_bandwidth=8.0e12,
    peak_flops={"bf16": 2250e12, "f16": 2250e12, "f32": 80e12, "f64": 40e12},
    launch_overhead=4.0e-6,
    graph_launch_overhead=1.2e-6,
    l2_bytes=126 * 2**20,
    multiprocessors=148,
    sources={"*": "datasheet (dense), not measured"},
)

CPU = Device(
    name="cpu",
    arch="cpu",
    copy_bandwidth=10e9,
    read_bandwidth=10e9,
    peak_flops={"f32": 50e9, "f64": 25e9, "bf16": 10e9, "f16": 10e9},
    launch_overhead=5e-6,
    graph_launch_overhead=5e-6,
    l2_bytes=2 * 2**20,
    multiprocessors=4,  # the interpreter's stand-in (library/_triton_compile.py:num_sms): grids need only be valid
    sources={"*": "default; calibrate_cpu() measures this machine"},
)

DEVICES: dict[str, Device] = {"h200": H200, "h100": H100, "b200": B200, "cpu": CPU}


def _key(name: str) -> str:
    """A name as the table looks it up: lowercased, without "NVIDIA " ("NVIDIA H200" and "h200" alike)."""
    return name.lower().replace("nvidia ", "").strip()


def register_device(device: Device, key: str | None = None) -> Device:
    """Add `device` to the table (or replace the row of its key): a GPU hoid has no row for, with the figures
    `benchmarks/measure_calibration.py` measures on it, e.g. `register_device(Device(name="NVIDIA A100-SXM4-80GB",
    arch="sm_80", copy_bandwidth=..., ...))`; `key` defaults to its name without "NVIDIA ", lowercased."""
    DEVICES[key or _key(device.name)] = device
    return device


def get_device(name: str) -> Device:
    """The device table's row for `name`: a key ("h200", "h100", "b200", "cpu") or a row's full name, as torch
    names the GPU ("NVIDIA H200", "NVIDIA H100 80GB HBM3"); `UnknownDeviceError` (a `KeyError`) lists the
    known."""
    key = _key(name)
    found = DEVICES.get(key) or next((d for d in DEVICES.values() if _key(d.name) == key), None)
    if found is None:
        raise UnknownDeviceError(f"no device {name!r} in the table; known: {', '.join(DEVICES)} "
                                 "(hoid.measure.register_device adds one)")
    return found

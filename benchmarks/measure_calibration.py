"""Measure the device table's figures on the GPU at hand; write them as JSON.

    PYTHONPATH=. python3 benchmarks/measure_calibration.py --out benchmarks/results

Measures, with hoid's own CUDA timer (events; rotation where the data would fit in L2):

- copy bandwidth: a large device-to-device copy, bytes read plus bytes written, at two sizes;
- read bandwidth: a read-only reduction (`torch.sum`) over a large tensor;
- bf16 matmul rate: square products on random data (never zeros: they run faster than real data);
- launch cost outside a CUDA graph: back-to-back launches of a one-element kernel from Python, per launch;
- launch cost inside a CUDA graph: the same kernels captured in one graph and replayed, per kernel;
- for the record, a 2048x2048 bf16 GEMV with and without rotation, against its memory floor.

The JSON holds the device, the versions, the date, and under `device_table` the figures in the units of
`hoid.measure.devices.Device`, to paste into the table's H200 entry.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import torch

from hoid.measure.cuda import l2_bytes, time_cuda
from hoid.measure.devices import H200
from hoid.measure.sanity import check_time

GiB = 2**30


def copy_bandwidth(nbytes: int) -> dict:
    src = torch.randn(nbytes // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    t = time_cuda(lambda s, d: d.copy_(s), [src, dst], repeat=30)
    return {"bytes": nbytes, "seconds": t.median, "spread": t.relative_spread, "bandwidth": 2 * nbytes / t.median}


def read_bandwidth(nbytes: int) -> dict:
    x = torch.randn(nbytes // 4, device="cuda")
    out = torch.empty((), device="cuda")
    t = time_cuda(lambda x, out: torch.sum(x, dim=0, out=out), [x, out], repeat=30)
    return {"bytes": nbytes, "seconds": t.median, "spread": t.relative_spread, "bandwidth": nbytes / t.median}


def matmul_rate(n: int) -> dict:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    t = time_cuda(lambda a, b, c: torch.matmul(a, b, out=c), [a, b, c], repeat=30)
    return {"n": n, "seconds": t.median, "spread": t.relative_spread, "flops": 2 * n**3 / t.median}


def launch_costs(launches: int = 2000) -> dict:
    """Per launch: one-element kernels back to back from Python, then the same inside a CUDA graph."""
    x = torch.zeros(1, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(100):
        x.add_(1.0)
    torch.cuda.synchronize()
    start.record()
    for _ in range(launches):
        x.add_(1.0)
    end.record()
    end.synchronize()
    eager = start.elapsed_time(end) / 1e3 / launches
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1.0)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(launches):
            x.add_(1.0)
    g.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(10):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / launches)
    return {"launches": launches, "eager": eager, "graph": sorted(samples)[len(samples) // 2]}


def gemv_l2_check(device) -> dict:
    """A 2048^2 bf16 GEMV timed with rotation and L2-resident: the resident time must be flagged against the
    memory floor of `device` (this GPU's entry, with the bandwidths just measured)."""
    w = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(2048, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(2048, device="cuda", dtype=torch.bfloat16)
    nbytes = w.nbytes + x.nbytes + y.nbytes
    fn = lambda w, x, y: torch.matmul(w, x, out=y)  # noqa: E731
    rotated, resident = time_cuda(fn, [w, x, y]), time_cuda(fn, [w, x, y], rotate=False)
    gate = check_time(resident, nbytes=nbytes, device=device)
    return {"bytes": nbytes, "rotated": rotated.median, "l2_resident": resident.median,
            "floor": gate.memory_floor, "l2_resident_flagged": gate.suspect}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure_calibration needs a CUDA GPU: the CPU entry is measured by hoid.measure.calibrate_cpu()")
    copies = [copy_bandwidth(n) for n in (1 * GiB, 4 * GiB)]
    reads = [read_bandwidth(n) for n in (1 * GiB, 4 * GiB)]
    matmuls = [matmul_rate(n) for n in (4096, 8192)]
    launch = launch_costs()
    table = {
        "copy_bandwidth": max(c["bandwidth"] for c in copies),
        "read_bandwidth": max(r["bandwidth"] for r in reads),
        "peak_flops.bf16": max(m["flops"] for m in matmuls),
        "launch_overhead": launch["eager"],
        "graph_launch_overhead": launch["graph"],
        "l2_bytes": l2_bytes(),
    }
    measured = H200.with_measurements(copy_bandwidth=table["copy_bandwidth"], read_bandwidth=table["read_bandwidth"])
    gemv = gemv_l2_check(measured)
    result = {
        "benchmark": "measure_calibration",
        "device": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "cuda": torch.version.cuda, "triton": _version("triton")},
        "device_table": table,
        "copy": copies, "read": reads, "matmul_bf16": matmuls, "launch": launch, "gemv_2048_bf16": gemv,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "measure_calibration.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'figure':<24} {'value':>14}")
    for key, value in table.items():
        shown = f"{value / 1e12:.3f} T/s" if value > 1e9 else (f"{value * 1e6:.2f} µs" if value < 1 else f"{value}")
        print(f"{key:<24} {shown:>14}")
    print(f"gemv 2048^2 bf16: rotated {gemv['rotated'] * 1e6:.2f} µs, L2-resident {gemv['l2_resident'] * 1e6:.2f} µs, "
          f"floor {gemv['floor'] * 1e6:.2f} µs, L2-resident flagged: {gemv['l2_resident_flagged']}")


def _version(package: str) -> str | None:
    try:
        return __import__(package).__version__
    except ImportError:
        return None


if __name__ == "__main__":
    main()

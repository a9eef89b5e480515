"""Measurement: the device table, the analytic roofline, timers, the measurement cache, the profiler.

- `devices`: the one device table (H200 measured, B200 datasheet, CPU calibrated by `calibrate_cpu`).
- `roofline`: analytic times from the registry's flop/byte counts, scaled by cached kernel efficiency.
- `cuda` / `cpu` / `local`: timers (CUDA events, graph replay, rotation past 4x L2; wall clock).
- `cache`: the SQLite measurement cache (carry the file between machines, `merge` it).
- `noise`, `sanity`: when a gain is real, and when a time is too good to be true.
- `kernel_bench`, `tune`, `profile`: one kernel measured, its params tuned, a graph's per-node table.

Must not import egglog, openai or CuTe DSL; torch.cuda is touched only when a GPU timer runs.
"""

from .cache import MeasureCache, MeasureKey, default_cache_path
from .cpu import calibrate_cpu, time_cpu
from .cuda import time_cuda
from .devices import B200, CPU, DEVICES, H100, H200, Device, get_device, register_device
from .kernel_bench import KernelMeasurement, measure_kernel
from .local import local_device, time_on
from .noise import Comparison, compare, compare_rounds, is_faster
from .profile import Profile, ProfileRow, profile_graph
from .roofline import graph_time, kernel_time, memory_floor, node_time, op_time, region_floor
from .sanity import SanityVerdict, check_time
from .timing import Timing
from .tune import TuneResult, descend, tune

__all__ = ["B200", "CPU", "DEVICES", "H100", "H200", "Comparison", "Device", "KernelMeasurement", "MeasureCache",
           "MeasureKey", "Profile", "ProfileRow", "SanityVerdict", "Timing", "TuneResult", "calibrate_cpu",
           "check_time", "compare", "compare_rounds", "default_cache_path", "descend", "get_device", "graph_time",
           "is_faster", "kernel_time", "local_device", "measure_kernel", "memory_floor", "node_time", "op_time",
           "profile_graph", "region_floor", "register_device", "time_cpu", "time_cuda", "time_on", "tune"]

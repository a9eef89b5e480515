"""Measurement: the device table, the analytic roofline, timers, the measurement cache, the profiler.

Must not import egglog, openai or CuTe DSL.
"""

from .devices import B200, CPU, DEVICES, H200, Device, get_device
from .roofline import graph_time, memory_floor, op_time

__all__ = ["B200", "CPU", "DEVICES", "H200", "Device", "get_device", "graph_time", "memory_floor", "op_time"]

"""The in-context profile: each node of a compiled step timed as the step runs it, against its roofline.

Built on `hoid.measure` (its timers, its roofline, its `Profile` table; measure does not import the
runtime): every step of the compiled sequence is timed alone with the device's timer (on a GPU: CUDA-graph
replay, inputs rotated past the L2) over the tensors the compiled call really gives it (planned buffers,
bound weights), with its roofline floor (`region_floor` of a kernel's body, the op's floor otherwise);
then the whole step is timed (its CUDA graph replayed) and, on a GPU, the sum of its kernels' durations
is read with `torch.profiler`, so the gap between them (launch gaps, host work) is visible. The printed
profile also says what a call launches and which steps break a PDL chain (`CompiledGraph.launches`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..ir.analysis import deaths
from ..ir.interpreter import run_node
from ..ir.registry import get_op
from ..measure.devices import Device
from ..measure.local import local_device, time_on
from ..measure.profile import Profile, rows_of, signature
from ..measure.roofline import op_floor, region_floor
from .compiled import CompiledGraph


def profile(compiled: CompiledGraph, inputs: Sequence[torch.Tensor], *, device: Device | None = None,
            per_signature: bool = True, **timer_options) -> Profile:
    """per_signature: time each (op, attrs, input and output types) once, in context at its first node,
    and give that time to every node of the signature (a decoder's layers repeat theirs: on the H200 the
    Qwen3-1.7B step's and prefill's 1165 nodes took 138 s to profile one by one); False times every node."""
    device = device or local_device()
    env = _staged(compiled, inputs)
    # the values a later step reads, no more: one call's every value, kept, took 42 GB of the H200 for
    # BGE-M3's optimized plan at 32 x 512 tokens (12-05), whose step peaks at 3 GB
    dead = deaths(compiled.plan.steps, outlive=set())
    timed = []
    seen: dict[tuple, tuple[float, str]] = {}
    for i, node in enumerate(compiled.plan.steps):
        call, args = _step(compiled, node, env)
        key = signature(node) if per_signature else None
        key = ("node", id(node)) if key is None else key  # None: an attr without an exact key, timed alone
        if key in seen:
            seconds, method = seen[key]
        elif _aliases_an_input(node, call, args):  # a view torch made without a copy: nothing to time (its
            seconds, method = 0.0, "no launch: a view of its input"  # CUDA graph would be empty, and say so)
            seen[key] = (seconds, method)
        else:
            timing = time_on(device, call, args, **timer_options)
            method = f"{timing.method}; {timing.note}" if timing.note else timing.method
            seconds = timing.median
            seen[key] = (seconds, f"{method}; timed at {node.name}, once per signature")
        timed.append((node, seconds, method, _floor(node, device)))
        outs = call(*args)  # the step's value, for the steps after it (timed over inputs as the call gives them)
        env.update((v.name, t) for v, t in zip(node.outputs, outs if isinstance(outs, tuple) else (outs,)))
        del call, args, outs
        for name in dead.get(i, ()):
            env.pop(name, None)
    step_args = list(inputs)
    compiled(*step_args)  # capture (on a GPU) before the step is timed
    step = time_on(device, lambda *a: compiled(*a), step_args,
                   **({"rotate": False} if device.arch != "cpu" else {})).median
    launched = step_kernels(compiled, step_args) if device.arch != "cpu" else None
    kernels = sum(seconds for _, _, seconds in launched) if launched is not None else None
    return Profile(compiled.graph.name, device.name, "in-context", rows_of(timed), step=step, kernels=kernels,
                   launched=tuple(launched or ()))


def _aliases_an_input(node, call, args) -> bool:
    """Whether the plain view op `node` runs as a view here: every output shares an input's storage (torch's
    reshape copies a tensor it cannot view, and then a kernel runs, which is timed)."""
    if not get_op(node.op).is_view:  # a kernel node is no view either
        return False
    outs = call(*args)
    storages = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
    return all(isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() in storages
               for o in (outs if isinstance(outs, (tuple, list)) else (outs,)))


def _staged(compiled: CompiledGraph, inputs) -> dict[str, torch.Tensor]:
    """The values a call starts from, by name: its inputs as staged and the bound tensors (weights)."""
    staged = compiled._stage(inputs)
    env = {v.name: t for v, t in zip(compiled.graph.runtime_inputs, staged)}
    for name, (_, value) in compiled.program.tensors.items():
        env[value] = compiled.namespace[name]
    return env


def _step(compiled: CompiledGraph, node, env):
    """(callable, args) running `node` as the compiled step does: kernels into their planned buffers."""
    args = [env[v.name] for v in node.inputs]
    bound = compiled.lowered.kernels.get(node.outputs[0].name) if node.op == "kernel" else None
    if bound is None:
        return (lambda *a, node=node: run_node(node, list(a))), args
    outs = [env.get(v.name) if v.name in compiled.plan.buffers else None for v in node.outputs]
    outs = [args[bound.aliases[o]] if t is None else t for o, t in enumerate(outs)]
    for v, t in zip(node.outputs, outs):
        env.setdefault(v.name, t)
    n, m = len(args), len(outs)
    # the planned scratch too: a step timed in context allocates nothing either
    scratch = [compiled.namespace[name] for name in compiled.program.workspaces.get(node.outputs[0].name, [])]
    return (lambda *a: bound(*a[:n], out=a[n:n + m], workspace=a[n + m:] or None)), [*args, *outs, *scratch]


def _floor(node, device: Device) -> float:
    if node.op == "kernel":
        return region_floor(node.attrs["body"], device)
    return max(op_floor(node.op, [v.type for v in node.inputs], [v.type for v in node.outputs], node.attrs, device)) \
        if not get_op(node.op).is_view else 0.0


def step_kernels(call, args) -> list[tuple[str, int, float]]:
    """The device kernels of one `call(*args)` (a compiled step: its replay; or any callable, a stock model's
    forward) by name: (name, launches, seconds), the slowest first, from torch.profiler's trace. What the
    step really launches, which the per-node rows cannot show: a copy torch makes inside an op, a backend
    another capture chose."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as trace

    torch.cuda.synchronize()
    with trace(activities=[ProfilerActivity.CUDA]) as prof:
        call(*args)
        torch.cuda.synchronize()
    totals: dict[str, list] = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            entry = totals.setdefault(e.name, [0, 0.0])
            entry[0] += 1
            entry[1] += e.device_time / 1e6
    return sorted(((name, n, seconds) for name, (n, seconds) in totals.items()), key=lambda t: -t[2])


def kernel_seconds(compiled: CompiledGraph, args) -> float:
    """Sum of the device kernels' durations in one call (replay), from torch.profiler's trace."""
    return sum(seconds for _, _, seconds in step_kernels(compiled, args))


def example_inputs(compiled: CompiledGraph) -> list[torch.Tensor]:
    """Inputs to profile with when none are given: random floats, zero integers (a position and token ids
    of 0 index every cache and vocabulary), and the compiled graph's own state."""
    from ..measure.inputs import random_tensor

    states = iter(compiled.state)
    out = []
    for v in compiled.graph.runtime_inputs:
        if compiled.graph.kind_of(v.name) == "state":
            out.append(next(states))
        elif v.type.torch_dtype.is_floating_point:
            out.append(random_tensor(v.type, device=compiled.device))
        else:
            out.append(torch.zeros(v.type.shape, dtype=v.type.torch_dtype, device=compiled.device))
    return out


def print_profile(result: Profile, *, limit: int | None = 25, console=None, launches=None) -> None:
    """The profile as a rich table: time, share, roofline floor and how far above it each node runs; with
    `launches` (`CompiledGraph.launches`), what a call launches and what breaks its PDL chain."""
    from rich.console import Console
    from rich.table import Table

    from ..measure.timing import format_seconds

    table = Table(title=f"{result.graph} on {result.device} ({result.mode})")
    for column in ("node", "op", "time", "share", "floor", "x floor", "timed by"):
        table.add_column(column, justify="left" if column in ("node", "op", "timed by") else "right")
    for row in result.rows[:limit]:
        ratio = f"{row.seconds / row.floor:.1f}" if row.floor else "-"
        op = row.op if row.kernel is None else f"kernel {row.kernel}"
        table.add_row(row.node[:32], op, format_seconds(row.seconds), f"{row.share:.1%}",
                      format_seconds(row.floor) if row.floor else "-", ratio, row.method)
    console = console or Console()
    console.print(table)
    if result.rows:
        console.print(result.by_op_line(limit), markup=False)
    if result.step is not None:
        console.print(result.table(limit=0).splitlines()[-1])
        for line in result.launched_lines(limit):
            console.print(line, markup=False)
    if launches is not None:
        console.print(launches.summary(), markup=False)

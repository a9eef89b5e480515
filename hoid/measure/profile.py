"""The profiler core: a per-node time table for a graph, the input to "where does the time go?".

`profile_graph(graph)` gives one row per node, sorted by time, with each node's share of the total:

- **measured** (the default where a GPU is present): the graph runs once through the interpreter to get
  every node's real input tensors, then each node is timed alone with this machine's timer (on a GPU:
  events, CUDA-graph replay for short nodes, inputs rotated past the L2). A `kernel` node is timed by
  launching its implementation (the registered spec, with the node's attrs and params, into freshly
  allocated outputs), so such rows say `kernel` under `timed`.
  With a `cache`, each node signature's time is read from it where it is there and stored where it is
  not, so a second profile of the same model (a warm `hoid.optimize`) times nothing and runs nothing.
- **analytic** (the default on the CPU, and always available): the roofline estimate of each node,
  `kernel` nodes scaled by their kernel's measured efficiency where the cache has one.

`hoid profile` (the CLI) prints `Profile.table()`; the agent ranks regions by these rows (Amdahl).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from ..ir import Graph, Node
from ..ir.graph import attr_key
from ..ir.interpreter import run, run_node
from ..ir.registry import get_op
from .cache import MeasureCache, MeasureKey
from .devices import Device
from .inputs import random_inputs, random_tensor
from .local import has_cuda, local_device, tensor_device, time_on
from .roofline import node_time
from .timing import format_seconds

MODES = ("auto", "measured", "analytic")


@dataclass(frozen=True)
class ProfileRow:
    """node: its output names; seconds: per run; share: of the graph's total; source: "measured" or
    "analytic"; timed: what ran ("op", or "kernel" for a kernel node's implementation); method: the timer's
    method and note ("cuda-graph; 920 runs per replay"), or "roofline"."""

    node: str
    op: str
    kernel: str | None
    seconds: float
    share: float
    source: str
    timed: str
    flops: int
    bytes: int
    method: str = "roofline"
    floor: float | None = None  # the roofline's fewest seconds for this node (in-context profiles)


@dataclass(frozen=True)
class Profile:
    graph: str
    device: str
    mode: str
    rows: tuple[ProfileRow, ...]  # slowest first
    step: float | None = None  # seconds of the whole compiled step (in-context profiles)
    kernels: float | None = None  # sum of the device's kernel durations in one step (torch.profiler)
    launched: tuple[tuple[str, int, float], ...] = ()  # those kernels by name: (name, launches, seconds), slowest first

    @property
    def total(self) -> float:
        return sum(r.seconds for r in self.rows)

    def by_op(self) -> list[tuple[str, int, float]]:
        """(the op, or "kernel ID"; its nodes; their seconds), slowest first: where a layered model's time
        goes, which its slowest nodes do not show (BGE-M3's first 25 rows on the H200, 12-05: 21% of 508
        nodes' time, the attention of 24 layers, and nothing of the rest)."""
        totals: dict[str, list] = {}
        for row in self.rows:
            entry = totals.setdefault(row.op if row.kernel is None else f"kernel {row.kernel}", [0, 0.0])
            entry[0] += 1
            entry[1] += row.seconds
        return sorted(((name, n, seconds) for name, (n, seconds) in totals.items()), key=lambda t: -t[2])

    def by_op_line(self, limit: int | None = 20) -> str:
        total = self.total or 1.0
        return "by op: " + ", ".join(f"{name} x{n} {format_seconds(seconds)} ({seconds / total:.0%})"
                                     for name, n, seconds in self.by_op()[:limit])

    def table(self, limit: int | None = 20) -> str:
        """A text table of the slowest rows, with the running share (how much fixing the top n could win)."""
        lines = [f"profile of {self.graph} on {self.device} ({self.mode}): {format_seconds(self.total)} in "
                 f"{len(self.rows)} nodes",
                 f"{'node':<24} {'op':<14} {'time':>10} {'share':>7} {'cum.':>7}"]
        running = 0.0
        for row in self.rows[:limit]:
            running += row.share
            name = row.op if row.kernel is None else f"kernel {row.kernel}"
            lines.append(f"{row.node[:24]:<24} {name[:14]:<14} {format_seconds(row.seconds):>10} "
                         f"{row.share:>7.1%} {running:>7.1%}")
        if self.rows and limit != 0:
            lines.append(self.by_op_line(limit))
        if self.step is not None:
            line = f"step {format_seconds(self.step)}; nodes timed alone {format_seconds(self.total)}"
            if self.kernels is not None and self.kernels <= self.step:  # outside kernels: launch gaps
                line += f"; kernels {format_seconds(self.kernels)} (gaps {format_seconds(self.step - self.kernels)})"
            elif self.kernels is not None:  # a PDL kernel starts early and waits: its duration holds the wait
                line += (f"; kernels {format_seconds(self.kernels)}, overlapping by "
                         f"{format_seconds(self.kernels - self.step)} (programmatic dependent launch)")
            lines.append(line)
        return "\n".join(lines + self.launched_lines(limit))

    def launched_lines(self, limit: int | None = 20) -> list[str]:
        """The slowest `limit` of the kernels one step launched, a line each."""
        return [f"  launched x{n:<4d} {format_seconds(seconds):>10}  {name[:90]}"
                for name, n, seconds in self.launched[:limit]]


def profile_graph(graph: Graph, *, mode: str = "auto", device: Device | None = None,
                  inputs: Sequence[torch.Tensor] | None = None,
                  weights: Mapping[str, torch.Tensor] | None = None, cache: MeasureCache | None = None,
                  **timer_options) -> Profile:
    """Per-node times of `graph`. `mode`: "measured", "analytic", or "auto" (measured on a GPU, analytic
    on the CPU). Measuring draws random inputs and weights where none are given (pass `inputs` where
    values matter, e.g. positions that index a cache); `timer_options` go to the timer."""
    if mode not in MODES:
        raise ValueError(f"profile mode {mode!r}: expected one of {MODES}")
    if mode == "auto":
        mode = "measured" if has_cuda() else "analytic"
    device = device or local_device()
    if mode == "analytic":
        timed = [(n, node_time(n, device, cache=cache), "roofline") for n in graph.nodes]
    else:
        timed = _measure_nodes(graph, device, inputs, weights, timer_options, cache if not timer_options else None)
    total = sum(seconds for _, seconds, _ in timed) or 1.0
    rows = [_row(n, seconds, seconds / total, method) for n, seconds, method in timed]
    return Profile(graph.name, device.name, mode, tuple(sorted(rows, key=lambda r: -r.seconds)))


def rows_of(timed: Sequence[tuple[Node, float, str, float | None]]) -> tuple[ProfileRow, ...]:
    """Rows, slowest first, from (node, seconds, method, roofline floor) tuples: how the runtime's
    in-context profile (hoid.runtime.profile) builds its table, with the same fields as this one."""
    total = sum(seconds for _, seconds, _, _ in timed) or 1.0
    rows = [replace(_row(n, s, s / total, m), floor=f) for n, s, m, f in timed]
    return tuple(sorted(rows, key=lambda r: -r.seconds))


def _row(node: Node, seconds: float, share: float, method: str) -> ProfileRow:
    op = get_op(node.op)
    ins, outs = [v.type for v in node.inputs], [v.type for v in node.outputs]
    kernel = node.attrs["kernel"] if node.op == "kernel" else None
    source = "analytic" if method == "roofline" else "measured"
    timed = "kernel" if kernel and source == "measured" else "op"
    return ProfileRow(node.name, node.op, kernel, seconds, share, source, timed,
                      op.count_flops(ins, outs, node.attrs), op.count_bytes(ins, outs, node.attrs), method)


def _measure_nodes(graph: Graph, device: Device, inputs, weights, timer_options, cache: MeasureCache | None = None
                   ) -> list[tuple[Node, float, str]]:
    """Run the graph once to capture every value, then time each node alone on its real inputs (each
    signature once; with `cache`, only those it does not hold, and nothing runs when it holds them all)."""
    signatures = {id(n): signature(n) for n in graph.nodes}
    keys = {id(n): _cache_key(signatures[id(n)], n.op, device) for n in graph.nodes} if cache is not None else {}
    held = {}
    for node in graph.nodes:
        key = keys.get(id(node))
        if key is not None and key not in held and (hit := cache.get(key)) is not None:
            held[key] = hit.median
    if keys and all(k is not None and k in held for k in keys.values()):
        return [(n, held[keys[id(n)]], "cache") for n in graph.nodes]
    where = tensor_device(device)
    if inputs is None:  # integer inputs that index (cache positions, token ids) stay inside what they index
        from ..verify.region import index_bounds

        inputs = random_inputs([v.type for v in graph.runtime_inputs], device=where, index_bounds=index_bounds(graph))
    given = {**graph.weights, **(weights or {})}
    weights = {v.name: given[v.name].to(where) if v.name in given else random_tensor(v.type, device=where)
               for v in graph.weight_inputs}
    env = {v.name: t for v, t in zip(graph.runtime_inputs, inputs, strict=True)} | weights
    # only what the nodes to be timed read is kept from the run (each signature's first node): every value
    # of a 24-layer BGE-M3 batch held at once took 50 GB of an H100 (12-05)
    timed_first: dict = {}
    for node in graph.nodes:
        if keys.get(id(node)) not in held:
            timed_first.setdefault(signatures[id(node)] or id(node), node)
    needed = {v.name for node in timed_first.values() for v in node.inputs}

    def keep(node: Node, outputs) -> None:
        env.update((v.name, t) for v, t in zip(node.outputs, outputs, strict=True) if v.name in needed)

    run(graph, *inputs, weights=weights, on_node=keep)
    out = []
    first: dict = {}  # signature -> (seconds, method, node timed)
    for node in graph.nodes:
        key = signatures[id(node)]
        if key is not None and key in first:
            seconds, method, timed = first[key]
            out.append((node, seconds, f"{method}; as {timed.name}"))
            continue
        cached = keys.get(id(node))
        if cached in held:
            out.append((node, held[cached], "cache"))
            continue
        args = [env[v.name] for v in node.inputs]
        call = _launcher(node) if node.op == "kernel" else (lambda *tensors, node=node: run_node(node, list(tensors)))
        timing = time_on(device, call, args, **timer_options)
        method = f"{timing.method}; {timing.note}" if timing.note else timing.method
        out.append((node, timing.median, method))
        if key is not None:
            first[key] = (timing.median, method, node)
        if cached is not None:
            cache.put(cached, timing)
    return out


def _cache_key(signature, op: str, device: Device) -> MeasureKey | None:
    """A node's `_signature` as a measurement-cache key, under "profile:<op>" (a kernel node's id, version
    and params are among its attrs); None where the signature has no exact key."""
    if signature is None:
        return None
    attrs = hashlib.sha256(repr(signature[3]).encode()).hexdigest()[:24]
    return MeasureKey.of(device.name, f"profile:{op}", "", {}, [*signature[1], *signature[2]], {"attrs": attrs})


def signature(node: Node):
    """What a node's time depends on: its op, attrs and the types (strides included) of what it reads and
    writes. A model's layers repeat: the 28-layer Qwen3-1.7B decode step has 86 signatures in 2529 nodes
    (39 in 556 once rewritten), so each is timed once, on the first node that has it (inputs are rotated
    past the L2 either way, and the index inputs whose values could matter, cache positions, are the same
    tensors in every layer). None (time it) where an attr has no exact key."""
    try:
        key = (node.op, tuple(v.type for v in node.inputs), tuple(v.type for v in node.outputs),
               attr_key(node.attrs))
        hash(key)
    except TypeError:
        return None
    return key


def _launcher(node: Node):
    """Launch a kernel node's implementation as the runtime does (`hoid.kernels.launch.bind`): into
    outputs allocated on the first call and reused."""
    from ..kernels.launch import bind

    call = bind(node)
    outs: list[torch.Tensor] = []

    def run_kernel(*tensors):
        if not outs:
            outs.extend(call.allocate(tensors))
        result = call(*tensors, out=outs)
        return result[0] if len(result) == 1 else result

    return run_kernel

"""The CUDA timer: events, warm-up, the median of many runs, CUDA-graph replay, and rotated inputs.

- **Events**, recorded on the stream around each run, time the device, not the host.
- **Warm-up** runs first (once over every rotated copy), so compilation, module load and first-touch
  page faults stay out of the numbers.
- **CUDA-graph replay** for kernels of a few microseconds, and for any call the host cannot launch as fast
  as the GPU runs it (a torch reference of eight small kernels, say): launched one by one from Python,
  their time is the host's launch rate, not the device's. A graph of many back-to-back runs is replayed
  instead, and each sample is one replay divided by the runs inside it (the time a call takes inside a
  CUDA graph, which is how the runtime runs it).
- **Rotation**: the tensors are copied until the copies total at least 4x the L2, and run `i` uses copy
  `i mod n`. Without it a memory-bound kernel reads its inputs from L2 on every run after the first, and
  reports a bandwidth the memory does not have: every decode weight of a 1.7B model fits in the H200's
  60 MB L2. The sanity gate (`hoid.measure.sanity`) catches the timings that slip through.

torch.cuda is only touched when a timer runs, so this module imports on machines without CUDA.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import torch

from .timing import Timing

GRAPH_BELOW = 50e-6  # kernels estimated shorter than this are timed by CUDA-graph replay
ROTATE_FACTOR = 4  # rotated copies total at least this many times the L2
_REPLAY_SECONDS = 2e-4  # one graph replay lasts at least this long...
_MAX_CALLS = 4096  # ...within this many runs


def require_cuda() -> None:
    if not torch.cuda.is_available():
        raise RuntimeError("the CUDA timer needs a CUDA GPU and none is available here; "
                           "time with hoid.measure.cpu.time_cpu, or use the analytic roofline")


def l2_bytes() -> int:
    """The L2 size of the current GPU, as the driver reports it."""
    require_cuda()
    return int(torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size)


def tensor_bytes(args: Sequence) -> int:
    """Bytes of the distinct tensors among `args` (a tensor passed twice counts once)."""
    seen = {id(a): a for a in args if isinstance(a, torch.Tensor)}
    return sum(t.numel() * t.element_size() for t in seen.values())


def rotation_sets(args: Sequence, *, cache_bytes: int, factor: int = ROTATE_FACTOR,
                  max_copies: int = 1024) -> list[list]:
    """`args` followed by copies of it (same shapes, strides and contents; non-tensors shared) until the
    sets total at least `factor * cache_bytes`, or `max_copies` sets. A tensor passed twice stays one."""
    nbytes = tensor_bytes(args)
    copies = 1 if nbytes == 0 else min(max(1, math.ceil(factor * cache_bytes / nbytes)), max_copies)
    sets = [list(args)]
    for _ in range(copies - 1):
        clones: dict[int, torch.Tensor] = {}
        for a in args:
            if isinstance(a, torch.Tensor) and id(a) not in clones:
                clones[id(a)] = _strided_copy(a)
        sets.append([clones.get(id(a), a) for a in args])
    return sets


def _strided_copy(a: torch.Tensor) -> torch.Tensor:
    """A copy of `a` in new memory with its strides, also where elements share memory (an expanded
    tensor's stride 0, which `copy_` into such a view refuses): the span of memory it reads is copied."""
    if a.numel() == 0:
        return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
    span = 1 + sum((size - 1) * stride for size, stride in zip(a.shape, a.stride(), strict=True))
    return a.as_strided((span,), (1,)).clone().as_strided(a.shape, a.stride())


def time_cuda(fn: Callable[..., object], args: Sequence = (), *, rotate: bool = True, warmup: int = 3,
              repeat: int = 50, graph: bool | None = None, graph_below: float = GRAPH_BELOW,
              cache_bytes: int | None = None, max_copies: int = 1024) -> Timing:
    """Seconds per call of `fn(*args)` on the current GPU (args: tensors, inputs and outputs alike).

    rotate: run over copies of `args` totalling `ROTATE_FACTOR` x the L2 (`cache_bytes` overrides the L2
    size); graph: time by CUDA-graph replay (None: when one run is estimated under `graph_below`, or the
    host needs more than half that time to launch it); repeat:
    samples taken (events around each run, or around each replay).
    """
    require_cuda()
    cache = cache_bytes if cache_bytes is not None else l2_bytes()
    sets = rotation_sets(args, cache_bytes=cache, max_copies=max_copies) if rotate else [list(args)]
    rotated = len(sets) * tensor_bytes(args) if rotate else 0
    note = ""
    if rotate and rotated < ROTATE_FACTOR * cache:
        note = f"rotation capped at {len(sets)} copies ({rotated / 2**20:.1f} MiB < {ROTATE_FACTOR}x L2)"
    for i in range(max(warmup, len(sets))):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    estimate, host = _per_call(fn, sets, min(len(sets), 10))
    # Launch-bound: the GPU waited for the host, so events would time the host. Graph replay removes it.
    use_graph = graph if graph is not None else (estimate < graph_below or host > 0.5 * estimate)
    if use_graph:
        calls = max(len(sets), math.ceil(_REPLAY_SECONDS / max(estimate, 1e-7)))
        calls = math.ceil(min(calls, _MAX_CALLS) / len(sets)) * len(sets)  # every copy used equally often
        try:
            samples = _replay(fn, sets, calls, repeat)
            return Timing(samples, "cuda-graph", rotated, note=_join(note, f"{calls} runs per replay"))
        except RuntimeError as e:
            if graph:  # the caller asked for a graph: its failure is theirs to see
                raise
            note = _join(note, f"CUDA-graph capture failed ({str(e).splitlines()[0]}); timed with events")
    return Timing(_events(fn, sets, repeat), "cuda-events", rotated, note=note)


def _per_call(fn, sets, calls: int) -> tuple[float, float]:
    """(device seconds, host seconds) per call, over `calls` calls launched back to back."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    begin = time.perf_counter()
    for i in range(calls):
        fn(*sets[i % len(sets)])
    host = time.perf_counter() - begin
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls, host / calls


def _events(fn, sets, repeat: int) -> tuple[float, ...]:
    """Events around each run; all recorded first, read once at the end (no sync between runs)."""
    pairs = _event_pairs(repeat)
    for i, (start, end) in enumerate(pairs):
        start.record()
        fn(*sets[i % len(sets)])
        end.record()
    torch.cuda.synchronize()
    return tuple(start.elapsed_time(end) / 1e3 for start, end in pairs)


def _replay(fn, sets, calls: int, repeat: int) -> tuple[float, ...]:
    """Capture `calls` runs rotating over `sets` into one CUDA graph; time `repeat` replays."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as capture wants of lazily set-up libraries
        for i in range(min(3, len(sets))):
            fn(*sets[i])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(*sets[i % len(sets)])
    g.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    pairs = _event_pairs(repeat)
    for start, end in pairs:
        start.record()
        g.replay()
        end.record()
    torch.cuda.synchronize()
    return tuple(start.elapsed_time(end) / 1e3 / calls for start, end in pairs)


def _event_pairs(n: int) -> list:
    return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)

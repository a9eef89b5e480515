"""Races a numerical check can miss, read from the code Triton built for a candidate on a GPU.

A split-K kernel whose ticket (one thread's release: "my partials are in") is not preceded by a CTA barrier
can let the last program read a partial another warp has not written yet. Whether a trial shows it depends
on a warp lagging at the wrong moment, so a kernel can pass every trial and still be wrong in a model; the
build shows it always (`hoid.kernels.ptx.unsynced_releases`). After a candidate's call on a GPU, the
isolated child reads the PTX of every kernel its module's Triton functions have compiled so far; under
Triton's interpreter (a CPU) nothing is compiled and nothing is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..kernels.ptx import unsynced_releases
from .verdict import Failure


def compiled_triton_kernels(fn: Callable) -> Iterator[tuple[str, object]]:
    """(function name, compiled kernel) for each kernel that the Triton functions of `fn`'s module (its
    globals) have compiled so far: Triton's per-device caches of `JITFunction`s."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:  # no Triton: nothing compiled by it
        return
    for value in list(getattr(fn, "__globals__", {}).values()):
        for _ in range(3):  # an autotuned or heuristic kernel holds its JITFunction as `fn`
            if isinstance(value, JITFunction) or not hasattr(value, "fn"):
                break
            value = value.fn
        if isinstance(value, JITFunction):
            for caches in list(getattr(value, "device_caches", {}).values()):
                for compiled in list(caches[0].values()):  # (kernel cache, key cache, target, backend, binder)
                    yield value.__name__, compiled


def unsynced_tickets(fn: Callable, seen: set[int]) -> Failure | None:
    """A `race` failure if a kernel compiled for `fn` (and not in `seen`, which this extends) announces other
    warps' writes before they are made; else None."""
    for name, compiled in compiled_triton_kernels(fn):
        if id(compiled) in seen:
            continue
        seen.add(id(compiled))
        ptx = (getattr(compiled, "asm", None) or {}).get("ptx")
        if ptx and (count := unsynced_releases(ptx)):
            return Failure("race", f"Triton kernel {name}: {count} release atomic(s) follow global writes with no "
                                   "barrier between (a ticket taken by one thread announces its warp's stores, not "
                                   "the other warps', so the last program can read a partial not yet written): put "
                                   "tl.debug_barrier() before the ticket, or sem='relaxed' on an atomic that "
                                   "publishes nothing (a counter's reset)", {"unsynced_releases": count})
    return None

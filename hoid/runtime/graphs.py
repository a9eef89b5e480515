"""CUDA-graph capture of a compiled call: one stream, static buffers, and a reason whenever it fails.

The call has already run once eagerly over the same buffers (Triton kernels compiled, cuBLAS set up,
the split-K GEMV's arrival counters allocated), so capture records launches and allocates only from the
graph's private pool: torch-op intermediates and the workspaces kernels allocate inside their launch
(split-K partials, attention partials) get fixed addresses there, and a replay allocates nothing.
Everything runs on the one capture stream; the split-K counters assume launches never overlap.
"""

from __future__ import annotations

import torch


def capture(fn, args: list[torch.Tensor]):
    """(graph, static outputs, None), or (None, None, why) when `fn(*args)` cannot be captured."""
    generators = [g for g in _generators(fn) if g is not None]
    graph = torch.cuda.CUDAGraph()
    if generators and not hasattr(graph, "register_generator_state"):
        return None, None, ("this torch cannot register a seeded sampler's generator with a CUDA graph "
                            "(CUDAGraph.register_generator_state is missing)")
    for g in generators:
        graph.register_generator_state(g)
    torch.cuda.synchronize()
    try:
        with torch.cuda.graph(graph):
            outputs = fn(*args)
    except Exception as e:  # an op that syncs with the host or allocates outside the pool cannot be recorded
        torch.cuda.synchronize()
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return None, None, f"CUDA-graph capture failed ({type(e).__name__}: {first}); the step runs eagerly"
    # no replay here: it would run the step a second time (state updated twice); the next call replays
    return graph, outputs, None


def _generators(fn):
    sample = getattr(fn, "__globals__", {}).get("sample")
    return [getattr(sample, "generator", None)] if sample is not None else []

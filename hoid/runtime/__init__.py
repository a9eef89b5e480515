"""The runtime: Graph -> executable code, weight binding, state updates, CUDA-graph capture.

    step = hoid.compile(graph)                 # hoid.runtime.compile: a CompiledGraph
    logits, *cache = step(ids, position, *step.state)

Modules: `lower` (kernel nodes bound, unavailable ones replaced by their bodies, bind-time values),
`memory` (planned buffers by liveness, the in-place state rule), `codegen` (the readable source that
runs), `compiled` (binding and the call), `graphs` (CUDA-graph capture), `sampling` (the next token
inside the step), `decode` (driving `hoid.models.generate`), `profile` (the in-context profile),
`export` (a standalone PyTorch package: `export_ops`, `export_source`, `export_template`).
"""

from .compiled import CompiledGraph, compile
from .export import export
from .lower import KernelFallbackWarning

__all__ = ["CompiledGraph", "KernelFallbackWarning", "compile", "export"]

"""Generation through compiled graphs: `hoid.models.generate` driven by its `run=` argument.

    step = hoid.compile(decode_step_graph(lm, 256))
    prefill = hoid.compile(prefill_graph(lm, 8, 256), state=step.state)   # one cache for both
    tokens = generate(step, prompt, 32, prefill=prefill)

The caches are the compiled graphs' own `state` buffers: `generate` starts from them and each call gets
back the tensors it returned, which the compiled graph recognises by pointer, so no step copies a cache.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .compiled import CompiledGraph


def runner(*compiled: CompiledGraph) -> Callable[..., tuple[torch.Tensor, ...]]:
    """`run(graph, *inputs)` for `hoid.models.generate`: each graph runs through its compiled form."""
    by_graph = {id(c.graph): c for c in compiled}

    def run(graph, *inputs):
        try:
            return by_graph[id(graph)](*inputs)
        except KeyError:
            raise KeyError(f"graph {graph.name!r} was not compiled for this runner") from None

    return run


def generate(step: CompiledGraph, prompt: torch.Tensor, max_new_tokens: int, *,
             prefill: CompiledGraph | None = None) -> torch.Tensor:
    """`hoid.models.generate` through compiled graphs, from zeroed caches (the compiled state itself)."""
    from ..models.llm import generate as drive

    if prefill is not None and any(a.data_ptr() != b.data_ptr() for a, b in zip(prefill.state, step.state)):
        raise ValueError("the prefill and the decode step hold different caches: compile the prefill with "
                         "state=step.state")
    step.reset_state()
    return drive(step.graph, prompt.to(step.device), max_new_tokens, prefill=prefill.graph if prefill else None,
                 run=runner(*([step] + ([prefill] if prefill else []))), cache=step.state)

"""Import a PyTorch module into hoid: `hoid.from_torch(module, args)`.

    g = hoid.from_torch(model, (input_ids,))
    logits, = hoid.run(g, input_ids)          # weights are bound to the graph

The module is captured with `torch.export` (static shapes, the example inputs' shapes and dtypes),
functionalized, and lowered op by op through the ATen table (`aten_table.py`). See `convert.py`
for the order of inputs and outputs, `outputs.py` for how a pytree result is flattened.

Modules: `export` (driving torch.export), `aten_table` (which ATen op becomes which hoid ops) and
its lowerings (`lower_<family>`, one module per family of hoid ops), `convert` (the walk over the program),
`unsupported` (collecting every op that cannot be imported), `outputs` (result flattening),
`fx` (the GraphModule a torch.compile backend receives).
"""

from __future__ import annotations

import torch

from ...errors import UnsupportedOpError
from ..graph import Graph
from .aten_table import register_lowering
from .convert import convert
from .emitter import Emitter, NotLowerable
from .export import decompose_refused, export_program
from .fx import bind_graph_module
from .outputs import flatten_outputs


def from_torch(module: torch.nn.Module, args, kwargs: dict | None = None, *,
               name: str | None = None) -> Graph:
    """The hoid graph of `module(*args, **kwargs)`; `module` may be the FX `GraphModule` and `args` the
    example inputs a `torch.compile` backend receives (see `fx.py`: lifted parameters and buffers become
    weights or state, the other tensors inputs, SymInts their concrete sizes).

    Tensor arguments become the graph's inputs; parameters, read-only buffers and tensor constants
    become weights named by their module path and bound to the graph; buffers the module mutates
    (KV caches) become state inputs whose updates are outputs. Bound weights share memory with the
    module's tensors (no copy). The module is exported as it is (call `.eval()` first for inference).

    Raises `hoid.ExportError` (torch's reason and a hint) when torch.export cannot capture the module,
    and `hoid.UnsupportedOpError` listing every ATen op that cannot be imported, with its count and
    the source line of its first use.
    """
    if isinstance(args, torch.Tensor):
        args = (args,)
    name = name or type(module).__name__
    if isinstance(module, torch.fx.GraphModule):
        binding = bind_graph_module(module, args)
        module, args = binding.module, binding.args
    program = export_program(module, tuple(args), kwargs, name)
    try:
        return convert(program, name)
    except UnsupportedOpError as error:
        # Some calls could not be lowered as they are (an argument hoid's op lacks): where torch can
        # decompose those ops, import the decomposed program instead; its error, if any, is complete.
        decomposed = decompose_refused(program, error.targets)
        if decomposed is None:
            raise
        return convert(decomposed, name)


__all__ = ["Emitter", "NotLowerable", "flatten_outputs", "from_torch", "register_lowering"]

"""Importing the FX `GraphModule` a `torch.compile` backend receives (what `from_torch` does with one).

Dynamo hands a backend a torch-level FX graph (not ATen) whose placeholders include the module's own
parameters and buffers, lifted as inputs (torch inlines built-in nn.Modules, so `self.linear.weight`
arrives as `L_self_modules_linear_parameters_weight_`), and, after a recompile for a new shape, SymInt
sizes. To reach the ATen program the importer knows, the GraphModule goes through the same
`torch.export` as any module (one path, with its functionalization and decompositions; aot_autograd
or make_fx would give an ATen graph without export's signature of weights, buffers and mutations,
and need a second converter). Before that, `bind_graph_module` puts the lifted tensors back on a
module as parameters and buffers, so they become bound weights (or state, where the graph mutates
them) rather than inputs, and replaces SymInts by the concrete sizes of the call: hoid graphs have
static shapes, one per shape seen.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def _placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def is_lifted(node: torch.fx.Node, example) -> bool:
    """Whether placeholder `node` is a parameter or buffer dynamo lifted from the module (not an argument)."""
    if isinstance(example, torch.nn.Parameter):
        return True
    source = getattr(node.meta.get("grapharg"), "source", None)
    if source is None or not isinstance(example, torch.Tensor):
        return False
    from torch._dynamo.source import is_from_unspecialized_param_buffer_source

    return bool(is_from_unspecialized_param_buffer_source(source))


class BoundGraphModule(torch.nn.Module):
    """`gm` with its lifted placeholders held as parameters and buffers (the very tensors, not copies);
    `forward` takes the remaining arguments, in their order, and calls `gm` with all of them."""

    def __init__(self, gm: torch.fx.GraphModule, lifted: dict[int, tuple[str, torch.Tensor]], arity: int):
        super().__init__()
        self.gm, self.arity, self.lifted_names = gm, arity, {}
        for i, (name, tensor) in lifted.items():
            if isinstance(tensor, torch.nn.Parameter):
                self.register_parameter(name, tensor)
            else:
                self.register_buffer(name, tensor)
            self.lifted_names[i] = name

    def forward(self, *free):
        free, args = iter(free), []
        for i in range(self.arity):
            args.append(getattr(self, self.lifted_names[i]) if i in self.lifted_names else next(free))
        return self.gm(*args)


@dataclass
class Binding:
    """How a call's arguments map onto the imported graph: `lifted` are the positions held as weights or
    state (by the name of their graph input), `free` the positions passed through as arguments."""

    module: BoundGraphModule
    free: list[int]
    lifted: dict[int, str]
    args: tuple


def lifted_positions(gm: torch.fx.GraphModule, example_inputs) -> frozenset[int]:
    """The placeholders of `gm` dynamo lifted from the module. Ask while the backend runs: dynamo drops
    the placeholders' `grapharg` once the backend returns (a call sees only plain tensors for buffers)."""
    return frozenset(i for i, (n, e) in enumerate(zip(_placeholders(gm), example_inputs)) if is_lifted(n, e))


def bind_graph_module(gm: torch.fx.GraphModule, example_inputs, lifted: frozenset[int] | None = None) -> Binding:
    """`gm` ready for `torch.export`: lifted parameters and buffers (`lifted`, default found from the
    placeholders) bound, SymInts made concrete."""
    nodes, example_inputs = _placeholders(gm), list(example_inputs)
    lifted_at = lifted_positions(gm, example_inputs) if lifted is None else lifted
    if len(nodes) != len(example_inputs):
        raise ValueError(f"the GraphModule has {len(nodes)} placeholders, given {len(example_inputs)} inputs")
    lifted, free, args = {}, [], []
    for i, (node, value) in enumerate(zip(nodes, example_inputs)):
        if i in lifted_at:
            lifted[i] = (node.name, value)
        else:
            free.append(i)
            # a SymInt from a dynamic recompile: its value at this call (the hoid graph specialises to it)
            args.append(int(value) if isinstance(value, torch.SymInt) else value)
    module = BoundGraphModule(gm, lifted, len(nodes))
    return Binding(module, free, dict(module.lifted_names), tuple(args))

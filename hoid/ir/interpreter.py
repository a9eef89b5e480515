"""The reference interpreter: runs a graph with each op's torch reference, on any device and dtype.

It is functional: state inputs are not modified; their updates are among the outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from ..errors import InputError
from .analysis import deaths
from .graph import Graph, Node, expect_graph
from .registry import get_op
from .types import TensorType


def _check(name: str, kind: str, declared: TensorType, tensor) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise InputError(f"{kind} %{name}: expected a torch.Tensor of type {declared}, got {type(tensor).__name__}")
    got = TensorType.of(tensor)
    if not got.same_data_type(declared):
        raise InputError(f"{kind} %{name}: declared {declared}, got a tensor of type {got.contiguous()}")


def bind_inputs(graph: Graph, inputs, weights: Mapping[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
    """Map value names to tensors for every graph input, checking types; errors name the input."""
    runtime = graph.runtime_inputs
    if len(inputs) != len(runtime):
        names = ", ".join(f"%{v.name}: {v.type}" for v in runtime)
        raise InputError(f"graph {graph.name!r} takes {len(runtime)} inputs ({names}), got {len(inputs)}")
    env: dict[str, torch.Tensor] = {}
    for value, tensor in zip(runtime, inputs):
        _check(value.name, graph.kind_of(value.name) or "input", value.type, tensor)
        env[value.name] = tensor
    given = dict(graph.weights)
    given.update(weights or {})
    missing = [v.name for v in graph.weight_inputs if v.name not in given]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise InputError(f"graph {graph.name!r}: no tensor for weight(s) {', '.join(missing[:5])}{more}; "
                         "bind them to the graph or pass weights={name: tensor}")
    for value in graph.weight_inputs:
        _check(value.name, "weight", value.type, given[value.name])
        env[value.name] = given[value.name]
    return env


def run_node(node: Node, args: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    result = get_op(node.op).reference(*args, **node.attrs)
    return result if isinstance(result, tuple) else (result,)


def run(graph: Graph, *inputs: torch.Tensor, weights: Mapping[str, torch.Tensor] | None = None,
        on_node: Callable[[Node, tuple[torch.Tensor, ...]], None] | None = None) -> tuple[torch.Tensor, ...]:
    """Run `graph` on `inputs` (activation and state inputs, in declaration order).

    `weights` maps weight names to tensors where the graph has none bound. Returns every output, in order
    (state updates included). `on_node(node, outputs)` is called after each node, for tracing.
    """
    env = bind_inputs(expect_graph(graph, "hoid.run"), inputs, weights)
    # Constants (arange, full) have no operand to take a device from: they go where the inputs are.
    device = next(iter(env.values())).device if env else None
    # each value freed after its last reader: a model's intermediates held to the end took 50 GB of an H100
    # where the batch's own working set is 3 GB (BGE-M3 32x512, 12-05)
    dead = deaths(graph.nodes, {v.name for v in graph.outputs})
    for i, node in enumerate(graph.nodes):
        outs = run_node(node, [env[v.name] for v in node.inputs])
        if len(outs) != len(node.outputs):
            raise RuntimeError(f"{node.op}: reference returned {len(outs)} outputs, the graph declares "
                               f"{len(node.outputs)}")
        for value, tensor in zip(node.outputs, outs):
            if not node.inputs and device is not None:
                tensor = tensor.to(device)
            # torch keeps a non-contiguous input's layout through most ops; the IR declares such outputs
            # contiguous, and kernels fed by them may rely on it.
            if value.type.strides is None and not tensor.is_contiguous():
                tensor = tensor.contiguous()
            env[value.name] = tensor
        if on_node is not None:  # what later nodes read: on the inputs' device, contiguous as declared
            on_node(node, tuple(env[v.name] for v in node.outputs))
        for name in dead.get(i, ()):
            del env[name]
    return tuple(env[v.name] for v in graph.outputs)

"""Lowering: a graph -> a flat graph whose every `kernel` node has a launcher, plus what folds at bind time.

A kernel node whose implementation cannot run here (unknown id, another version of its source, an arch
it does not build for: `hoid.kernels.launch.KernelUnavailable`) is replaced by its body, inlined, with a
warning naming the node and the reason: an optimized document never becomes unrunnable. Inlined values
are renamed `<node output>.<body value>`, so names stay unique and say where they came from.

A bool attention mask that several plain `sdpa` nodes read is converted to its additive form once, before
the first of them (`_convert_shared_masks`), as Inductor does: torch converts it on every call.

Bind-time values are the weight-only ones (`hoid.ir.analysis.weight_only_values`, the one owner of that
rule), plus the values built from constants alone (`arange`, `full` and what follows from them): they
are the same on every call, so the runtime computes them once instead of allocating them per call.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from ..ir import Graph, Node, TensorType, Value
from ..ir.analysis import weight_only_values
from ..kernels.launch import BoundKernel, KernelUnavailable, bind


class KernelFallbackWarning(UserWarning):
    """A kernel node runs its body (the reference subgraph) because its implementation cannot run."""


@dataclass(frozen=True)
class Lowered:
    """graph: the flat graph (same inputs and outputs as the original); kernels: kernel node (by its first
    output's name) -> its launcher; fallbacks: kernel node name -> why it runs its body; static: names of
    the values computed at bind time."""

    graph: Graph
    kernels: dict[str, BoundKernel]
    fallbacks: dict[str, str]
    static: frozenset[str]


def lower(graph: Graph, *, arch: str | None = None, kernels=None, pdl: bool = False,
          pdl_early: bool = False) -> Lowered:
    """pdl: bind the kernels whose spec supports it to launch with programmatic dependent launch (the
    caller checked the arch has it); pdl_early: and those whose `pdl_early` inputs are bind-time values to
    read them before their wait."""
    bound: dict[str, BoundKernel] = {}
    fallbacks: dict[str, str] = {}
    nodes: list[Node] = []
    _flatten(graph.nodes, {}, "", (arch, kernels, pdl), bound, fallbacks, nodes)
    nodes = _convert_shared_masks(nodes)
    flat = Graph(graph.name, list(graph.inputs), nodes, list(graph.outputs), dict(graph.state_updates),
                 dict(graph.weights))
    static = frozenset(_static_values(flat))
    if pdl and pdl_early:
        _read_weights_early(flat, bound, static)
    return Lowered(flat, bound, fallbacks, static)


def _read_weights_early(flat: Graph, bound: dict[str, BoundKernel], static: frozenset[str]) -> None:
    """PDL launches whose `pdl_early` inputs are all bind-time values read them before their wait: no kernel
    of a call writes a weight, so the weight tiles may stream in while the previous kernel drains."""
    for node in flat.nodes:
        b = bound.get(node.outputs[0].name) if node.op == "kernel" else None
        if b is not None and b.pdl and all(node.inputs[i].name in static for i in b.spec.pdl_early):
            bound[node.outputs[0].name] = b.early()


def _flatten(body_nodes, rename: dict[str, Value], prefix: str, how, bound, fallbacks, out) -> None:
    """Append `body_nodes` to `out` with their values renamed (`rename`: body name -> outer value), each
    runnable kernel bound and each unavailable one replaced by its own body, recursively."""
    arch, kernels, pdl = how

    def outer(v: Value) -> Value:
        return rename.get(v.name) or Value(prefix + v.name, v.type)

    for node in body_nodes:
        node = Node(node.op, tuple(outer(v) for v in node.inputs), node.attrs, tuple(outer(v) for v in node.outputs))
        if node.op != "kernel":
            out.append(node)
            continue
        try:
            bound[node.outputs[0].name] = bind(node, arch=arch, kernels=kernels, pdl=pdl)
            out.append(node)
            continue
        except KernelUnavailable as e:
            reason = str(e)
        fallbacks[node.name] = reason
        warnings.warn(f"kernel node {node.name} ({node.attrs['kernel']}) runs its body instead: {reason}",
                      KernelFallbackWarning, stacklevel=4)
        body: Graph = node.attrs["body"]
        inner = {b.name: v for b, v in zip(body.inputs_of_kind("input"), node.inputs, strict=True)}
        sub_prefix = node.outputs[0].name + "."
        passthrough = []
        for b_out, v in zip(body.outputs, node.outputs, strict=True):
            if b_out.name in inner:  # the body returns an operand as is: copy nothing, alias it
                passthrough.append((inner[b_out.name], v))
            else:
                inner[b_out.name] = v
        _flatten(body.nodes, inner, sub_prefix, how, bound, fallbacks, out)
        for src, dst in passthrough:
            out.append(Node("reshape", (src,), {"shape": dst.type.shape}, (dst,)))


def _convert_shared_masks(nodes: list[Node]) -> list[Node]:
    """`nodes` with each bool mask that two or more plain `sdpa` nodes read (with q of one dtype) converted
    once to the additive mask torch would build on each call, where(mask, 0, -inf) in q's dtype (true
    attends: 0 is added to its score, -inf to the others'), before its first reader, which all read then.
    The same attention by torch's own definition of a bool mask. On the H100 (12-05) BGE-M3's 24 layers
    spent 0.54 ms of a 22.8 ms step converting one [32, 1, 512, 512] mask, once per layer, where Inductor's
    step converts it once. The two constants are bind-time values (computed once)."""
    def mask_of(node: Node) -> tuple[str, str] | None:
        if node.op == "sdpa" and len(node.inputs) == 4 and node.inputs[3].type.dtype == "bool":
            return node.inputs[3].name, node.inputs[0].type.dtype
        return None

    readers: dict[tuple[str, str], int] = {}
    for node in nodes:
        if (key := mask_of(node)) is not None:
            readers[key] = readers.get(key, 0) + 1
    if all(n < 2 for n in readers.values()):
        return nodes
    out: list[Node] = []
    additive: dict[tuple[str, str], Value] = {}
    for node in nodes:
        key = mask_of(node)
        if key is not None and readers[key] > 1:
            if key not in additive:
                mask, dtype = node.inputs[3], key[1]
                zero, never = (Value(f"{mask.name}.{what}_{dtype}", TensorType((), dtype))
                               for what in ("zero", "never"))
                additive[key] = Value(f"{mask.name}.additive_{dtype}", TensorType(mask.type.shape, dtype))
                out += [Node("full", (), {"shape": (), "value": 0.0, "dtype": dtype}, (zero,)),
                        Node("full", (), {"shape": (), "value": float("-inf"), "dtype": dtype}, (never,)),
                        Node("where", (mask, zero, never), {}, (additive[key],))]
            node = Node(node.op, (*node.inputs[:3], additive[key]), node.attrs, node.outputs)
        out.append(node)
    return out


def _static_values(flat: Graph) -> set[str]:
    static = weight_only_values(flat)
    for node in flat.nodes:  # topological order: one pass is the fixpoint
        if all(v.name in static for v in node.inputs):  # no operand at all: a constant
            static.update(v.name for v in node.outputs)
    return static

"""Graph analyses that several packages need, each defined once here.

`weight_only_values`: the values a graph computes from its weights alone (a merged Q/K/V weight, a
transposed tied embedding). They are the same on every call, so the runtime computes them once when
weights are bound, and the search prices them at zero. The search applies the same rule to e-classes
(`hoid.search.cost.weight_only_classes`) through `folds`, so the two can never disagree.

`last_reads` and `deaths`: when each value of a run of nodes is last read, and so can be freed. The
interpreter, the compiled step's generated code and the exported package's forward free by them: a model's
intermediates held to the end took 45-54 GB of a 1.5 GB BGE-M3 batch on an H100 (12-05).

`made_contiguous`: where generated code gives a value the contiguous layout the IR declares, which torch
does not always (an op keeps a strided operand's layout), for the compiled step and the exported forward.
"""

from __future__ import annotations

from collections.abc import Iterable

from .graph import Graph
from .registry import get_op


def folds(operands_weight_only: Iterable[bool]) -> bool:
    """Whether a node whose operands are weight-only or not (in order) is itself weight-only: it reads at
    least one operand, and only weight-only ones. A node with no operands (`arange`, `full`) is not: it is
    cheap, and folding it would only move a constant from the graph into the bound weights."""
    flags = list(operands_weight_only)
    return bool(flags) and all(flags)


def weight_only_values(graph: Graph) -> set[str]:
    """Names of the values computed from weight inputs alone (weight inputs included); graphs are
    topologically ordered, so one pass is the fixpoint."""
    done = {v.name for v in graph.weight_inputs}
    for node in graph.nodes:
        if folds(v.name in done for v in node.inputs):
            done.update(v.name for v in node.outputs)
    return done


def last_reads(nodes) -> dict[str, int]:
    """Value name -> the index of the last node of `nodes` that reads it."""
    return {v.name: i for i, node in enumerate(nodes) for v in node.inputs}


def deaths(nodes, outlive: set[str]) -> dict[int, list[str]]:
    """Node index -> the values made by `nodes` that are dead after it (its last reader; a value nothing
    reads dies after the node that makes it), but those in `outlive` (returned, or copied at the end)."""
    last = last_reads(nodes)
    dead: dict[int, list[str]] = {}
    for i, node in enumerate(nodes):
        for v in node.outputs:
            if v.name not in outlive:
                dead.setdefault(max(last.get(v.name, i), i), []).append(v.name)
    return dead


def made_contiguous(nodes, outlive: set[str]) -> set[str]:
    """The values of `nodes` (a run's steps, in order) after whose node generated code calls `.contiguous()`.

    The IR declares an op's output contiguous, but torch keeps a strided operand's layout through most ops,
    and a kernel fed by the value may rely on the declared one: so an op with a strided operand has its
    contiguous outputs made so, as the interpreter does. Except where only views read the value, and only
    views read theirs, down to views whose outputs are declared contiguous: those are made so instead, and
    the op's own output keeps torch's layout. Attention over heads transposed out of [B, T, H, D] returns
    its output in that memory order, which the layer transposes back and reshapes to [B, T, H * D]: made
    contiguous at the attention, the step copied it twice where eager copies nothing (BGE-M3 and
    Whisper's encoder, every layer; Whisper's own `.contiguous()` of it, an op that copies only what is
    not, ends a path as such a view does). `.contiguous()` on a view already contiguous is free. A value in
    `outlive` (returned, stored) is never left to its readers."""
    readers: dict[str, list] = {}
    for node in nodes:
        for v in node.inputs:
            readers.setdefault(v.name, []).append(node)
    made: set[str] = set()

    def sinks(value) -> set[str] | None:
        """The contiguous-declared view outputs that end every path of views from `value`; None when some
        path reaches anything but a view (or `value` outlives the run)."""
        if value.name in outlive or not readers.get(value.name):
            return None
        found: set[str] = set()
        for reader in readers[value.name]:
            if reader.op == "contiguous":  # the model's own `.contiguous()`: a copy only where one is needed
                continue
            if reader.op == "kernel" or not get_op(reader.op).is_view:
                return None
            for out in reader.outputs:
                if out.type.strides is None:
                    found.add(out.name)
                elif (below := sinks(out)) is None:
                    return None
                else:
                    found |= below
        return found

    for node in nodes:
        if node.op == "kernel" or get_op(node.op).is_view or all(v.type.strides is None for v in node.inputs):
            continue
        for v in node.outputs:
            if v.type.strides is None:
                deferred = sinks(v)
                made |= {v.name} if deferred is None else deferred
    return made

"""Driving `torch.export`: from a module to a functional ATen program the ATen table can lower.

Three steps: export the module (its failure becomes `hoid.ExportError` with torch's reason and a
hint); functionalize without decomposing (`run_decompositions({})`: in-place updates become new
values and buffer mutations become outputs, while linear, SDPA, SiLU... stay whole); then, for the
ops the table has no row for, apply torch's own decompositions, only to those, until every op is
known or nothing more decomposes. What is left is reported by `convert` as unsupported; where a
known op was refused for one of its calls' arguments, `decompose_refused` gives a second chance.
"""

from __future__ import annotations

import contextlib
import warnings

import torch
from torch.export import ExportedProgram

from ...errors import ExportError
from .aten_table import lowering_for

# Warnings torch raises from its own code during export, about its own internals: a user can do nothing
# about them (torch 2.13's run_decompositions deep-copies LeafSpecs, which warns). Only these are hidden.
_TORCH_INTERNAL_WARNINGS = (
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
)


@contextlib.contextmanager
def quiet_torch_internals():
    """Hide `_TORCH_INTERNAL_WARNINGS` (and nothing else) while hoid drives torch.export."""
    with warnings.catch_warnings():
        for category, message in _TORCH_INTERNAL_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        yield


# Rounds of decomposition: a decomposition may produce ops that decompose further.
_MAX_ROUNDS = 4

_HINTS = (
    (("data-dependent", "data dependent", "GuardOnDataDependent", "nonzero", "item()"),
     "the module branches on tensor values (data-dependent control flow): make the branch static, "
     "or express it with torch.where / torch.cond"),
    (("Constraints violated", "dynamic", "symbolic", "SymInt"),
     "the module needs dynamic shapes: hoid imports static shapes, so export one graph per shape "
     "(e.g. one per sequence length) with example inputs of exactly those shapes"),
)
_GENERAL_HINT = ("simplify the module's forward (plain tensors in and out, no Python side effects), or "
                 "wrap it in a small nn.Module that torch.export accepts")


def _hint(reason: str) -> str:
    for needles, hint in _HINTS:
        if any(n.lower() in reason.lower() for n in needles):
            return hint
    return _GENERAL_HINT


_SHAPE_HINT = ("keep every size static: mask with torch.where(mask, x, 0) rather than select with x[mask] "
               "or nonzero")


def export_error(module_name: str, stage: str, error: Exception | str, hint: str | None = None) -> ExportError:
    """`hoid.ExportError` saying what torch.export could not do, torch's reason (`.reason`) and what to
    try (`.hint`, chosen from the reason unless given)."""
    reason = error if isinstance(error, str) else f"{type(error).__name__}: {error}".strip()
    hint = hint or _hint(reason)
    short = reason if len(reason) < 2000 else reason[:2000] + " [...]"
    exc = ExportError(f"torch.export could not {stage} {module_name}.\ntorch's reason: {short}\nhint: {hint}")
    exc.reason, exc.hint = reason, hint
    return exc


def export_program(module: torch.nn.Module, args: tuple, kwargs: dict | None, name: str) -> ExportedProgram:
    """`module(*args, **kwargs)` exported, functionalized and decomposed as far as hoid needs."""
    try:
        with quiet_torch_internals():
            ep = torch.export.export(module, tuple(args), kwargs=dict(kwargs or {}))
    except Exception as e:  # torch raises many kinds here; each becomes one error with its reason
        raise export_error(name, "export", e) from e
    require_static_shapes(ep, name)
    try:
        with quiet_torch_internals():
            ep = ep.run_decompositions({})
        return decompose_unknown(ep)
    except Exception as e:
        raise export_error(name, "functionalize (run_decompositions) the program of", e) from e


def require_static_shapes(ep: ExportedProgram, name: str) -> None:
    """hoid graphs have static shapes: a tensor whose size export could only express as a symbol
    (`x[x > 0]`, `nonzero`) makes the module unimportable; say which, and where."""
    from .unsupported import source_line

    for node in ep.graph.nodes:
        val = node.meta.get("val")
        for t in val if isinstance(val, (list, tuple)) else (val,):
            if isinstance(t, torch.Tensor) and not all(isinstance(s, int) for s in t.shape):
                reason = (f"the size {list(t.shape)} of {node.name} ({node.target}) depends on the data "
                          f"(first at {source_line(node)}); hoid graphs have static shapes")
                raise export_error(name, "give static shapes for", reason, _SHAPE_HINT)


def decompose_refused(ep: ExportedProgram, targets) -> ExportedProgram | None:
    """The program with `targets` (ops some of whose calls a lowering refused, such as an SDPA with
    a mask shape hoid's op does not take) replaced by torch's decompositions; None when torch has
    none for any of them."""
    decompositions = torch.export.default_decompositions()
    table = {op: decompositions[op] for op in targets if op in decompositions}
    if not table:
        return None
    with quiet_torch_internals():
        ep = ep.run_decompositions(table)
    return decompose_unknown(ep)


def decompose_unknown(ep: ExportedProgram) -> ExportedProgram:
    """Apply torch's decompositions to the ops the ATen table does not know, and only to them."""
    decompositions = torch.export.default_decompositions()  # torch's core-ATen table
    for _ in range(_MAX_ROUNDS):
        unknown = {n.target for n in ep.graph.nodes
                   if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
                   and lowering_for(n.target) is None and n.target in decompositions}
        if not unknown:
            break
        with quiet_torch_internals():
            ep = ep.run_decompositions({op: decompositions[op] for op in unknown})
    return ep

"""Collecting what an import cannot express, so that one error lists all of it.

An import meets unsupported calls one by one; stopping at the first would make a user fix them one
by one. `Unsupported` gathers every one (by ATen op: how often it occurs, where it is first used
in the user's source, and why it could not be lowered) and `raise_if_any` reports them together.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import torch

from ...errors import UnsupportedOpError

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\n\s*(?P<code>.*)')


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_IMPORTER_DIR = os.path.dirname(__file__) + os.sep

# Ops whose presence says more than "no lowering": what the user can do about them.
_TRAINING_HINT = "the module is in training mode: call module.eval() before hoid.from_torch"
_HINTS = {
    "aten.native_dropout.default": _TRAINING_HINT,
    "aten.dropout.default": _TRAINING_HINT,
    "aten._native_batch_norm_legit_functional.default": _TRAINING_HINT,
    "aten._native_batch_norm_legit.default": _TRAINING_HINT,
    "transformers.grouped_mm_fallback.default": (
        "transformers' grouped_mm experts sort tokens into groups of data-dependent sizes; call "
        "model.set_experts_implementation('batched_mm') (static shapes) before hoid.from_torch"),
}


def source_line(node: torch.fx.Node) -> str:
    """Where `node` comes from in the model's code, as `file:line (function): code`: the innermost
    frame of its recorded stack trace outside torch itself (a call to F.dropout is reported where
    the model calls it, not inside torch.nn), or `unknown source` when export recorded none."""
    frames = list(_FRAME.finditer(node.meta.get("stack_trace") or ""))
    # The trace may begin with the frames that called the importer: the model's code comes after them.
    importer = [i for i, f in enumerate(frames) if f["file"].startswith(_IMPORTER_DIR)]
    model = frames[importer[-1] + 1:] if importer else frames
    if not model:
        return "unknown source"
    outside_torch = [f for f in model if not f["file"].startswith(_TORCH_DIR)]
    f = (outside_torch or model)[-1]
    return f"{f['file']}:{f['line']} ({f['func']}): {f['code'].strip()}"


def op_name(target) -> str:
    """`aten.topk.default` for OpOverloads, the qualified name for other callables."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._schema.name.split('::')[-1]}.{target._overloadname}"
    return getattr(target, "__qualname__", None) or str(target)


@dataclass
class _Entry:
    count: int
    first_use: str
    reason: str
    target: object  # the op itself (an OpOverload), for callers that decompose it and retry


@dataclass
class Unsupported:
    """The unsupported calls met so far, by op, in order of first appearance."""

    entries: dict[str, _Entry] = field(default_factory=dict)

    def add(self, node: torch.fx.Node, reason: str, *, count: bool = True) -> None:
        """Record a use of `node`'s op (`count=False`: a further reason about a use already counted)."""
        name = op_name(node.target)
        reason = _HINTS.get(name, reason)
        if name in self.entries:
            self.entries[name].count += 1 if count else 0
        else:
            self.entries[name] = _Entry(1, source_line(node), reason, node.target)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def raise_if_any(self, module_name: str) -> None:
        if not self.entries:
            return
        lines = [f"{module_name}: {len(self.entries)} ATen op(s) cannot be imported into hoid:"]
        for name, e in self.entries.items():
            times = "1 use" if e.count == 1 else f"{e.count} uses"
            lines.append(f"  {name} ({times}): {e.reason}\n      first used at {e.first_use}")
        lines.append("Add a lowering for each from your own code with hoid.ir.register_lowering(torch.ops.aten."
                     "<op>.<overload>, fn), where fn(em, **args) emits hoid ops (see its docstring; "
                     "hoid.register_op adds an op hoid lacks), or change the model to avoid them.")
        error = UnsupportedOpError("\n".join(lines))
        error.ops = {name: e.count for name, e in self.entries.items()}  # op name -> uses
        error.targets = [e.target for e in self.entries.values()]
        raise error

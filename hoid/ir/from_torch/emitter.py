"""`Emitter`: what a lowering uses to turn one FX node into hoid nodes.

A lowering (see `aten_table.py`) receives the emitter, the FX node being lowered and the node's
arguments with every FX node already replaced by its hoid `Value`. It emits hoid nodes with
`em.op(...)` and returns the value (or tuple of values) that stands for the FX node's result.
Emitted values are named after the FX node (`linear_3`), with a tag for intermediates
(`linear_3.wT`), so that a graph printed as a document can be read side by side with torch's.
"""

from __future__ import annotations

import torch

from ..builder import GraphBuilder
from ..dtypes import dtype_name
from ..graph import Value


def is_value(x) -> bool:
    """Whether a lowering's argument is a tensor (a hoid value) rather than a Python number or list."""
    return isinstance(x, Value)


class NotLowerable(Exception):
    """A lowering cannot express this call in hoid ops; the message says what about it (e.g. an argument)."""


class Emitter:
    def __init__(self, builder: GraphBuilder):
        self.builder = builder
        self.node: torch.fx.Node | None = None  # the FX node being lowered
        self._taken: set[str] = set()

    # --- naming ------------------------------------------------------------------------------------
    def claim(self, name: str) -> str:
        """`name`, or `name.2`, `name.3`... if it is taken: value names are unique in a graph."""
        unique, k = name, 1
        while unique in self._taken:
            k += 1
            unique = f"{name}.{k}"
        self._taken.add(unique)
        return unique

    def _name(self, tag: str | None) -> str:
        base = self.node.name if self.node is not None else "const"
        return self.claim(base if tag is None else f"{base}.{tag}")

    # --- emitting ----------------------------------------------------------------------------------
    def op(self, op_name: str, *operands: Value, tag: str | None = None,
           **attrs) -> Value | tuple[Value, ...]:
        """Add one hoid node. `tag` names an intermediate (`<fx name>.<tag>`); the node's final value
        goes untagged so that it keeps the FX node's name."""
        return self.builder.op(op_name, *operands, name=self._name(tag), **attrs)

    def full(self, shape, value, dtype, tag: str = "fill") -> Value:
        """A constant tensor (`full`): how scalars that torch broadcasts become hoid operands.
        (A bool fill is written as 0 or 1: `full`'s value is a number, its dtype says bool.)"""
        value = int(value) if isinstance(value, bool) else value
        return self.op("full", shape=tuple(shape), value=value, dtype=dtype_name(dtype), tag=tag)

    # --- facts about the FX node -------------------------------------------------------------------
    def out_meta(self, index: int | None = None) -> torch.Tensor:
        """The fake tensor torch.export recorded for the current node's output (or output `index`)."""
        val = self.node.meta.get("val")
        if index is not None:
            val = val[index]
        if not isinstance(val, torch.Tensor):
            raise NotLowerable(f"its result is not a tensor ({type(val).__name__})")
        return val

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.out_meta().shape)

    @property
    def out_dtype(self) -> str:
        return dtype_name(self.out_meta().dtype)

    # --- small conveniences shared by the lowerings -----------------------------------------------
    def cast(self, x: Value, dtype, tag: str | None = None) -> Value:
        """`x` as `dtype`; no node when it already is."""
        dtype = dtype_name(dtype)
        return x if x.type.dtype == dtype else self.op("cast", x, dtype=dtype, tag=tag)

    def reshape(self, x: Value, shape, tag: str | None = None) -> Value:
        """`x` in `shape`; no node when it already has it."""
        shape = tuple(int(s) for s in shape)
        return x if x.type.shape == shape else self.op("reshape", x, shape=shape, tag=tag)

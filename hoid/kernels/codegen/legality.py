"""Fusion legality: can one generated kernel compute this region, and over what iteration space?

A generated kernel walks a 2-D tile space: rows (every dim but the last, flattened) by columns (the last
dim) of the region's iteration shape S. Every value of the region is a tile broadcast over S, so:

- elementwise ops (and broadcasts between them) fuse whenever each value's shape broadcasts to S;
- row ops (reductions over the last dim, softmax, layer/RMS norm: templates that read `{mask}` or `{n}`)
  fuse with their prologue and epilogue when a whole row fits one tile (a row of at most `MAX_ROW`): the
  kernel then makes as many passes over the tile as the row op needs (the mean before the variance, the max
  before the sum), so a reduction whose full result is needed first is never cut across. A longer row would
  need a kernel that loops over the row for each pass: it is refused, with that reason;
- every row op of a region reduces the same rows (the region's S);
- a reduction without keepdim gives a value per row (shape S[:-1]); it may feed only other per-row values
  and scalars, not a value laid out over S, whose broadcast would align it differently;
- a value of integer or bool dtype is computed in its own dtype; floats in float32 (float64 for f64).

`check(body)` returns the `Layout` or raises `Refused` with the reason in words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...ir import Graph
from ...ir.registry import get_op
from .templates import COMPUTE, choose, is_row_template

MAX_ROW = 16384  # the longest row one tile holds (float32 registers of one program)


class Refused(ValueError):
    """The region cannot be one generated kernel; the message says why."""


@dataclass(frozen=True)
class Layout:
    """shape: the iteration shape S; rows, cols: S as a 2-D space; row_kernel: a row fits one tile (a row op
    is present); addressing: each value's shape as a rank-len(S) broadcast of S; per_row: values that hold
    one element per row (reduced ones); templates: the template of each node (by node index)."""

    shape: tuple[int, ...]
    rows: int
    cols: int
    row_kernel: bool
    addressing: dict[str, tuple[int, ...]]
    per_row: frozenset[str]
    templates: dict[int, str]


def _right_aligned(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + tuple(shape)


def _broadcasts(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    return len(shape) == len(to) and all(s in (1, t) for s, t in zip(shape, to, strict=True))


def _row_dims_ok(node, x_rank: int) -> str | None:
    """None when the row op `node` works over the last dim, else what it does instead."""
    attrs = node.attrs
    if "dim" in attrs:
        dims = attrs["dim"]
        if dims is None:
            dims = tuple(range(x_rank))
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        if sorted(d % max(x_rank, 1) for d in dims) != [max(x_rank, 1) - 1]:
            return f"{node.op} over dim {list(dims)}, not the last dim alone (only row reductions are generated)"
    if "normalized_shape" in attrs and len(attrs["normalized_shape"]) != 1:
        return f"{node.op} over the trailing {len(attrs['normalized_shape'])} dims, not the last dim alone"
    return None


def check(body: Graph) -> Layout:
    """The `Layout` of one kernel computing `body` (a region cut out with `hoid.ir.Region`), or `Refused`."""
    if not body.nodes:
        raise Refused("the region has no nodes")
    templates: dict[int, str] = {}
    row_inputs: list[tuple[int, ...]] = []
    for i, node in enumerate(body.nodes):
        if len(node.outputs) != 1:
            raise Refused(f"{node.name}: {node.op} has {len(node.outputs)} outputs (generated ops have one)")
        out = node.outputs[0].type
        for v in [*node.inputs, node.outputs[0]]:
            if v.type.dtype not in COMPUTE:
                raise Refused(f"{node.name}: dtype {v.type.dtype} has no Triton type here")
        template, why = choose(get_op(node.op), node.attrs, len(node.inputs), out.dtype)
        if template is None:
            raise Refused(f"{node.name}: {why}")
        templates[i] = template
        if is_row_template(template):
            x = node.inputs[0].type
            bad = _row_dims_ok(node, x.rank)
            if bad is not None:
                raise Refused(f"{node.name}: {bad}")
            row_inputs.append(tuple(x.shape) or (1,))
    if row_inputs:
        shape = row_inputs[0]
        if any(s != shape for s in row_inputs):
            listed = ", ".join(str(list(s)) for s in dict.fromkeys(row_inputs))
            raise Refused(f"the row ops reduce rows of different shapes ({listed}): one kernel has one row space")
        if shape[-1] > MAX_ROW:
            raise Refused(f"a row of {shape[-1]} does not fit one tile (at most {MAX_ROW}): a kernel that makes "
                          "its passes by looping over the row is not generated, so the reduction is not fused "
                          "with what needs its full result")
    else:
        shapes = [tuple(n.outputs[0].type.shape) for n in body.nodes]
        rank = max(len(s) for s in shapes)
        shape = tuple(max(s[d] for s in (_right_aligned(s, rank) for s in shapes)) for d in range(rank)) or (1,)
    if math.prod(shape) == 0:
        raise Refused(f"the region's iteration shape {list(shape)} is empty")
    for gi in body.inputs:
        t = gi.value.type
        if t.rank and 0 in tuple(t.layout()) and t.numel > 1:
            raise Refused(f"input %{gi.value.name} {t} is an expanded view (stride 0): no check can draw values "
                          "into it; the region must take the tensor before the expand")
    for v in body.outputs:
        if not v.type.is_contiguous:
            raise Refused(f"output %{v.name} {v.type} is a strided view: a generated kernel writes its outputs "
                          "contiguous; leave the view outside the region")
    rank = len(shape)
    lead = shape[:-1]
    addressing: dict[str, tuple[int, ...]] = {}
    per_row: set[str] = set()
    for v in body.inputs:
        addressing[v.value.name] = _right_aligned(tuple(v.value.type.shape), rank) if v.value.type.rank <= rank \
            else tuple(v.value.type.shape)
    for i, node in enumerate(body.nodes):
        out = node.outputs[0]
        template = templates[i]
        flat_in = [v.name for v in node.inputs if v.name in per_row]
        if is_row_template(template):
            x = node.inputs[0]
            if x.name in per_row or addressing.get(x.name) != shape:
                raise Refused(f"{node.name}: {node.op} reads {x.name}, which is not laid out over the region's "
                              f"rows {list(shape)}")
            if out.type.rank < x.type.rank:  # keepdim=False: one value per row, shape S[:-1]
                per_row.add(out.name)
                addressing[out.name] = lead + (1,)
            else:
                addressing[out.name] = _right_aligned(tuple(out.type.shape), rank)
            for w in node.inputs[1:]:
                if not _broadcasts(addressing.get(w.name, ()), shape):
                    raise Refused(f"{node.name}: operand {w.name} {list(w.type.shape)} does not broadcast to "
                                  f"the rows {list(shape)}")
            continue
        if flat_in:
            others = [v for v in node.inputs if v.name not in per_row and v.type.rank > 0]
            if others:
                raise Refused(f"{node.name}: {node.op} combines {flat_in[0]}, a value per row (a reduction "
                              f"without keepdim), with {others[0].name} {list(others[0].type.shape)}: their "
                              "broadcast would not align rows")
            per_row.add(out.name)
            addressing[out.name] = lead + (1,)
        else:
            addressing[out.name] = _right_aligned(tuple(out.type.shape), rank)
    for name, shape_of in addressing.items():
        if not _broadcasts(shape_of, shape):
            raise Refused(f"%{name} {list(shape_of)} does not broadcast to the region's iteration shape "
                          f"{list(shape)}")
    return Layout(shape, math.prod(lead), shape[-1], bool(row_inputs), addressing, frozenset(per_row), templates)

"""Fusion legality: can one generated kernel compute this region, and over what iteration space?

A generated kernel walks a 2-D tile space: rows (every dim but the last, flattened) by columns (the last
dim) of the region's iteration shape S. Every value of the region is a tile broadcast over S, so:

- elementwise ops (and broadcasts between them) fuse whenever each value's shape broadcasts to S;
- row ops (reductions over the last dim, softmax, layer/RMS norm: templates that read `{mask}` or `{n}`)
  fuse with their prologue and epilogue, and a reduction whose full result is needed first is never cut
  across: when a whole row fits one tile (a row of at most `max_row`, `MAX_ROW` unless told) the kernel
  makes as many passes over the tile as the row ops need (the mean before the variance, the max before the
  sum); a longer row is *looped*: each pass walks the row a tile at a time (`looped.py`), which every
  statistic that is a sum, max or min over the row allows (`templates.unsplittable` says which do not);
- views (templates `"view"`, and expand's) move no data: a value a view reads is evaluated at the
  coordinates the view maps its own to (`index.py`), down to the loads of region inputs. So a view fuses
  wherever its input can be computed at other coordinates: an input, or elementwise ops over inputs; a row
  op's result exists once per row, and a view that would read it elsewhere is refused;
- every row op of a region reduces the same rows (the region's S);
- a reduction without keepdim gives a value per row (shape S[:-1]); it may feed only other per-row values
  and scalars, not a value laid out over S, whose broadcast would align it differently;
- a value of integer or bool dtype is computed in its own dtype; floats in float32 (float64 for f64).

`check(body)` returns the `Layout` (with the coordinates each value is evaluated at) or raises `Refused` with
the reason in words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...ir import Graph
from ...ir.registry import get_op
from .index import ZERO, Ix, broadcast_coords, dim, view_coords
from .templates import COMPUTE, VIEW, choose, is_row_template, unsplittable

MAX_ROW = 16384  # the longest row one tile holds (float32 registers of one program); longer rows are looped


class Refused(ValueError):
    """The region cannot be one generated kernel; the message says why."""


@dataclass(frozen=True)
class Layout:
    """shape: the iteration shape S; rows, cols: S as a 2-D space; row_kernel: a row fits one tile (a row op
    is present); addressing: each value's shape as a rank-len(S) broadcast of S; per_row: values that hold
    one element per row (reduced ones); templates: the template of each node (by node index); requests: the
    coordinates each value is evaluated at (its own first, where it is read in place); looped: a row op's rows
    are longer than `max_row`, so its passes loop over each row a tile at a time."""

    shape: tuple[int, ...]
    rows: int
    cols: int
    row_kernel: bool
    addressing: dict[str, tuple[int, ...]]
    per_row: frozenset[str]
    templates: dict[int, str]
    requests: dict[str, tuple[tuple[Ix, ...], ...]] = field(default_factory=dict)
    looped: bool = False
    max_row: int = MAX_ROW

    def own_coords(self, value) -> tuple[Ix, ...]:
        """The coordinates where `value` is itself (not through a view): S's dims it is laid out over."""
        shape, rank = self.shape, len(self.shape)
        vshape = tuple(value.type.shape)
        first = 0 if value.name in self.per_row else rank - len(vshape)
        return tuple(ZERO if s == 1 else dim(first + i, shape) for i, s in enumerate(vshape))


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


def _in_place(body: Graph, templates: dict[int, str]) -> set[str]:
    """The values read in place (at their own coordinates): outputs and row ops' results (a row op's result
    exists only there), and what non-view nodes among those read."""
    marked = {v.name for v in body.outputs}
    marked.update(n.outputs[0].name for i, n in enumerate(body.nodes) if is_row_template(templates[i]))
    for i in reversed(range(len(body.nodes))):
        node = body.nodes[i]
        if node.outputs[0].name in marked and templates[i] != VIEW:
            marked.update(v.name for v in node.inputs)
    return marked


def check(body: Graph, *, max_row: int = MAX_ROW) -> Layout:
    """The `Layout` of one kernel computing `body` (a region cut out with `hoid.ir.Region`), or `Refused`.
    Rows longer than `max_row` are looped (tests make it small, so that a short row is several tiles)."""
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
    in_place = _in_place(body, templates)
    if row_inputs:
        shape = row_inputs[0]
        if any(s != shape for s in row_inputs):
            listed = ", ".join(str(list(s)) for s in dict.fromkeys(row_inputs))
            raise Refused(f"the row ops reduce rows of different shapes ({listed}): one kernel has one row space")
        if shape[-1] > max_row:
            for i, node in enumerate(body.nodes):
                why = unsplittable(templates[i]) if is_row_template(templates[i]) else None
                if why is not None:
                    raise Refused(f"{node.name}: a row of {shape[-1]} does not fit one tile (at most {max_row}) and "
                                  f"{node.op}'s template cannot loop over it: {why}; so the reduction is not fused "
                                  "with what needs its full result")
    else:
        shapes = [tuple(n.outputs[0].type.shape) for n in body.nodes if n.outputs[0].name in in_place]
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
        if v.value.name in in_place:
            addressing[v.value.name] = _right_aligned(tuple(v.value.type.shape), rank) \
                if v.value.type.rank <= rank else tuple(v.value.type.shape)
    for i, node in enumerate(body.nodes):
        out = node.outputs[0]
        template = templates[i]
        if out.name not in in_place:  # read only through views: evaluated where they read it
            continue
        if template == VIEW:
            addressing[out.name] = _right_aligned(tuple(out.type.shape), rank)
            continue
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
    layout = Layout(shape, math.prod(lead), shape[-1], bool(row_inputs), addressing, frozenset(per_row), templates,
                    looped=bool(row_inputs) and shape[-1] > max_row, max_row=max_row)
    requests: dict[str, list] = {}
    for v in body.outputs:
        requests.setdefault(v.name, []).append(layout.own_coords(v))
    for i in reversed(range(len(body.nodes))):
        node = body.nodes[i]
        for coords in requests.get(node.outputs[0].name, ()):
            for v, at in zip(node.inputs, operand_coords(node, templates[i], coords, layout), strict=True):
                if at not in requests.setdefault(v.name, []):
                    requests[v.name].append(at)
    layout.requests.update({name: tuple(at) for name, at in requests.items()})
    return layout


def operand_coords(node, template: str, coords: tuple[Ix, ...], layout: Layout) -> list[tuple[Ix, ...]]:
    """Where `node`, evaluated at `coords`, reads each of its operands; `Refused` where that cannot be."""
    out = node.outputs[0]
    if template == VIEW:
        return [view_coords(node, coords, layout.shape)]
    if not is_row_template(template):
        return [broadcast_coords(coords, tuple(out.type.shape), tuple(v.type.shape)) for v in node.inputs]
    if out.name not in layout.addressing or coords != layout.own_coords(out):
        raise Refused(f"{node.name}: the result of {node.op} is read through a view at other coordinates than its "
                      "own: a row op's result exists once per row, where it was reduced; leave the view outside")
    whole = layout.own_coords(node.inputs[0])
    return [whole] + [broadcast_coords(whole, layout.shape, tuple(v.type.shape)) for v in node.inputs[1:]]

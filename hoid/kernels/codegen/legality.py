"""Fusion legality: can one generated kernel compute this region, and over what iteration space?

A generated kernel walks a 2-D tile space: rows (every dim but the last, flattened) by columns (the last
dim) of the region's iteration shape S. Every value of the region is a tile broadcast over V, the shape its
values are laid out over: S itself, or a row-major reshape of it where the row ops' rows are a view of their
input (`row_view`: group norm's x [N, C, ...] is rows [N, num_groups, C/num_groups * spatial], S, over V =
x's shape; each point of S stands for the coordinates in V that `Layout.at` gives). So:

- elementwise ops (and broadcasts between them) fuse whenever each value's shape broadcasts to V;
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
- every row op of a region reduces the same rows (the region's S) of inputs of one shape (V); a row op's
  operand laid along other dims of x than its trailing ones (group norm's weight and bias, along C) is read
  where x's element is (its channel), as through a view;
- a reduction without keepdim gives a value per row (shape S[:-1]); it may feed only other per-row values
  and scalars, not a value laid out over S, whose broadcast would align it differently;
- a value of integer or bool dtype is computed in its own dtype; floats in float32 (float64 for f64).

`check(body)` returns the `Layout` (with the coordinates each value is evaluated at) or raises `Refused` with
the reason in words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from ...ir import Graph
from ...ir.registry import get_op
from .index import ZERO, Ix, broadcast_coords, dim, repeat_coords, reshaped, view_coords
from .templates import COMPUTE, REPEAT, VIEW, choose, is_row_template, moves_no_data, unsplittable

MAX_ROW = 16384  # the longest row one tile holds (float32 registers of one program); longer rows are looped


class Refused(ValueError):
    """The region cannot be one generated kernel; the message says why."""


@dataclass(frozen=True)
class Layout:
    """shape: the iteration shape S; rows, cols: S as a 2-D space; row_kernel: a row fits one tile (a row op
    is present); addressing: each value's shape as a rank-len(V) broadcast of V; per_row: values that hold
    one element per row (reduced ones); templates: the template of each node (by node index); requests: the
    coordinates each value is evaluated at (its own first, where it is read in place); looped: a row op's rows
    are longer than `max_row`, so its passes loop over each row a tile at a time. values: V where it is not S
    (None: the values are laid out over S)."""

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
    values: tuple[int, ...] | None = None

    @property
    def value_shape(self) -> tuple[int, ...]:
        """V, the shape the region's values are laid out over: S, or the shape of a row op's input that its
        rows view (group norm's [N, C, ...], whose rows are S = [N, num_groups, rest])."""
        return self.values or self.shape

    @cached_property
    def at(self) -> tuple[Ix, ...]:
        """The coordinates in V of each point of S."""
        own = tuple(dim(d, self.shape) for d in range(len(self.shape)))
        return own if self.values is None else reshaped(own, self.shape, self.values, self.shape)

    def own_coords(self, value) -> tuple[Ix, ...]:
        """The coordinates where `value` is itself (not through a view): V's dims it is laid out over (a value
        per row: S's leading dims)."""
        vshape = tuple(value.type.shape)
        if value.name in self.per_row:
            return tuple(ZERO if s == 1 else dim(i, self.shape) for i, s in enumerate(vshape))
        return broadcast_coords(self.at, self.value_shape, vshape)


def _right_aligned(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + tuple(shape)


def _broadcasts(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    return len(shape) == len(to) and all(s in (1, t) for s, t in zip(shape, to, strict=True))


@dataclass(frozen=True)
class RowView:
    """How a row op reads its input x: as rows `shape` ([*lead, row]: x's elements in order, the last dim
    the one reduced), and `along[i]`, the dims of x its operand i + 1 (a weight, a bias) is laid along."""

    shape: tuple[int, ...]
    along: tuple[tuple[int, ...], ...]

    def trailing(self, x_rank: int) -> list[bool]:
        """Whether each further operand lies along x's trailing dims (right-aligned, read in place)."""
        rank = max(x_rank, 1)
        return [dims == tuple(range(rank - len(dims), rank)) for dims in self.along]

    def operand_coords(self, x_coords: tuple[Ix, ...], operands) -> list[tuple[Ix, ...]]:
        """Where each further operand is read, x being read at `x_coords`."""
        return [tuple(ZERO if s == 1 else x_coords[d] for s, d in zip(v.type.shape, dims, strict=True))
                for v, dims in zip(operands, self.along, strict=True)]


def row_view(node) -> RowView:
    """The rows the row op `node` reduces, from its attrs: `dim` (the last dim alone) and `normalized_shape`
    (the last dim alone) reduce x's last dim, their operands right-aligned to x; `num_groups` (group norm, as
    torch defines it) reduces x [N, C, ...] in groups of C / num_groups channels with all their trailing
    dims, rows [N, num_groups, rest], its weight and bias laid along C. `Refused` for any other."""
    x = node.inputs[0].type
    shape = tuple(x.shape) or (1,)
    attrs = node.attrs
    if "dim" in attrs:
        dims = attrs["dim"]
        if dims is None:
            dims = tuple(range(x.rank))
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        if sorted(d % max(x.rank, 1) for d in dims) != [max(x.rank, 1) - 1]:
            raise Refused(f"{node.op} over dim {list(dims)}, not the last dim alone (only row reductions are "
                          "generated)")
    if "normalized_shape" in attrs and len(attrs["normalized_shape"]) != 1:
        raise Refused(f"{node.op} over the trailing {len(attrs['normalized_shape'])} dims, not the last dim alone")
    extra = [v.type for v in node.inputs[1:]]
    if "num_groups" in attrs:
        groups = attrs["num_groups"]
        return RowView((shape[0], groups, math.prod(shape[1:]) // groups), tuple((1,) for _ in extra))
    return RowView(shape, tuple(tuple(range(len(shape) - t.rank, len(shape))) for t in extra))


def _in_place(body: Graph, templates: dict[int, str], views: dict[int, RowView]) -> set[str]:
    """The values read in place (at their own coordinates): outputs and row ops' results (a row op's result
    exists only there), and what non-view nodes among those read; but not a row op's operand laid along
    other dims of x than its trailing ones (group norm's weight): the op reads it where x's channel is."""
    marked = {v.name for v in body.outputs}
    marked.update(n.outputs[0].name for i, n in enumerate(body.nodes) if is_row_template(templates[i]))
    for i in reversed(range(len(body.nodes))):
        node = body.nodes[i]
        if node.outputs[0].name in marked and not moves_no_data(templates[i]):
            reads = list(node.inputs)
            if i in views:
                trailing = views[i].trailing(node.inputs[0].type.rank)
                reads = reads[:1] + [v for v, keep in zip(reads[1:], trailing, strict=True) if keep]
            marked.update(v.name for v in reads)
    return marked


def _templates(body: Graph) -> tuple[dict[int, str], dict[int, RowView]]:
    """(each node's template, each row op's rows), or `Refused` for a node the generator cannot compute."""
    templates: dict[int, str] = {}
    views: dict[int, RowView] = {}
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
        if template == REPEAT and len({v.name for v in node.inputs}) > 1:
            raise Refused(f"{node.name}: {node.op} joins distinct tensors "
                          f"({', '.join('%' + v.name for v in node.inputs)}); only a tensor joined to itself is "
                          "generated (read at its coordinates modulo its size)")
        templates[i] = template
        if is_row_template(template):
            try:
                views[i] = row_view(node)
            except Refused as e:
                raise Refused(f"{node.name}: {e}") from None
    return templates, views


def _row_space(body: Graph, templates, views: dict[int, RowView], max_row: int) -> tuple[tuple, tuple]:
    """(S, V) of a region with row ops: the rows they all reduce, and the shape of their inputs."""
    spaces = {i: (tuple(body.nodes[i].inputs[0].type.shape) or (1,), view.shape) for i, view in views.items()}
    values, shape = next(iter(spaces.values()))
    if any(space != (values, shape) for space in spaces.values()):
        listed = ", ".join(str(list(v)) if v == s else f"{list(v)} as {list(s)}"
                           for v, s in dict.fromkeys(spaces.values()))
        raise Refused(f"the row ops reduce rows of different shapes ({listed}): one kernel has one row space")
    if shape[-1] > max_row:
        for i in views:
            why = unsplittable(templates[i])
            if why is not None:
                node = body.nodes[i]
                raise Refused(f"{node.name}: a row of {shape[-1]} does not fit one tile (at most {max_row}) and "
                              f"{node.op}'s template cannot loop over it: {why}; so the reduction is not fused "
                              "with what needs its full result")
    return shape, values


def _check_ends(body: Graph) -> None:
    """Refused for inputs and outputs no generated kernel can take or write."""
    for gi in body.inputs:
        t = gi.value.type
        if t.rank and 0 in tuple(t.layout()) and t.numel > 1:
            raise Refused(f"input %{gi.value.name} {t} is an expanded view (stride 0): no check can draw values "
                          "into it; the region must take the tensor before the expand")
    for v in body.outputs:
        if not v.type.is_contiguous:
            raise Refused(f"output %{v.name} {v.type} is a strided view: a generated kernel writes its outputs "
                          "contiguous; leave the view outside the region")


def check(body: Graph, *, max_row: int = MAX_ROW) -> Layout:
    """The `Layout` of one kernel computing `body` (a region cut out with `hoid.ir.Region`), or `Refused`.
    Rows longer than `max_row` are looped (tests make it small, so that a short row is several tiles)."""
    if not body.nodes:
        raise Refused("the region has no nodes")
    templates, views = _templates(body)
    in_place = _in_place(body, templates, views)
    if views:
        shape, values = _row_space(body, templates, views, max_row)
    else:
        shapes = [tuple(n.outputs[0].type.shape) for n in body.nodes if n.outputs[0].name in in_place]
        rank = max(len(s) for s in shapes)
        shape = tuple(max(s[d] for s in (_right_aligned(s, rank) for s in shapes)) for d in range(rank)) or (1,)
        values = shape
    if math.prod(shape) == 0:
        raise Refused(f"the region's iteration shape {list(shape)} is empty")
    _check_ends(body)
    addressing, per_row = _addressing(body, templates, in_place, values)
    layout = Layout(shape, math.prod(shape[:-1]), shape[-1], bool(views), addressing, frozenset(per_row), templates,
                    looped=bool(views) and shape[-1] > max_row, max_row=max_row,
                    values=None if values == shape else values)
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


def _addressing(body: Graph, templates, in_place: set[str], values: tuple[int, ...]) -> tuple[dict, set[str]]:
    """(each value read in place: its shape as a broadcast of V, right-aligned; the values one per row), or
    `Refused` where a value does not broadcast to V. A value per row exists only where V is S (a reduction
    without keepdim reduces the last dim alone, so the region's rows are its input's)."""
    rank = len(values)
    lead = values[:-1]
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
        if moves_no_data(template):
            addressing[out.name] = _right_aligned(tuple(out.type.shape), rank)
            continue
        flat_in = [v.name for v in node.inputs if v.name in per_row]
        if is_row_template(template):
            x = node.inputs[0]
            if x.name in per_row or addressing.get(x.name) != values:
                raise Refused(f"{node.name}: {node.op} reads {x.name}, which is not laid out over the region's "
                              f"rows {list(values)}")
            if out.type.rank < x.type.rank:  # keepdim=False: one value per row, shape S[:-1]
                per_row.add(out.name)
                addressing[out.name] = lead + (1,)
            else:
                addressing[out.name] = _right_aligned(tuple(out.type.shape), rank)
            for w in node.inputs[1:]:  # those laid along other dims than x's trailing ones are not in place
                if w.name in in_place and not _broadcasts(addressing.get(w.name, ()), values):
                    raise Refused(f"{node.name}: operand {w.name} {list(w.type.shape)} does not broadcast to "
                                  f"the rows {list(values)}")
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
        if not _broadcasts(shape_of, values):
            raise Refused(f"%{name} {list(shape_of)} does not broadcast to the region's iteration shape "
                          f"{list(values)}")
    return addressing, per_row


def operand_coords(node, template: str, coords: tuple[Ix, ...], layout: Layout) -> list[tuple[Ix, ...]]:
    """Where `node`, evaluated at `coords`, reads each of its operands; `Refused` where that cannot be."""
    out = node.outputs[0]
    if template == VIEW:
        return [view_coords(node, coords, layout.shape)]
    if template == REPEAT:  # every operand is the one tensor, read at the same place
        return [repeat_coords(node, coords, layout.shape)] * len(node.inputs)
    if not is_row_template(template):
        return [broadcast_coords(coords, tuple(out.type.shape), tuple(v.type.shape)) for v in node.inputs]
    if out.name not in layout.addressing or coords != layout.own_coords(out):
        raise Refused(f"{node.name}: the result of {node.op} is read through a view at other coordinates than its "
                      "own: a row op's result exists once per row, where it was reduced; leave the view outside")
    whole = layout.own_coords(node.inputs[0])
    return [whole] + row_view(node).operand_coords(whole, node.inputs[1:])

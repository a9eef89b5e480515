"""Writing the kernel: a region (its body graph) and its `Layout` -> readable Triton source text.

One program computes a tile of BLOCK_M rows by BLOCK_N columns of the iteration shape. Each input is loaded
once per tile through its own strides (a broadcast dim has none), converted to its compute dtype; each node
becomes one line (or a few, for a row op) from its op's template, with a comment naming the IR node; each
output is stored from the tile through its contiguous strides, masked to the lanes it owns (a broadcast
dim of an output is written by the first lane along it). Shapes and strides are constants of the source: a
generated kernel serves exactly the region's types, and its version is its text.
"""

from __future__ import annotations

import math
import re

from ...ir import Graph
from ...ir.dtypes import promote
from ...ir.registry import get_op
from ...ir.types import contiguous_strides
from .legality import Layout
from .templates import COMPUTE, TL, is_row_template, literal, render

INT32_MAX = 2**31 - 1


def _ident(name: str, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", name)
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


class _Coords:
    """The coordinate expressions of the iteration shape's dims, from `rows` (the flattened leading dims)
    and `cols` (the last dim)."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape

    def of(self, d: int) -> str:
        shape, rank = self.shape, len(self.shape)
        if d == rank - 1:
            return "cols"
        inner = math.prod(shape[d + 1:rank - 1])
        lead = shape[:rank - 1]
        expr = "rows" if inner == 1 else f"(rows // {inner})"
        # the outermost non-trivial leading dim needs no modulo: rows < the leading dims' product
        if any(s > 1 for s in lead[:d]):
            expr = f"({expr} % {shape[d]})"
        return expr

    def offset(self, addressing: tuple[int, ...], strides: tuple[int, ...]) -> str:
        """The element offset of a tensor laid out with `strides` and broadcast from `addressing` to S."""
        rank = len(self.shape)
        if addressing == self.shape and tuple(strides) == contiguous_strides(self.shape):
            cols = self.shape[-1]
            return f"rows * {cols} + cols" if rank > 1 and math.prod(self.shape[:-1]) > 1 else "cols"
        terms = []
        for d in range(rank):
            if addressing[d] == 1 or strides[d] == 0:
                continue
            c = self.of(d)
            terms.append(c if strides[d] == 1 else f"{c} * {strides[d]}")
        return " + ".join(terms) if terms else "0"

    def owner_mask(self, addressing: tuple[int, ...]) -> list[str]:
        """Conditions that pick one lane along each dim an output is broadcast over."""
        return [f"({self.of(d)} == 0)" for d in range(len(self.shape))
                if addressing[d] == 1 and self.shape[d] > 1]


def _strides_of(t, rank: int) -> tuple[int, ...]:
    layout = tuple(t.layout()) if t.rank else ()
    return (0,) * (rank - len(layout)) + layout


def emit(body: Graph, layout: Layout, *, title: str) -> tuple[str, dict]:
    """(source text, facts the spec needs: kernel name, pointer dtypes in order, constexpr block sizes)."""
    shape, rank = layout.shape, len(layout.shape)
    coords = _Coords(shape)
    taken = {"rows", "cols", "mask", "zero", "pid_m", "pid_n", "tl", "triton", "torch", "grid", "block_m",
             "block_n", "num_warps", "launch", "fused_kernel", "PARAMS", "AUTO"}
    base: dict[str, str] = {}  # each IR value's Python name: v_<name> in the kernel, p_<name> its pointer
    for v in [gi.value for gi in body.inputs] + [o for n in body.nodes for o in n.outputs]:
        base.setdefault(v.name, _ident(v.name, taken))
    var = {name: f"v_{b}" for name, b in base.items()}
    ptr = {v.name: f"p_{base[v.name]}" for v in [gi.value for gi in body.inputs] + list(body.outputs)}
    spans = [layout.rows * layout.cols] + [max(1, sum((s - 1) * abs(st) for s, st in
                                                      zip(v.type.shape, v.type.layout(), strict=True)) + 1)
                                           for v in [gi.value for gi in body.inputs] if v.type.rank]
    wide = max(spans) > INT32_MAX
    lines: list[str] = []
    add = lines.append
    add("    pid_m = tl.program_id(0)")
    add("    pid_n = tl.program_id(1)")
    cast64 = ".to(tl.int64)" if wide else ""
    add(f"    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)){cast64}[:, None]")
    add(f"    cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)){cast64}[None, :]")
    add(f"    mask = (rows < {layout.rows}) & (cols < {layout.cols})")
    add("    zero = rows * 0 + cols * 0  # a full tile of offsets 0: every load and store covers the tile")
    for gi in body.inputs:
        v = gi.value
        offs = coords.offset(layout.addressing[v.name], _strides_of(v.type, rank))
        load = f"tl.load({ptr[v.name]} + (zero + {offs}), mask=mask, other=0)"
        if COMPUTE[v.type.dtype] != v.type.dtype:
            load += f".to({TL[COMPUTE[v.type.dtype]]})"
        add(f"    # %{v.name}: {v.type}")
        add(f"    {var[v.name]} = {load}")
    for i, node in enumerate(body.nodes):
        out = node.outputs[0]
        name = var[out.name]
        template = layout.templates[i]
        op = get_op(node.op)
        values = _operand_values(node, op, var, template)
        for attr, value in node.attrs.items():
            if attr == "dtype" and value is not None:
                values[attr] = TL[value]
            elif isinstance(value, (int, float)) and attr != "scalar":
                values[attr] = literal(value, COMPUTE[out.type.dtype])
        values["mask"], values["n"] = "mask", str(layout.cols)
        pre, expr = render(template, name, values)
        ct = COMPUTE[out.type.dtype]
        if ".to(" in template and out.type.dtype != "bool":
            expr = f"({expr}).to({TL[ct]})"
        if out.type.dtype == "f16":  # f16's range ends at 65504: a value the region overflows to inf must
            expr = f"({expr}).to(tl.float16).to(tl.float32)"  # overflow here too (found by the property test)
        add(f"    # {_node_text(node)}")
        for line in pre:
            add(f"    {line}")
        add(f"    {name} = {expr}")
    for v in body.outputs:
        addressing = layout.addressing[v.name]
        own = contiguous_strides(tuple(s for s in addressing))
        strides = tuple(0 if a == 1 else st for a, st in zip(addressing, own, strict=True))
        offs = coords.offset(addressing, strides)
        value = var[v.name]
        if addressing[-1] == 1:  # a value per row may be a [BLOCK_M, 1] tile (a reduction's)
            value = f"tl.broadcast_to({value}, (BLOCK_M, BLOCK_N))"
        conditions = " & ".join(["mask", *coords.owner_mask(addressing)])
        add(f"    # store %{v.name}: {v.type}")
        add(f"    tl.store({ptr[v.name]} + (zero + {offs}), {value}.to({ptr[v.name]}.dtype.element_ty), "
            f"mask={conditions})")
    inputs = [gi.value for gi in body.inputs]
    args = [ptr[v.name] for v in inputs] + [ptr[v.name] for v in body.outputs]
    kernel = "fused_kernel"
    header = _header(title, body, layout)
    signature = ", ".join(args + ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr"])
    source = "\n".join([header, "", "@triton.jit", f"def {kernel}({signature}):", *lines, "", "",
                        _launch(args, kernel, layout)]) + "\n"
    dtypes = [v.type.dtype for v in inputs] + [v.type.dtype for v in body.outputs]
    return source, {"kernel": kernel, "args": args, "dtypes": dtypes}


def _operand_values(node, op, var: dict[str, str], template: str) -> dict[str, str]:
    """Each operand's expression in the dtype the op computes in: its output's, or for a bool result the
    operands' common dtype; bool operands stay bool (a where's condition), except into a row op."""
    names = [o.strip("*?") for o in op.operands]
    out = node.outputs[0].type.dtype
    scalar = node.attrs.get("scalar")
    row = is_row_template(template)
    if row or out != "bool":
        target = COMPUTE[out]
    else:
        dtypes = [v.type.dtype for v in node.inputs if v.type.dtype != "bool"]
        common = dtypes[0] if dtypes else None
        for d in dtypes[1:]:
            common = promote(common, d)
        if common is not None and scalar is not None and isinstance(scalar, float) and common not in \
                ("f16", "bf16", "f32", "f64"):
            common = "f32"
        target = COMPUTE[common] if common is not None else None
    values = {}
    for name, v in zip(names, node.inputs, strict=False):
        expr = var[v.name]
        have = COMPUTE[v.type.dtype]
        if target is not None and have != target and (row or v.type.dtype != "bool"):
            expr = f"{expr}.to({TL[target]})"
        values[name] = expr
    if scalar is not None:
        values[names[len(node.inputs)]] = literal(scalar, out if out != "bool" else None)
    return values


def _node_text(node) -> str:
    """The node as the .hoid text writes it, roughly: a comment for the person reading the kernel."""
    args = [f"%{v.name}" for v in node.inputs]
    args += [f"{k}={v!r}" for k, v in node.attrs.items() if v is not None]
    return f"%{node.outputs[0].name} = {node.op}({', '.join(args)}) : {node.outputs[0].type}"


def _header(title: str, body: Graph, layout: Layout) -> str:
    ops = " -> ".join(n.op for n in body.nodes)
    kind = (f"row kernel: each program holds BLOCK_M whole rows of {layout.cols} (one tile per row), so every "
            "row op makes its passes over registers" if layout.row_kernel else
            "elementwise kernel: each program computes a BLOCK_M x BLOCK_N tile")
    return (f'"""Generated by hoid.kernels.codegen: {title}.\n\n{ops}\n\nIteration shape {list(layout.shape)}, '
            f"seen as {layout.rows} rows x {layout.cols} columns; {kind}.\nFloats are computed in float32 (float64 "
            'for f64), integers and bools in their own dtype.\n"""\n\nimport triton\nimport triton.language as tl\n')


def _launch(args: list[str], kernel: str, layout: Layout) -> str:
    from .params import auto_params, declared_choices

    auto = auto_params(layout)
    choices = declared_choices(layout)
    lines = [f"PARAMS = {choices!r}", f"AUTO = {auto!r}  # what \"auto\" means at this region's shape", "", "",
             f"def launch({', '.join(a.removeprefix('p_') for a in args)}, *, "
             + ", ".join(f'{k}="auto"' for k in choices) + "):",
             '    """Destination-passing: the outputs (after the inputs) are written in place."""']
    for k in choices:
        lines.append(f'    {k} = AUTO["{k}"] if {k} == "auto" else {k}')
    block_n = "block_n" if "block_n" in choices else str(auto["block_n"])
    lines.append(f"    grid = (triton.cdiv({layout.rows}, block_m), triton.cdiv({layout.cols}, {block_n}))")
    call = ", ".join(a.removeprefix("p_") for a in args)
    lines.append(f"    {kernel}[grid]({call}, BLOCK_M=block_m, BLOCK_N={block_n}, num_warps=num_warps)")
    return "\n".join(lines)

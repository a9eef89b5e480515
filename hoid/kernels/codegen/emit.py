"""Writing the kernel: a region (its body graph) and its `Layout` -> readable Triton source text.

`lower` turns the region into statements, the same for every kernel form: each input loaded through its own
strides at each place it is read (`Layout.requests`: its own coordinates, or those a view maps to), converted
to its compute dtype; each node one line (or a few, for a row op) from its op's template, with a comment
naming the IR node; a view no line at all (its consumers read its input elsewhere); each output stored from
the tile through its contiguous strides, masked to the lanes it owns (a broadcast dim of an output is
written by the first lane along it). Then the statements are printed as one of two forms:

- a tile kernel (here): one program computes a tile of BLOCK_M rows by BLOCK_N columns of the iteration
  shape (for a row op, BLOCK_N holds the whole row and its passes run over registers);
- a looped row kernel (`looped.py`), when rows are longer than one tile.

Shapes and strides are constants of the source: a generated kernel serves exactly the region's types, and
its version is its text.
"""

from __future__ import annotations

import re

from ...ir import Graph
from ...ir.dtypes import promote
from ...ir.registry import get_op
from ...ir.types import contiguous_strides
from .index import Render, offset
from .legality import Layout, operand_coords
from .looped import looped_kernel
from .program import Program, Stmt, print_stmt
from .templates import COMPUTE, TL, for_dtype, is_row_template, literal, moves_no_data, render

INT32_MAX = 2**31 - 1
_ASSIGN = re.compile(r"^(\w+) = (.+)$")


def _ident(name: str, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", name)
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


def lower(body: Graph, layout: Layout) -> Program:
    shape = layout.shape
    text = Render(shape)
    taken = {"rows", "cols", "mask", "zero", "pid_m", "pid_n", "tl", "triton", "torch", "grid", "block_m",
             "block_n", "num_warps", "launch", "fused_kernel", "PARAMS", "AUTO", "start"}
    base: dict[str, str] = {}  # each IR value's Python name: v_<name> in the kernel, p_<name> its pointer
    for v in [gi.value for gi in body.inputs] + [o for n in body.nodes for o in n.outputs]:
        base.setdefault(v.name, _ident(v.name, taken))
    ptr = {v.name: f"p_{base[v.name]}" for v in [gi.value for gi in body.inputs] + list(body.outputs)}
    names: dict[tuple, str] = {}  # (value name, coordinates) -> the kernel's name for it there

    def name_for(v, k: int) -> str:
        return f"v_{base[v.name]}" if k == 0 else f"v_{base[v.name]}_at{k}"

    def where(v, k: int, coords) -> str:
        if v.name in layout.addressing and coords == layout.own_coords(v):
            return ""
        return f", where a view reads it: at [{', '.join(text(c) for c in coords)}]"

    stmts: list[Stmt] = []
    for gi in body.inputs:
        v = gi.value
        for k, coords in enumerate(layout.requests.get(v.name, ())):
            offs = text(offset(coords, tuple(v.type.layout()) if v.type.rank else (), shape))
            # an input read at the same place by every row (a bias, a norm's weight, positions shared over
            # the batch) is re-read by every program: kept in the L2 ahead of the streamed activations, as
            # Inductor marks such loads (`eviction_policy='evict_last'` where the index has no x term)
            reused = layout.rows > 1 and not (text.dims_of(coords) & set(text.lead))
            keep = ", eviction_policy=\"evict_last\"" if reused else ""
            load = f"tl.load({ptr[v.name]} + (zero + {offs}), mask=mask, other=0{keep})"
            if COMPUTE[v.type.dtype] != v.type.dtype:
                load += f".to({TL[COMPUTE[v.type.dtype]]})"
            names[(v.name, coords)] = name_for(v, k)
            stmts.append(Stmt(name_for(v, k), load, f"%{v.name}: {v.type}{where(v, k, coords)}"))
    for i, node in enumerate(body.nodes):
        out = node.outputs[0]
        template = layout.templates[i]
        op = get_op(node.op)
        for k, coords in enumerate(layout.requests.get(out.name, ())):
            reads = operand_coords(node, template, coords, layout)
            if moves_no_data(template):  # no code: what reads the view reads its input there
                names[(out.name, coords)] = names[(node.inputs[0].name, reads[0])]
                continue
            name = name_for(out, k)
            names[(out.name, coords)] = name
            var = {v.name: names[(v.name, at)] for v, at in zip(node.inputs, reads, strict=True)}
            values = _operand_values(node, op, var, template)
            for attr, value in node.attrs.items():
                if attr == "dtype" and value is not None:
                    values[attr] = TL[value]
                elif isinstance(value, (int, float)) and attr != "scalar":
                    values[attr] = literal(value, COMPUTE[out.type.dtype])
            values["mask"], values["n"] = "mask", str(layout.cols)
            ct = COMPUTE[out.type.dtype]
            pre, expr = render(for_dtype(template, ct), name, values)
            if ".to(" in template and out.type.dtype != "bool":
                expr = f"({expr}).to({TL[ct]})"
            if out.type.dtype == "f16":  # f16's range ends at 65504: a value the region overflows to inf must
                expr = f"({expr}).to(tl.float16).to(tl.float32)"  # overflow here too (found by the property test)
            comment = _node_text(node) + where(out, k, coords)
            for line in pre:
                assigned = _ASSIGN.match(line)
                if assigned is None:
                    raise ValueError(f"{node.op}'s template line {line!r} is not an assignment to a _name")
                stmts.append(Stmt(assigned.group(1), assigned.group(2), comment))
                comment = None
            stmts.append(Stmt(name, expr, comment))
    stores = []
    for v in body.outputs:
        addressing = layout.addressing[v.name]
        own = layout.own_coords(v)
        offs = text(offset(own, contiguous_strides(tuple(v.type.shape)), shape))
        value = names[(v.name, own)]
        if addressing[-1] == 1:  # a value per row may be a [BLOCK_M, 1] tile (a reduction's)
            value = f"tl.broadcast_to({value}, (BLOCK_M, BLOCK_N))"
        at, values = layout.at, layout.value_shape
        owner = [f"({text(at[d])} == 0)" for d in range(len(values)) if addressing[d] == 1 and values[d] > 1]
        conditions = " & ".join(["mask", *owner])
        stores.append(Stmt("", f"tl.store({ptr[v.name]} + (zero + {offs}), {value}.to({ptr[v.name]}.dtype.element_ty), "
                               f"mask={conditions})", f"store %{v.name}: {v.type}"))
    inputs = [gi.value for gi in body.inputs]
    spans = [layout.rows * layout.cols] + [max(1, sum((s - 1) * abs(st) for s, st in
                                                      zip(v.type.shape, v.type.layout(), strict=True)) + 1)
                                           for v in inputs if v.type.rank]
    args = [ptr[v.name] for v in inputs] + [ptr[v.name] for v in body.outputs]
    dtypes = [v.type.dtype for v in inputs] + [v.type.dtype for v in body.outputs]
    return Program(stmts, stores, args, dtypes, max(spans) > INT32_MAX)


def emit(body: Graph, layout: Layout, *, title: str) -> tuple[str, dict]:
    """(source text, facts the spec needs: kernel name, pointer dtypes in order, constexpr block sizes)."""
    program = lower(body, layout)
    kernel = "fused_kernel"
    if layout.looped:
        lines, helpers = looped_kernel(program, layout)
    else:
        lines, helpers = _tile_kernel(program, layout), []
    even = [] if layout.looped else ["EVEN_M: tl.constexpr", "EVEN_N: tl.constexpr"]
    signature = ", ".join(program.args + ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", *even])
    source = "\n".join([_header(title, body, layout), "", *helpers, "@triton.jit", f"def {kernel}({signature}):",
                        *lines, "", "", _launch(program.args, kernel, layout)]) + "\n"
    facts = {"kernel": kernel, "args": program.args, "dtypes": program.dtypes}
    if even:
        facts.update(even=True, rows=layout.rows, cols=layout.cols)
    return source, facts


def _tile_kernel(program: Program, layout: Layout) -> list[str]:
    cast64 = ".to(tl.int64)" if program.wide else ""
    lines = ["    pid_m = tl.program_id(0)", "    pid_n = tl.program_id(1)",
             f"    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)){cast64}[:, None]",
             f"    cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)){cast64}[None, :]",
             # where the blocks divide the shape (the launch says so in EVEN_M / EVEN_N, constexprs) the bound
             # is a constant true, which Triton folds away: loads and stores unmasked and the row ops' wheres
             # gone, as Inductor drops xmask/rmask when the numel is a multiple of the block
             "    if EVEN_M:", "        in_rows = tl.full([BLOCK_M, 1], 1, tl.int1)", "    else:",
             f"        in_rows = rows < {layout.rows}",
             "    if EVEN_N:", "        in_cols = tl.full([1, BLOCK_N], 1, tl.int1)", "    else:",
             f"        in_cols = cols < {layout.cols}",
             "    mask = in_rows & in_cols",
             "    zero = rows * 0 + cols * 0  # a full tile of offsets 0: every load and store covers the tile"]
    for stmt in program.stmts + program.stores:
        lines += print_stmt(stmt, "    ")
    return lines


def _operand_values(node, op, var: dict[str, str], template: str) -> dict[str, str]:
    """Each operand's expression in the dtype the op computes in: its output's, or for a bool result the
    operands' common dtype. A bool operand stays bool where it is one: a where's condition, or an operand
    of a bool result (not into a row op); into arithmetic it is cast as torch promotes it (`pow(bool, 0.5)`
    is float, and Triton's sqrt_rn takes no int1: found by the property test)."""
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
        stays_bool = v.type.dtype == "bool" and not row and (out == "bool" or name == "condition")
        if target is not None and have != target and not stays_bool:
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
    kind = (f"looped row kernel: each program takes BLOCK_M rows of {layout.cols} (longer than one tile, at most "
            f"{layout.max_row}) and makes each pass of its row ops by a loop over them, BLOCK_N columns at a time"
            if layout.looped else
            f"row kernel: each program holds BLOCK_M whole rows of {layout.cols} (one tile per row), so every "
            "row op makes its passes over registers" if layout.row_kernel else
            "elementwise kernel: each program computes a BLOCK_M x BLOCK_N tile")
    values = f" (the values {list(layout.values)}, as the row ops' rows)" if layout.values else ""
    return (f'"""Generated by hoid.kernels.codegen: {title}.\n\n{ops}\n\nIteration shape {list(layout.shape)}'
            f"{values}, seen as {layout.rows} rows x {layout.cols} columns; {kind}.\nFloats are computed in float32 "
            '(float64 for f64), integers and bools in their own dtype.\n"""\n\nimport triton\n'
            "import triton.language as tl\n")


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
    columns = "1" if layout.looped else f"triton.cdiv({layout.cols}, {block_n})"  # a looped program walks its rows
    lines.append(f"    grid = (triton.cdiv({layout.rows}, block_m), {columns})")
    call = ", ".join(a.removeprefix("p_") for a in args)
    even = "" if layout.looped else (f", EVEN_M={layout.rows} % block_m == 0, "
                                     f"EVEN_N={layout.cols} % {block_n} == 0")
    lines.append(f"    {kernel}[grid]({call}, BLOCK_M=block_m, BLOCK_N={block_n}{even}, num_warps=num_warps)")
    return "\n".join(lines)

"""The looped row kernel: row ops over rows longer than one tile, each pass a loop over the row.

The region's statements (`emit.lower`) are split at their row statistics: every `tl.sum/max/min(E, axis=1,
keep_dims=True)` of a template becomes a statistic accumulated over the row's tiles (tile by tile into a
BLOCK_M x BLOCK_N accumulator, reduced across it once at the end), and E a statement of its own. Each
statement is then either per element (it reads `cols`, the mask, a load or another per-element value) or per
row (it reads only statistics and other per-row values). A statistic can be taken in pass p when every
per-row value its terms read exists after pass p - 1: so layer norm's mean is pass 1 and its variance of
x - mean pass 2, softmax's max pass 1 and its sum of exp(x - max) pass 2, and statistics of one pass (the
NaN count and the max of amax) share its loop. A last loop computes and stores the outputs.

Each pass's tile is a `@triton.jit` function of its own (`_pass1`, ...; `_store_tile` for the last), called
once for the first tile (whose terms start the accumulators, in whatever dtype they have) and then in the
loop: per-element values are recomputed in every pass from the loads (the row is read once per pass, as
any multi-pass reduction reads it; rows in flight stay in the L2), never kept across passes.
"""

from __future__ import annotations

import re

from .legality import Layout
from .program import Program, Stmt, print_stmt
from .templates import innermost_reduction

_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_PER_ELEMENT = {"cols", "mask", "zero"}
_COMBINE = {"sum": "{acc} + {e}", "max": "tl.maximum({acc}, {e})", "min": "tl.minimum({acc}, {e})"}


def _split(stmts: list[Stmt]) -> tuple[list[Stmt], dict[str, tuple[str, str]]]:
    """Statements with every row statistic made its own (name -> (kind, the name of its terms))."""
    out: list[Stmt] = []
    stats: dict[str, tuple[str, str]] = {}
    for stmt in stmts:
        expr, k, comment = stmt.expr, 0, stmt.comment
        while (found := innermost_reduction(expr)) is not None:
            start, end, kind, terms = found
            k += 1
            e, r = f"{stmt.name}__e{k}", f"{stmt.name}__r{k}"
            out.append(Stmt(e, terms, comment))
            comment = None
            stats[r] = (kind, e)
            out.append(Stmt(r, f"tl.{kind}({e}, axis=1, keep_dims=True)"))
            expr = expr[:start] + r + expr[end:]
        out.append(Stmt(stmt.name, expr, comment))
    return out, stats


def _reads(stmt: Stmt, known: set[str]) -> set[str]:
    return {n for n in _NAME.findall(stmt.expr) if n in known or n in _PER_ELEMENT}


def looped_kernel(program: Program, layout: Layout) -> tuple[list[str], list[str]]:
    """(the kernel's body lines, the tile functions it calls)."""
    stmts, stats = _split(program.stmts)
    known = {s.name for s in stmts}
    element: set[str] = set()
    ready: dict[str, int] = {}  # per-element value: the pass after which the per-row values it reads exist
    after: dict[str, int] = {}  # per-row value: the pass after which it exists
    looped: set[str] = set()  # statistics of per-element terms (a per-row value's reduction is taken as is)
    for s in stmts:
        reads = _reads(s, known)
        if s.name in stats and stats[s.name][1] in element:
            looped.add(s.name)
            after[s.name] = ready[stats[s.name][1]] + 1
        elif reads & (_PER_ELEMENT | element):
            element.add(s.name)
            ready[s.name] = max([after.get(n, 0) for n in reads] + [ready.get(n, 0) for n in reads] + [0])
        else:
            after[s.name] = max([after.get(n, 0) for n in reads] + [0])
    passes = max([after[r] for r in looped] + [0])
    by_name = {s.name: s for s in stmts}
    cast64 = ".to(tl.int64)" if program.wide else ""
    lines = ["    pid_m = tl.program_id(0)", f"    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)){cast64}[:, None]"]
    helpers: list[str] = []

    def per_row_lines(p: int) -> list[str]:
        out = []
        for s in stmts:
            if s.name in after and s.name not in looped and after[s.name] == p:
                out += print_stmt(s, "    ")
        return out

    def tile_function(fname: str, doc: str, targets: list[Stmt], returns: list[str]) -> str:
        """A function computing one tile of BLOCK_N columns: the per-element values `targets` read."""
        wanted, stack = set(), [n for t in targets for n in _reads(t, known)]
        while stack:
            n = stack.pop()
            if n in element and n not in wanted:
                wanted.add(n)
                stack.extend(_reads(by_name[n], known))
        body = [s for s in stmts if s.name in wanted]
        used = {n for s in body + targets for n in _NAME.findall(s.expr)}
        params = [a for a in program.args if a in used] + [s.name for s in stmts if s.name in used and s.name in after]
        signature = ", ".join(params + ["rows", "start", "BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr"])
        code = ["@triton.jit", f"def {fname}({signature}):", f'    """{doc}"""',
                f"    cols = (start + tl.arange(0, BLOCK_N)){cast64}[None, :]",
                f"    mask = (rows < {layout.rows}) & (cols < {layout.cols})",
                "    zero = rows * 0 + cols * 0"]
        for s in body + [t for t in targets if t.name not in wanted]:
            code += print_stmt(s, "    ")
        if returns:
            code.append(f"    return {', '.join(returns)}")
        helpers.append("\n".join(code) + "\n\n")
        return ", ".join(params + ["rows"])

    lines += per_row_lines(0)
    for p in range(1, passes + 1):
        mine = [r for r in stats if r in looped and after[r] == p]
        terms = [stats[r][1] for r in mine]
        call = tile_function(f"_pass{p}", f"Pass {p}, one tile of each row: the terms of "
                             f"{', '.join(f'{stats[r][0]} {r}' for r in mine)}.", [by_name[t] for t in terms], terms)
        accs = [f"{r}_acc" for r in mine]
        lines.append(f"    # pass {p}: {', '.join(f'{stats[r][0]} {r}' for r in mine)} over the row, tile by tile")
        lines.append(f"    {', '.join(accs)} = _pass{p}({call}, 0, BLOCK_M, BLOCK_N)")
        lines.append(f"    for start in range(BLOCK_N, {layout.cols}, BLOCK_N):")
        lines.append(f"        {', '.join(terms)} = _pass{p}({call}, start, BLOCK_M, BLOCK_N)")
        for r, acc, e in zip(mine, accs, terms, strict=True):
            lines.append(f"        {acc} = {_COMBINE[stats[r][0]].format(acc=acc, e=e)}")
        for r, acc in zip(mine, accs, strict=True):
            lines.append(f"    {r} = tl.{stats[r][0]}({acc}, axis=1, keep_dims=True)")
        lines += per_row_lines(p)
    call = tile_function("_store_tile", "The last pass, one tile of each row: the outputs.", program.stores, [])
    lines.append("    # the outputs, tile by tile")
    lines.append(f"    for start in range(0, {layout.cols}, BLOCK_N):")
    lines.append(f"        _store_tile({call}, start, BLOCK_M, BLOCK_N)")
    return lines, helpers

"""Index arithmetic: where each value of a region is read, as integer expressions over the iteration space.

A generated kernel's program holds a tile of the iteration shape S: `rows` (S's leading dims, flattened) by
`cols` (its last dim). Every value is evaluated at one coordinate per dim of its own shape, each an `Ix`
over S's dims: most values at their own place in S (right-aligned, a broadcast dim at 0); the input of a
view at the coordinates the view maps its own to (`view_coords`), so a view moves no data: it changes where
its producer is evaluated, down to the load of a region input through that input's strides.

A view's map needs no knowledge of the op: the op's own inference over a contiguous input gives its output's
strides over the input's elements in row-major order (`hoid.ir` derives every view's strides so), so output
coordinates c read input element number sum(c * strides), whose coordinates are its mixed-radix digits.
The expressions are kept simplified (a digit of an aligned reshape folds back to the dims it came from), so
a reshape that splits or merges contiguous dims, a transpose or an expand costs no division at run time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...ir.registry import infer_node
from ...ir.types import contiguous_strides


@dataclass(frozen=True)
class Ix:
    """(sum(coef * atom) + const) // div % mod (mod None: none). An atom is an int (dim d of S) or a nested
    `Ix` with a division or a modulo; every atom and coefficient is non-negative."""

    terms: tuple[tuple[object, int], ...] = ()
    const: int = 0
    div: int = 1
    mod: int | None = None

    @property
    def linear(self) -> bool:
        return self.div == 1 and self.mod is None


ZERO = Ix()


def dim(d: int, shape: tuple[int, ...]) -> Ix:
    """Dim d of S (0 when S is 1 there: the only coordinate it has)."""
    return ZERO if shape[d] == 1 else Ix(((d, 1),))


def _extent(atom, shape) -> int:
    """How many values `atom` takes (0 .. extent - 1)."""
    if isinstance(atom, int):
        return shape[atom]
    top = (sum(k * (_extent(a, shape) - 1) for a, k in atom.terms) + atom.const) // atom.div
    return min(top + 1, atom.mod) if atom.mod is not None else top + 1


def _merged(terms, shape) -> tuple[list[tuple[object, int]], int]:
    """(terms, const): linear nested atoms inlined, equal atoms' coefficients added, atoms of one value and
    zeros dropped, and (x // m % n) * k * m + (x % m) * k made (x % (m * n)) * k (x when n is none)."""
    acc: dict = {}
    const = 0
    for atom, k in terms:
        if isinstance(atom, Ix) and atom.linear:
            inner, c = _merged(atom.terms, shape)
            const += k * (atom.const + c)
            for a, kk in inner:
                acc[a] = acc.get(a, 0) + k * kk
        elif k and _extent(atom, shape) > 1:
            acc[atom] = acc.get(atom, 0) + k
    # until none is left: a merge makes a new digit, which may merge with the digit above it in turn (a
    # reshape of [N, G, M] to [N, C, H, W] reads back as m: m % W, then m % (H * W), then m)
    while (pair := _digit_pair(acc, shape)) is not None:
        low, high, whole = pair
        k = acc.pop(low)
        del acc[high]
        inner, c = _merged([(whole, k)], shape)
        const += c
        for a, kk in inner:
            acc[a] = acc.get(a, 0) + kk
    ordered = sorted(((a, k) for a, k in acc.items() if k), key=lambda t: (isinstance(t[0], Ix), repr(t[0])))
    return ordered, const


def _digit(atom) -> tuple[tuple, int, int, int | None] | None:
    """`atom` as a digit x // div % mod: (x's terms, x's const, div, mod), or None. The division may sit
    inside the modulo ((x // div) % mod, as `make` builds a digit above the lowest)."""
    if not isinstance(atom, Ix) or atom.mod is None and atom.div == 1:
        return None
    if atom.div == 1 and len(atom.terms) == 1 and atom.terms[0][1] == 1 and not atom.const:
        inner = atom.terms[0][0]
        if isinstance(inner, Ix) and inner.mod is None and inner.div > 1:
            return inner.terms, inner.const, inner.div, atom.mod
    return atom.terms, atom.const, atom.div, atom.mod


def _digit_pair(acc: dict, shape) -> tuple[Ix, Ix, Ix] | None:
    """Two digits of one x in `acc`, (x // d % m) * k and the one above it (x // (d * m) % n) * k * m, and
    the digit they make together, x // d % (m * n) (no modulo when n is none); or None."""
    for low, k in acc.items():
        lo = _digit(low)
        if lo is None or lo[3] is None or not k:
            continue
        for high, kh in acc.items():
            hi = _digit(high)
            if hi is not None and hi[:2] == lo[:2] and hi[2] == lo[2] * lo[3] and kh == k * lo[3]:
                mod = lo[3] * hi[3] if hi[3] is not None else None
                return low, high, make(lo[0], shape, const=lo[1], div=lo[2], mod=mod)
    return None


def _low_max(terms, shape) -> int:
    return sum(k * (_extent(a, shape) - 1) for a, k in terms)


def _floor(low: list, r: int, div: int, shape) -> Ix:
    """(sum(low) + r) // div, no coefficient of `low` a multiple of div: through g | div where the terms
    split into multiples of g and a rest below g, (x * g + rest) // div is x // (div / g)."""
    for g in sorted({math.gcd(div, k) for _, k in low} - {1}, reverse=True):
        high = [(a, k // g) for a, k in low if k % g == 0]
        rest = [(a, k) for a, k in low if k % g]
        q, rr = divmod(r, g)
        if high and _low_max(rest, shape) + rr < g:
            return make(high, shape, const=q, div=div // g)
    return Ix(tuple(low), r, div)


def make(terms, shape: tuple[int, ...], *, const: int = 0, div: int = 1, mod: int | None = None) -> Ix:
    """(sum(coef * atom) + const) // div % mod, simplified: (q * div + r) // div is q + r // div, and r // div
    vanishes when r < div; (k * a) % mod keeps k % mod, and the modulo goes when the sum stays below it."""
    merged, extra = _merged(terms, shape)
    const += extra
    if div > 1:
        high = [(a, k // div) for a, k in merged if k % div == 0]
        low = [(a, k) for a, k in merged if k % div]
        q, r = divmod(const, div)
        if _low_max(low, shape) + r >= div:  # else r // div is 0
            high.append((_floor(low, r, div, shape), 1))
        merged, extra = _merged(high, shape)
        const = q + extra
    if mod is not None:
        merged = [(a, k % mod) for a, k in merged if k % mod]
        const %= mod
        if _low_max(merged, shape) + const < mod:
            mod = None
    if mod is None and const == 0 and len(merged) == 1 and merged[0][1] == 1 and isinstance(merged[0][0], Ix):
        return merged[0][0]
    return Ix(tuple(merged), const, 1, mod)


def offset(coords: tuple[Ix, ...], strides: tuple[int, ...], shape: tuple[int, ...]) -> Ix:
    """The element offset sum(coords * strides) of a tensor with `strides`, read at `coords`."""
    return make([(c, s) for c, s in zip(coords, strides, strict=True) if s], shape)


def view_coords(node, out: tuple[Ix, ...], shape: tuple[int, ...]) -> tuple[Ix, ...]:
    """The coordinates of the input of the view `node` that its output's coordinates `out` read."""
    x = node.inputs[0].type
    (over_contiguous,), _ = infer_node(node.op, [x.contiguous()], node.attrs)
    flat = [(c, s) for c, s in zip(out, over_contiguous.layout(), strict=True) if s]
    return _digits(flat, tuple(x.shape), shape)


def repeat_coords(node, out: tuple[Ix, ...], shape: tuple[int, ...]) -> tuple[Ix, ...]:
    """The coordinates of the tensor that the concat `node` joins to itself (every operand the same value)
    that its output's coordinates `out` read: the same, but modulo the tensor's size along the joined dim."""
    x = node.inputs[0].type
    d = node.attrs["dim"] % x.rank
    return tuple(make([(c, 1)], shape, mod=x.shape[d]) if i == d else c for i, c in enumerate(out))


def reshaped(coords: tuple[Ix, ...], from_shape: tuple[int, ...], to_shape: tuple[int, ...],
             shape: tuple[int, ...]) -> tuple[Ix, ...]:
    """The coordinates in `to_shape` of the element at `coords` in `from_shape` (both row-major, one numel)."""
    return _digits([(c, s) for c, s in zip(coords, contiguous_strides(from_shape), strict=True)], to_shape, shape)


def _digits(flat: list, to_shape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[Ix, ...]:
    """The coordinates in a row-major `to_shape` of element number sum(flat): its mixed-radix digits."""
    return tuple(make(flat, shape, div=st, mod=size) for st, size in zip(contiguous_strides(to_shape), to_shape,
                                                                        strict=True))


def broadcast_coords(out: tuple[Ix, ...], out_shape: tuple[int, ...], operand_shape: tuple[int, ...]) -> tuple[Ix, ...]:
    """An operand's coordinates inside an op that broadcasts it (right-aligned) to `out_shape`."""
    lead = len(out_shape) - len(operand_shape)
    return tuple(ZERO if s == 1 else out[lead + i] for i, s in enumerate(operand_shape))


class Render:
    """Python text for expressions over S, as the kernel's `rows` and `cols` hold it."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape
        self.rank = len(shape)
        self.lead = [d for d in range(self.rank - 1) if shape[d] > 1]  # the leading dims `rows` spans

    def _inner(self, d: int) -> int:
        return math.prod(self.shape[d + 1:self.rank - 1])

    def _rows(self, first: int, last: int) -> str:
        """The dims first..last of S (consecutive leading dims) as one number: (rows // inner) % size."""
        inner = self._inner(last)
        size = math.prod(self.shape[first:last + 1])
        expr = "rows" if inner == 1 else f"(rows // {inner})"
        return expr if first == self.lead[0] else f"({expr} % {size})"

    def __call__(self, ix: Ix) -> str:
        parts: list[str] = []
        dims = {a: k for a, k in ix.terms if isinstance(a, int)}
        run: list[int] = []
        for d in [d for d in self.lead if d in dims] + [None]:  # runs of leading dims that `rows` holds whole
            # dims a, d next to each other in `rows` read as one number when a's coefficient is d's times S[d]
            if run and d is not None and self.lead.index(d) == self.lead.index(run[-1]) + 1 \
                    and dims[run[-1]] == dims[d] * self.shape[d]:
                run.append(d)
                continue
            if run:
                parts.append(_times(self._rows(run[0], run[-1]), dims[run[-1]]))
            run = [d] if d is not None else []
        if self.rank - 1 in dims:
            parts.append(_times("cols", dims[self.rank - 1]))
        for a, k in ix.terms:
            if isinstance(a, Ix):
                parts.append(_times(self(a), k))
        if ix.const or not parts:
            parts.append(str(ix.const))
        text = " + ".join(parts)
        if ix.div != 1:
            text = f"{_group(text)} // {ix.div}"
        if ix.mod is not None:
            text = f"{_group(text)} % {ix.mod}"
        return text if _group(text) == text else f"({text})"

    def dims_of(self, coords: tuple[Ix, ...]) -> set[int]:
        """The dims of S the expressions read."""
        out: set[int] = set()
        stack = list(coords)
        while stack:
            ix = stack.pop()
            for a, _ in ix.terms:
                if isinstance(a, int):
                    out.add(a)
                else:
                    stack.append(a)
        return out


def _group(text: str) -> str:
    """`text` made one operand: parenthesized unless it is a name or already one group."""
    if text.isidentifier() or text.isdigit():
        return text
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0 and i < len(text) - 1:
                break
        else:
            return text
    return f"({text})"


def _times(text: str, k: int) -> str:
    return text if k == 1 else f"{text} * {k}"

"""The op registry: every op is registered once, with everything about it.

An `OpDef` holds an op's operands, its attrs schema, shape/dtype inference, its torch reference
implementation, its flop and byte counts and a sampler of valid inputs (used by the tests and by
hypothesis strategies). Built-in ops live in `hoid/ir/ops/`, one module per family, and register
through `register_op`, the same entry point users have.
"""

from __future__ import annotations

import difflib
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import GraphError
from .dtypes import TORCH_DTYPES, dtype_name
from .types import TensorType

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()

# Kinds of attr values and the Python values they hold (lists are stored as tuples).
ATTR_KINDS = ("int", "float", "number", "bool", "str", "ints", "floats", "dtype", "graph", "params")


class InferError(GraphError):
    """Raised by an op's inference; `infer_node` adds the op name and the input types."""


@dataclass(frozen=True)
class Attr:
    """One attribute an op declares: its name, kind (one of `ATTR_KINDS`), default, and allowed values."""
    name: str
    kind: str
    default: Any = REQUIRED
    optional: bool = False  # None is a valid value
    choices: tuple | None = None
    doc: str = ""

    def __post_init__(self):
        if self.kind not in ATTR_KINDS:
            raise ValueError(f"attr {self.name}: unknown kind {self.kind!r}; expected one of {ATTR_KINDS}")


Sampler = Callable[[random.Random], tuple[list[TensorType], dict]]


@dataclass(frozen=True)
class OpDef:
    """Everything about one op.

    operands: names; a trailing `?` marks an optional operand (only trailing ones may be left out),
      a leading `*` a variadic one (zero or more... at least one for `*`, given last).
    infer(types, attrs) -> TensorType | tuple[TensorType, ...]; raise InferError with a message that
      says what was expected.
    reference(*tensors, **attrs) -> Tensor | tuple[Tensor, ...]: the semantics, in torch.
    flops(in_types, out_types, attrs) -> int; bytes likewise (default: every input read once and every
      output written once; views move nothing).
    sample(rng) -> (input types, attrs): a valid call, for tests and random graphs. Integer operands
      that index take `index_bounds(types, attrs) -> {operand position: exclusive upper bound}`.
    inplace(*tensors, **attrs) -> Tensor: the reference writing its result into its first operand and
      returning it, for ops that update a buffer (`index_copy`); the runtime uses it to update state in
      place where nothing later reads the old value.
    triton: how `hoid.kernels.codegen` writes the op inside a generated Triton kernel, as plain text (so
      that `hoid.ir` never imports triton): an expression template over the operands by name (`{x}`,
      `{a}`, `{b}`; `{b}` is the `scalar=` literal when the op has one) and attrs (`{eps}`; `{dtype}` as a
      Triton dtype), with `{mask}` (the tile's valid lanes) and `{n}` (the row length) for row ops. Lines
      before the last are assignments to `_names`, private to the op's one use. A mapping chooses among
      templates by condition, the first that holds: "attr=value", "operands=N", or the kind of the
      output, "float"/"int"/"bool" (a plain string serves float and int outputs; a bool output needs a
      "bool" key). "view", for a view: no code; the strides `infer` gives the output over a contiguous input
      say which input element each output element is, and the generator reads the input there. "repeat",
      for a join (concat) of one tensor to itself along `dim`: no code either, the input read at each
      coordinate modulo its size there (a join of distinct tensors is refused). None: the generator does
      not fuse the op (and says so).
    """

    name: str
    operands: tuple[str, ...]
    infer: Callable[[list[TensorType], dict], Any]
    reference: Callable[..., Any]
    attrs: tuple[Attr, ...] = ()
    flops: Callable[[list[TensorType], list[TensorType], dict], int] | None = None
    bytes: Callable[[list[TensorType], list[TensorType], dict], int] | None = None
    sample: Sampler | None = None
    index_bounds: Callable[[list[TensorType], dict], dict[int, int]] | None = None
    category: str = "misc"
    is_view: bool = False
    inplace: Callable[..., Any] | None = None
    doc: str = ""
    triton: str | dict[str, str] | None = field(default=None, compare=False)
    attr_map: dict[str, Attr] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "attr_map", {a.name: a for a in self.attrs})

    @property
    def arity(self) -> tuple[int, float]:
        """(fewest, most) operands."""
        if any(o.startswith("*") for o in self.operands):
            return len([o for o in self.operands if not o.endswith("?")]), math.inf
        return len([o for o in self.operands if not o.endswith("?")]), len(self.operands)

    def count_flops(self, ins: Sequence[TensorType], outs: Sequence[TensorType], attrs: dict) -> int:
        return int(self.flops(list(ins), list(outs), attrs)) if self.flops else 0

    def count_bytes(self, ins: Sequence[TensorType], outs: Sequence[TensorType], attrs: dict) -> int:
        if self.bytes:
            return int(self.bytes(list(ins), list(outs), attrs))
        if self.is_view:
            return 0
        return sum(t.nbytes for t in ins) + sum(t.nbytes for t in outs)


_REGISTRY: dict[str, OpDef] = {}


def register_op(op: OpDef, *, replace: bool = False) -> OpDef:
    """Register an op; refuses to silently replace an existing one unless `replace=True`."""
    if op.name in _REGISTRY and not replace:
        raise ValueError(f"op {op.name!r} is already registered; pass replace=True to override it")
    _REGISTRY[op.name] = op
    return op


def get_op(name: str) -> OpDef:
    """The registered op `name`; an unknown name raises `GraphError` naming the closest ones."""
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see hoid.ir.registry.all_ops()"
        raise GraphError(f"unknown op {name!r}{hint}") from None


def has_op(name: str) -> bool:
    _load_builtins()
    return name in _REGISTRY


def all_ops() -> dict[str, OpDef]:
    """Every registered op, by name (the built-ins and any `register_op` added)."""
    _load_builtins()
    return dict(_REGISTRY)


_loaded = False


def _load_builtins() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from . import ops  # noqa: F401  (registers the built-ins)


# --- attrs ---------------------------------------------------------------------------------------

def _check_value(op: str, attr: Attr, value: Any) -> Any:
    where = f"{op}: attr {attr.name}"
    if value is None:
        if attr.optional:
            return None
        raise GraphError(f"{where} is required and may not be none")
    k = attr.kind
    if k == "bool":
        if isinstance(value, bool):
            return value
    elif k == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
    elif k == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif k == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    elif k == "str":
        if isinstance(value, str):
            if attr.choices and value not in attr.choices:
                raise GraphError(f"{where} is {value!r}; expected one of {', '.join(map(repr, attr.choices))}")
            return value
    elif k == "dtype":
        try:
            return dtype_name(value)
        except ValueError:
            raise GraphError(f"{where} is {value!r}; expected a dtype ({', '.join(TORCH_DTYPES)})") from None
    elif k in ("ints", "floats"):
        if isinstance(value, (list, tuple)):
            want_int = k == "ints"
            items = []
            for v in value:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or (want_int and not isinstance(v, int)):
                    break
                items.append(int(v) if want_int else float(v))
            else:
                return tuple(items)
    elif k == "graph":
        from .graph import Graph

        if isinstance(value, Graph):
            return value
    elif k == "params":
        if isinstance(value, dict) and all(isinstance(key, str) for key in value):
            # a pattern's `ints`/`floats` attrs (a convolution's stride) ride here too: as tuples, hashable
            out = {key: tuple(v) if _numbers(v) else v for key, v in value.items()}
            bad = [key for key, v in out.items() if not isinstance(v, (int, float, bool, str, type(None), tuple))]
            if not bad:
                return out
            raise GraphError(f"{where}: parameter {bad[0]!r} must be an int, float, bool, str, none or a list of "
                             "numbers")
    raise GraphError(f"{where} is {value!r} ({type(value).__name__}); expected {_kind_words(attr)}")


def _numbers(value) -> bool:
    """A list or tuple of ints and floats (no bools)."""
    return isinstance(value, (list, tuple)) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)


def _kind_words(attr: Attr) -> str:
    words = {
        "int": "an integer", "float": "a number", "number": "a number", "bool": "true or false",
        "str": "a string", "ints": "a list of integers", "floats": "a list of numbers",
        "dtype": "a dtype", "graph": "a graph (@name)", "params": "a mapping of parameter names to scalars",
    }[attr.kind]
    return words + (" or none" if attr.optional else "")


def check_attrs(op: OpDef, attrs: dict) -> dict:
    """Validate and normalize `attrs` for `op`: defaults filled in, lists made tuples, unknown names refused."""
    unknown = [k for k in attrs if k not in op.attr_map]
    if unknown:
        known = ", ".join(op.attr_map) or "none"
        raise GraphError(f"{op.name}: unknown attr {unknown[0]!r}; its attrs are: {known}")
    out = {}
    for attr in op.attrs:
        if attr.name in attrs:
            out[attr.name] = _check_value(op.name, attr, attrs[attr.name])
        elif attr.default is REQUIRED:
            raise GraphError(f"{op.name}: missing required attr {attr.name!r} ({_kind_words(attr)})")
        else:
            default = attr.default
            out[attr.name] = dict(default) if isinstance(default, dict) else default
    return out


def check_arity(op: OpDef, n: int) -> None:
    lo, hi = op.arity
    if not lo <= n <= hi:
        want = f"{lo}" if lo == hi else (f"at least {lo}" if hi == math.inf else f"{lo} to {hi}")
        names = ", ".join(op.operands)
        raise GraphError(f"{op.name}: takes {want} operand(s) ({names}), got {n}")


def infer_node(op_name: str, types: Sequence[TensorType], attrs: dict) -> tuple[tuple[TensorType, ...], dict]:
    """Check arity and attrs, run inference; returns (output types, normalized attrs).

    Errors name the op, the input types and what was expected.
    """
    op = get_op(op_name)
    check_arity(op, len(types))
    attrs = check_attrs(op, attrs)
    try:
        out = op.infer(list(types), attrs)
    except InferError as e:
        shapes = ", ".join(str(t) for t in types)
        raise GraphError(f"{op_name}({shapes}): {e}") from None
    outs = out if isinstance(out, tuple) else (out,)
    return outs, attrs

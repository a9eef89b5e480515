"""The term language hoid's graphs become inside egglog: sorts, one constructor per registered op, facts.

Every op of the registry gets a constructor named after it in CamelCase (`rmsnorm` -> `Rmsnorm`,
`index_copy` -> `IndexCopy`) whose arguments are the op's operands, then its attrs, in registry order:

    (Add a (Absent) (Float 1e-06))        add(%a, scalar=1e-06): a missing optional operand is (Absent)
    (Mean p (Ints (vec-of -1)) (Bool true))
    (Concat (TCons a (TCons b (TNil))) (Int 0))   variadic operands are a TensorList
    (Out (Split x ...) 1)                 the second output of a multi-output node

Attrs share one sort, `Attr`, so every op encodes the same way and a rule captures any attr as a variable:
`(Int i64) (Float f64) (Bool bool) (Str String) (Ints (Vec i64)) (Floats (Vec f64)) (NoAttr)` (dtype
attrs are `Str`). Graph inputs are `(Input "name")`. A kernel node is `(Kernel "key" inputs)`, a tuple
whose outputs are `(Out k i)`; the key names its implementation and body in the encoding's table.

Facts rules guard on: `(shape t)` (a `Vec i64`) and `(dtype t)` (a String), functions without a merge
so that an unsound rule that puts tensors of different types in one class fails loudly instead of
poisoning it; `(weight-id t)` numbers weight inputs, 2-d ones first in graph order (layout merges use
it to stay canonical and join consecutive projections only); `(is-float d)` and `(lossless narrow wide)`
are dtype facts. `(N i)` is an unextractable handle per encoded value, so Python can name e-classes.

This module is pure text: it never imports egglog (see `_egglog.py`).
"""

from __future__ import annotations

import math

from ..errors import GraphError
from ..ir.registry import Attr, OpDef, all_ops

# Names the language itself defines; an op whose CamelCase name collides with one cannot be encoded.
RESERVED = {
    "Tensor", "TensorList", "TNil", "TCons", "Attr", "Int", "Float", "Bool", "Str", "Ints", "Floats",
    "NoAttr", "IntVec", "FloatVec", "Input", "Absent", "Out", "Kernel", "N",
}

PRELUDE = """
(sort Tensor)
(sort IntVec (Vec i64))
(sort FloatVec (Vec f64))
(datatype TensorList (TNil) (TCons Tensor TensorList))
(datatype Attr (Int i64) (Float f64) (Bool bool) (Str String) (Ints IntVec) (Floats FloatVec) (NoAttr))
(constructor Input (String) Tensor)
(constructor Absent () Tensor)
(constructor Out (Tensor i64) Tensor)
(constructor Kernel (String TensorList) Tensor)
(constructor N (i64) Tensor :unextractable)
(function shape (Tensor) IntVec :no-merge)
(function dtype (Tensor) String :no-merge)
(function weight-id (Tensor) i64 :no-merge)
(relation is-float (String))
(relation lossless (String String))
(is-float "f64") (is-float "f32") (is-float "f16") (is-float "bf16")
(lossless "f16" "f32") (lossless "bf16" "f32")
(lossless "f16" "f64") (lossless "bf16" "f64") (lossless "f32" "f64")
"""

CONTAINERS = {"IntVec": "i64", "FloatVec": "f64"}  # the prelude's vec sorts and their elements


def constructor_name(op_name: str) -> str:
    """`index_copy` -> `IndexCopy`: the egglog constructor of an op."""
    return "".join(part[:1].upper() + part[1:] for part in op_name.split("_"))


def encodable(op: OpDef) -> bool:
    """Ops with graph or params attrs (only `kernel`) have their own encoding."""
    return not any(a.kind in ("graph", "params") for a in op.attrs)


def op_declaration(op: OpDef) -> str:
    """The egglog constructor declaration of one op."""
    name = constructor_name(op.name)
    if name in RESERVED:
        raise GraphError(f"op {op.name!r} encodes as {name}, a name the search language reserves; "
                         "rename the op")
    args = ["TensorList" if o.startswith("*") else "Tensor" for o in op.operands]
    args += ["Attr"] * len(op.attrs)
    return f"({'constructor'} {name} ({' '.join(args)}) Tensor)"


def declarations() -> str:
    """The prelude and a constructor for every registered op (user ops included)."""
    ops = sorted((op for op in all_ops().values() if encodable(op)), key=lambda op: op.name)
    return PRELUDE + "\n".join(op_declaration(op) for op in ops) + "\n"


def op_by_constructor() -> dict[str, OpDef]:
    """The reverse of `constructor_name`, for decoding."""
    return {constructor_name(op.name): op for op in all_ops().values() if encodable(op)}


# --- literals ---------------------------------------------------------------------------------------

def string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def f64(value: float) -> str:
    """An exact egglog f64 literal (repr round-trips; egglog spells the non-finite ones inf, -inf, NaN)."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def int_vec(values) -> str:
    return "(vec-of" + "".join(f" {int(v)}" for v in values) + ")"


def attr(spec: Attr, value) -> str:
    """The `Attr` term of one attr value, by the attr's kind (numbers keep int vs float)."""
    if value is None:
        return "(NoAttr)"
    kind = spec.kind
    if kind == "number":
        kind = "float" if isinstance(value, float) else "int"
    if kind == "int":
        return f"(Int {int(value)})"
    if kind == "float":
        return f"(Float {f64(value)})"
    if kind == "bool":
        return f"(Bool {'true' if value else 'false'})"
    if kind in ("str", "dtype"):
        return f"(Str {string(str(value))})"
    if kind == "ints":
        return f"(Ints {int_vec(value)})"
    if kind == "floats":
        return "(Floats (vec-of" + "".join(f" {f64(v)}" for v in value) + "))"
    raise GraphError(f"attr {spec.name} of kind {spec.kind} cannot be encoded in the search language")


def tensor_list(items) -> str:
    text = "(TNil)"
    for item in reversed(list(items)):
        text = f"(TCons {item} {text})"
    return text


def op_term(op: OpDef, operands: list[str], attrs: dict) -> str:
    """The term of a node: operand terms (already encoded) and attrs, absent optionals filled in."""
    args: list[str] = []
    fixed = [o for o in op.operands if not o.startswith("*")]
    if any(o.startswith("*") for o in op.operands):
        args += operands[: len(fixed)]
        args.append(tensor_list(operands[len(fixed):]))
    else:
        args += operands + ["(Absent)"] * (len(op.operands) - len(operands))
    args += [attr(a, attrs.get(a.name)) for a in op.attrs]
    return f"({constructor_name(op.name)} {' '.join(args)})" if args else f"({constructor_name(op.name)})"

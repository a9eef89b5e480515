"""Reading an op's Triton template (`OpDef.triton`, written beside the op's registration) and filling it in.

The generator never knows an op by name: it asks the op's template. This module chooses the template that
holds for a node (its attrs, operand count and output kind), and renders it into lines of kernel code with
the node's operands, attrs and private names substituted.
"""

from __future__ import annotations

import math
import re

from ...ir.registry import OpDef

# The dtype each IR dtype is computed in inside a kernel: half precisions in float32 (never below the
# region's own precision, as docs/design.md allows), everything else as itself.
COMPUTE = {"f16": "f32", "bf16": "f32", "f32": "f32", "f64": "f64", "i64": "i64", "i32": "i32", "i16": "i16",
           "i8": "i8", "u8": "u8", "bool": "bool"}
TL = {"f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32", "f64": "tl.float64", "i64": "tl.int64",
      "i32": "tl.int32", "i16": "tl.int16", "i8": "tl.int8", "u8": "tl.uint8", "bool": "tl.int1"}
FLOATS = ("f16", "bf16", "f32", "f64")

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_PRIVATE = re.compile(r"(?<![\w.])_([A-Za-z]\w*)")


# The template of a view (`OpDef.triton = "view"`): no code of its own; its output's strides, as the op infers
# them over a contiguous input, say which input element each output element is (`index.view_coords`).
VIEW = "view"
# The template of a tensor joined to itself along `dim` (`OpDef.triton = "repeat"`: concat of one value k
# times, as RoPE's tables are made, cat(freqs, freqs)): no code either, each output element reads the input
# at its coordinate modulo the input's size along `dim` (`index.repeat_coords`), which no strides can say.
# A node of several distinct operands has no such template (legality refuses it, naming them).
REPEAT = "repeat"

# A row reduction inside a template: `tl.sum(E, axis=1, keep_dims=True)` (or max, min) over a tile's rows.
_REDUCE = re.compile(r"\btl\.(sum|max|min)\(")
_OTHER_REDUCE = re.compile(r"\btl\.(argmax|argmin|reduce|cumsum|cumprod|associative_scan|xor_sum|histogram)\(")
_ROW_AXIS = ", axis=1, keep_dims=True"


def kind(dtype: str) -> str:
    """"float", "int" or "bool": what a template is chosen by."""
    return "float" if dtype in FLOATS else "bool" if dtype == "bool" else "int"


def compute_dtype(dtype: str) -> str:
    return COMPUTE[dtype]


def _holds(condition: str, attrs: dict, n_operands: int, out_kind: str) -> bool:
    if condition in ("float", "int", "bool"):
        return condition == out_kind
    name, _, value = condition.partition("=")
    if name == "operands":
        return n_operands == int(value)
    if name not in attrs:
        return False
    actual = attrs[name]
    if value == "None":
        return actual is None
    if isinstance(actual, (int, float)) and not isinstance(actual, bool):
        try:
            return float(actual) == float(value)
        except ValueError:
            return False
    return str(actual) == value


def choose(op: OpDef, attrs: dict, n_operands: int, out_dtype: str) -> tuple[str | None, str]:
    """(the op's template for this node, or None; and why not, in words)."""
    template = op.triton
    out_kind = kind(out_dtype)
    if template is None:
        return None, f"{op.name} has no Triton template (OpDef.triton)"
    if moves_no_data(template):
        return template, ""
    if isinstance(template, str):
        if out_kind == "bool":
            return None, f"{op.name} with a bool output has no Triton template (its template serves float and int)"
        return template, ""
    for condition, text in template.items():
        if _holds(condition, attrs, n_operands, out_kind):
            return text, ""
    shown = ", ".join(f"{k}={attrs[k]!r}" for k in sorted(attrs) if attrs[k] is not None)
    return None, (f"{op.name} has no Triton template for a {out_kind} output with {n_operands} operand(s)"
                  f"{' and ' + shown if shown else ''} (its templates: {', '.join(template)})")


def moves_no_data(template: str) -> bool:
    """A view's or a repeat's template: no code; what reads the node reads its input elsewhere."""
    return template in (VIEW, REPEAT)


def is_row_template(template: str) -> bool:
    """A template over whole rows (a reduction or a normalization): it reads `{mask}` or `{n}`."""
    return "{mask}" in template or "{n}" in template


def innermost_reduction(expr: str) -> tuple[int, int, str, str] | None:
    """The first row reduction in `expr` holding no other: (start, end, "sum"/"max"/"min", its operand), or
    None. Raises ValueError for a reduction of another form (a loop over the row could not split it)."""
    found = None
    for match in _REDUCE.finditer(expr):
        depth, i = 1, match.end()
        while depth:
            if i == len(expr):
                raise ValueError(f"unbalanced parentheses in {expr!r}")
            depth += {"(": 1, ")": -1}.get(expr[i], 0)
            i += 1
        inner = expr[match.end():i - 1]
        if _REDUCE.search(inner):
            continue
        if not inner.endswith(_ROW_AXIS):
            raise ValueError(f"tl.{match.group(1)}({inner}) is not a reduction over the row "
                             f"(`{_ROW_AXIS.lstrip(', ')}`)")
        found = (match.start(), i, match.group(1), inner[:-len(_ROW_AXIS)])
        break
    return found


def unsplittable(template: str) -> str | None:
    """Why a row template cannot be computed by passes that loop over the row (None: it can). Every statistic
    must be a sum, max or min over the row (each tile's, then the tiles')."""
    other = _OTHER_REDUCE.search(template)
    if other:
        return f"it reduces with tl.{other.group(1)}, which a loop over the row does not split"
    rest = template
    try:
        while (found := innermost_reduction(rest)) is not None:
            rest = rest[:found[0]] + "_r" + rest[found[1]:]
    except ValueError as e:
        return str(e)
    return None


def literal(value, dtype: str | None = None) -> str:
    """A Python literal for a scalar attr, as Triton reads it inside a kernel."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float) or (dtype is not None and kind(dtype) == "float"):
        value = float(value)
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '-float("inf")'
        text = repr(value)
        return f"({text})" if value < 0 else text
    text = str(int(value))
    return f"({text})" if value < 0 else text


# Triton's correctly rounded fp32 functions take fp32 alone (a float64 region failed to build for sm_90, found
# by the property test); in float64 the plain function rounds correctly already (PTX sqrt.rn.f64).
_FP32_ONLY = {"tl.sqrt_rn(": "tl.sqrt("}


def for_dtype(template: str, compute: str) -> str:
    """`template` as it builds for values of the compute dtype `compute`."""
    if compute == "f64":
        for fp32_only, plain in _FP32_ONLY.items():
            template = template.replace(fp32_only, plain)
    return template


def render(template: str, var: str, values: dict[str, str]) -> tuple[list[str], str]:
    """(statement lines, final expression) of `template` for the value named `var`: placeholders replaced
    by `values` (operand expressions, attr literals, `mask`, `n`), private `_names` made `var_names`."""

    def fill(match: re.Match) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"template placeholder {{{key}}} has no value (known: {', '.join(sorted(values))})")
        return values[key]

    lines = template.strip().splitlines()
    out = []
    for line in lines:
        line = _PLACEHOLDER.sub(fill, line)
        out.append(_PRIVATE.sub(lambda m: f"{var}_{m.group(1)}", line))
    return out[:-1], out[-1]

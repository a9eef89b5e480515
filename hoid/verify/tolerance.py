"""Dtype-aware, scale-aware tolerances.

An output element passes when `|candidate - reference| <= atol * scale + rtol * |reference|`, where
`scale` is the root mean square of the reference output (1 where it is all zeros). Making `atol`
relative to the output's own scale is what stops an all-zero output from passing against a reference
whose values are all tiny, and lets one table serve outputs of any magnitude. The whole output must also
pass on relative L2 error, `||candidate - reference|| / ||reference|| <= l2`, which is the figure that
catches a computation done in a lower precision (its per-element errors are small but everywhere).

The figures are set from what honest kernels measure against a float64 reference: float32 leaves room
for summation order over thousands of terms but not for float16 or bfloat16 arithmetic (relative errors
near 5e-4 and 4e-3); tf32 is for matmuls that opt into it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..ir.dtypes import dtype_name, to_torch


@dataclass(frozen=True)
class Tolerance:
    """atol: per element, in units of the output's RMS; rtol: per element, relative to |reference|;
    l2: the largest relative L2 error of the whole output; exact: integers and bools compare equal."""

    atol: float
    rtol: float
    l2: float
    exact: bool = False

    def __str__(self) -> str:
        if self.exact:
            return "exact"
        return f"atol {self.atol:.1e} x RMS, rtol {self.rtol:.1e}, relative L2 {self.l2:.1e}"


EXACT = Tolerance(0.0, 0.0, 0.0, exact=True)

TOLERANCES: dict[str, Tolerance] = {
    "f64": Tolerance(atol=1e-10, rtol=1e-10, l2=1e-11),
    "f32": Tolerance(atol=2e-5, rtol=2e-5, l2=1e-5),
    "tf32": Tolerance(atol=4e-3, rtol=4e-3, l2=2e-3),
    "f16": Tolerance(atol=4e-3, rtol=4e-3, l2=2e-3),
    "bf16": Tolerance(atol=3e-2, rtol=3e-2, l2=1.6e-2),
}


def governing_dtype(output_dtype, input_dtypes=()) -> str:
    """The dtype whose tolerance an output is held to: the least precise of the output's dtype and the
    float dtypes of the inputs. An op may round to an input's dtype on the way (RMSNorm rounds its
    normalized rows to x's dtype before the weight multiplies them, as transformers does), which the
    float64 reference does not do: a float32 output of bfloat16 data is only as exact as bfloat16."""
    name = dtype_name(output_dtype)
    if name not in TOLERANCES:
        return name
    floats = [d for d in map(dtype_name, input_dtypes) if d in TOLERANCES]
    return max([name, *floats], key=lambda d: torch.finfo(to_torch(d)).eps)


def tolerance_for(dtype, *, tf32: bool = False, atol: float | None = None, rtol: float | None = None,
                  inputs=()) -> Tolerance:
    """The tolerance of an output of `dtype` (an IR name or torch dtype) computed from inputs of dtypes
    `inputs` (see `governing_dtype`); `tf32=True` loosens float32 to tf32's figures; `atol`/`rtol`
    override the table (the L2 bound follows the larger of the two)."""
    name = governing_dtype(dtype, inputs)
    if name not in TOLERANCES:
        return EXACT
    tol = TOLERANCES["tf32" if tf32 and name == "f32" else name]
    if atol is None and rtol is None:
        return tol
    atol = tol.atol if atol is None else float(atol)
    rtol = tol.rtol if rtol is None else float(rtol)
    return replace(tol, atol=atol, rtol=rtol, l2=max(tol.l2, 0.5 * max(atol, rtol)))

"""Checks a library kernel against its pattern run by the interpreter in float64.

Outputs are poisoned with NaN before the launch, so an element the kernel fails to write fails the
comparison; the figure compared is the relative L2 error, bounded per output dtype at what an honest
kernel in that precision reaches (float32 summation order; one or two float16 roundings).
"""

from __future__ import annotations

import torch

from hoid.ir import TensorType, run
from hoid.ir.dtypes import FLOAT_DTYPES
from hoid.kernels import KernelSpec
from hoid.verify.selection import compare_selection, selections
from hoid.verify.tolerance import tolerance_for

L2_BOUND = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}


def _wide(t: TensorType) -> TensorType:
    return TensorType(t.shape, "f64") if t.dtype in FLOAT_DTYPES else t


def _graph(spec: KernelSpec, inputs: list[torch.Tensor], attrs: dict, wide: bool):
    return spec.pattern.graph([_wide(TensorType.of(x)) if wide else TensorType.of(x) for x in inputs], attrs)


def reference(spec: KernelSpec, inputs: list[torch.Tensor], attrs: dict) -> tuple[torch.Tensor, ...]:
    """The pattern's outputs on these inputs, computed in float64."""
    wide = [x.double() if x.is_floating_point() else x for x in inputs]
    return run(_graph(spec, inputs, attrs, wide=True), *wide)


def launch(spec: KernelSpec, inputs: list[torch.Tensor], attrs: dict, params: dict | None = None):
    """Launch `spec` on `inputs` into NaN-poisoned outputs of the pattern's types; returns the outputs."""
    types = spec.output_types([TensorType.of(x) for x in inputs], attrs)
    device = inputs[0].device
    outs = [torch.full(t.shape, float("nan") if t.dtype in FLOAT_DTYPES else -1, dtype=t.torch_dtype,
                       device=device) for t in types]
    spec.launch(*inputs, *outs, **attrs, **spec.check_params(params or {}))
    return outs


def assert_matches(spec: KernelSpec, inputs: list[torch.Tensor], attrs: dict, params: dict | None = None):
    """The kernel's outputs are within the dtype's relative L2 bound of the float64 reference."""
    got = launch(spec, inputs, attrs, params)
    want = reference(spec, inputs, attrs)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        dtype = TensorType.of(g).dtype
        if dtype not in FLOAT_DTYPES:
            _assert_same_indices(spec, inputs, attrs, i, g, w)
            continue
        # NaN agrees only with NaN in the reference (attention over an all-masked row is NaN in torch too).
        undefined = w.isnan()
        assert torch.equal(g.isnan(), undefined), f"{spec.id} output {i}: NaN where the reference has none"
        g, w = g.double()[~undefined], w[~undefined]
        err = ((g - w).norm() / w.norm().clamp_min(1e-30)).item()
        assert err <= L2_BOUND[dtype], f"{spec.id} output {i} ({dtype}): relative L2 error {err:.2e}"


def _assert_same_indices(spec: KernelSpec, inputs: list[torch.Tensor], attrs: dict, i: int, got, want):
    """Integer outputs are equal, except a topk's indices, which may differ where the scores tie (as
    `hoid.verify` judges them: `selection.py`)."""
    if torch.equal(got.cpu(), want.cpu()):
        return
    sel = selections(_graph(spec, inputs, attrs, wide=False)).get(i)
    assert sel is not None, f"{spec.id} output {i}: integer output differs"
    wide = [x.double() if x.is_floating_point() else x for x in inputs]
    tol = tolerance_for(sel.dtype, inputs=[TensorType.of(x).dtype for x in inputs])
    failure = compare_selection(i, got, want, sel, sel.scores(*wide)[0], sel.scores(*inputs)[0], tol)
    assert failure is None, f"{spec.id}: {failure.message}"


def linear_inputs(spec: KernelSpec, m: int, k: int, n: int, dtype) -> list[torch.Tensor]:
    """Inputs of a linear-family spec (its pattern `linear`, `linear_add` or `linear_swiglu_merged`): x [m, k],
    a weight of n output rows (2n, gate then up, for the merged pair) scaled so that outputs stay near 1, and
    the residual [m, n] where the pattern adds one."""
    rows = 2 * n if spec.pattern.name == "linear_swiglu_merged" else n
    ins = [torch.randn(m, k, dtype=dtype), torch.randn(rows, k, dtype=dtype) / k**0.5]
    return ins + ([torch.randn(m, n, dtype=dtype)] if spec.pattern.name == "linear_add" else [])

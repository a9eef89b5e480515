"""Comparing a candidate's outputs with the reference's, and two runs of the candidate with each other.

The reference arrives in float64 where it could run so (see `trials.py`), and also as computed in the
inputs' own dtypes; the candidate in its own dtype. Non-finite values are judged against the reference
rounded to the candidate's dtype, so that a value too large for float16 is expected to be Inf there;
everything else against the float64 values, with torch's own error in those dtypes forgiven element by
element (no kernel is held to more than torch computes in its dtypes), and `tolerance.py`'s per-element and
relative-L2 bounds beyond it. Every failure says which output, how many elements, the figures and the worst element.

The comparison runs where the reference ran (the check's device): in float64 on the CPU, a check of one library
kernel at BGE-M3's [32, 512, 1024] projection took 33 s of a 1-minute `hoid.optimize` on an H100 (12-05,
benchmarks/results/h100/workload-bge-m3-optimize-1m.log); on the GPU, the checks of all 24 of BGE-M3's library
proposals took 17 s together (H200, 12-05, benchmarks/results/workloads/workload-bge-m3-optimize-2m.log).
"""

from __future__ import annotations

import torch

from .poison import bits, unwritten_mask
from .tolerance import Tolerance
from .verdict import Failure

# Relative L2 errors in this band are those of float16/bfloat16 arithmetic (float32's relative to float64).
_LOW_PRECISION_BAND = (5e-5, 5e-2)
# Lower precisions an output may turn out to hold, coarsest first (a bfloat16 value is often a float16 one).
_LOWER = (torch.bfloat16, torch.float16, torch.float32)
# The share of the nonzero elements that must be values of the lower precision: a random float32 is a
# bfloat16 value once in 65536, so even a few percent would be evidence; all but 1% is certainty.
_LOWER_SHARE = 0.99


def _index(flat: int, shape) -> list[int]:
    return list(torch.unravel_index(torch.tensor(flat), tuple(shape))) if shape else []


def _where(k: int, flat: int, shape) -> str:
    return f"output {k}[{', '.join(str(int(i)) for i in _index(flat, shape))}]"


def compare_output(k: int, cand: torch.Tensor, ref: torch.Tensor, tol: Tolerance, *,
                   native: torch.Tensor | None = None) -> Failure | None:
    """None when output `k` of the candidate matches the reference within `tol`, else the failure.

    `native`: the same reference run in the inputs' own dtypes, where `ref` ran in float64. An element
    passes when its distance from the float64 value, less torch's own there, is within tolerance: a kernel is
    never held to more than torch computes in its dtypes (float32's exp overflows at 89 where float64's does
    not, and silu then gives 0 instead of 1e-37), and where the reference is NaN or Inf, the native value is
    accepted as well."""
    if tol.exact:
        return _compare_exact(k, cand, ref)
    where = ref.device  # the module doc says why not the CPU
    c, r = cand.detach().to(where, torch.float64), ref.detach().double()
    n = native.detach().to(where, torch.float64) if native is not None else torch.full_like(r, float("nan"))
    r_rounded = ref.detach().to(cand.dtype).double()
    expect_finite = torch.isfinite(r_rounded)
    unwritten = unwritten_mask(cand.detach()).to(where) & expect_finite
    if bool(unwritten.any()):
        n, first = int(unwritten.sum()), int(torch.nonzero(unwritten.flatten())[0])
        return Failure(
            "unwritten",
            f"{n} of {c.numel()} elements of output {k} were never written (they still hold "
            f"the poison the checker wrote before the run), first at {_where(k, first, c.shape)}",
            {"unwritten": n},
        )
    # A reference within tolerance of the dtype's largest value may overflow to Inf of its sign on the way.
    near_max = r.abs() * (1 + tol.rtol) >= torch.finfo(cand.dtype).max
    may_overflow = torch.isinf(c) & (((c.sign() == r.sign()) & near_max) | (c == n))
    nonfinite = ~torch.isfinite(c) & expect_finite & ~may_overflow
    if bool(nonfinite.any()):
        n, first = int(nonfinite.sum()), int(torch.nonzero(nonfinite.flatten())[0])
        # guards.py fills fresh allocations with NaN during the call: say so, it may be memory left unwritten.
        hint = " (fresh allocations hold NaN during the check: left unwritten, or computed?)"
        return Failure(
            "nonfinite",
            f"output {k} has NaN or Inf at {n} of {c.numel()} elements where the reference "
            f"is finite, first at {_where(k, first, c.shape)} = {c.flatten()[first].item()} "
            f"(reference {r.flatten()[first].item():.6g}){hint}",
            {"nonfinite": n},
        )
    # Where the reference (in the output's dtype) is NaN or Inf, the candidate must be the same, or what torch
    # gives in the inputs' dtypes: log(log_softmax(x)) is NaN in float64 (log of -3.8e-11) where float16's
    # log_softmax rounds to -0 and torch itself gives -inf.
    special = (c.isnan() & r_rounded.isnan()) | (c == r_rounded)
    if native is not None:
        special |= (c.isnan() & n.isnan()) | (c == n)
    wrong_special = ~expect_finite & ~special
    if bool(wrong_special.any()):
        first = int(torch.nonzero(wrong_special.flatten())[0])
        return Failure(
            "mismatch",
            f"output {k}: {_where(k, first, c.shape)} is {c.flatten()[first].item()} where "
            f"the reference is {r_rounded.flatten()[first].item()}",
            {},
        )
    return _compare_finite(k, c, r, n, expect_finite & ~may_overflow, tol, cand.dtype)


def resolution(r: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """What no output of `dtype` can be held to, per element: the reference's own rounding to the dtype,
    plus the dtype's smallest normal number. GPUs flush subnormals to zero (and float32 arithmetic
    underflows to zero where float64 keeps 1e-39), so an honest kernel may give 0 wherever the exact
    result is subnormal; anything above that band is compared as usual."""
    return (r - r.to(dtype).double()).abs() + torch.finfo(dtype).smallest_normal


def _compare_finite(k, c, r, n, finite, tol: Tolerance, dtype) -> Failure | None:
    c, r = torch.where(finite, c, 0.0), torch.where(finite, r, 0.0)
    # The error beyond torch's own in the inputs' dtypes, element by element (|c - n| is never less: the
    # triangle inequality). Where the region is ill-conditioned, a sum that cancels terms far larger than
    # itself, its own rounding of those terms exceeds any tolerance scaled by the output, and an honest kernel
    # that rounds where the region rounds, in another order, lands as far off, on either side (the grouped
    # MoE kernel's bfloat16 partials, weighted by routing weights of 1e-4 and summed to 1e-3 from 1e-2,
    # H100 12-07: 2.1e-4 from both, its bound 1.7e-4).
    own = torch.where(finite & torch.isfinite(n), (n - r).abs(), 0.0)
    raw = ((c - r).abs() - own).clamp(min=0)
    err = (raw - resolution(r, dtype)).clamp(min=0)
    ref_norm = float(r.norm())
    scale = float(r.square().mean().sqrt()) if r.numel() else 0.0
    allowed = tol.atol * (scale if scale > 0 else 1.0) + tol.rtol * r.abs()
    worst = int((err / allowed).flatten().argmax()) if err.numel() else 0
    rel_l2 = float(err.norm()) / ref_norm if ref_norm > 0 else float(err.norm())
    violations = int((err > allowed).sum())
    worst_text = (f"{_where(k, worst, c.shape)} = {c.flatten()[worst].item():.8g}, reference "
                  f"{r.flatten()[worst].item():.8g}") if err.numel() else ""
    figures = {"rel_l2": rel_l2, "max_abs_error": float(raw.max()) if raw.numel() else 0.0, "ref_rms": scale,
               "violations": violations, "worst": worst_text}
    if violations == 0 and rel_l2 <= tol.l2:
        return None
    what = (f"{violations} of {c.numel()} elements exceed the per-element bound" if violations
            else "the per-element bounds hold")
    text = (f"output {k} differs from the reference: relative L2 error {rel_l2:.3g} (bound {tol.l2:.1g}), "
            f"{what}; worst {worst_text} (tolerance: {tol})")
    lower = _held_precision(c, dtype) if _LOW_PRECISION_BAND[0] <= rel_l2 <= _LOW_PRECISION_BAND[1] else None
    if lower is not None:
        low, out = str(lower).replace("torch.", ""), str(dtype).replace("torch.", "")
        text += (f"; every element of the output is a {low} value, and errors of this size are those of {low} "
                 f"arithmetic: the computation seems to run in lower precision than its {out} output")
    return Failure("mismatch", text, figures)


def _held_precision(c: torch.Tensor, dtype: torch.dtype) -> torch.dtype | None:
    """The lower precision whose values the candidate's output holds, or None. A result computed in
    bfloat16 and widened to float32 keeps bfloat16's rounding in every element; that, not the size of
    the error, is the evidence: a formula bug (a biased variance, the tanh GELU) gives errors of the
    same size in values of the output's own precision."""
    nonzero = c[(c != 0) & torch.isfinite(c)]
    if not nonzero.numel():
        return None
    for lower in _LOWER:
        if torch.finfo(lower).eps <= torch.finfo(dtype).eps:
            continue
        held = (nonzero.to(lower).double() == nonzero).double().mean()
        if float(held) >= _LOWER_SHARE:
            return lower
    return None


def _compare_exact(k: int, cand: torch.Tensor, ref: torch.Tensor) -> Failure | None:
    c, r = cand.detach().to(ref.device), ref.detach().to(cand.dtype)
    differ = c != r
    if not bool(differ.any()):
        return None
    n, first = int(differ.sum()), int(torch.nonzero(differ.flatten())[0])
    kind = "unwritten" if bool(unwritten_mask(c).flatten()[first]) else "mismatch"
    return Failure(
        kind,
        f"output {k}: {n} of {c.numel()} elements differ (exact comparison for "
        f"{str(c.dtype).replace('torch.', '')}); first {_where(k, first, c.shape)} = "
        f"{c.flatten()[first].item()}, reference {r.flatten()[first].item()}",
        {"violations": n},
    )


def compare_runs(
    first: list[torch.Tensor], second: list[torch.Tensor], tols: list[Tolerance], *, bitwise: bool
) -> Failure | None:
    """Two runs of the candidate on the same inputs: bitwise equal when it declares itself
    deterministic, else within the tolerance of each output (the first run standing as the reference)."""
    for k, (a, b, tol) in enumerate(zip(first, second, tols, strict=True)):
        if bitwise or tol.exact:
            same = bits(a.flatten()) == bits(b.flatten())
            if not bool(same.all()):
                n, at = int((~same).sum()), int(torch.nonzero(~same)[0])
                return Failure(
                    "nondeterministic",
                    f"two runs on the same inputs differ in {n} elements of output "
                    f"{k} (first at {_where(k, at, a.shape)}: {a.flatten()[at].item()} then "
                    f"{b.flatten()[at].item()}), but the candidate declares itself bitwise deterministic",
                    {"differing": n},
                )
            continue
        failure = compare_output(k, b, a, tol)
        if failure is not None:
            return Failure(
                "nondeterministic",
                "two runs on the same inputs disagree beyond the tolerance: "
                + failure.message.replace("the reference", "the first run"),
                failure.figures,
            )
    return None

"""The precision policy (docs/design.md, "Precision"): a kernel may compute in a higher precision than the
dtypes of the region it replaces, never skip one of the region's explicit casts, and is held to the
tolerance of the least precise dtype among the region's inputs and outputs, against the exact function."""

import torch

import hoid
from hoid.ir import get_op
from hoid.verify import Input, check
from hoid.verify.check import region_inputs

EPS = 1e-6


def bf16_rmsnorm_without_upcast() -> hoid.Graph:
    """A user's RMSNorm in bfloat16, written without the upcast to float32: every op rounds to bfloat16."""
    b = hoid.GraphBuilder("user_rmsnorm")
    x, w = b.input("x", (16, 64), "bf16"), b.input("w", (64,), "bf16")
    var = b.mean(b.pow(x, 2.0), dim=[-1], keepdim=True)
    return b.build(b.mul(w, b.mul(x, b.rsqrt(b.add(var, EPS)))))


def fake_quantized_scale() -> hoid.Graph:
    """float32 in and out, with an explicit round to bfloat16 on the way (how fake quantization is written)."""
    b = hoid.GraphBuilder("fake_quant")
    x, w = b.input("x", (16, 64), "f32"), b.input("w", (64,), "f32")
    return b.build(b.mul(b.cast(b.cast(x, dtype="bf16"), dtype="f32"), w))


def _inputs(graph):
    return region_inputs(graph)


def upcast_rmsnorm(x, w):  # hoid's rmsnorm op: float32 inside, as transformers computes it
    return get_op("rmsnorm").reference(x, w, eps=EPS)


def test_a_higher_precision_kernel_may_replace_a_lower_precision_region():
    graph = bf16_rmsnorm_without_upcast()
    verdict = check(upcast_rmsnorm, graph, _inputs(graph), seed=1)
    assert verdict.ok, verdict


def test_it_is_held_to_the_regions_least_precise_dtype_against_the_exact_function():
    graph = bf16_rmsnorm_without_upcast()
    close = check(lambda x, w: (upcast_rmsnorm(x, w).float() * 1.004).bfloat16(), graph, _inputs(graph), seed=1)
    assert close.ok, close  # 0.4% off: within bfloat16's tolerance, which a float32 bound would refuse
    off = check(lambda x, w: upcast_rmsnorm(x, w) * 1.05, graph, _inputs(graph), seed=1)
    assert not off.ok and "(bound 0.02)" in off.reason, off  # bfloat16's L2 bound, 1.6e-2


def test_an_explicit_cast_is_part_of_the_function_and_cannot_be_skipped():
    graph = fake_quantized_scale()
    skipped = check(lambda x, w: x * w, graph, _inputs(graph), seed=1)
    assert not skipped.ok and skipped.kind == "mismatch" and "(bound 1e-05)" in skipped.reason, skipped
    assert "lower precision" not in skipped.reason  # it is the candidate that computes higher, not lower
    kept = check(lambda x, w: x.bfloat16().float() * w, graph, _inputs(graph), seed=1)
    assert kept.ok, kept


def test_a_lower_precision_kernel_never_replaces_a_higher_precision_region():
    b = hoid.GraphBuilder("f32_scale")
    x, w = b.input("x", (16, 64), "f32"), b.input("w", (64,), "f32")
    graph = b.build(b.mul(x, w))
    verdict = check(lambda x, w: (x.bfloat16() * w.bfloat16()).float(), graph, _inputs(graph), seed=1)
    assert not verdict.ok and "lower precision than its float32 output" in verdict.reason, verdict
    assert torch.finfo(torch.bfloat16).eps > torch.finfo(torch.float32).eps


def test_where_float16_overflows_a_kernel_is_held_to_float32s_own_error():
    """(x * 2^28 + 1) - x * 2^28 is 1. torch in float16 overflows (Inf - Inf: NaN) for |x| >= 2^-12, and float32
    loses the 1 for |x| >= 1/16: a kernel that keeps float32 intermediates gives float32's answer there and
    passes (it was refused before, held to float64 where torch had no answer); one worse than float32, where
    float32 is exact, fails."""
    def reference(x):
        return (x * 2.0**28 + 1) - x * 2.0**28

    def in_float32(x):
        wide = x.float() * 2.0**28
        return ((wide + 1) - wide).to(x.dtype)

    def worse(x):
        return in_float32(x) + 1

    xs = Input((64,), "f16", derive=lambda earlier, sizes: torch.linspace(-1, 1, 64, dtype=torch.float16))
    assert check(in_float32, reference, [xs], seed=0)
    verdict = check(worse, reference, [xs], seed=0)
    assert not verdict and "differs from the reference" in verdict.reason

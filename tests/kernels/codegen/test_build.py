"""Every generated kernel of the tiny models builds for Hopper (sm_90, the H200) and Blackwell (sm_100, the
B200) without a GPU, down to a cubin, with no spill or warning from ptxas, and its bulk loads are 16 bytes
wide where the rows allow; and so does each new kernel form (looped rows, views read through)."""

from __future__ import annotations

import pytest

from hoid.kernels.codegen import generate

from .helpers import builder
from .test_models import MODELS, found


def _unique(kind):
    return list({f.generated.spec.id: f.generated for f in found(kind).regions}.values())


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("kind", MODELS)
def test_every_generated_kernel_builds(kind, arch):
    for generated in _unique(kind):
        assert arch in generated.spec.archs
        built = generated.spec.compile(arch)
        assert built.arch == arch and built.ptx_target == arch + "a", built
        assert built.spilled_bytes == 0 and not built.ptxas_warnings, built  # the assembler's word on it


def test_a_contiguous_row_kernel_loads_16_bytes_a_thread():
    """T5's RMSNorm rows (64 floats, contiguous): the compiler must see aligned, vectorizable offsets."""
    rms = next(g for g in _unique("t5_encoder") if g.layout.row_kernel)
    assert rms.spec.compile("sm_90").wide_loads >= 1


def test_an_unknown_arch_is_refused():
    generated = _unique("vit")[0]
    with pytest.raises(ValueError, match="sm_90, sm_100"):
        generated.spec.compile("sm_80")


def _forms():
    """One of each new kernel form: looped row kernels (one pass, two passes, several statistics in a pass)
    and views read through (a permuted computed value into a layer norm, a reshape, an expanded mask)."""
    b = builder()
    x, w = b.input("x", (8, 4096), "f16"), b.input("w", (4096,), "f16")
    yield "looped layer norm", generate(b.build(b.layer_norm(x, w, normalized_shape=[4096])), max_row=1024)
    b = builder()
    x = b.input("x", (8, 4096), "f32")
    yield "looped rmsnorm", generate(b.build(b.op("rmsnorm", x, eps=1e-6)), max_row=1024)
    b = builder()
    x = b.input("x", (8, 4096), "f32")
    yield "looped statistics", generate(b.build(b.amax(x, dim=[-1]), b.op("var", x, dim=[-1])), max_row=1024)
    b = builder()
    x, pos, w = b.input("x", (2, 64, 48), "f16"), b.input("pos", (48, 64), "f16"), b.input("w", (64,), "f16")
    y = b.add(b.permute(b.gelu(x), dims=[0, 2, 1]), pos)
    yield "permute into a layer norm", generate(b.build(y, b.layer_norm(y, w, normalized_shape=[64])))
    b = builder()
    x = b.input("x", (4, 16, 256), "f32")
    yield "reshape", generate(b.build(b.exp(b.reshape(x, shape=(4, 16, 4, 64)))))
    b = builder()
    s, m = b.input("s", (2, 4, 64, 64), "f32"), b.input("m", (2, 1, 1, 64), "f32")
    yield "expanded mask", generate(b.build(b.softmax(b.add(s, b.expand(m, shape=(2, 4, 64, 64))), dim=-1)))
    b = builder()
    x = b.input("x", (2, 4096, 8), "f32")
    yield "transpose into a looped softmax", generate(b.build(b.softmax(b.transpose(x, dim0=1, dim1=2), dim=-1)),
                                                      max_row=1024)
    b = builder()
    x = b.input("x", (64, 256), "f64")  # the property test's find: Triton's sqrt_rn takes fp32 alone
    yield "float64 sqrt", generate(b.build(b.sqrt(b.abs(x))))


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_every_new_kernel_form_builds(arch):
    for what, generated in _forms():
        built = generated.spec.compile(arch)
        assert built.arch == arch and built.ptx_target == arch + "a", (what, built)
        assert built.spilled_bytes == 0 and not built.ptxas_warnings, (what, built)
        # every row here is a multiple of 16 bytes, so each load (through a view too: a permuted read goes
        # through shared memory) moves 16 bytes a thread; but a looped program holding one row (16 rows here:
        # "auto" keeps programs many) reads a transposed input one element at a time
        if what != "transpose into a looped softmax":
            assert built.wide_loads >= 1 and built.narrow_loads == 0, (what, built)

"""Every generated kernel of the tiny models builds for Hopper (sm_90, the H200) and Blackwell (sm_100, the
B200) without a GPU, down to a cubin, and its bulk loads are 16 bytes wide where the rows allow."""

from __future__ import annotations

import pytest

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


def test_a_contiguous_row_kernel_loads_16_bytes_a_thread():
    """T5's RMSNorm rows (64 floats, contiguous): the compiler must see aligned, vectorizable offsets."""
    rms = next(g for g in _unique("t5_encoder") if g.layout.row_kernel)
    assert rms.spec.compile("sm_90").wide_loads >= 1


def test_an_unknown_arch_is_refused():
    generated = _unique("vit")[0]
    with pytest.raises(ValueError, match="sm_90, sm_100"):
        generated.spec.compile("sm_80")

"""Every Triton kernel of the library builds for Hopper (sm_90, the H200) and Blackwell (sm_100, the
B200: the seed's target), without a GPU: nothing may silently fail to build for either."""

import pytest

from hoid.kernels import all_kernels

TRITON_IDS = sorted(k.id for k in all_kernels().values() if k.backend == "triton")


def test_the_library_has_its_triton_kernels():
    assert {"triton.rmsnorm", "triton.add_rmsnorm", "triton.softmax", "triton.embedding"} <= set(TRITON_IDS)


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("kernel_id", TRITON_IDS)
def test_builds_for_arch(kernel_id, arch):
    spec = all_kernels()[kernel_id]
    assert arch in spec.archs and spec.compile is not None
    built = spec.compile(arch)
    builds = built if isinstance(built, list) else [built]
    assert builds, f"{kernel_id} built nothing"
    for b in builds:
        assert b.arch == arch and b.ptx_target == arch + "a", f"{kernel_id}: {b}"

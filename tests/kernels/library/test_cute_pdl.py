"""Programmatic dependent launch in the CuTe GEMV, on the CPU: the specs declare it (the weight readable before
the wait), a bound PDL launch passes `pdl=` / `pdl_early=` to the kernel, each choice is a build of its own,
and the sm_90 / sm_100 PTX of a PDL build waits (`griddepcontrol.wait`) before every load while the early
build loads its weight rows' first steps, and nothing else, ahead of the wait. (On the GPU: test_cute_gpu.)

Without CuTe DSL the build tests skip, except where HOID_REQUIRE_CUTE=1 (then a missing install fails them)."""

import os

import pytest

from hoid.ir import TensorType
from hoid.kernels import Target, get
from hoid.kernels.launch import bind_spec, resolve_params
from hoid.kernels.library._cute_compile import have_cute

GEMV_IDS = ["cute.linear", "cute.linear_add", "cute.linear_swiglu_merged", "cute.rmsnorm_linear",
            "cute.rmsnorm_linear_swiglu_merged", "cute.linear_split", "cute.linear_add_split"]

needs_cute = pytest.mark.skipif(not have_cute() and os.environ.get("HOID_REQUIRE_CUTE") != "1",
                                reason="CuTe DSL is not installed (pip install 'hoid[cute]'); "
                                       "HOID_REQUIRE_CUTE=1 makes this a failure")


def _types(kernel_id, m=1, k=2048, n=64):
    rows = 2 * n if kernel_id.endswith("swiglu_merged") else n
    norm = [TensorType((k,), "bf16")] if "rmsnorm" in kernel_id else []  # (x, norm weight, weight)
    types = [TensorType((m, k), "bf16"), *norm, TensorType((rows, k), "bf16")]
    return types + ([TensorType((m, n), "bf16")] if "linear_add" in kernel_id else [])


@pytest.mark.parametrize("kernel_id", GEMV_IDS)
def test_the_gemvs_declare_pdl_with_the_weight_read_early(kernel_id):
    spec = get(kernel_id)
    # the weight (input 1; 2 after the norm prologue's norm weight), which no kernel of a decode step writes
    assert spec.pdl and spec.pdl_early == ((2,) if "rmsnorm" in kernel_id else (1,))
    types = _types(kernel_id, k=8192 if kernel_id.endswith("_split") else 2048)  # the split kernels: long rows
    params = resolve_params(spec, types, {}, target=Target.H200)
    plain = bind_spec(spec, types, {}, params)
    assert not plain.pdl and "pdl" not in plain.keywords and "pdl_early" not in plain.keywords
    early = bind_spec(spec, types, {}, params, pdl=True).early()
    assert early.pdl and early.pdl_early
    assert early.keywords["pdl"] is True and early.keywords["pdl_early"] is True


@needs_cute
def test_each_pdl_choice_is_a_build_of_its_own_and_early_needs_pdl():
    import torch

    from hoid.kernels.library import cute_gemv

    x, w = torch.zeros(1, 512, dtype=torch.bfloat16), torch.zeros(64, 512, dtype=torch.bfloat16)
    out = torch.empty(1, 64, dtype=torch.bfloat16)
    keys = {cute_gemv.prepare(x, w, None, out, "none", pdl=pdl, pdl_early=early)[1]
            for pdl, early in ((False, False), (True, False), (True, True))}
    assert len(keys) == 3
    with pytest.raises(ValueError, match="pdl_early=True needs pdl=True"):
        cute_gemv.prepare(x, w, None, out, "none", pdl_early=True)


@needs_cute
@pytest.mark.parametrize("epilogue, m, k, n", [("none", 5, 520, 100), ("add", 1, 6144, 2048)])
def test_the_pdl_launch_path_builds_over_torch_tensors(epilogue, m, k, n):
    """The launch with `use_pdl` and the early reads compiles over DLPack views as a GPU launch would (the
    `add` case: a K loop longer than the steps read early; the other: K = 520 has a partial last step)."""
    import torch

    from hoid.kernels.library import cute_gemv
    from hoid.kernels.library._cute_compile import compiled_for, dlpack_views, null_stream

    x, w = torch.zeros(m, k, dtype=torch.bfloat16), torch.zeros(n, k, dtype=torch.bfloat16)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    residual = torch.zeros(m, n, dtype=torch.bfloat16) if epilogue == "add" else None
    name, key, make, tensors = cute_gemv.prepare(x, w, residual, out, epilogue, pdl=True, pdl_early=True)
    assert compiled_for(name, key, make, dlpack_views(tensors), null_stream(), "sm_90") is not None


# (epilogue, (M, K, N)): decode shapes of Qwen3-1.7B (K = 2048: the early steps are the whole row; K = 6144:
# a loop goes on after them), and M = 16, where x's rows take the registers and one step is read early.
SHAPES = [("none", (1, 2048, 4096)), ("add", (1, 6144, 2048)), ("swiglu", (1, 2048, 6144)),
          ("swiglu", (16, 2048, 6144))]


@needs_cute
@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("epilogue, shape", SHAPES, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v)
def test_the_pdl_build_waits_first_and_the_early_one_reads_only_the_weight_ahead(arch, epilogue, shape):
    from hoid.kernels.library import cute_gemv

    m, k, n = shape
    waiting = cute_gemv.build_one(epilogue, shape, arch, pdl=True)
    early = cute_gemv.build_one(epilogue, shape, arch, pdl=True, early=True)
    for b in (waiting, early):
        assert b.ptx_target == cute_gemv.CUTE_TARGETS[arch] and b.cubin_bytes > 0
        assert b.count("griddepcontrol.wait") == 1 and b.count("griddepcontrol.launch_dependents") == 1
        # The next kernel may launch only once this one has waited (else it could wait on this one's wait).
        assert b.ptx.index("griddepcontrol.wait") < b.ptx.index("griddepcontrol.launch_dependents")
        assert b.count_before_wait("st.global") == 0
    assert waiting.count_before_wait("ld.global") == 0
    # Ahead of the wait: each weight row's first `unroll` steps of 16 bytes a lane, and no load of x or the
    # residual (any would make the count larger than the weight's).
    cfg = cute_gemv.choose(m, n, k, Target(arch, 0))
    steps = min(cfg["unroll"], k // (32 * 8))
    w_rows = cfg["rows"] * (2 if epilogue == "swiglu" else 1)
    assert early.count_before_wait("ld.global.v4") == early.count_before_wait("ld.global") == steps * w_rows


@needs_cute
@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_the_split_build_waits_first_and_reads_each_warp_s_own_run_ahead(arch):
    """Llama-3.2-1B's down projection split 4 ways: each warp reads its own run's first steps ahead of the
    wait (so as many loads as the unsplit build's, at other offsets), and stores nothing before it."""
    from hoid.kernels.library import cute_gemv, cute_gemv_split

    shape = (1, 8192, 2048)
    cfg = cute_gemv_split.choose_split(1, 2048, 8192, Target(arch, 0))
    early = cute_gemv.build_one("add", shape, arch, pdl=True, early=True, split=cute_gemv_split.auto_split)
    assert early.count("griddepcontrol.wait") == 1 and early.count_before_wait("st.") == 0
    per = 8192 // (32 * 8) // cfg["split"]
    assert early.count_before_wait("ld.global.v4") == early.count_before_wait("ld.global") == min(cfg["unroll"], per)

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
        # Built as a launch on torch tensors specializes it (aligned pointers, strides multiples of 16), the
        # bulk of its bytes is read 16 bytes per thread; a build without that read 2 bytes at a time.
        assert b.wide_loads >= 1, f"{kernel_id}: no 16-byte global load in {b}"
    # a kernel that supports PDL builds with it too: both grid dependency instructions, and none without
    assert {b.griddep for b in builds} == ({0, 2} if spec.pdl else {0}), f"{kernel_id}: {builds}"
    if not spec.pdl_early:  # its PDL builds wait before touching memory: the last kernel may still write it
        assert all(b.loads_before_wait == 0 for b in builds if b.griddep), f"{kernel_id}: {builds}"
    # and none writes before its wait, early weight loads or not: the last kernel may still read what it holds
    assert all(b.writes_before_wait == 0 for b in builds if b.griddep), f"{kernel_id}: {builds}"


# The kernels that load after a store by design, each with why. Elsewhere a load after a store waits for it
# (the compiler cannot tell the addresses apart), and for everything the store waits on: the prelude attention
# of 12-04 stored its new cache rows first and its walk of the cache waited behind the prelude (9.5 us alone
# on the H200 against 7.8 for the two kernels it replaced).
LOADS_AFTER_STORES = {
    "triton.linear": "split-K: the last program to arrive sums the partials the others stored",
    "triton.linear_add": "split-K: the last program to arrive sums the partials the others stored",
    "triton.linear_bias": "split-K: the last program to arrive sums the partials the others stored",
    "triton.linear_swiglu_merged": "split-K: the last program to arrive sums the partials the others stored",
    "triton.gemm_linear": "split-K (48 rows): as triton.linear",
    "triton.gemm_linear_add": "split-K (a prompt of 128): as triton.linear",
    "triton.gemm_linear_swiglu_merged": "split-K (its narrow build): as triton.linear",
    "triton.decode_attention_onelaunch": "the last split to arrive combines the partials the others stored",
    "triton.moe_experts": "each pass over an expert's pairs stores its rows before the next pass loads; the "
                          "down launch's last program sums the partials the others stored",
    "triton.moe_router": "the last program to arrive selects from the logits the others stored",
}


@pytest.mark.parametrize("kernel_id", TRITON_IDS)
def test_no_load_waits_behind_a_store_unless_it_reads_what_was_stored(kernel_id):
    built = all_kernels()[kernel_id].compile("sm_90")
    builds = built if isinstance(built, list) else [built]
    after = [b.loads_after_store for b in builds]
    if kernel_id in LOADS_AFTER_STORES:
        assert any(after), f"{kernel_id} no longer loads after a store: drop it from LOADS_AFTER_STORES"
    else:
        assert not any(after), f"{kernel_id}: global loads after its first store {after}: load first, store last"


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("kernel_id", TRITON_IDS)
def test_no_ticket_announces_other_warps_writes_before_they_are_made(kernel_id, arch):
    """A split-K ticket is one thread's release: a CTA barrier must make every warp's partials precede it
    (`hoid.kernels.ptx.unsynced_releases`). Triton places one there by itself only where shared memory
    happens to be reused; the library's kernels place their own."""
    built = all_kernels()[kernel_id].compile(arch)
    builds = built if isinstance(built, list) else [built]
    assert not any(b.unsynced_releases for b in builds), f"{kernel_id}: {builds}"


# Builds ptxas spills in (bytes of spill stores and loads, by arch), each with why it stands: a new spill fails
# below, and so does one of these growing or gone (update the entry: the measurement it needs is named).
SPILLS = {
    # the M = 16 tile without split-K (32 x 256 on 4 warps, 3 stages): gate and up accumulators both live;
    # 2 stages or 8 warps spill nothing, untimed (at 16 rows only Llama-3.1-8B's gate/up runs it unsplit)
    ("triton.linear_swiglu_merged", "sm_90"): 12,
    # the widest row block (16384 columns, 3 tiles, 16 warps) on Blackwell only: long rows, no decode graph
    ("triton.softmax", "sm_100"): 24,
}


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("kernel_id", TRITON_IDS)
def test_no_build_spills_or_draws_a_ptxas_warning_beyond_its_entry(kernel_id, arch):
    built = all_kernels()[kernel_id].compile(arch)
    builds = built if isinstance(built, list) else [built]
    assert not [w for b in builds for w in b.ptxas_warnings], kernel_id
    assert max(b.spilled_bytes for b in builds) == SPILLS.get((kernel_id, arch), 0), kernel_id


def test_a_broken_build_raises_with_the_compiler_s_reason():
    from hoid.kernels.library import triton_rmsnorm
    from hoid.kernels.library._triton_build import compile_for

    with pytest.raises((RuntimeError, ValueError), match="no type or value for argument"):
        compile_for(triton_rmsnorm.rmsnorm_rows, "sm_90", {"x_ptr": "*bf16"}, {"BLOCK_N": 64})


def test_an_unknown_arch_is_refused():
    from hoid.kernels.library import triton_rmsnorm
    from hoid.kernels.library._triton_build import compile_for

    with pytest.raises(ValueError, match="sm_90, sm_100"):
        compile_for(triton_rmsnorm.rmsnorm_rows, "sm_80", {}, {})


def test_declaring_a_pointer_divisible_is_refused_by_name():
    from hoid.kernels.library import triton_rmsnorm
    from hoid.kernels.library._triton_build import compile_for

    sig = {"x_ptr": "*bf16", "res_ptr": "*bf16", "w_ptr": "*bf16", "out_ptr": "*bf16", "sum_ptr": "*bf16",
           "n_rows": "i32", "n_cols": "i32", "eps": "fp32"}
    consts = {"HAS_RESIDUAL": False, "BLOCK_M": 1, "BLOCK_N": 64, "PDL": False}
    with pytest.raises((RuntimeError, ValueError), match="non-integer argument.*eps"):
        compile_for(triton_rmsnorm.rmsnorm_rows, "sm_90", sig, consts, divisible_by_16=("n_cols", "eps"))


EARLY_STORE = '''
import triton
import triton.language as tl


@triton.jit
def early_store(x_ptr, out_ptr, STORE_FIRST: tl.constexpr):
    offs = tl.arange(0, 128)
    if STORE_FIRST:
        tl.store(out_ptr + offs, tl.zeros([128], tl.float32))
    tl.extra.cuda.gdc_wait()
    tl.extra.cuda.gdc_launch_dependents()
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
'''


@pytest.mark.parametrize("store_first", [False, True])
def test_a_write_ahead_of_the_grid_dependency_wait_is_counted(tmp_path, store_first):
    from hoid.kernels.library._triton_build import compile_file_for

    (path := tmp_path / "early_store.py").write_text(EARLY_STORE)
    built = compile_file_for(str(path), "early_store", "sm_90", {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                             {"STORE_FIRST": store_first})
    assert built.griddep == 2 and built.writes_before_wait == int(store_first), built


PRODUCT = '''
import triton
import triton.language as tl


@triton.jit
def product(a_ptr, b_ptr, out_ptr, K, CONVERT: tl.constexpr):
    m, n = tl.arange(0, 64), tl.arange(0, 64)
    acc = tl.zeros((64, 64), tl.float32)
    for k0 in range(0, K, 64):
        k = k0 + tl.arange(0, 64)
        a = tl.load(a_ptr + m[:, None] * K + k[None, :])
        if CONVERT:
            a = (a * 2.0).to(tl.bfloat16)  # computed after its load, in registers
        acc = tl.dot(a, tl.load(b_ptr + k[:, None] * 64 + n[None, :]), acc)
    tl.store(out_ptr + m[:, None] * 64 + n[None, :], acc)
'''


@pytest.mark.parametrize("convert", [False, True])
def test_a_hopper_product_of_an_operand_computed_in_registers_is_counted(tmp_path, convert):
    from hoid.kernels.library._triton_build import compile_file_for

    (path := tmp_path / "product.py").write_text(PRODUCT)
    built = compile_file_for(str(path), "product", "sm_90", {"a_ptr": "*bf16", "b_ptr": "*bf16", "out_ptr": "*fp32",
                                                             "K": "i32"}, {"CONVERT": convert}, divisible_by_16=("K",))
    assert built.tensor_core_mmas > 0 and (built.register_operand_dots > 0) == convert, built

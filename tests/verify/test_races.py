"""Races the numerical check can miss, read from what Triton built for an untrusted kernel on a GPU."""

import types

import pytest
import torch

from hoid.verify import Dim, check
from hoid.verify.races import compiled_triton_kernels, unsynced_tickets

STORE, TICKET, BARRIER = ("@%p2 st.global.b32 [ %rd1 + 0 ], { %r1 };",
                          "@%p1 atom.global.gpu.acq_rel.add.u32 %r5, [ %rd3 + 0 ], %r6;", "bar.sync \t0;")


def _ticket(x_ptr):  # the Python function a stand-in JITFunction wraps (Triton reads it from this file)
    pass


def _module_with_a_built_kernel(ptx: str):
    """A candidate's module as a GPU leaves it after a call: one Triton function with one compiled kernel
    in its per-device cache (Triton's own structure, filled by hand: the CPU interprets, compiles nothing)."""
    from triton.runtime.jit import JITFunction

    module = types.ModuleType("candidate")
    exec("def launch(x):\n    return x\n", module.__dict__)
    module.ticket = JITFunction(_ticket)
    module.ticket.device_caches = {0: ({"key": types.SimpleNamespace(asm={"ptx": ptx})}, {}, None, None, None)}
    return module


def test_a_ticket_built_without_a_barrier_is_a_race_with_the_fix_named():
    module = _module_with_a_built_kernel("\n".join([STORE, TICKET]))
    assert [name for name, _ in compiled_triton_kernels(module.launch)] == ["_ticket"]
    failure = unsynced_tickets(module.launch, seen := set())
    assert failure.kind == "race" and "tl.debug_barrier()" in failure.message and "ticket" in failure.message
    assert unsynced_tickets(module.launch, seen) is None  # each build is read once


def test_a_ticket_behind_a_barrier_and_a_module_without_triton_kernels_pass():
    assert unsynced_tickets(_module_with_a_built_kernel("\n".join([STORE, BARRIER, TICKET])).launch, set()) is None
    assert unsynced_tickets(test_a_ticket_behind_a_barrier_and_a_module_without_triton_kernels_pass, set()) is None


# Column sums of x [P, 256]: each program stores its row as a partial and takes a ticket; the last sums them.
COLUMN_SUMS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def column_sums(x_ptr, part_ptr, count_ptr, out_ptr, P, SYNC: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    tl.store(part_ptr + row * BLOCK + cols, tl.load(x_ptr + row * BLOCK + cols) * 1.0)
    if SYNC:
        tl.debug_barrier()
    if tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu") == P - 1:
        acc = tl.zeros([BLOCK], tl.float32)
        for p in range(P):
            acc += tl.load(part_ptr + p * BLOCK + cols, cache_modifier=".cg")
        tl.store(out_ptr + cols, acc)


def kernel(x):
    out = torch.empty(x.shape[1], device=x.device, dtype=x.dtype)
    part, count = torch.empty_like(x), torch.zeros(1, device=x.device, dtype=torch.int32)
    column_sums[(x.shape[0],)](x, part, count, out, x.shape[0], SYNC=SYNC, BLOCK=x.shape[1])
    return out
'''


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("sync", [False, True])
def test_on_the_gpu_a_kernel_whose_ticket_has_no_barrier_is_refused_for_the_race(sync):
    source = COLUMN_SUMS + f"\n\nSYNC = {sync}\n"
    verdict = check((source, "kernel"), lambda x: x.sum(0), [((Dim("p", 1, 32), 256), "f32")], trials=4, seed=0)
    if sync:
        assert verdict.ok, verdict
    else:
        assert verdict.kind == "race" and "column_sums" in verdict.reason, verdict


@pytest.mark.parametrize("sync", [False, True])
def test_the_gpu_test_s_kernel_builds_with_the_race_only_without_its_barrier(tmp_path, sync):
    """The GPU test's premise, on the CPU: its kernel built for sm_90 has one unsynced ticket, none with SYNC."""
    from hoid.kernels.library._triton_build import compile_file_for

    (path := tmp_path / "column_sums.py").write_text(COLUMN_SUMS)
    signature = {"x_ptr": "*fp32", "part_ptr": "*fp32", "count_ptr": "*i32", "out_ptr": "*fp32", "P": "i32"}
    built = compile_file_for(str(path), "column_sums", "sm_90", signature, {"SYNC": sync, "BLOCK": 256})
    assert built.unsynced_releases == (0 if sync else 1), built

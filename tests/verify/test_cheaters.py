"""The cheater corpus: every cheating candidate is rejected, with the kind and the words of its cheat.

In-process checks are cheap (milliseconds a trial); the isolated ones start a child each (a second or
two for torch's import), so only the defences that need a separate process run isolated here.
"""

import concurrent.futures

import pytest
import torch

from hoid.verify import Dim, Input, check

from . import cheaters as C
from . import references as R

M = Dim("m", 1, 16)
ROWS = [((M, 64), "f32"), ((64,), "f32")]  # x and the weight of an RMSNorm
ONE = [((M, 64), "f32")]
MATMUL = [((M, 32), "f32"), ((32, 24), "f32")]
B, S = Dim("b", 1, 3), Dim("s", 2, 12)
CACHE = [((B, S, 16), "f32"), Input((1,), "i64", low=0, high=lambda earlier, sizes: sizes["s"], name="pos"),
         ((B, 1, 16), "f32")]  # a cache, the slot a decode step writes, and the row it writes there
WINDOW = [((B, S, 16), "f32"), ((B, 16), "f32")]
IN_PLACE = {"destination_passing": True, "aliases": ((0, 0),)}  # output 0 is written into the cache

# (candidate, reference, inputs, options, expected kind, words the reason must contain)
IN_PROCESS = [
    (C.cached_by_address, R.rmsnorm, ROWS, {}, "cached", "cached results"),
    (C.wrong_after_six_calls, R.rmsnorm, ROWS, {}, "stateful", "right for its first calls"),
    (C.wrong_once_timed, R.rmsnorm, ROWS, {}, "stateful", "after the trials and the timing runs"),
    (C.relu_in_place, R.relu, ONE, {}, "mutated", "wrote into input"),
    (C.copy_returns_input, R.copy, ONE, {}, "alias", "shares memory with input 0"),
    (C.copy_returns_view, R.copy, ONE, {}, "alias", "a view of it"),
    (C.cache_swap_reads_after_write, R.cache_swap, CACHE, IN_PLACE, "mismatch", "output 1 differs"),
    (C.cache_shift_overwrites_before_reading, R.cache_shift_in, WINDOW, IN_PLACE, "mismatch", "output 0 differs"),
    (C.cache_append_scribbles_on_new, R.cache_append, CACHE, IN_PLACE, "mutated", "wrote into input #2"),
    (C.rmsnorm_skips_last_row, R.rmsnorm, ROWS, {"destination_passing": True}, "unwritten", "never written"),
    (C.rmsnorm_fresh_buffer, R.rmsnorm, ROWS, {}, "nonfinite", "left unwritten"),
    (C.rmsnorm_noisy, R.rmsnorm, ROWS, {}, "nondeterministic", "two runs on the same inputs"),
    (C.split_k_claims_deterministic, R.matmul, MATMUL, {"deterministic": True}, "nondeterministic", "bitwise"),
    (C.rmsnorm_in_half, R.rmsnorm, ROWS, {}, "mismatch", "lower precision"),
    (C.matmul_in_bf16, R.matmul, MATMUL, {}, "mismatch", "lower precision"),
    (C.silu_clamped, R.silu, ONE, {}, "mismatch", "differs from the reference"),
    (C.relu_assumes_positive, R.relu, ONE, {}, "mismatch", "differs from the reference"),
    (C.softmax_without_max, R.softmax, ONE, {}, "nonfinite", "NaN or Inf"),
    (C.rmsnorm_as_float64, R.rmsnorm, ROWS, {}, "output_type", "dtype float64, expected float32"),
    (C.rmsnorm_as_subclass, R.rmsnorm, ROWS, {}, "output_type", "tensor subclass"),
    (C.rmsnorm_lazy, R.rmsnorm, ROWS, {}, "output_type", "not a plain torch.Tensor"),
    (C.rmsnorm_first_row_only, R.rmsnorm, ROWS, {}, "output_type", "broadcasts"),
    (C.rmsnorm_on_meta, R.rmsnorm, ROWS, {}, "output_type", "device meta"),
    (C.rmsnorm_patches_through_alias, R.rmsnorm, ROWS, {}, "patched", "torch.allclose"),
    (C.raises, R.rmsnorm, ROWS, {}, "raised", "does not support these shapes"),
    (C.loops_forever, R.rmsnorm, ROWS, {"timeout_s": 0.5}, "timeout", "did not return"),
]

STATIC = [
    (C.TRY_EXCEPT_FALLBACK, "try/except"),
    (C.STARTS_THREAD, "import threading"),
    (C.EXTRA_STREAM, "CUDA stream"),
    (C.PATCHES_SYNCHRONIZE, "torch.cuda.synchronize"),
    (C.READS_FRAMES, "_getframe"),
    (C.SCANS_GC, "import gc"),
    (C.PATCHES_ALLCLOSE, "torch.allclose"),
]


@pytest.fixture(autouse=True)
def fresh_cheaters():
    C.forget()


@pytest.mark.parametrize("candidate, reference, inputs, options, kind, words", IN_PROCESS,
                         ids=[row[0].__name__ for row in IN_PROCESS])
def test_cheater_is_rejected_for_its_cheat(candidate, reference, inputs, options, kind, words):
    verdict = check(candidate, reference, inputs, trials=10, seed=7, **options)
    assert not verdict.ok
    assert verdict.kind == kind, verdict
    assert words in verdict.reason, verdict
    if candidate is C.silu_clamped:  # the shrunk counterexample keeps the distribution that exposes the clamp
        assert any("large" in line or "outliers" in line for line in verdict.counterexample.inputs), verdict


@pytest.mark.parametrize("source, words", STATIC, ids=[words for _, words in STATIC])
def test_static_pass_refuses_source_before_running_it(source, words):
    # Static rejection happens in the parent: no child is started for these.
    verdict = check((source, "kernel"), R.rmsnorm, ROWS, trials=2, seed=7)
    assert verdict.kind == "static"
    assert words in verdict.reason, verdict


def test_static_pass_reads_callables_too():
    def reads_frames(x, w):
        import sys

        return sys._getframe(1).f_locals["reference"](x, w)

    verdict = check(reads_frames, R.rmsnorm, ROWS, trials=2, seed=7)
    assert verdict.kind == "static" and "_getframe" in verdict.reason


def _isolated(candidate, **options):
    return check(candidate, R.rmsnorm, ROWS, trials=6, seed=7, isolate=True, **options)


def test_crashes_in_the_isolated_process_are_verdicts_and_the_caller_survives():
    # Three children at once: their start (importing torch) dominates, and it overlaps.
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        exits, segfault, loop = pool.map(lambda args: _isolated(args[0], **args[1]), [
            (C.exits, {}), (C.segfaults, {}), (C.loops_forever, {"timeout_s": 1})])
    assert exits.kind == "crashed" and "exited with status 3" in exits.reason
    assert segfault.kind == "crashed" and "SIGSEGV" in segfault.reason
    assert loop.kind == "timeout" and "did not return" in loop.reason


def test_isolation_defeats_caching_and_reference_hunting():
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        cached, hunter = pool.map(_isolated, [C.cached_by_address, C.rmsnorm_hunts_reference])
    assert cached.kind == "cached", cached
    # In a fresh process there is no reference on the stack to find.
    assert hunter.kind == "raised" and "no reference in reach" in hunter.reason


# Every dim varies: without repeated signatures, a cache keyed by the signature is never asked twice.
VARYING = [((Dim("rows", 1, 64), Dim("cols", 1, 64)), "f32")]


@pytest.mark.parametrize("candidate", C.MEMOIZERS, ids=[c.__name__ for c in C.MEMOIZERS])
def test_a_cache_keyed_by_the_input_signature_is_caught_when_every_dim_varies(candidate):
    verdict = check(candidate, R.gelu, VARYING, seed=7)
    assert not verdict.ok and verdict.kind == "cached", verdict
    assert "cached results" in verdict.reason


def test_a_cache_keyed_by_the_input_signature_is_caught_in_isolation_too():
    with concurrent.futures.ThreadPoolExecutor(len(C.MEMOIZERS)) as pool:
        verdicts = list(pool.map(lambda c: check(c, R.gelu, VARYING, trials=6, seed=7, isolate=True), C.MEMOIZERS))
    for candidate, verdict in zip(C.MEMOIZERS, verdicts):
        assert verdict.kind == "cached", (candidate.__name__, verdict)


def test_an_honest_candidate_still_passes_with_every_dim_varying():
    verdict = check(R.gelu, R.gelu, VARYING, seed=7)
    assert verdict.ok, verdict


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_an_illegal_memory_access_is_a_verdict_and_the_callers_gpu_still_works():
    verdict = check((C.ILLEGAL_ACCESS, "kernel"), R.rmsnorm, ROWS, trials=2, seed=7)
    assert verdict.kind == "raised" and "illegal memory access" in verdict.reason, verdict
    assert torch.ones(4, device="cuda").sum().item() == 4

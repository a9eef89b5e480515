"""The cheater corpus: candidates that game naive checks, one or more per defence of hoid.verify.

Each is small and names its trick; `test_cheaters.py` checks that each is rejected with the right kind.
They run isolated as well as in-process, so they live at module level (the child imports them by name).
"""
# ruff: noqa: E731

import faulthandler
import os
import sys

import torch

from .honest import matmul_split_k, rmsnorm

# --- 1. outputs cached across calls --------------------------------------------------------------
_cache: dict = {}


def forget() -> None:
    """Reset the state the stateful cheaters keep, so that each test meets them fresh."""
    _cache.clear()
    _calls["n"] = 0
    _timed["n"] = 0



def cached_by_address(x, w):
    """Computes once per input buffer address, then returns the stored result."""
    key = (x.data_ptr(), w.data_ptr())
    if key not in _cache:
        _cache[key] = rmsnorm(x, w)
    return _cache[key].clone()


def _memoized(key, x, compute):
    """The result stored under `key` where it fits x's shape (so it never looks obviously wrong), else
    computed and stored: a cache keyed by something that follows from the input signature."""
    hit = _cache.get(key)
    if hit is None or hit.numel() != x.numel():
        hit = _cache[key] = compute(x)
    return hit.reshape(x.shape).clone()


def _gelu(x):
    return torch.nn.functional.gelu(x)


def gelu_memo_by_shape(x):
    return _memoized(("shape", tuple(x.shape)), x, _gelu)


def gelu_memo_by_dtype(x):
    return _memoized(("dtype", x.dtype), x, _gelu)


def gelu_memo_by_strides(x):
    return _memoized(("strides", x.stride()), x, _gelu)


def gelu_memo_by_numel(x):
    return _memoized(("numel", x.numel()), x, _gelu)


def gelu_memo_by_device(x):
    return _memoized(("device", str(x.device)), x, _gelu)


MEMOIZERS = (gelu_memo_by_shape, gelu_memo_by_dtype, gelu_memo_by_strides, gelu_memo_by_numel,
             gelu_memo_by_device)


# --- 2. right for the first calls, then wrong ----------------------------------------------------
_calls = {"n": 0}


def wrong_after_six_calls(x, w):
    _calls["n"] += 1
    out = rmsnorm(x, w)
    return out if _calls["n"] <= 6 else out * 1.01


_timed = {"n": 0}


def wrong_once_timed(x, w):
    """Honest for the sweep (about 2 calls per trial), wrong once a timing loop has run."""
    _timed["n"] += 1
    out = rmsnorm(x, w)
    return out if _timed["n"] <= 40 else out + 1e-3


# --- 3. input mutation, outputs aliasing inputs ---------------------------------------------------
def relu_in_place(x):
    return x.relu_().clone()


def copy_returns_input(x):
    return x


def copy_returns_view(x):
    return x.view(x.shape)


# --- 3b. in place (declared `aliases`: the output buffer is the input's): reading what it overwrote ---
def cache_swap_reads_after_write(cache, pos, new, out, evicted):
    """Writes the new row, then reads the slot for the evicted row: it reads its own write."""
    slot = int(pos[0])
    out[:, slot] = new[:, 0]
    evicted[:, 0] = cache[:, slot]


def cache_shift_overwrites_before_reading(cache, new, out):
    """Moves rows down from the top: each row is overwritten before the next one reads it."""
    out[:, 0] = new
    for t in range(1, cache.shape[1]):
        out[:, t] = cache[:, t - 1]


def cache_append_scribbles_on_new(cache, pos, new, out):
    """Declares the cache in place, and also writes into `new`, which it did not declare."""
    out[:, int(pos[0])] = new[:, 0]
    new.zero_()


# --- 4. unwritten outputs, freed memory ------------------------------------------------------------
def rmsnorm_skips_last_row(x, w, out):
    out[:-1] = rmsnorm(x[:-1], w)


def rmsnorm_fresh_buffer(x, w):
    """Returns a fresh allocation, hoping it holds the reference's freed result."""
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


# --- 5. non-determinism ---------------------------------------------------------------------------
def rmsnorm_noisy(x, w):
    out = rmsnorm(x, w)
    return out + 1e-3 * torch.randn_like(out)


split_k_claims_deterministic = matmul_split_k  # honest, but its last bits vary between runs


# --- 6. precision downgrade ------------------------------------------------------------------------
def rmsnorm_in_half(x, w):
    return rmsnorm(x.half(), w.half()).float()


def matmul_in_bf16(a, b):
    return (a.bfloat16() @ b.bfloat16()).float()


# --- 7. value-range tricks -------------------------------------------------------------------------
def silu_clamped(x):
    """Assumes inputs of moderate size: clamps them, which changes nothing until they are large."""
    return torch.nn.functional.silu(x.clamp(-30, 30))


def relu_assumes_positive(x):
    return x.clone()


def softmax_without_max(x):
    """Skips the max subtraction: exp overflows on large inputs."""
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)


# --- 8. wrong output type ---------------------------------------------------------------------------
class Sneaky(torch.Tensor):
    """A tensor subclass: could compare equal to anything, or compute only when read."""


class Lazy:
    """A thunk standing in for a tensor."""

    def __init__(self, fn):
        self.fn = fn


def rmsnorm_as_float64(x, w):
    return rmsnorm(x.double(), w.double())


def rmsnorm_as_subclass(x, w):
    return rmsnorm(x, w).as_subclass(Sneaky)


def rmsnorm_lazy(x, w):
    return Lazy(lambda: rmsnorm(x, w))


def rmsnorm_first_row_only(x, w):
    """[1, N]: broadcasts to the right shape, and is wrong."""
    return rmsnorm(x[:1], w)


def rmsnorm_on_meta(x, w):
    return rmsnorm(x, w).to("meta")


# --- 9. reading the reference, patching the comparison -------------------------------------------
def rmsnorm_patches_through_alias(x, w):
    """Patches torch through a name the static pass does not know is a module."""
    namespace = [torch][0]
    namespace.allclose = lambda *args, **kwargs: True
    return rmsnorm(x, w) * 2


def rmsnorm_hunts_reference(x, w):
    """Walks up the call stack for the checker's reference and calls it; the attribute name is built at
    run time so that the static pass does not see it. Isolation leaves it nothing to find."""
    frame = getattr(sys, "_get" + "frame")(1)
    while frame is not None:
        found = getattr(frame, "f_" + "locals").get("reference")
        if callable(found):
            return found(x, w)
        frame = getattr(frame, "f_" + "back")
    raise LookupError("no reference in reach")


# --- 11. crashes -----------------------------------------------------------------------------------
def exits(x, w):
    os._exit(3)


def segfaults(x, w):
    faulthandler._sigsegv()


def loops_forever(x, w):
    while True:
        pass


def raises(x, w):
    raise ValueError("this kernel does not support these shapes")


ILLEGAL_ACCESS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def far_store(out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK).to(tl.int64) + 1099511627776  # a terabyte past the buffer
    tl.store(out_ptr + offsets, tl.zeros((BLOCK,), tl.float32))


def kernel(x, w):
    out = torch.empty_like(x)
    far_store[(1,)](out, BLOCK=128)
    return out
'''


# --- 10. static rejection: source text, never run ----------------------------------------------------
TRY_EXCEPT_FALLBACK = """
import torch
def kernel(x, w):
    try:
        return fast_path(x, w)
    except Exception:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
"""

STARTS_THREAD = """
import threading
def kernel(x, w):
    threading.Thread(target=lambda: None).start()
    return x
"""

EXTRA_STREAM = """
import torch
def kernel(x, w):
    with torch.cuda.stream(torch.cuda.Stream()):
        return x * w
"""

PATCHES_SYNCHRONIZE = """
import torch
torch.cuda.synchronize = lambda *args: None
def kernel(x, w):
    return x * w
"""

READS_FRAMES = """
import sys
def kernel(x, w):
    return sys._getframe(2).f_locals["reference"](x, w)
"""

SCANS_GC = """
import gc
import torch
def kernel(x, w):
    return [o for o in gc.get_objects() if isinstance(o, torch.Tensor)][-1]
"""

PATCHES_ALLCLOSE = """
import torch
def kernel(x, w):
    torch.allclose = lambda *args, **kwargs: True
    return x
"""

"""`_attention_tile.online_softmax_tile`, one tile through a test kernel (the interpreter on a CPU): a key
left out with HOLE is never loaded, so a row the same launch writes (or garbage there) cannot reach the sums
even as 0 x NaN, which masking its score alone lets through."""

import pytest
import torch

from hoid.kernels.library._attention_tile import online_softmax_tile
from hoid.kernels.library._triton_compile import HAVE_TRITON, tl, triton_kernel

pytestmark = pytest.mark.skipif(not HAVE_TRITON, reason="needs triton")

R = D = N = 16


@triton_kernel
def one_tile(q_ptr, k_ptr, v_ptr, out_ptr, S, hole, HOLE: tl.constexpr, R: tl.constexpr, D: tl.constexpr,
             N: tl.constexpr):
    r, d, n = tl.arange(0, R), tl.arange(0, D), tl.arange(0, N)
    q = tl.load(q_ptr + r[:, None] * D + d[None, :])
    valid = (r[:, None] >= 0) & (n[None, :] < S) & (n[None, :] != hole)  # the hole never attends
    m = tl.full((R,), -float("inf"), tl.float32)
    l = tl.zeros((R,), tl.float32)
    acc = tl.zeros((R, D), tl.float32)
    m, l, acc = online_softmax_tile(q, k_ptr, v_ptr, n, d, valid, m, l, acc, S, 0.25, D=D, PRECISION="ieee",
                                    hole=hole, HOLE=HOLE)
    tl.store(out_ptr + r[:, None] * D + d[None, :], acc / l[:, None])


@pytest.mark.parametrize("hole_loads", [False, True])
def test_a_key_left_out_of_the_loads_cannot_poison_the_sums(hole_loads):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=g) for shape in ((R, D), (N, D), (N, D)))
    k[5], v[5] = float("nan"), float("nan")  # the row being written: anything may be there
    out = torch.empty(R, D)
    one_tile[(1,)](q, k, v, out, N, 5, HOLE=hole_loads, R=R, D=D, N=N)
    keep = [i for i in range(N) if i != 5]
    want = torch.softmax(q @ k[keep].T * 0.25, dim=-1) @ v[keep]
    if hole_loads:
        torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    else:  # the score is masked but the NaN row is loaded: 0 x NaN reaches the sums
        assert out.isnan().any()

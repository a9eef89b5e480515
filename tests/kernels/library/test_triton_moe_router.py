"""triton.moe_router under the Triton interpreter: the router's weights and ids against the float64 region,
ties to the lowest index (and the check accepting them), determinism with its counter reset, the workspace,
and the constraints' words."""

import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels.library import triton_moe_router as router
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches, launch


def _inputs(tokens, experts, hidden, dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(tokens, hidden, generator=g).to(dtype),
            (torch.randn(experts, hidden, generator=g) / hidden**0.5).to(dtype)]


@pytest.mark.parametrize("tokens, experts, k", [(1, 16, 4), (3, 40, 8), (16, 128, 8), (2, 5, 5)])
def test_matches_float64_reference(tokens, experts, k):
    # hidden 72 is not a multiple of the tile, 40 and 5 experts not of the program's block: the tails are masked
    assert_matches(router.SPEC, _inputs(tokens, experts, 72), {"k": k}, {"block_k": 128})


def test_the_weights_are_the_renormalized_probabilities_of_the_ids():
    x, w = _inputs(3, 16, 64, seed=1)
    weights, ids = launch(router.SPEC, [x, w], {"k": 4})
    probs = torch.softmax((x @ w.T).float(), dim=-1)
    assert (ids.sort(dim=-1).values.diff(dim=-1) > 0).all()  # distinct experts
    picked = probs.gather(-1, ids)
    assert torch.allclose(weights.float(), picked / picked.sum(-1, keepdim=True), atol=2e-3)
    assert (picked.diff(dim=-1) <= 0).all()  # largest first


def tied_inputs(tokens: int):
    """x, w over 8 experts where four (1, 5, 6, 7) tie for the largest logit of every token."""
    x, w = _inputs(tokens, 8, 32, seed=2)
    w[5], w[6], w[7] = w[1], w[1], w[1]  # four experts tie: 1, 5, 6, 7
    w[1] *= 4  # and they are the largest for these tokens
    x[:] = w[1].abs().sign() * w[1].sign()
    return x, w


def test_ties_go_to_the_lowest_index_and_the_check_accepts_them():
    """Experts with the same weight rows give the same logits: the kernel takes the lowest of them first, which
    the CPU's topk need not (its order among ties is arbitrary), and `check_kernel` judges ids up to ties."""
    x, w = tied_inputs(2)
    _, ids = launch(router.SPEC, [x, w], {"k": 3})
    assert ids.tolist() == [[1, 5, 6], [1, 5, 6]]
    assert_matches(router.SPEC, [x, w], {"k": 3})
    verdict = check_kernel(router.SPEC, examples=2, seed=4, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_deterministic_and_resets_its_counter():
    ins = _inputs(3, 40, 64, seed=5)
    first, second = launch(router.SPEC, ins, {"k": 8}), launch(router.SPEC, ins, {"k": 8})
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert not router._counters(ins[0].device, 1024).any(), "the arrival counter must be zero between launches"


def test_a_given_workspace_is_used_and_a_wrong_one_named():
    x, w = _inputs(2, 16, 32)
    weights, ids = torch.empty(2, 4, dtype=x.dtype), torch.empty(2, 4, dtype=torch.int64)
    logits = torch.full((2, 16), float("nan"))
    router.launch(x, w, weights, ids, k=4, workspace=(logits,))
    assert torch.isfinite(logits).all()  # the logits went where the runtime planned them
    with pytest.raises(ValueError, match=r"workspace f32\[2,8\] given, these inputs need f32\[2,16\]"):
        router.launch(x, w, weights, ids, k=4, workspace=(torch.empty(2, 8),))


def test_the_constraints_say_what_they_refuse():
    f16, f32 = TensorType((1, 64), "f16"), TensorType((1, 64), "f32")
    assert "f16 or bf16" in router.SPEC.rejects([f32, TensorType((16, 64), "f32")], {"k": 4})
    assert "1 to 16 tokens" in router.SPEC.rejects([TensorType((17, 64), "f16"), TensorType((16, 64), "f16")],
                                                   {"k": 4})
    assert "at most the experts" in router.SPEC.rejects([f16, TensorType((4, 64), "f16")], {"k": 8})
    assert router.SPEC.rejects([f16, TensorType((128, 64), "f16")], {"k": 8}) is None


def test_a_tile_too_narrow_for_tensor_cores_is_refused_with_the_fix():
    assert router.choose(1, 128, block_e=4)["block_e"] == 4  # one token: a broadcast multiply, any width
    with pytest.raises(ValueError, match="block_e 16 or 32"):
        router.choose(3, 128, block_e=8)

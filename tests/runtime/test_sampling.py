"""Sampling inside the step: greedy equals argmax; a seed reproduces; draws follow torch's distribution."""

import math

import pytest
import torch

from hoid.runtime.sampling import Greedy, Sample


def test_greedy_is_the_argmax_of_the_last_position():
    logits = torch.randn(3, 4, 50)
    assert torch.equal(Greedy()(logits), logits[:, -1:].argmax(dim=-1))


def test_a_seed_reproduces_and_another_seed_differs():
    logits = torch.randn(4, 1, 100)
    a = [Sample(temperature=0.8, seed=1)(logits) for _ in range(1)]
    s1, s2, s3 = Sample(seed=1), Sample(seed=1), Sample(seed=2)
    first = torch.cat([s1(logits) for _ in range(20)])
    assert torch.equal(first, torch.cat([s2(logits) for _ in range(20)]))
    assert not torch.equal(first, torch.cat([s3(logits) for _ in range(20)]))
    s1.reset()
    assert torch.equal(first, torch.cat([s1(logits) for _ in range(20)])) and a


@pytest.mark.parametrize("options", [dict(temperature=0.7), dict(top_k=5), dict(top_p=0.8), dict(top_k=8, top_p=0.9)])
def test_draws_follow_the_distribution_torch_defines(options):
    """The frequencies of 20000 draws against torch's softmax with the same filtering, by a chi-square
    bound far in the tail (a wrong temperature, an off-by-one in top-k or top-p moves it by orders)."""
    torch.manual_seed(0)
    logits = torch.randn(1, 1, 12) * 2
    sampler = Sample(seed=3, **options)
    n = 20000
    draws = torch.cat([sampler(logits.expand(1000, 1, 12).contiguous()) for _ in range(n // 1000)]).flatten()
    counts = torch.bincount(draws, minlength=12).double()
    expected = _torch_probabilities(logits[0, -1], **options) * n
    assert (counts[expected == 0] == 0).all(), "a filtered-out token was drawn"
    keep = expected > 0
    chi2 = float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    dof = int(keep.sum()) - 1
    assert chi2 < dof + 6 * math.sqrt(2 * dof) + 10, f"chi-square {chi2:.1f} over {dof} degrees of freedom"


def _torch_probabilities(logits, temperature=1.0, top_k=None, top_p=None):
    """The textbook filtering (as in transformers' warpers), written independently of the sampler."""
    x = logits.double() / temperature
    if top_k is not None:
        x[x < torch.topk(x, top_k).values[-1]] = -math.inf
    if top_p is not None:
        p, order = torch.sort(torch.softmax(x, -1), descending=True)
        cut = int((torch.cumsum(p, -1) < top_p).sum()) + 1  # the smallest prefix reaching top_p
        x[order[cut:]] = -math.inf
    return torch.softmax(x, -1)


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="Greedy"):
        Sample(temperature=0)
    with pytest.raises(ValueError, match="top_p"):
        Sample(top_p=1.5)

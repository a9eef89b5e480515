"""The decode loop through compiled graphs: the interpreter's tokens, the caches never copied."""

import torch

from hoid.models import generate as interpret_generate
from hoid.models import prefill_graph
from hoid.runtime import compile
from hoid.runtime.decode import generate
from hoid.runtime.sampling import Greedy, Sample

from .conftest import CACHE


def test_greedy_tokens_equal_the_interpreters(tiny_lm, tiny_step):
    prompt = torch.tensor([[3, 17, 42, 5]])
    want = interpret_generate(tiny_step, prompt, 6)
    step = compile(tiny_step, device="cpu")
    assert torch.equal(generate(step, prompt, 6), want)
    assert step.stats.state_copies == 0  # generate started from the compiled state and passed it back


def test_prefill_and_step_share_one_cache(tiny_lm, tiny_step):
    prompt = torch.tensor([[3, 17, 42, 5]])
    prefill = prefill_graph(tiny_lm, 4, CACHE)
    want = interpret_generate(tiny_step, prompt, 5, prefill=prefill)
    step = compile(tiny_step, device="cpu")
    first = compile(prefill, device="cpu", state=step.state)
    assert torch.equal(generate(step, prompt, 5, prefill=first), want)
    assert step.stats.state_copies == first.stats.state_copies == 0


def test_a_step_that_samples_returns_the_token(tiny_step):
    prompt = torch.tensor([[3, 17]])
    greedy = compile(tiny_step, device="cpu", sample=Greedy())
    assert "sample(" in greedy.source
    assert torch.equal(generate(greedy, prompt, 5), interpret_generate(tiny_step, prompt, 5))
    runs = [generate(compile(tiny_step, device="cpu", sample=Sample(temperature=1.5, seed=7)), prompt, 5)
            for _ in range(2)]
    assert torch.equal(runs[0], runs[1]) and runs[0].shape == (1, 7)

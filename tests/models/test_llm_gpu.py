"""The zoo's graphs on a GPU, in bfloat16: the interpreter's greedy tokens are transformers' own."""

from __future__ import annotations

import warnings

import pytest
import torch

import hoid
from hoid.models import build_model, decode_step_graph, generate, prefill_graph

pytest.importorskip("transformers")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("name", ["qwen3-4b-tiny", "llama-3.1-8b-tiny"])
def test_bf16_generation_on_gpu_matches_transformers(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = build_model(name, dtype=torch.bfloat16, device="cuda")
        step, prefill = decode_step_graph(lm, cache_len=32), prefill_graph(lm, 6, cache_len=32)
    assert all(t.is_cuda for t in step.weights.values())
    prompt = torch.randint(0, 256, (1, 6), generator=torch.Generator().manual_seed(2)).cuda()
    ours = generate(step, prompt, 12, prefill=prefill)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        theirs = lm.generate(prompt, max_new_tokens=12, min_new_tokens=12, do_sample=False,
                             cache_implementation="static")
    assert torch.equal(ours, theirs)
    logits, *_ = hoid.run(prefill, prompt, torch.zeros(1, dtype=torch.long, device="cuda"),
                          *[torch.zeros(v.type.shape, dtype=v.type.torch_dtype, device="cuda")
                            for v in prefill.inputs_of_kind("state")])
    assert logits.dtype == torch.bfloat16 and logits.is_cuda

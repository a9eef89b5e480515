"""benchmarks/decode_fast.py: the plain fast model gives the transformers model's logits (both families,
batched, prefill then decode steps over its static cache)."""

import pytest
import torch
from decode_fast import FastModel

pytest.importorskip("transformers")


@pytest.mark.parametrize("name", ["qwen3-1.7b-tiny", "llama-3.2-1b-tiny", "llama-3.1-8b-tiny"])
def test_fast_model_matches_transformers(name):
    from hoid.models import build_model

    lm = build_model(name)
    ids = torch.randint(0, lm.config.vocab_size, (2, 11))
    with torch.no_grad():
        expected = lm(ids).logits
        fast = FastModel(lm, cache_len=16, batch=2)
        parts = [fast(ids[:, :7], torch.tensor([0]))]
        parts += [fast(ids[:, i:i + 1], torch.tensor([i])) for i in range(7, 11)]
    torch.testing.assert_close(torch.cat(parts, dim=1), expected, rtol=1e-4, atol=1e-5)
    assert fast.layers[0].qk_norm == name.startswith("qwen3")

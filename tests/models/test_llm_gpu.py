"""The zoo's graphs on a GPU, in bfloat16: the interpreter's greedy tokens are transformers' own."""

from __future__ import annotations

import warnings

import pytest
import torch

import hoid
from hoid.models import build_model, decode_step_graph, prefill_graph

pytest.importorskip("transformers")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _relative_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


# bf16 logits of two implementations that round in different orders differ by a few bf16 ulps (2**-8
# relative each): 2e-2 relative L2 is far above that and far below a wrong model (a transposed weight or a
# missed norm gives order 1).
BF16_LOGITS = 2e-2


@pytest.mark.parametrize("name", ["qwen3-4b-tiny", "llama-3.1-8b-tiny"])
def test_bf16_teacher_forced_logits_on_gpu_match_transformers(name):
    """Exact greedy tokens in bf16 against another implementation are no sound assertion on random weights
    (two near-tied logits flip on one rounding); the logits at every position, both fed the same tokens,
    are: the prompt through prefill, then each of transformers' own greedy tokens through the decode step."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = build_model(name, dtype=torch.bfloat16, device="cuda")
        step, prefill = decode_step_graph(lm, cache_len=32), prefill_graph(lm, 6, cache_len=32)
    assert all(t.is_cuda for t in step.weights.values())
    prompt = torch.randint(0, 256, (1, 6), generator=torch.Generator().manual_seed(2)).cuda()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        tokens = lm.generate(prompt, max_new_tokens=12, min_new_tokens=12, do_sample=False,
                             cache_implementation="static")
        reference = lm(tokens).logits  # [1, 18, vocab]: position t predicts token t + 1
    cache = [torch.zeros(v.type.shape, dtype=v.type.torch_dtype, device="cuda") for v in step.inputs_of_kind("state")]
    logits, *cache = hoid.run(prefill, prompt, torch.zeros(1, dtype=torch.long, device="cuda"), *cache)
    assert logits.dtype == torch.bfloat16 and logits.is_cuda
    ours = [logits[0]]
    for t in range(6, tokens.shape[1] - 1):
        logits, *cache = hoid.run(step, tokens[:, t:t + 1], torch.tensor([t], device="cuda"), *cache)
        ours.append(logits[0])
    ours = torch.cat(ours)  # [17, vocab]
    errors = [_relative_l2(ours[i], reference[0, i]) for i in range(ours.shape[0])]
    assert max(errors) < BF16_LOGITS, f"relative L2 per position: {[f'{e:.1e}' for e in errors]}"

"""The correctness gate of `benchmarks/decode.py`, over `hoid.testing.gate`'s arithmetic.

The tokens are those transformers' eager model generated (the `hf-eager` row). The reference is a float32
copy of the same weights (the bfloat16 values, upcast) run once over prompt + tokens: with teacher forcing,
one causal forward gives the logits of every step. Eager bfloat16's own errors (teacher-forced through the
`hf-eager` decoder) are the bar each hoid row is judged by.
"""

from __future__ import annotations

import copy

import torch
from decode_loop import Decoder, release, teacher_forced

from hoid.testing.gate import Stats, StepErrors, judge


def reference_logits(lm, prompt: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Float32 logits [N, B, V] predicting each of `tokens`' N positions, teacher-forced."""
    reference = copy.deepcopy(lm).float()
    sequence = torch.cat([prompt, tokens[:, :-1]], dim=1)
    hidden = reference.model(input_ids=sequence, use_cache=False).last_hidden_state[:, prompt.shape[1] - 1:]
    logits = reference.lm_head(hidden).float().transpose(0, 1).contiguous()
    del reference, hidden
    release(prompt.device)
    return logits


class Gate:
    def __init__(self, lm, prompt: torch.Tensor, tokens: torch.Tensor):
        self.prompt, self.tokens = prompt, tokens
        self.reference = reference_logits(lm, prompt, tokens)
        self.baseline: Stats | None = None

    def stats(self, decoder: Decoder) -> Stats:
        errors = StepErrors()
        teacher_forced(decoder, self.prompt, self.tokens,
                       lambda i, logits: errors.add(logits.float(), self.reference[i]))
        return errors.stats()

    def set_baseline(self, eager: Decoder) -> dict:
        self.baseline = self.stats(eager)
        return self.baseline.to_json()

    def judge(self, decoder: Decoder, row: dict, *, informational: bool = False) -> None:
        """Adds `gate` (the verdict) and `failed` to `row`; a row that cannot be gated has failed.
        informational: the verdict only, marked so, and never `failed` (a stock row: where a hoid row fails,
        it shows whether the model it was built from passes on its own)."""
        try:
            if self.baseline is None:
                raise RuntimeError("no eager bfloat16 baseline (the hf-eager row did not run)")
            verdict = judge(self.stats(decoder), self.baseline)
            row["gate"], failed = verdict.to_json(), not verdict.passed
        except Exception as e:  # reported as a failed gate, with why
            row["gate"], failed = {"passed": False, "error": f"{type(e).__name__}: {e}"}, True
        if informational:
            row["gate"]["informational"] = True
        else:
            row["failed"] = failed

"""The next token, chosen inside the step: greedy argmax, or seeded temperature / top-k / top-p sampling.

Passed to `hoid.compile(graph, sample=...)`, a sampler turns the step's logits [B, T, V] into the next
token i64[B, 1] as the last lines of the generated function, so a CUDA graph covers the whole step and
the host reads one token instead of the logits. Sampling draws with the exponential race (the argmax of
p / E, E ~ Exp(1), is distributed as p), which needs no host sync and no data-dependent shape, and takes
its randomness from the sampler's own seeded generator (registered with the CUDA graph it runs in).
"""

from __future__ import annotations

import torch


class Greedy:
    """The most likely token (ties to the lowest id, as `argmax` breaks them)."""

    generator = None

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        return logits[:, -1:].argmax(dim=-1)

    def __repr__(self) -> str:
        return "Greedy()"


class Sample:
    """Temperature, then top-k (keep the k largest), then top-p (keep the smallest set of tokens whose
    probability reaches p, the most likely always kept), then a draw. Two samplers with the same seed
    draw the same tokens from the same logits; `reset()` starts the sequence again."""

    def __init__(self, *, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                 seed: int = 0):
        if temperature <= 0:
            raise ValueError(f"temperature {temperature}: must be > 0 (use Greedy() for argmax)")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k {top_k}: must be at least 1")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"top_p {top_p}: must be in (0, 1]")
        self.temperature, self.top_k, self.top_p, self.seed = temperature, top_k, top_p, seed
        self.generator: torch.Generator | None = None

    def reset(self) -> None:
        if self.generator is not None:
            self.generator.manual_seed(self.seed)

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """The distribution a draw follows, [B, V] (float32), for the last position of `logits`."""
        x = logits[:, -1].float() / self.temperature
        if self.top_k is not None and self.top_k < x.shape[-1]:
            kth = x.topk(self.top_k, dim=-1).values[:, -1:]
            x = x.masked_fill(x < kth, float("-inf"))
        if self.top_p is not None and self.top_p < 1:
            ordered, order = x.sort(dim=-1, descending=True)
            p = ordered.softmax(dim=-1)
            drop = (p.cumsum(dim=-1) - p) >= self.top_p  # the mass before this token already reaches p
            x = torch.full_like(x, float("-inf")).scatter(-1, order, ordered.masked_fill(drop, float("-inf")))
        return x.softmax(dim=-1)

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        if self.generator is None or self.generator.device != logits.device:
            self.generator = torch.Generator(device=logits.device)
            self.generator.manual_seed(self.seed)
        p = self.probabilities(logits)
        race = torch.empty_like(p).exponential_(generator=self.generator)
        return (p / race).argmax(dim=-1, keepdim=True)

    def __repr__(self) -> str:
        return f"Sample(temperature={self.temperature}, top_k={self.top_k}, top_p={self.top_p}, seed={self.seed})"

"""Small graphs, kernels and proposers for the agent's tests (CPU, fast)."""

from __future__ import annotations

import os
import time

import torch

from hoid.agent import LibraryProposer, Proposal
from hoid.ir import GraphBuilder
from hoid.kernels import KernelSpec
from hoid.kernels.pattern import op_pattern


def norm_graph(rows: int = 64, hidden: int = 256):
    """x -> rmsnorm(x) as transformers writes it (decomposed), in float32."""
    gen = torch.Generator().manual_seed(0)
    b = GraphBuilder("norm")
    x = b.input("x", (rows, hidden), "f32")
    w = b.weight("w", (hidden,), "f32", 1 + 0.1 * torch.randn(hidden, generator=gen))
    var = b.mean(b.pow(x, 2.0), dim=[-1], keepdim=True)
    return b.build(b.mul(w, b.mul(x, b.rsqrt(b.add(var, 1e-6)))))


def _slow_rmsnorm(x, w, out, *, eps):
    """Correct, and slow on purpose: it computes the norm 30 times over."""
    for _ in range(30):
        var = x.pow(2).mean(-1, keepdim=True)
        out.copy_(w * (x * torch.rsqrt(var + eps)))


SLOW_RMSNORM = KernelSpec(id="test.slow_rmsnorm", pattern=op_pattern("rmsnorm", 2), backend="torch",
                          launch=_slow_rmsnorm, deterministic=True)


class Only:
    """Proposes exactly these kernels, for every region of their pattern."""

    def __init__(self, name: str, *specs):
        self.name, self.specs = name, specs

    def propose(self, context):
        for region in context.regions:
            for spec in self.specs:
                if spec.pattern.name == region.pattern and spec.rejects(list(region.types), region.attrs) is None:
                    yield Proposal(region.key, spec, (spec.default_params(),))


class TorchLibrary(LibraryProposer):
    """The library proposer, its torch kernels only (they run on the CPU without Triton's interpreter);
    with HOID_TEST_STALL_AFTER=n it hangs after its n-th proposal (the resume test kills it there)."""

    name = "torch-library"

    @property
    def together(self) -> bool:
        # stalling (the resume test), it decides one by one, so that the kill lands between finished attempts
        return not os.environ.get("HOID_TEST_STALL_AFTER")

    def propose(self, context):
        stall = int(os.environ.get("HOID_TEST_STALL_AFTER", "0"))
        n = 0
        for proposal in super().propose(context):
            if proposal.kernel.backend != "torch":
                continue
            if stall and n == stall:
                open(os.environ["HOID_TEST_STALL_FILE"], "w").close()
                time.sleep(600)
            n += 1
            yield proposal

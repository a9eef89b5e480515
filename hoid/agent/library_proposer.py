"""`LibraryProposer`: the default proposer, offline and deterministic: for every region the graph's
e-graph recognises (hottest first), each library kernel that implements its pattern, builds for the
device, and whose constraints hold there, with a sweep of its parameters."""

from __future__ import annotations

from collections.abc import Iterable

from ..kernels.registry import library_kernels
from .proposer import Context, Proposal


def _builds_for(spec, arch: str) -> bool:
    # torch kernels run wherever torch does; the others must build for the run's GPU (sm_100 for a B200
    # plan, even on a machine without one) or, on the CPU, run under Triton's interpreter
    return spec.backend == "torch" or arch == "cpu" or arch in spec.archs


def _why_triton_cannot_run() -> str | None:
    """None on a CUDA GPU, or on the CPU where this process imported Triton under its interpreter; else why
    not. Triton fixes the mode at its first import, so a script that imported it before `hoid.optimize` could
    set TRITON_INTERPRET=1 (torch.compile does) cannot run Triton kernels on the CPU at all."""
    import torch

    from ..kernels.library._triton_compile import HAVE_TRITON, interpreting

    if not HAVE_TRITON:
        return "a Triton kernel cannot be checked here: Triton is not installed (pip install triton)"
    if torch.cuda.is_available() or interpreting():
        return None
    return ("a Triton kernel cannot be checked here: no CUDA GPU, and this process imported Triton without its CPU "
            "interpreter (set TRITON_INTERPRET=1 before anything imports triton)")


def _cute_runs_here() -> bool:
    import torch

    from ..kernels.library._cute_compile import have_cute

    return torch.cuda.is_available() and have_cute()


class LibraryProposer:
    """sweep: at most this many param combinations per kernel (the defaults first, then one param at a time
    moved to its nearest choices, every param in turn), so a kernel with many choices does not eat the
    budget."""

    name = "library"
    independent = True  # its proposals never depend on earlier outcomes: a pool may read them ahead
    together = True  # decided at once first (one whole-graph measurement for all that pass): see together.py

    def __init__(self, *, sweep: int = 8):
        self.sweep = sweep

    def propose(self, context: Context) -> Iterable[Proposal]:
        specs = list(library_kernels().values())
        arch = getattr(context.device, "arch", "sm_90")
        target = context.device.target()  # what "auto" params resolve for (the sweep's neighbours)
        # where this process can run each backend: asked once, not per region and kernel
        why_not = {"triton": _why_triton_cannot_run(),
                   "cute": None if _cute_runs_here() else "a CuTe DSL kernel cannot be checked here: it runs on a "
                   "CUDA GPU with CuTe DSL installed (pip install 'hoid[cute]')"}
        for region in context.regions:
            for spec in specs:
                if spec.pattern.name != region.pattern or not _builds_for(spec, arch):
                    continue
                if spec.rejects(list(region.types), region.attrs) is not None:
                    continue
                if (why := why_not.get(spec.backend)) is not None:  # a check needs a run: skip, say why
                    context.skip(self.name, f"{spec.id} for {region.key}", why)
                    continue
                sweep = self._sweep(spec, region.types, region.attrs, target)
                yield Proposal(region.key, spec, sweep, note=f"library kernel {spec.id} for {region.pattern}")

    def _sweep(self, spec, types, attrs, target) -> tuple[dict, ...]:
        """The defaults, then their neighbours at the region's types (`hoid.measure.tune.neighbours`)."""
        from ..measure.tune import neighbours

        return neighbours(spec, self.sweep, types=types, attrs=attrs, target=target)

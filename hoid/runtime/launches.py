"""What a compiled call launches on the device, from the specs: how many kernels each step launches, and
which launches overlap through programmatic dependent launch (PDL).

    plan = compiled.launches
    plan.declared        # device kernels the kernel nodes launch per call, as their specs declare
    plan.undeclared      # steps whose launches torch decides (plain ops, vendor kernels)
    plan.breaks()        # the steps that serialise a PDL chain

A kernel step launches what its spec declares (`KernelSpec.launches`: split attention two); a view
launches nothing; any other torch op launches what torch picks (unknown here, at least one). PDL overlaps
a launch with the one before only when both support it: the earlier one lets the next launch early, the
later one waits for its memory. One step without it between two with it serialises the chain twice (it
waits for the step before it to finish, and the step after it waits for it), so `breaks` names those.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.registry import get_op


@dataclass(frozen=True)
class StepLaunches:
    """node: the step's name; what: "kernel <id>" or the op's name; count: device kernels one call
    launches (0 for a view, None where torch decides); pdl: launched with PDL in this compiled graph;
    pdl_capable: its spec supports PDL (whether or not this device or compile uses it)."""

    node: str
    what: str
    count: int | None
    pdl: bool
    pdl_capable: bool

    @property
    def launches(self) -> bool:
        return self.count != 0


@dataclass(frozen=True)
class LaunchPlan:
    steps: tuple[StepLaunches, ...]
    pdl: bool  # whether this compiled graph launches its capable kernels with PDL

    @property
    def kernels(self) -> list[StepLaunches]:
        return [s for s in self.steps if s.what.startswith("kernel ")]

    @property
    def declared(self) -> int:
        """Device kernels one call launches through its kernel nodes, as their specs declare (a kernel whose
        count torch decides is left out: see `undeclared`)."""
        return sum(s.count for s in self.kernels if s.count is not None)

    @property
    def undeclared(self) -> list[str]:
        """Steps that launch what torch decides: plain ops other than views, and torch vendor kernels."""
        return [s.node for s in self.steps if s.count is None]

    def breaks(self) -> list[StepLaunches]:
        """Launching steps without PDL that lie between PDL-capable ones: each serialises the chain."""
        launching = [s for s in self.steps if s.launches]
        capable = [i for i, s in enumerate(launching) if s.pdl_capable]
        if not capable:
            return []
        return [s for s in launching[capable[0] + 1:capable[-1]] if not s.pdl_capable]

    def overlaps(self) -> tuple[int, int]:
        """(boundaries between consecutive launches that PDL can overlap, all such boundaries) in one call;
        a step whose count torch decides counts as one launch."""
        flat = [s.pdl_capable for s in self.steps if s.launches for _ in range(s.count or 1)]
        pairs = list(zip(flat, flat[1:]))
        return sum(1 for a, b in pairs if a and b), len(pairs)

    def summary(self) -> str:
        """Two lines: the launches declared, and the PDL chain with what breaks it."""
        unknown = f" + what torch launches for {len(self.undeclared)} step(s)" if self.undeclared else ""
        lines = [f"launches per call: {self.declared} from {len(self.kernels)} kernel nodes{unknown}"]
        overlapped, boundaries = self.overlaps()
        state = "on" if self.pdl else "off here (counts say what it would overlap)"
        line = f"PDL {state}: {overlapped} of {boundaries} launch boundaries can overlap"
        broken = self.breaks()
        if broken:
            names = ", ".join(f"{s.node} ({s.what})" for s in broken[:8])
            line += f"; {len(broken)} step(s) without PDL break the chain: {names}"
            line += ", ..." if len(broken) > 8 else ""
        return "\n".join(lines + [line])


def launch_plan(steps, kernels: dict, pdl: bool) -> LaunchPlan:
    """The launches of `steps` (a plan's nodes, in order); `kernels`: kernel node (first output) -> its
    `BoundKernel`, as `Lowered.kernels` holds them."""
    out = []
    for node in steps:
        bound = kernels.get(node.outputs[0].name) if node.op == "kernel" else None
        if bound is not None:
            out.append(StepLaunches(node.name, f"kernel {bound.spec.id}", bound.launches, bound.pdl, bound.spec.pdl))
        else:
            count = 0 if get_op(node.op).is_view else None
            out.append(StepLaunches(node.name, node.op, count, False, False))
    return LaunchPlan(tuple(out), pdl)

"""`CodegenProposer`: generated Triton kernels for the fusible regions of the graph (on by default, after the
library proposer).

It cuts the graph's maximal fusible regions with `hoid.kernels.codegen.find_regions` (elementwise chains,
broadcasts, a row reduction or norm with its prologue and epilogue, each cut with `hoid.ir.Region`), and
proposes each distinct generated kernel once (the same region in every layer is one kernel: the search joins
it to every match). Each proposal is kernel *source* (`KernelSource.to_spec`): the loop checks it statically
and numerically in a separate process, journals its text, and keeps it only when the whole graph gets
faster. A region the generator cannot handle, or a fusion it refuses, is recorded in the journal with the
reason (`Context.skip`).

Off the device the loop prices a generated kernel with the roofline at its input and output bytes at full
efficiency, so fused kernels always look like wins there: such acceptances are labelled modelled (as all
modelled evidence is) and are never stored for the device.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..measure.profile import profile_graph
from .proposer import Context, Proposal, RegionInfo


class CodegenProposer:
    """sweep: at most this many param sets per kernel ("auto" first, then its neighbours: `params.sweep`)."""

    name = "codegen"
    independent = True  # its proposals never depend on earlier outcomes: a pool may read them ahead
    together = True  # decided at once first (one whole-graph measurement for all that pass): see together.py

    def __init__(self, *, sweep: int = 5):
        self.sweep = sweep

    def propose(self, context: Context) -> Iterable[Proposal]:
        from ..kernels.codegen import find_regions

        found = find_regions(context.graph)
        for refusal in found.refusals:
            context.skip(self.name, f"{refusal.kind}: {', '.join(refusal.nodes)}", refusal.reason)
        arch = getattr(context.device, "arch", "sm_90")
        total = sum(r.total_seconds for r in context.regions) or None
        matches: dict[str, int] = {}  # generated kernel id -> the regions it was generated for (one per layer)
        for fused in found.regions:
            matches[fused.generated.spec.id] = matches.get(fused.generated.spec.id, 0) + 1
        seen: set[str] = set()
        infos = []
        for fused in found.regions:
            spec = fused.generated.spec
            if spec.id in seen:
                continue
            seen.add(spec.id)
            if arch not in ("cpu", *spec.archs):
                context.skip(self.name, spec.id, f"generated kernels build for {', '.join(spec.archs)}, not {arch}")
                continue
            body = fused.generated.body
            seconds = profile_graph(body, mode="analytic", device=context.device).total
            count = matches[spec.id]
            share = min(1.0, seconds * count / total) if total else 0.0
            types = fused.generated.types
            info = RegionInfo(RegionInfo.key_of(spec.pattern.name, types, {}), spec.pattern.name, types, {}, body,
                              seconds, share, "modelled", count)
            infos.append((info, fused))
        # hottest first over every match, as the context's regions
        infos.sort(key=lambda item: (-item[0].total_seconds, item[0].key))
        for info, fused in infos:
            context.add_region(info)
            ops = " -> ".join(n.op for n in fused.region.nodes)
            yield Proposal(info.key, fused.generated.spec, self._sweep(fused.generated),
                           note=f"generated fusion of {len(fused.region.nodes)} ops ({ops}) at "
                                f"{', '.join(n for n in fused.names[:3])}{'...' if len(fused.names) > 3 else ''}")

    def _sweep(self, generated) -> tuple[dict, ...]:
        """"auto" and its neighbours (`hoid.kernels.codegen.params.sweep`): the executor times each on the GPU
        and keeps the fastest, so a region whose "auto" is off by a block size or the warps still wins."""
        from ..kernels.codegen.params import sweep

        return sweep(generated.layout, self.sweep)

"""Generated kernels: fused Triton for the regions no library kernel covers.

    from hoid.kernels.codegen import find_regions, generate
    found = find_regions(graph)         # maximal fusible regions, and those refused with the reason
    for region in found.regions:
        region.generated.spec            # a KernelSpec built from generated source (`KernelSource`)

Modules: `templates` (reading each op's `OpDef.triton`), `index` (where each value is read: views by index
arithmetic), `legality` (what fuses, and why not), `emit` (the statements and the tile kernel's text),
`looped` (the looped row kernel, for rows longer than one tile), `params` (block sizes and "auto"),
`generate` (region -> `KernelSpec`), `regions` (finding maximal regions with `hoid.ir.Region`), `build`
(sm_90 / sm_100 builds without a GPU).
"""

from .generate import Generated, Refused, generate
from .regions import Found, FusedRegion, Refusal, find_regions

__all__ = ["Found", "FusedRegion", "Generated", "Refusal", "Refused", "find_regions", "generate"]

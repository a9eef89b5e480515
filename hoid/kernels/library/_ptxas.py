"""What the assembler says of a kernel's PTX (build-only: CI's checks of the sm_90 and sm_100 builds, no launch).

`ptxas -v` reports each kernel's registers and spills, and warns where it had to give up on something the
code meant to do: C7514, WGMMAs serialized because other instructions read their accumulators mid-flight,
which cost the CuTe GEMM 42% at 128 x 128 on the H200 (12-04) and showed nowhere else before a GPU ran it.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass


@dataclass(frozen=True)
class PtxasReport:
    """`ptxas -v`'s words (`text`), and what the checks read of them: the bytes of spill stores and loads
    together (0 where every value stays in registers), and its warnings and numbered notices (C7514 ...)."""

    text: str
    spilled_bytes: int
    warnings: tuple[str, ...]


def ptxas_report(ptx: str, target: str) -> PtxasReport:
    """`ptxas -v` on `ptx` for `target` ("sm_90a", "sm_100a"), from the ptxas Triton ships: its Blackwell one
    for either arch, since CuTe DSL 4.8 writes PTX 8.8, which its Hopper one (CUDA 12.8) refuses. Raises with
    the assembler's message where it fails."""
    from triton.backends.nvidia.compiler import get_ptxas

    with tempfile.TemporaryDirectory(prefix="hoid-ptxas-") as folder:
        path = os.path.join(folder, "kernel.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        done = subprocess.run([get_ptxas(100).path, "-v", f"-arch={target}", path, "-o",
                               os.path.join(folder, "kernel.cubin")], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"ptxas failed for {target}: {done.stderr[-2000:]}")
    text = done.stderr
    spilled = sum(int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", text))
    warned = tuple(line.strip() for line in text.splitlines() if re.search(r"warning|\(C\d{4}\)", line))
    return PtxasReport(text, spilled, warned)

"""What the assembler says of a kernel's PTX (build-only: CI's checks of the sm_90 and sm_100 builds, no launch).

`ptxas -v` reports each kernel's registers and spills, and warns where it had to give up on something the
code meant to do: C7514, WGMMAs serialized because other instructions read their accumulators mid-flight,
which cost the CuTe GEMM 42% at 128 x 128 on the H200 (12-04) and showed nowhere else before a GPU ran it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile


def ptxas_report(ptx: str, target: str) -> str:
    """`ptxas -v`'s words on `ptx` for `target` ("sm_90a", "sm_100a"), from the ptxas Triton ships: its
    Blackwell one for either arch, since CuTe DSL 4.8 writes PTX 8.8, which its Hopper one (CUDA 12.8) refuses.
    Raises with the assembler's message where it fails."""
    from triton.backends.nvidia.compiler import get_ptxas

    with tempfile.TemporaryDirectory(prefix="hoid-ptxas-") as folder:
        path = os.path.join(folder, "kernel.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        done = subprocess.run([get_ptxas(100).path, "-v", f"-arch={target}", path, "-o",
                               os.path.join(folder, "kernel.cubin")], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"ptxas failed for {target}: {done.stderr[-2000:]}")
    return done.stderr

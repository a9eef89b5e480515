"""Building generated kernels for sm_90 and sm_100 without a GPU.

Generated source is a module of its own (not importable by name), so the build loads it from the file
`hoid.kernels.loader` wrote for it (exactly the checked text) and compiles its `@triton.jit` kernel with
the library's build (`_triton_build.compile_file_for`: aligned pointers, down to a cubin, in the build
process that every library kernel's check shares).
"""

from __future__ import annotations

from ..library._triton_build import ARCHS, BuiltKernel, compile_file_for, pointer_type
from ..loader import KernelSource, _materialize


def build_generated(source: KernelSource, facts: dict, auto: dict, arch: str) -> BuiltKernel:
    """Build the generated kernel of `source` for `arch` at its "auto" block sizes; raises on failure."""
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; generated kernels build for {', '.join(ARCHS)}")
    signature = {a: pointer_type(d) for a, d in zip(facts["args"], facts["dtypes"], strict=True)}
    constexprs = {"BLOCK_M": auto["block_m"], "BLOCK_N": auto["block_n"]}
    if "even" in facts:  # a tile kernel: its bounds are constexprs too (see `emit._tile_kernel`)
        constexprs.update(EVEN_M=facts["rows"] % auto["block_m"] == 0, EVEN_N=facts["cols"] % auto["block_n"] == 0)
    try:
        return compile_file_for(_materialize(source), facts["kernel"], arch, signature, constexprs,
                                auto["num_warps"])
    except RuntimeError as e:
        raise RuntimeError(f"building generated kernel {facts['kernel']} for {arch} failed:\n{e}") from e

"""Building a Triton kernel for a GPU arch without a GPU: the check CI runs that every library and
generated kernel compiles for sm_90 and sm_100, down to a cubin, and what the build tells of the code.

This is build-only code: no launch runs it (on a GPU, Triton compiles at the first launch itself). So
`hoid.kernels.version` leaves it out of every kernel's version (`version.BUILD_ONLY`): an edit here
changes no kernel and throws away no measurement.

Triton fixes interpreter-or-compiler at its first import, so a process that interprets builds in one
helper process without the interpreter, started once and kept (`_CompileServer`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...ir import TensorType
from ..ptx import global_writes, unsynced_releases
from ._ptxas import ptxas_report
from ._triton_compile import TritonKernel, interpreting, require_triton, triton

# Triton's names for the pointer element types of the IR dtypes.
_TRITON_TYPES = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "f64": "fp64", "i64": "i64", "i32": "i32",
                 "i16": "i16", "i8": "i8", "u8": "u8", "bool": "i1"}
ARCHS = {"sm_90": 90, "sm_100": 100}


def pointer_type(dtype) -> str:
    """Triton's signature type of a pointer to `dtype` (an IR dtype name or a torch dtype)."""
    name = TensorType((), dtype).dtype
    return "*" + _TRITON_TYPES[name]


@dataclass(frozen=True)
class BuiltKernel:
    """What a build for an arch produced: the PTX `.target` line's arch (`sm_90a`, `sm_100a`), the
    shared memory it needs and its warps; enough to tell a real build from a silent fallback.
    `async_loads` counts the loads Triton's software pipeliner made asynchronous (cp.async or TMA copies
    into shared memory, issued stages ahead of their use): 0 means every load in a loop waits for
    memory before the loop goes on. `wide_loads` and `narrow_loads` count the PTX global loads that move
    16 bytes per thread and those that move less (a bf16 tensor read 2 bytes at a time takes 8x the
    instructions and rarely reaches the bandwidth). `griddep` counts the grid dependency control
    instructions (`griddepcontrol.wait` and `.launch_dependents`): a PDL build has both, others none.
    `loads_before_wait`: the global loads the PTX issues ahead of its first `griddepcontrol.wait` (a GEMV's
    early weight tile; 0 for a PDL kernel that touches no memory before its wait). `loads_after_store`: the
    global loads that follow its first global store: the compiler cannot tell most addresses apart, so
    none of them is issued before that store is (nor before what the store waits on).
    `writes_before_wait`: the global stores and atomics ahead of that wait (0 for every PDL build: the previous
    kernel may still read what such a write would overwrite, the buffers the runtime plans reused by liveness).
    `unsynced_releases`: the release atomics (`atom`/`red` with `.release` or `.acq_rel`) that follow a
    global write with no `bar.sync` between: see `hoid.kernels.ptx.unsynced_releases`."""

    kernel: str
    arch: str
    ptx_target: str
    shared_bytes: int
    num_warps: int
    async_loads: int
    wide_loads: int
    narrow_loads: int
    griddep: int = 0
    loads_before_wait: int = 0
    loads_after_store: int = 0
    spilled_bytes: int = 0  # ptxas's spill stores and loads together: 0 where every value stays in registers
    ptxas_warnings: tuple[str, ...] = ()  # what ptxas warned of (C7514: WGMMAs serialized, and the like)
    tensor_core_mmas: int = 0  # the PTX's tensor-core MMAs: wgmma (sm_90), tcgen05 (sm_100) or mma.sync ones
    unsynced_releases: int = 0
    writes_before_wait: int = 0
    # Hopper's warp-group products with an operand in registers (computed after its load: a conversion, a split)
    # rather than in shared memory, where the pipelined copies put it. The grouped MoE kernel's down launch so
    # built took 277 us a layer, its bf16 form fed from memory 97 for half the products (H100, 12-07:
    # `triton_moe_experts_grouped`'s doc)
    register_operand_dots: int = 0


def compile_for(kernel: TritonKernel, arch: str, signature: dict[str, str], constexprs: dict[str, Any],
                num_warps: int = 4, num_stages: int = 3, divisible_by_16: Sequence[str] = ()) -> BuiltKernel:
    """Build `kernel` for `arch` ("sm_90" or "sm_100") without a GPU, down to a cubin.

    `signature` maps every runtime argument to its Triton type ("*bf16", "i32", "fp32"); `constexprs`
    gives every `tl.constexpr` argument its value. Raises on any compile failure: nothing may silently
    fail to build for an arch the library claims. Under the interpreter, the build runs in a helper
    process (see the module doc); `kernel` must then be a module-level name, for that process to import.

    The build is the one a launch on torch tensors gets: Triton's launcher specializes a pointer that is
    16-byte aligned (torch's allocations are) and an integer that is a multiple of 16 (name those, the
    strides of a contiguous [.., 128] tensor, in `divisible_by_16`). Without that, loads cannot be
    vectorized or made asynchronous, and the build would not be the code that runs.
    """
    require_triton(f"compiling Triton kernel {kernel.name}")
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; Triton kernels build for {', '.join(ARCHS)}")
    if interpreting():
        return _CompileServer.get().build({"module": kernel.fn.__module__}, kernel.name, arch, signature,
                                          constexprs, num_warps, num_stages, list(divisible_by_16))
    return _build(kernel, arch, signature, constexprs, num_warps, num_stages, divisible_by_16)


def compile_file_for(path: str, name: str, arch: str, signature: dict[str, str], constexprs: dict[str, Any],
                     num_warps: int = 4, num_stages: int = 3, divisible_by_16: Sequence[str] = ()) -> BuiltKernel:
    """`compile_for` of the `@triton.jit` function `name` in the file at `path` (a generated kernel or a
    kernel folder's, which no module name imports); always in the build process, so that this one may be
    interpreting."""
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; Triton kernels build for {', '.join(ARCHS)}")
    return _CompileServer.get().build({"file": str(path)}, name, arch, signature, constexprs, num_warps,
                                      num_stages, list(divisible_by_16))


def _build(kernel: TritonKernel, arch, signature, constexprs, num_warps, num_stages,
           divisible_by_16=()) -> BuiltKernel:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    jit = kernel.impl
    full = {**signature, **{name: "constexpr" for name in constexprs}}
    missing = [n for n in jit.arg_names if n not in full]
    if missing:
        raise ValueError(f"compile_for({kernel.name}): no type or value for argument(s) {', '.join(missing)}")
    unknown = [n for n in divisible_by_16 if not signature.get(n, "").startswith("i")]
    if unknown:
        raise ValueError(f"compile_for({kernel.name}): divisible_by_16 names non-integer argument(s) "
                         f"{', '.join(unknown)}")
    aligned = [n for n, t in signature.items() if t.startswith("*")] + list(divisible_by_16)
    attrs = {(jit.arg_names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    src = ASTSource(fn=jit, signature=full, constexprs=constexprs, attrs=attrs)
    built = triton.compile(src, target=GPUTarget("cuda", ARCHS[arch], 32),
                           options={"num_warps": num_warps, "num_stages": num_stages})
    ptx_lines = built.asm["ptx"].splitlines()
    target = next((line.split()[1] for line in ptx_lines if line.startswith(".target")), "?")
    ttgir = built.asm["ttgir"]
    async_loads = ttgir.count("ttg.async_copy_global_to_local") + ttgir.count("async_tma_copy_global_to_local")
    loads = re.findall(r"\b(ld\.global[.\w:]*|cp\.async\.cg\.shared\.global)\b", built.asm["ptx"])
    wide = sum(1 for op in loads if op.startswith("cp.async.cg") or op.endswith((".v4.b32", ".v2.b64")))
    griddep = len(re.findall(r"\bgriddepcontrol\.(?:wait|launch_dependents)\b", built.asm["ptx"]))
    ahead = built.asm["ptx"].split("griddepcontrol.wait")[0] if griddep else ""
    behind = built.asm["ptx"].split("st.global", 1)[1] if "st.global" in built.asm["ptx"] else ""
    report = ptxas_report(built.asm["ptx"], target)
    mmas = len(re.findall(r"\b(?:wgmma\.mma_async|tcgen05\.mma|mma\.sync)\b", built.asm["ptx"]))
    dots = re.findall(r"ttng\.warp_group_dot (.*)", ttgir)
    return BuiltKernel(kernel.name, arch, target, built.metadata.shared, built.metadata.num_warps, async_loads,
                       wide, len(loads) - wide, griddep, len(re.findall(r"\bld\.global", ahead)),
                       len(re.findall(r"\bld\.global", behind)), report.spilled_bytes, report.warnings, mmas,
                       unsynced_releases(built.asm["ptx"]),
                       global_writes(ahead), sum("#ttg.dot_op<" in dot for dot in dots))


class _CompileServer:
    """A helper process without the interpreter that builds kernels, one JSON request a line on its stdin,
    one answer a line on its stdout; started once (importing torch and triton costs seconds) and kept for
    every later build. A request names the kernel's module, or the file of a generated kernel (which no
    name imports: `hoid.kernels.loader` wrote it, exactly the checked text)."""

    _instance: _CompileServer | None = None
    _ANSWER = "hoid-build:"

    @classmethod
    def get(cls) -> _CompileServer:
        if cls._instance is None or cls._instance.proc.poll() is not None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        env = {**os.environ, "TRITON_INTERPRET": "0"}
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def build(self, where: dict, name, arch, signature, constexprs, num_warps, num_stages,
              divisible_by_16) -> BuiltKernel:
        request = [where, name, arch, signature, constexprs, num_warps, num_stages, divisible_by_16]
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:  # anything else the build prints is passed over
            if line.startswith(self._ANSWER):
                answer = json.loads(line[len(self._ANSWER):])
                if "error" in answer:
                    raise RuntimeError(f"building {name} for {arch} failed:\n{answer['error']}")
                return BuiltKernel(**{**answer, "ptxas_warnings": tuple(answer.get("ptxas_warnings", ()))})
        raise RuntimeError(f"the build process died while building {name} for {arch} (its stderr is above)")


class _FileKernel:
    """What `_build` reads of a kernel: its jit function and name (a generated file's `@triton.jit`)."""

    def __init__(self, impl, name: str):
        self.impl, self.name = impl, name


def _kernel_at(where: dict, name: str):
    if "module" in where:
        return getattr(importlib.import_module(where["module"]), name)
    spec = importlib.util.spec_from_file_location(f"hoid_build_{abs(hash(where['file']))}", where["file"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return _FileKernel(getattr(module, name), name)


def _serve_builds() -> None:
    for line in sys.stdin:
        where, name, arch, signature, constexprs, num_warps, num_stages, divisible = json.loads(line)
        try:
            kernel = _kernel_at(where, name)
            answer = asdict(_build(kernel, arch, signature, constexprs, num_warps, num_stages, divisible))
        except Exception:  # the whole trace goes back to the caller, which raises it
            answer = {"error": traceback.format_exc()}
        print(_CompileServer._ANSWER + json.dumps(answer), flush=True)


if __name__ == "__main__":
    _serve_builds()

"""What every Triton kernel of the library shares: the optional import, launching, and building
for a GPU arch without a GPU.

Triton is optional (it exists on Linux only), so nothing here imports it unguarded: `import hoid.kernels`
works without it, every spec still registers, and launching a Triton kernel then raises
`MissingTritonError`, which names the package to install.

Triton fixes its mode when it is first imported: with `TRITON_INTERPRET=1` every kernel (and Triton's
own `tl.sum`, `tl.cdiv`...) runs under the CPU interpreter, and nothing can be compiled for a GPU in
that process; without it nothing can be interpreted. So kernels are written as plain functions decorated
with `triton_kernel` (not `triton.jit`), launched in whichever mode the process is in, and `compile_for`
builds in a helper process without the interpreter when this one runs it.

Programmatic dependent launch (PDL, sm_90+): a kernel that supports it takes a `PDL: tl.constexpr` and
calls `pdl_enter(PDL)` first; its launch passes `**pdl_launch(pdl)`. The interpreter has no grid
dependency control (`tl.extra.cuda.gdc_*` fail there), and runs launches one after another anyway, so
under it the flag is compiled out and the launch is a plain one.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from ...errors import HoidError
from ...ir import TensorType
from ..launch import note_device_launch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is absent
    triton = None

    class _ConstexprStandIn:
        """Lets `BLOCK: tl.constexpr` annotations evaluate when triton is absent; never launched."""

    class tl:  # type: ignore[no-redef]
        constexpr = _ConstexprStandIn

HAVE_TRITON = triton is not None

# Triton's names for the pointer element types of the IR dtypes.
_TRITON_TYPES = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "f64": "fp64", "i64": "i64", "i32": "i32",
                 "i16": "i16", "i8": "i8", "u8": "u8", "bool": "i1"}
ARCHS = {"sm_90": 90, "sm_100": 100}


class MissingTritonError(HoidError, ImportError):
    """A Triton kernel was launched or compiled where the `triton` package is not installed."""


class TritonDeviceError(HoidError, RuntimeError):
    """A Triton kernel was launched on tensors it cannot run on (CPU tensors without the interpreter)."""


def require_triton(what: str) -> None:
    if not HAVE_TRITON:
        raise MissingTritonError(f"{what} needs the `triton` package, which is not installed: "
                                 "pip install 'triton>=3.6,<3.7' (Linux only)")


def interpreting() -> bool:
    """True when this process imported Triton under its CPU interpreter (`TRITON_INTERPRET=1`)."""
    # Triton's own jit functions are built in the mode of the first import; they tell which it was.
    return HAVE_TRITON and type(triton.language.standard.sum).__name__ == "InterpretedFunction"


class TritonKernel:
    """A Triton kernel function; `kernel[grid](*args, num_warps=..., **constexprs)` launches it like a
    `triton.jit` function, interpreted or compiled as this process runs Triton."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.name = fn.__name__
        functools.update_wrapper(self, fn)

    @functools.cached_property
    def impl(self):
        require_triton(f"Triton kernel {self.name}")
        return triton.jit(self.fn)  # an InterpretedFunction under the interpreter

    def __getitem__(self, grid):
        impl = self.impl
        interpret = interpreting()

        def launch(*args, **kwargs):
            if not interpret:
                _require_gpu_tensors(self.name, args)
            note_device_launch(self.name)
            return impl[grid](*args, **kwargs)

        return launch


def triton_kernel(fn: Callable) -> TritonKernel:
    """Decorate a Triton kernel function (use this instead of `@triton.jit`; see the module doc)."""
    return TritonKernel(fn)


def device_function(fn: Callable):
    """Decorate a function that Triton kernels call (not launched from the host): `triton.jit` in this
    process's mode, or the plain function where triton is absent (nothing can call it then)."""
    return triton.jit(fn) if HAVE_TRITON else fn


def pdl_launch(pdl: bool) -> dict:
    """The launch keywords of a PDL-capable kernel: its `PDL` constexpr, and Triton's `launch_pdl` option
    where it is on (never under the interpreter: see the module doc). Off, the launch is exactly a plain
    one (no option a tracer of Triton launches, torch.compile's, would have to know)."""
    on = bool(pdl) and not interpreting()
    return {"PDL": True, "launch_pdl": True} if on else {"PDL": False}


def _pdl_enter(PDL: tl.constexpr):
    """A PDL kernel's first statement. Waits until the previous kernel in the stream has finished and its
    writes are visible (before any load or store: this kernel may read what it wrote, or overwrite what it
    still reads, as planned buffers are reused), then lets the next kernel launch: its programs start and
    wait in turn, so the launch and the ramp-up overlap this kernel instead of following it."""
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


pdl_enter = device_function(_pdl_enter)


def _require_gpu_tensors(name: str, args: Sequence[Any]) -> None:
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type != "cuda":
            raise TritonDeviceError(
                f"Triton kernel {name} got a tensor on {a.device}: launch it on CUDA tensors, or set "
                "TRITON_INTERPRET=1 before triton is first imported to run it on the CPU (interpreted)")


def example_floats() -> tuple[str, ...]:
    """The float dtypes a Triton kernel's `examples` draw: bfloat16 only where it runs faithfully, which the
    interpreter does not (it stores bfloat16 as uint16 and truncates on casts); check it on a GPU."""
    return ("f32", "f16") if interpreting() else ("f32", "f16", "bf16")


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
    instructions (`griddepcontrol.wait` and `.launch_dependents`): a PDL build has both, others none."""

    kernel: str
    arch: str
    ptx_target: str
    shared_bytes: int
    num_warps: int
    async_loads: int
    wide_loads: int
    narrow_loads: int
    griddep: int = 0


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
        return _CompileServer.get().build(kernel.fn.__module__, kernel.name, arch, signature, constexprs,
                                          num_warps, num_stages, list(divisible_by_16))
    return _build(kernel, arch, signature, constexprs, num_warps, num_stages, divisible_by_16)


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
    loads = re.findall(r"\b(ld\.global[.\w]*|cp\.async\.cg\.shared\.global)\b", built.asm["ptx"])
    wide = sum(1 for op in loads if op.startswith("cp.async.cg") or op.endswith((".v4.b32", ".v2.b64")))
    griddep = len(re.findall(r"\bgriddepcontrol\.(?:wait|launch_dependents)\b", built.asm["ptx"]))
    return BuiltKernel(kernel.name, arch, target, built.metadata.shared, built.metadata.num_warps, async_loads,
                       wide, len(loads) - wide, griddep)


class _CompileServer:
    """A helper process without the interpreter that builds kernels by module and name, one JSON request
    a line on its stdin, one answer a line on its stdout; started once (importing torch and triton costs
    seconds) and kept for every later build."""

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

    def build(self, module, name, arch, signature, constexprs, num_warps, num_stages,
              divisible_by_16) -> BuiltKernel:
        request = [module, name, arch, signature, constexprs, num_warps, num_stages, divisible_by_16]
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:  # anything else the build prints is passed over
            if line.startswith(self._ANSWER):
                answer = json.loads(line[len(self._ANSWER):])
                if "error" in answer:
                    raise RuntimeError(f"building {name} for {arch} failed:\n{answer['error']}")
                return BuiltKernel(**answer)
        raise RuntimeError(f"the build process died while building {name} for {arch} (its stderr is above)")


def _serve_builds() -> None:
    for line in sys.stdin:
        module, name, arch, signature, constexprs, num_warps, num_stages, divisible = json.loads(line)
        try:
            kernel = getattr(importlib.import_module(module), name)
            answer = asdict(_build(kernel, arch, signature, constexprs, num_warps, num_stages, divisible))
        except Exception:  # the whole trace goes back to the caller, which raises it
            answer = {"error": traceback.format_exc()}
        print(_CompileServer._ANSWER + json.dumps(answer), flush=True)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def num_sms(device: torch.device) -> int:
    """Multiprocessors of a CUDA device; a small stand-in on the CPU (the interpreter), where grids only
    need to be valid, not fast."""
    if device.type == "cuda":
        return _cuda_sms(device.index if device.index is not None else torch.cuda.current_device())
    return 4


@functools.cache
def _cuda_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


if __name__ == "__main__":
    _serve_builds()

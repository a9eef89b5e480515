"""What every Triton kernel of the library shares at launch: the optional import and the launch wrapper.
(Building for a GPU arch without a GPU, which no launch runs, is `_triton_build`'s.)

Triton is optional (it exists on Linux only), so nothing here imports it unguarded: `import hoid.kernels`
works without it, every spec still registers, and launching a Triton kernel then raises
`MissingTritonError`, which names the package to install.

Triton fixes its mode when it is first imported: with `TRITON_INTERPRET=1` every kernel (and Triton's
own `tl.sum`, `tl.cdiv`...) runs under the CPU interpreter, and nothing can be compiled for a GPU in
that process; without it nothing can be interpreted. So kernels are written as plain functions decorated
with `triton_kernel` (not `triton.jit`), launched in whichever mode the process is in, and
`_triton_build.compile_for` builds in a helper process without the interpreter when this one runs it.

Programmatic dependent launch (PDL, sm_90+): a kernel that supports it takes a `PDL: tl.constexpr` and
calls `pdl_enter(PDL)` first; its launch passes `**pdl_launch(pdl)`. The interpreter has no grid
dependency control (`tl.extra.cuda.gdc_*` fail there), and runs launches one after another anyway, so
under it the flag is compiled out and the launch is a plain one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...errors import HoidError
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


# Defined under its own name (not `pdl_enter = device_function(_pdl_enter)`): torch.compile's inductor
# rebuilds a user kernel's source with the jit functions it calls under their function names, so an alias
# is undefined there (an exported package under torch.compile failed so on the H200).
@device_function
def pdl_enter(PDL: tl.constexpr):
    """A PDL kernel's first statement. Waits until the previous kernel in the stream has finished and its
    writes are visible (before any load or store: this kernel may read what it wrote, or overwrite what it
    still reads, as planned buffers are reused), then lets the next kernel launch: its programs start and
    wait in turn, so the launch and the ramp-up overlap this kernel instead of following it."""
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()



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


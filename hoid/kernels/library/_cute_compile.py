"""What every CuTe DSL kernel of the library shares: the optional import, the arch names, building for a
GPU arch without a GPU, the compile cache and launching on torch tensors through DLPack.

CUTLASS's CuTe DSL (`nvidia-cutlass-dsl`, the extra `hoid[cute]`) is optional and heavy to import (a
second and an MLIR context), so nothing here imports it at module import: `import hoid.kernels` works
without it and registers every CuTe spec; a launch or a build imports it then, and where it is absent
raises `MissingCuteError`, which says how to install it.

Arch names. hoid spells an arch one way everywhere (`KernelSpec.archs`, `Target.arch`, the runtime's
`bind(arch=...)`, `spec.compile(arch)`): "sm_90" (the H200) and "sm_100" (the B200). CuTe, like Triton's
PTX, targets the arch-specific ISA of each, "sm_90a" / "sm_100a" (WGMMA and TMA multicast exist only
there); `CUTE_TARGETS` is the one place that maps the first to the second, and a build's PTX `.target`
line is checked against it.

A kernel module keeps its `@cute.jit` / `@cute.kernel` functions inside a factory that `cute_module()`
calls once (CuTe DSL reads the functions' source, so they live in the library's `.py` files, and the
factory is what keeps their decorators from importing cutlass at registration).
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from ...errors import HoidError

# hoid's arch name -> the CuTe DSL target (the PTX `.target` line) that a build for it makes.
CUTE_TARGETS = {"sm_90": "sm_90a", "sm_100": "sm_100a"}
INSTALL = "pip install 'hoid[cute]'  (CUTLASS CuTe DSL: nvidia-cutlass-dsl>=4.8, Linux x86-64 or aarch64)"


class MissingCuteError(HoidError, ImportError):
    """A CuTe DSL kernel was launched or built where CUTLASS's CuTe DSL is not installed."""


class CuteDeviceError(HoidError, RuntimeError):
    """A CuTe kernel was launched on tensors it cannot run on (CPU tensors: CuTe has no interpreter)."""


def have_cute() -> bool:
    """True where CuTe DSL can be imported: a `cutlass` package with a `cute` subpackage (NVIDIA's; PyPI has
    other `cutlass`es), found without importing either (importing CuTe DSL takes seconds)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("cutlass")
    except (ImportError, ValueError):  # ValueError: sys.modules["cutlass"] is None, as tests set it
        return False
    if spec is None:
        return False
    if "cutlass.cute" in sys.modules:
        return sys.modules["cutlass.cute"] is not None
    return any(os.path.isdir(os.path.join(d, "cute")) for d in (spec.submodule_search_locations or ()))


@functools.cache
def cute_modules():
    """(cutlass, cutlass.cute, cuda.bindings.driver), imported once; raises `MissingCuteError` without them."""
    # Builds write their PTX and cubin where CuTe's dump dir says (default: the working directory).
    os.environ.setdefault("CUTE_DSL_DUMP_DIR", os.path.join(tempfile.gettempdir(), "hoid-cute"))
    os.makedirs(os.environ["CUTE_DSL_DUMP_DIR"], exist_ok=True)
    try:
        cutlass = importlib.import_module("cutlass")
        cute = importlib.import_module("cutlass.cute")
        driver = importlib.import_module("cuda.bindings.driver")
    except ImportError as e:
        raise MissingCuteError(f"CuTe DSL kernels need CUTLASS's CuTe DSL, which is not installed ({e}): "
                               f"{INSTALL}") from None
    except Exception as e:  # installed but unloadable (a part missing: CuTe raises RuntimeError for its libraries)
        raise MissingCuteError(f"CuTe DSL is installed but does not load ({type(e).__name__}: {e}): reinstall "
                               f"it: {INSTALL}") from None
    return cutlass, cute, driver


def require_cute(what: str):
    """The CuTe modules, or `MissingCuteError` naming `what` needed them."""
    try:
        return cute_modules()
    except MissingCuteError as e:
        raise MissingCuteError(f"{what}: {e}") from None


def cute_module(factory: Callable[[Any, Any, Any], Any], what: str):
    """`factory(cutlass, cute, driver)`'s result, built once per factory: where a kernel module defines its
    `@cute.jit` functions (see the module doc)."""
    return _factory_result(factory, what)


@functools.cache
def _factory_result(factory, what):
    return factory(*require_cute(what))


def cute_target(arch: str) -> str:
    if arch not in CUTE_TARGETS:
        raise ValueError(f"unknown arch {arch!r}; CuTe kernels build for {', '.join(CUTE_TARGETS)}")
    return CUTE_TARGETS[arch]


def cutlass_dtype(dtype) -> Any:
    """CuTe's element type for an IR dtype name ("bf16") or a torch dtype."""
    cutlass = cute_modules()[0]
    name = dtype if isinstance(dtype, str) else {torch.bfloat16: "bf16", torch.float16: "f16",
                                                 torch.float32: "f32"}[dtype]
    return {"bf16": cutlass.BFloat16, "f16": cutlass.Float16, "f32": cutlass.Float32}[name]


@dataclass(frozen=True)
class BuiltCute:
    """What a build for an arch produced: the PTX `.target` (`sm_90a`), the PTX itself (tests read it for
    the instructions a kernel is meant to use: `wgmma`, `cp.async.bulk.tensor`) and the cubin's size."""

    kernel: str
    arch: str
    ptx_target: str
    ptx: str
    cubin_bytes: int

    def count(self, instruction: str) -> int:
        """How many PTX instructions start with `instruction` ("wgmma.mma_async", "cp.async.bulk.tensor")."""
        return len(re.findall(r"^\s*(?:@!?%\w+\s+)?" + re.escape(instruction), self.ptx, flags=re.M))

    def count_before_wait(self, instruction: str) -> int:
        """How many `instruction`s the PTX has ahead of its first `griddepcontrol.wait` (a PDL kernel's loads
        issued before it waits for the previous kernel: its early weight reads); 0 where it has no wait."""
        head, wait, _ = self.ptx.partition("griddepcontrol.wait")
        return replace(self, ptx=head).count(instruction) if wait else 0


_BUILD_LOCK = threading.Lock()  # CuTe's compiler state (the MLIR context, the arch setting) is per process


def compile_for(name: str, jit_fn, args: Sequence[Any], arch: str) -> BuiltCute:
    """Build `jit_fn` for `arch` ("sm_90", "sm_100") without a GPU, over `args` (fake tensors from
    `fake_tensor`, Python constants, a stream), down to a cubin; raises on any compile failure."""
    _, cute, _ = require_cute(f"building CuTe kernel {name}")
    target = cute_target(arch)
    # A directory of its own for each build's PTX and cubin, named in the call: CuTe otherwise keeps the
    # directory of its first compile in the process (after a build over DLPack views, `compiled_for`, that
    # was the working directory), and it names the files after the function and its arguments alone, so
    # builds that differ in a constant (PDL or not) in processes sharing one directory read each other's.
    with _BUILD_LOCK, tempfile.TemporaryDirectory(prefix="hoid-cute-") as dump:
        built = cute.compile(jit_fn, *args, options=f"--gpu-arch {target} --keep-ptx --keep-cubin "
                                                    f"--dump-dir={dump}")
        ptx, cubin_bytes = _text(built.__ptx__), len(built.__cubin__ or b"")
    found = next((line.split()[1] for line in ptx.splitlines() if line.startswith(".target")), "?")
    return BuiltCute(name, arch, found, ptx, cubin_bytes)


def _text(ptx) -> str:
    """The PTX text: CuTe hands back the file it wrote where a dump dir is set, else the text."""
    if ptx and "\n" not in ptx and os.path.isfile(ptx):
        with open(ptx) as f:
            return f.read()
    return ptx or ""


def fake_tensor(dtype, shape: Sequence[int]):
    """A compile-time stand-in for a contiguous row-major tensor, 16-byte aligned as torch allocates."""
    _, cute, _ = require_cute("a CuTe fake tensor")
    order = tuple(reversed(range(len(shape))))  # the last mode is the unit-stride one
    return cute.runtime.make_fake_compact_tensor(cutlass_dtype(dtype), tuple(shape), stride_order=order,
                                                 assumed_align=16)


def null_stream():
    return cute_modules()[2].CUstream(0)


# --- launching ---------------------------------------------------------------------------------------

_COMPILED: dict[tuple, Any] = {}


def device_arch(device: torch.device) -> str:
    """hoid's arch name of a CUDA device (sm_90 for the H200), from its compute capability."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def dlpack_views(tensors: Sequence[torch.Tensor]) -> list:
    """CuTe tensors over torch tensors' memory (static shapes and strides: a build per shape), 16-byte
    aligned as torch allocates."""
    from cutlass.cute.runtime import from_dlpack

    return [from_dlpack(t, assumed_align=16) for t in tensors]


def compiled_for(name: str, key: tuple, make: Callable[[], Any], views: Sequence[Any], stream, arch: str):
    """The build a launch runs, from the cache or compiled now (what `launch` calls; tests build it over
    CPU tensors' views, which compile the same)."""
    _, cute, _ = require_cute(f"CuTe kernel {name}")
    full_key = (name, arch, *key)
    compiled = _COMPILED.get(full_key)
    if compiled is None:
        with _BUILD_LOCK:
            compiled = cute.compile(make(), *views, stream, options=f"--gpu-arch {cute_target(arch)}")
        _COMPILED[full_key] = compiled
    return compiled


def launch(name: str, key: tuple, make: Callable[[], Any], tensors: Sequence[torch.Tensor]) -> None:
    """Launch `make()(*tensors, stream)` on the current torch stream (so a CUDA graph that torch captures
    records it). The jit function `make` returns is compiled at the first launch of each `key`, which must
    hold whatever it specializes on (shapes, dtypes, params), for the device's arch, and cached."""
    _, cute, driver = require_cute(f"CuTe kernel {name}")
    for t in tensors:
        if t.device.type != "cuda":
            raise CuteDeviceError(f"CuTe kernel {name} got a tensor on {t.device}: CuTe kernels run on CUDA "
                                  "tensors only (there is no CPU interpreter)")
        if t.data_ptr() % 16:  # builds assume torch's alignment: 16-byte vector loads and TMA need it
            raise CuteDeviceError(f"CuTe kernel {name} got a tensor at an address not 16-byte aligned "
                                  f"({t.data_ptr():#x}, a view at an offset?): pass an aligned copy")
    arch = device_arch(tensors[0].device)
    if arch not in CUTE_TARGETS:
        raise CuteDeviceError(f"CuTe kernel {name} builds for {', '.join(CUTE_TARGETS)}; this GPU is {arch}")
    views = dlpack_views(tensors)
    stream = driver.CUstream(torch.cuda.current_stream(tensors[0].device).cuda_stream)
    compiled = compiled_for(name, key, make, views, stream, arch)
    compiled(*views, stream)

"""The library's kernel modules and the Triton kernels they define, for the tests that read them all."""

import importlib
import pkgutil

import hoid.kernels.library as library
from hoid.kernels.library._triton_compile import TritonKernel


def library_modules():
    """(module name, module) of every module of `hoid.kernels.library`, in name order."""
    for info in sorted(pkgutil.iter_modules(library.__path__), key=lambda i: i.name):
        yield info.name, importlib.import_module(f"{library.__name__}.{info.name}")


def triton_kernels() -> dict[str, TritonKernel]:
    """"module.kernel" -> every `@triton_kernel` of the library."""
    return {f"{name}.{k.name}": k for name, module in library_modules()
            for k in vars(module).values() if isinstance(k, TritonKernel)}

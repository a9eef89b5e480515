"""The kernel registry: `register(spec)` is the one entry point, for built-ins and users alike.

The library (`hoid.kernels.library`) registers itself on the first lookup, so importing `hoid.kernels`
stays cheap and never imports Triton or CuTe DSL.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import TensorType
from .spec import KernelSpec

_KERNELS: dict[str, KernelSpec] = {}
_LIBRARY: dict[str, KernelSpec] = {}  # the built-in library as it registered itself (KernelSet.default)


def register(spec: KernelSpec, *, replace: bool = False) -> KernelSpec:
    """Add a kernel; refuses to replace one of the same id unless `replace=True`. Returns `spec`."""
    _load_library()  # the library first: else its own register of an id a user replaced would fail
    if spec.id in _KERNELS and not replace:
        raise ValueError(f"kernel {spec.id!r} is already registered; pass replace=True to override it")
    _KERNELS[spec.id] = spec
    return spec


def register_library(spec: KernelSpec) -> KernelSpec:
    """How the built-in library (`hoid/kernels/library/__init__.py`) registers its kernels: as `register`,
    and recorded as the library's, which `KernelSet.default()` is made of."""
    register(spec)
    _LIBRARY[spec.id] = spec
    return spec


def get(kernel_id: str) -> KernelSpec:
    """The registered kernel `kernel_id`; an unknown id raises `KeyError` listing the registered ones."""
    _load_library()
    try:
        return _KERNELS[kernel_id]
    except KeyError:
        known = ", ".join(sorted(_KERNELS)) or "none"
        raise KeyError(f"no kernel {kernel_id!r}; registered: {known}") from None


def all_kernels() -> dict[str, KernelSpec]:
    """Every registered kernel, by id: the library's and any registered since."""
    _load_library()
    return dict(_KERNELS)


def library_kernels() -> dict[str, KernelSpec]:
    """The built-in library's kernels, whatever has been registered since."""
    _load_library()
    return dict(_LIBRARY)


def kernels_for(pattern_name: str) -> list[KernelSpec]:
    """Every registered kernel implementing the pattern (or op) of that name."""
    return [k for k in all_kernels().values() if k.pattern.name == pattern_name]


def applicable(pattern_name: str, types: Sequence[TensorType], attrs: dict) -> list[KernelSpec]:
    """The kernels of that pattern whose constraints hold for these input types and attrs (the torch
    vendor kernel among them wherever torch runs the op)."""
    return [k for k in kernels_for(pattern_name) if k.rejects(types, attrs) is None]


_loaded = False
_loading = False


def _load_library() -> None:
    global _loaded, _loading
    if _loaded or _loading:  # _loading: the library's own register calls, while it imports
        return
    _loading = True
    try:
        from . import library  # noqa: F401  (registers the built-in kernels)

        _loaded = True  # only once the whole library registered: a failed import fails every lookup
    finally:
        _loading = False

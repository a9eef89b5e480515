"""The kernel registry: `register(spec)` is the one entry point, for built-ins and users alike."""

from __future__ import annotations

from .spec import KernelSpec

_KERNELS: dict[str, KernelSpec] = {}


def register(spec: KernelSpec, *, replace: bool = False) -> KernelSpec:
    if spec.id in _KERNELS and not replace:
        raise ValueError(f"kernel {spec.id!r} is already registered; pass replace=True to override it")
    _KERNELS[spec.id] = spec
    return spec


def get(kernel_id: str) -> KernelSpec:
    _load_library()
    try:
        return _KERNELS[kernel_id]
    except KeyError:
        known = ", ".join(sorted(_KERNELS)) or "none"
        raise KeyError(f"no kernel {kernel_id!r}; registered: {known}") from None


def all_kernels() -> dict[str, KernelSpec]:
    _load_library()
    return dict(_KERNELS)


def kernels_for(pattern_name: str) -> list[KernelSpec]:
    """Every registered kernel implementing the pattern (or op) of that name."""
    return [k for k in all_kernels().values() if k.pattern.name == pattern_name]


_loaded = False


def _load_library() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from . import library  # noqa: F401  (registers the built-in kernels)

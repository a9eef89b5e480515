"""The kernel registry: one public `register`, lookups that name what exists, applicability by types."""

import pytest

from hoid.ir import TensorType
from hoid.kernels import KernelSpec, all_kernels, applicable, get, kernels_for, op_pattern, register, registry


@pytest.fixture
def isolated(monkeypatch):
    """A registry copy, so that kernels registered by a test do not outlive it."""
    all_kernels()  # the library first, as a user's process would have it
    monkeypatch.setattr(registry, "_KERNELS", dict(registry._KERNELS))


def user_relu(x, out):
    """out <- relu(x)."""
    out.copy_(x.clamp_min(0))


def relu_spec(kernel_id="user.relu"):
    return KernelSpec(id=kernel_id, pattern=op_pattern("relu"), backend="torch", launch=user_relu)


def test_users_register_through_the_same_entry_point(isolated):
    spec = register(relu_spec())
    assert get("user.relu") is spec and spec in kernels_for("relu")
    with pytest.raises(ValueError, match="already registered; pass replace=True"):
        register(relu_spec())
    again = register(relu_spec(), replace=True)
    assert get("user.relu") is again


def test_unknown_kernel_lists_the_registered_ones():
    with pytest.raises(KeyError, match="no kernel 'torch.nope'; registered: .*torch.matmul"):
        get("torch.nope")


def test_applicable_filters_by_constraints_and_always_keeps_the_vendor_fallback():
    x, w = TensorType((4, 4096), "bf16"), TensorType((4096,), "bf16")
    ids = {k.id for k in applicable("rmsnorm", [x, w], {"eps": 1e-6})}
    assert "torch.rmsnorm" in ids
    assert {k.id for k in kernels_for("rmsnorm")} >= ids
    strided = TensorType((4, 4096), "bf16", strides=(1, 4))
    assert "triton.rmsnorm" not in {k.id for k in applicable("rmsnorm", [strided, w], {"eps": 1e-6})}
    ints = [TensorType((2, 3), "i64"), TensorType((3, 2), "i64")]
    assert applicable("matmul", ints, {}) == []


def test_a_user_kernel_registered_before_the_first_lookup_replaces_the_library_one(monkeypatch):
    """register before any lookup loads the library first: the user's replacement wins, lookups work."""
    import sys

    import hoid.kernels

    # A fresh process: the library not yet imported, the registry empty. Afterwards, exactly the state
    # before: the modules this test imports again hold launches of their own, and a later lookup (or
    # KernelSet.default()) must not mix them with the modules before it (hoid.export refuses a launch its
    # module does not define: CI failed so, in a later test on the same worker).
    library = {n: m for n, m in sys.modules.items() if n.startswith("hoid.kernels.library")}
    monkeypatch.setattr(registry, "_KERNELS", {})
    monkeypatch.setattr(registry, "_LIBRARY", {})
    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.delattr(hoid.kernels, "library", raising=False)
    for name in library:
        del sys.modules[name]
    try:
        mine = register(relu_spec("torch.matmul"), replace=True)
        assert get("torch.matmul") is mine
        assert get("torch.rmsnorm").id == "torch.rmsnorm"
    finally:
        for name in [n for n in sys.modules if n.startswith("hoid.kernels.library")]:
            del sys.modules[name]
        sys.modules.update(library)
        if "hoid.kernels.library" in library:  # `from . import library` reads the attribute first
            hoid.kernels.library = library["hoid.kernels.library"]
        elif hasattr(hoid.kernels, "library"):
            del hoid.kernels.library


def test_every_triton_and_cute_launch_is_a_top_level_function_of_its_module():
    """`hoid.export` copies a Triton or CuTe kernel's module and calls its launch by name (a torch vendor kernel
    it traces instead): a launch built by a closure (the group norm's first draft) exported nothing
    (ExportError at the first package that held it)."""
    import importlib

    from hoid.kernels.registry import library_kernels

    for spec in (s for s in library_kernels().values() if s.backend != "torch"):
        module = importlib.import_module(spec.launch.__module__)
        assert getattr(module, spec.launch.__name__, None) is spec.launch, spec.id

"""Loading kernel source: checked without running, versioned, and turned into a spec that runs on demand."""

import hashlib
import os
import sys
import tempfile
import textwrap

import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels import op_pattern
from hoid.kernels.loader import KernelSource, KernelSourceError, load_entry

SILU = textwrap.dedent('''
    """silu into a caller's buffer."""
    import torch
    import torch.nn.functional as F

    PARAMS = {"chunks": (1, 2, 4)}
    NOTE = "declared"


    def launch(x: torch.Tensor, out: torch.Tensor, *, chunks: int = 1) -> None:
        for xs, os_ in zip(x.chunk(chunks), out.chunk(chunks)):
            torch.mul(F.sigmoid(xs), xs, out=os_)
''')

TRITON = textwrap.dedent('''
    import triton
    import triton.language as tl


    @triton.jit
    def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


    def launch(x, out):
        double[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
''')


def test_source_is_versioned_and_read_without_running():
    src = KernelSource(SILU)
    assert src.version == hashlib.sha256(SILU.encode()).hexdigest()[:12]
    assert src.backend == "torch" and src.entry == "launch" and src.path is None
    assert src.constants == {"PARAMS": {"chunks": (1, 2, 4)}, "NOTE": "declared"}
    assert [(p.name, p.choices, p.default) for p in src.declared_params()] == [("chunks", (1, 2, 4), 1)]


def test_backend_comes_from_the_imports():
    assert KernelSource(TRITON).backend == "triton"
    assert KernelSource("import cutlass.cute as cute\n\ndef launch(x, out):\n    pass\n").backend == "cute"


def test_from_file_keeps_the_path_and_refuses_a_missing_file(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(SILU)
    src = KernelSource.from_file(path)
    assert src.path == str(path) and src.text == SILU
    with pytest.raises(FileNotFoundError, match="no kernel source file"):
        KernelSource.from_file(tmp_path / "absent.py")


def test_load_entry_runs_the_source_as_its_own_module(tmp_path):
    entry = load_entry(KernelSource(SILU))
    x = torch.randn(8, 4)
    out = torch.full_like(x, float("nan"))
    entry(x, out, chunks=2)
    torch.testing.assert_close(out, torch.nn.functional.silu(x))
    assert entry.__module__.startswith("hoid_kernel_")


def test_to_spec_defers_the_import_until_the_first_launch():
    src = KernelSource(SILU.replace("declared", "deferred"))  # a version no other test imported
    spec = src.to_spec("agent.silu", op_pattern("silu"), doc="an agent's silu")
    assert spec.version == src.version and spec.backend == "torch"
    assert spec.check_params({}) == {"chunks": 1}
    assert not any(src.version in name for name in sys.modules)  # nothing ran yet
    x = torch.randn(6)
    out = torch.empty_like(x)
    spec.launch(x, out, **spec.check_params({"chunks": 2}))
    torch.testing.assert_close(out, torch.nn.functional.silu(x))
    assert any(src.version in name for name in sys.modules)
    assert spec.output_types([TensorType((6,), "f32")], {}) == (TensorType((6,), "f32"),)


def test_malformed_params_declaration_is_refused_with_an_example():
    src = KernelSource("PARAMS = {'BLOCK': 64}\n\ndef launch(x, out):\n    pass\n")
    with pytest.raises(KernelSourceError, match=r'PARAMS = \{"BLOCK": \(64, 128, 256\)\}'):
        src.declared_params()


def test_what_runs_is_the_text_that_was_checked_not_the_file_now(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(SILU.replace("declared", "checked text"))
    src = KernelSource.from_file(path)
    path.write_text("import os\nos.system('echo swapped')\n")  # swapped after the check
    x = torch.randn(5)
    out = torch.empty_like(x)
    load_entry(src)(x, out)
    torch.testing.assert_close(out, torch.nn.functional.silu(x))


def test_a_failing_import_leaves_nothing_behind():
    src = KernelSource("import torch\n\ndef launch(x, out):\n    pass\n\nBROKEN = torch.no_such_attribute\n")
    for _ in range(2):  # the second load runs the module again rather than finding a half-built one
        with pytest.raises(AttributeError, match="no_such_attribute"):
            load_entry(src)
    assert f"hoid_kernel_{src.version}" not in sys.modules


def test_a_tampered_kernel_file_is_rewritten_not_imported(tmp_path, monkeypatch):
    """The materialized file may have been changed since (by anyone who can write there): what is
    imported is still exactly the checked text, from a folder of this user's alone."""
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    src = KernelSource(SILU.replace("declared", "tampered later"))
    load_entry(src)
    (path,) = tmp_path.glob(f"hoid_kernels*/kernel_{src.version}.py")
    if hasattr(os, "getuid"):
        assert path.parent.name == f"hoid_kernels_{os.getuid()}" and path.parent.stat().st_mode & 0o777 == 0o700
    path.write_text("def launch(x, out, chunks=1):\n    out.fill_(0)\n")
    monkeypatch.delitem(sys.modules, f"hoid_kernel_{src.version}")  # as a fresh process would import it
    x = torch.randn(5) + 3
    out = torch.empty_like(x)
    load_entry(src)(x, out)
    torch.testing.assert_close(out, torch.nn.functional.silu(x))
    assert path.read_text() == src.text

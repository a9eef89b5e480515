"""No library Triton kernel calls a tensor method on one of its scalar arguments.

A scalar argument is a tensor only while Triton keeps it a run-time value: Triton specializes an integer
equal to 1 into a constant, and torch.compile's analysis of which tensors a kernel writes traces it with
its integers as constants. There `n_out.to(tl.int64)` is `int.to`: on the H200 the analysis failed on the
GEMV, and torch assumed the kernel writes every input (its weights too) in the exported package.
`tl.cast(n_out, tl.int64)` takes either."""

import ast
import inspect

import pytest

from .modules import triton_kernels


def _scalar_params(fn: ast.FunctionDef) -> set[str]:
    """Arguments that are neither pointers (named `*_ptr`, the library's convention) nor `tl.constexpr`."""
    return {a.arg for a in fn.args.args if a.annotation is None and not a.arg.endswith("_ptr")}


def _tensor_methods_on(fn: ast.FunctionDef, names: set[str]) -> list[str]:
    return [f"{node.func.value.id}.{node.func.attr}(...) at line {node.lineno}" for node in ast.walk(fn)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id in names]


KERNELS = [kernel for _, kernel in sorted(triton_kernels().items())]


def test_the_library_has_triton_kernels_to_check():
    assert len(KERNELS) >= 14, [k.name for k in KERNELS]


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: f"{k.fn.__module__.rsplit('.', 1)[1]}.{k.name}")
def test_no_tensor_method_on_a_scalar_argument(kernel):
    tree = ast.parse(inspect.getsource(kernel.fn).lstrip())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    calls = _tensor_methods_on(fn, _scalar_params(fn))
    assert not calls, (f"{kernel.name}: {calls}: a scalar argument is a Python int where Triton or torch.compile "
                       f"specializes it; write tl.cast(x, tl.int64), not x.to(tl.int64)")


def test_the_check_finds_the_h200_failure():
    """The check itself, on the line that failed on the H200."""
    src = "def k(w_ptr, n_out, K, BLOCK: tl.constexpr):\n    o = n_out.to(tl.int64) * K\n"
    fn = ast.parse(src).body[0]
    assert _scalar_params(fn) == {"n_out", "K"}
    assert _tensor_methods_on(fn, _scalar_params(fn)) == ["n_out.to(...) at line 2"]

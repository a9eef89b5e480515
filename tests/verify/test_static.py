"""The static pass: what it refuses, what it lets through, and what it reads of a callable."""

import pytest

from hoid.verify.static import callable_sources, scan

REFUSED = [
    ("try:\n    pass\nexcept Exception:\n    pass\n", "try/except"),
    ("import contextlib\nwith contextlib.suppress(Exception):\n    pass\n", "contextlib.suppress"),
    ("from concurrent.futures import ThreadPoolExecutor\n", "import concurrent.futures"),
    ("import torch\ns = torch.cuda.Stream()\n", ".Stream"),
    ("import torch\nwith torch.cuda.stream(s):\n    pass\n", ".stream"),
    ("import torch\ntorch.cuda.synchronize = print\n", "assignment to torch.cuda.synchronize"),
    ("import torch as t\nsetattr(t, 'allclose', print)\n", "setattr()"),
    ("import hoid.verify.compare as c\nc.compare_output = print\n", "assignment to c.compare_output"),
    ("import sys\nf = sys._getframe()\n", "._getframe"),
    ("def f(g):\n    return g.gi_frame.f_back\n", ".f_back"),
    ("x = globals()['reference']\n", "globals()"),
    ("exec('print(1)')\n", "exec()"),
    ("import importlib\n", "import importlib"),
    ("y = __builtins__\n", "__builtins__"),
    ("def f(fn):\n    return fn.__globals__\n", ".__globals__"),
]


@pytest.mark.parametrize("source, construct", REFUSED, ids=[c for _, c in REFUSED])
def test_refused_constructs_are_found_with_their_line(source, construct):
    findings = scan(source)
    assert any(f.construct == construct for f in findings), findings
    assert all(f.line >= 1 for f in findings)


def test_honest_kernel_code_passes():
    source = '''
import torch
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

def launch(x, out):
    out[...] = 0
    k[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
    try:
        pass
    finally:
        pass
'''
    assert scan(source) == []


def _helper_with_fallback(x):
    try:
        return x + 1
    except RuntimeError:
        return x


def _entry(x):
    return _helper_with_fallback(x) * 2


def test_callables_are_read_with_the_functions_of_their_module_they_call():
    sources, unreadable = callable_sources(_entry)
    names = [name.rsplit(".", 1)[-1] for name, _ in sources]
    assert names == ["_entry", "_helper_with_fallback"] and unreadable == []
    assert any(f.construct == "try/except" for _, text in sources for f in scan(text))


def test_unreadable_callables_are_reported_not_ignored():
    sources, unreadable = callable_sources(len)
    assert sources == [] and unreadable == ["len"]

"""Building generated kernels for sm_90 and sm_100 without a GPU.

Generated source is a module of its own (not importable by name), and Triton fixes interpreter-or-compiler
at its first import, so builds run in one helper process without the interpreter, which loads each
source from the file `hoid.kernels.loader` wrote for it (exactly the checked text) and compiles its
`@triton.jit` kernel with the library's build (`compile_for`'s: aligned pointers, down to a cubin). The
helper is started once and serves every later build, one JSON request a line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import traceback
from dataclasses import asdict

from ..library._triton_compile import ARCHS, BuiltKernel, pointer_type
from ..loader import KernelSource, _materialize

_ANSWER = "hoid-codegen-build:"


class _Server:
    _instance: _Server | None = None

    @classmethod
    def get(cls) -> _Server:
        if cls._instance is None or cls._instance.proc.poll() is not None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        env = {**os.environ, "TRITON_INTERPRET": "0"}
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def build(self, request: list) -> BuiltKernel:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(_ANSWER):
                answer = json.loads(line[len(_ANSWER):])
                if "error" in answer:
                    raise RuntimeError(f"building generated kernel {request[1]} for {request[2]} failed:\n"
                                       f"{answer['error']}")
                return BuiltKernel(**answer)
        raise RuntimeError("the build process died (its stderr is above)")


def build_generated(source: KernelSource, facts: dict, auto: dict, arch: str) -> BuiltKernel:
    """Build the generated kernel of `source` for `arch` at its "auto" block sizes; raises on failure."""
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; generated kernels build for {', '.join(ARCHS)}")
    signature = {a: pointer_type(d) for a, d in zip(facts["args"], facts["dtypes"], strict=True)}
    constexprs = {"BLOCK_M": auto["block_m"], "BLOCK_N": auto["block_n"]}
    request = [_materialize(source), facts["kernel"], arch, signature, constexprs, auto["num_warps"]]
    return _Server.get().build(request)


class _Kernel:
    """What the library's `_build` reads of a kernel: its jit function and name."""

    def __init__(self, jit, name: str):
        self.impl, self.name = jit, name


def _serve() -> None:
    from ..library._triton_compile import _build

    for line in sys.stdin:
        path, name, arch, signature, constexprs, num_warps = json.loads(line)
        try:
            spec = importlib.util.spec_from_file_location(f"hoid_build_{abs(hash(path))}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            built = _build(_Kernel(getattr(module, name), name), arch, signature, constexprs, num_warps, 3)
            answer = asdict(built)
        except Exception:  # the whole trace goes back to the caller, which raises it
            answer = {"error": traceback.format_exc()}
        print(_ANSWER + json.dumps(answer), flush=True)


if __name__ == "__main__":
    _serve()

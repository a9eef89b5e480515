"""Every example kernel of examples/kernels builds for the H200 (sm_90) and the B200 (sm_100) without a GPU, at
the decode shapes it is written for: a kernel that the interpreter runs may still fail to compile, and its
GPU run would then be a rejection instead of a measurement. Built in a process without Triton's interpreter
(this one may have it on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytestmark = pytest.mark.slow  # a process and two builds per kernel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernels"
B = "*bf16"
GATE_UP = ("_norm_gate_up_silu", {"h_ptr": B, "nw_ptr": B, "wg_ptr": B, "wu_ptr": B, "out_ptr": B, "N": "i32",
                                  "K": "i32", "s_g": "i32", "s_u": "i32", "eps": "fp32"},
           {"BLOCK_N": 16, "BLOCK_K": 256})
# folder -> (the @triton.jit function, its signature as the launch passes it, the launch's constexprs at Qwen3-1.7B)
KERNELS = {
    "qkv_norm_rope_cache": ("_qkv_prelude", {
        "wq_ptr": B, "x_ptr": B, "wk_ptr": B, "wv_ptr": B, "qn_ptr": B, "kn_ptr": B, "cos_ptr": B, "sin_ptr": B,
        "pos_ptr": "*i64", "q_out_ptr": B, "kc_ptr": B, "vc_ptr": B, "ws_ptr": "*fp32", "cnt_ptr": "*i32",
        "K": "i32", "S": "i32", "eps": "fp32"}, {"HQ": 16, "HKV": 8, "HALF": 64, "SPLIT_K": 8, "BLOCK_K": 64}),
    "oproj_residual_rmsnorm": ("_oproj_residual_norm", {
        "w_ptr": B, "a_ptr": B, "x_ptr": B, "nw_ptr": B, "h_ptr": B, "n_ptr": B, "ws_ptr": "*fp32", "cnt_ptr": "*i32",
        "N": "i32", "K": "i32", "s_w": "i32", "eps": "fp32"}, {"BLOCK_N": 16, "BLOCK_K": 256, "BLOCK_TAIL": 1024}),
    "rmsnorm_gate_up_silu": GATE_UP,
    "slow_rmsnorm_gate_up_silu": (GATE_UP[0], GATE_UP[1], {"BLOCK_N": 512, "BLOCK_K": 64}),
    "wrong_rmsnorm_gate_up_silu": GATE_UP,
}

BUILD = r"""
import importlib.util, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

path, fn, signature, constexprs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
spec = importlib.util.spec_from_file_location("example_kernel", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
src = ASTSource(fn=getattr(module, fn), signature={**signature, **dict.fromkeys(constexprs, "constexpr")},
                constexprs=constexprs)
for arch in (90, 100):
    built = triton.compile(src, target=GPUTarget("cuda", arch, 32))
    print(arch, len(built.asm["ptx"]))
"""


def test_every_example_kernel_is_covered():
    assert set(KERNELS) == {p.name for p in EXAMPLES.iterdir() if (p / "kernel.py").is_file()}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_example_kernel_builds_for_sm90_and_sm100(name):
    fn, signature, constexprs = KERNELS[name]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", BUILD, str(EXAMPLES / name / "kernel.py"), fn,
                           json.dumps(signature), json.dumps(constexprs)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    built = dict(line.split() for line in done.stdout.splitlines())
    assert set(built) == {"90", "100"} and all(int(n) > 1000 for n in built.values())

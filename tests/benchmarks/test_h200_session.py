"""benchmarks/h200_session.sh's decode slices: the argv each hands to decode.py (a stand-in python3 on PATH
prints it; nothing runs)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "h200_session.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and coreutils' timeout")


def decode_argv(tmp_path, slice_, **env) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "python3"
    stub.write_text('#!/bin/sh\n[ "$1" = "-c" ] && exit 0\necho "ARGV $*"\n')  # `-c "import egglog"`: found
    stub.chmod(0o755)
    run_env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"), **env}
    done = subprocess.run(["bash", str(SCRIPT), "decode", slice_], cwd=ROOT, env=run_env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("ARGV "))
    return line.split()[1:]


def test_hoid_compile_runs_cold_and_warm_unless_cold_alone_is_asked(tmp_path):
    both = decode_argv(tmp_path, "hoid-compile", MODEL="llama-3.1-8b", BUDGET="4m")
    assert both[:2] == ["benchmarks/decode.py", "llama-3.1-8b"]
    assert "--no-warm" not in both and both[both.index("--optimize-budget") + 1] == "4m"
    assert both[both.index("--rows") + 1] == "hoid-compile" and "--no-write-reference" in both
    cold = decode_argv(tmp_path, "hoid-compile", MODEL="llama-3.1-8b", COLD="1")
    assert "--no-warm" in cold and cold[cold.index("--optimize-budget") + 1] == "2m"


def test_a_stock_slice_writes_the_reference_cells_a_hoid_slice_does_not(tmp_path):
    stock = decode_argv(tmp_path, "fast-b")
    assert "--no-write-reference" not in stock and stock[stock.index("--rows") + 1] == "fast-max-autotune-cd"
    assert "--gate-stock" in stock


def test_gemm_runs_the_gemm_tests_under_a_timeout_then_its_table_and_anatomy_into_out(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "python3"
    stub.write_text('#!/bin/sh\n[ "$1" = "-c" ] && exit 0\necho "ARGV $*"\n')  # `-c "import cutlass"`: found
    stub.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out)}
    done = subprocess.run(["bash", str(SCRIPT), "gemm"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    calls = [ln.split()[1:] for ln in done.stdout.splitlines() if ln.startswith("ARGV ")]
    assert [c[:3] for c in calls] == [["-m", "pytest", "-m"], ["benchmarks/kernels_cute.py", "--parts", "prefill"],
                                      ["benchmarks/cute_gemm_anatomy.py", "--out", str(out)]]
    assert calls[0][-3:] == ["tests/kernels/library/test_cute_gpu.py", "-k", "gemm"] and "--tune" in calls[1]
    assert (out / "cute_gemm_gpu_tests.txt").is_file()  # the tests' output comes back even when they fail
    # the table runs over the committed one, so the decode and model rows it does not rerun come back with it
    assert (out / "kernels_cute.json").read_bytes() == (ROOT / "benchmarks/results/kernels_cute.json").read_bytes()
    # without CuTe DSL, one clear error before anything runs
    stub.write_text('#!/bin/sh\n[ "$1" = "-c" ] && exit 1\necho "ARGV $*"\n')
    refused = subprocess.run(["bash", str(SCRIPT), "gemm"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode == 1 and "cute-only, then cute-b && gemm" in refused.stderr
    assert "ARGV" not in refused.stdout

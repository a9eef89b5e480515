"""`benchmarks/workload_whisper.py` end to end on the CPU (the tiny model): both parts run, the rows that need
CUDA say so, hoid's rows are gated against eager bf16, and the JSON holds what the README table needs."""

import json

import pytest

from .helpers import run_main

pytest.importorskip("transformers")



@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whisper")
    argv = ["--tiny", "--device", "cpu", "--new", "4", "--repeats", "2", "--warmup", "1", "--out", str(tmp / "out")]
    code, stdout = run_main("workload_whisper", argv, {"HOID_CACHE": str(tmp / "cache.sqlite")})
    assert code == 0, stdout[-3000:]
    return json.loads((tmp / "out" / "workload-whisper-large-v3-tiny.json").read_text()), stdout


@pytest.mark.slow
def test_both_parts_run_every_row_or_say_they_need_cuda(smoke):
    result, stdout = smoke
    assert result["complete"] and result["benchmark"] == "workload-whisper" and result["dtype"] == "bf16"
    for part in ("encoder", "decode"):
        rows = {r["key"]: r for r in result["parts"][part]["rows"]}
        assert list(rows) == ["eager", "compile-reduce-overhead", "compile-max-autotune", "compile-max-autotune-cd",
                              "hoid", "hoid-export"]
        for key in ("compile-reduce-overhead", "compile-max-autotune", "compile-max-autotune-cd"):
            assert rows[key]["status"] == "skipped" and rows[key]["reason"].startswith("needs CUDA")
        for key in ("eager", "hoid"):
            assert rows[key]["status"] == "ok" and rows[key]["latency_s"] > 0
        assert rows["hoid"]["plan_s"] > 0 and rows["hoid"]["nodes"] > 0
        exported = rows["hoid-export"]  # the hoid row's plan as a package, plain PyTorch, gated as any row
        assert exported["status"] == "ok" and exported["kernels"] == rows["hoid"]["kernels"]
        assert exported["gate"]["passed"] and not exported["failed"]
        summary = result["parts"][part]
        assert summary["best_stock"]["key"] == "eager"
        assert summary["hoid_speedup"] == pytest.approx(rows["eager"]["latency_s"] / rows["hoid"]["latency_s"])
    assert "| decode | hoid vs best stock (eager) |" in stdout
    # the encoder's rows log their phases: a GPU call cut at its limit says in its log where the time went
    assert "hoid-export: build ..." in stdout and "hoid_whisper_encoder: export and import the package:" in stdout


@pytest.mark.slow
def test_hoid_is_gated_against_eager_bf16(smoke):
    result, _ = smoke
    encoder = {r["key"]: r for r in result["parts"]["encoder"]["rows"]}
    gate = encoder["hoid"]["gate"]
    # the eager bf16 error against the float32 reference is real (bf16 rounding), and the bound is 1.5x it
    assert 1e-4 < gate["eager_relative_l2"] < 0.1
    assert gate["bound"] == pytest.approx(1.5 * gate["eager_relative_l2"])
    assert gate["passed"] == (gate["relative_l2"] <= gate["bound"]) and encoder["hoid"]["failed"] is not gate["passed"]
    decode = {r["key"]: r for r in result["parts"]["decode"]["rows"]}
    baseline = decode["eager"]["gate_baseline"]
    assert baseline["samples"] == 4 and 1e-4 < baseline["median"] <= baseline["p99"]
    verdict = decode["hoid"]["gate"]
    assert verdict["baseline"] == baseline and verdict["candidate"]["samples"] == 4
    assert decode["hoid"]["failed"] is (not verdict["passed"])

"""`benchmarks/workload_sdxl.py` end to end on the CPU (the tiny UNet and VAE): each part's rows run or say they
need CUDA, hoid's rows are gated against the float32 reference by eager bf16's errors, and the JSON holds the
figures. A slice of the rows (eager, one CUDA-only row, both hoid rows) keeps it near a minute and a half."""

import json

import pytest

from .helpers import run_main

pytest.importorskip("diffusers")

ROWS = ["eager", "compile-max-autotune", "hoid", "hoid-export"]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sdxl")
    argv = ["--tiny", "--device", "cpu", "--repeat", "2", "--rows", ",".join(ROWS), "--out", str(tmp / "out")]
    code, stdout = run_main("workload_sdxl", argv, {"HOID_CACHE": str(tmp / "cache.sqlite")})
    assert code == 0, stdout[-3000:]
    suffix = "_".join(ROWS)
    return {part: json.loads((tmp / "out" / f"workload-sdxl-{part}-tiny-{suffix}.json").read_text())
            for part in ("unet", "vae")}, stdout


@pytest.mark.slow
def test_both_parts_run_every_row_or_say_they_need_cuda(smoke):
    results, stdout = smoke
    unet, vae = results["unet"], results["vae"]
    assert unet["shape"]["batch"] == 2 and unet["shape"]["inputs"]["input_0"] == [2, 4, 16, 16]
    assert vae["shape"]["image"] == [64, 64] and vae["shape"]["inputs"]["input_0"] == [1, 4, 8, 8]
    for part, convs in (("unet", 25), ("vae", 27)):
        result = results[part]
        assert result["complete"] and result["dtype"] == "bf16"
        rows = {r["key"]: r for r in result["rows"]}
        assert list(rows) == ROWS
        assert rows["compile-max-autotune"]["status"] == "skipped" and "CUDA" in rows["compile-max-autotune"]["reason"]
        for key in ("eager", "hoid", "hoid-export"):
            assert rows[key]["status"] == "ok", rows[key]
            assert rows[key]["latency_s"] > 0 and rows[key]["speedup_vs_best_stock"] > 0
        assert result["best_stock"]["key"] == "eager"
        hoid_row = rows["hoid"]
        assert hoid_row["nodes"] > 0 and hoid_row["fallbacks"] == {}
        assert "saturated after" in hoid_row["search"]  # every rule set, layout's merges too, within its limits
        assert rows["hoid-export"]["kernels"] == hoid_row["kernels"]  # the same graph, packaged
        assert hoid_row["ops"]["conv"] == convs  # imported as single nodes
    assert "gate ok" in stdout


@pytest.mark.slow
def test_rows_are_gated_against_the_float32_reference_by_eager_bf16(smoke):
    results, _ = smoke
    for part, images in (("unet", 2), ("vae", 1)):
        rows = {r["key"]: r for r in results[part]["rows"]}
        baseline = results[part]["gate_baseline"]
        assert baseline == rows["eager"]["errors"] and baseline["samples"] == images
        assert 1e-4 < baseline["median"] < 0.05  # bf16 rounding: visible, small
        for key in ("hoid", "hoid-export"):
            row = rows[key]
            assert row["gate"]["baseline"] == baseline and row["failed"] is not row["gate"]["passed"]
            assert row["gate"]["passed"] == (row["errors"]["median"] <= 1.5 * baseline["median"]
                                             and row["errors"]["p99"] <= 1.5 * baseline["p99"])

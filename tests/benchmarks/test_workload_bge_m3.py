"""`benchmarks/workload_bge_m3.py` end to end on the CPU (bge-m3-tiny): every row runs or says it needs CUDA,
the rows are gated against the float32 reference by eager bf16's errors, and the JSON holds the figures."""

import json

import pytest

from .helpers import run_main

pytest.importorskip("transformers")

CUDA_ONLY = {"compile-reduce-overhead", "compile-max-autotune", "compile-max-autotune-cd"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bge")
    argv = ["--tiny", "--device", "cpu", "--repeat", "3", "--out", str(tmp / "out")]
    code, stdout = run_main("workload_bge_m3", argv, {"HOID_CACHE": str(tmp / "cache.sqlite")})
    assert code == 0, stdout[-3000:]
    return json.loads((tmp / "out" / "workload-bge-m3-tiny.json").read_text()), stdout


@pytest.mark.slow
def test_every_row_runs_or_says_it_needs_cuda(smoke):
    result, stdout = smoke
    import workload_bge_m3

    assert result["complete"] and result["shape"]["batch"] == 4 and result["shape"]["tokens"] == 64
    assert 0 < result["shape"]["padded_tokens"] < 4 * 64  # the batch is padded: the mask matters
    rows = {r["key"]: r for r in result["rows"]}
    assert list(rows) == list(workload_bge_m3.ROWS)
    for key, row in rows.items():
        if key in CUDA_ONLY:
            assert row["status"] == "skipped" and "CUDA" in row["reason"], row
        else:
            assert row["status"] == "ok", row
            assert row["latency_s"] > 0 and row["tokens_per_s"] > 0 and row["speedup_vs_best_stock"] > 0
    assert result["best_stock"]["key"] in ("eager", "compile-default")
    assert "hoid" in stdout and "gate ok" in stdout


@pytest.mark.slow
def test_rows_are_gated_against_the_float32_reference_by_eager_bf16(smoke):
    result, _ = smoke
    rows = {r["key"]: r for r in result["rows"]}
    baseline = result["gate_baseline"]
    assert baseline == rows["eager"]["errors"] and baseline["samples"] == 4
    assert 0 < baseline["median"] < 0.05  # bf16 rounding: visible, small
    hoid_row = rows["hoid"]
    assert hoid_row["gate"]["passed"] and not hoid_row["failed"]
    assert hoid_row["gate"]["baseline"] == baseline and hoid_row["errors"]["median"] <= 1.5 * baseline["median"]
    assert hoid_row["nodes"] > 0 and hoid_row["fallbacks"] == {}
    assert {"import_s", "plan_s", "compile_s"} <= set(hoid_row) and hoid_row["plan"] == "hoid.search (cpu)"
    exported = rows["hoid-export"]  # the same plan as a package, plain PyTorch: gated as any row
    assert exported["kernels"] == hoid_row["kernels"] and exported["export_s"] > 0
    assert exported["gate"]["passed"] and not exported["failed"]


@pytest.mark.slow
def test_with_a_budget_hoids_plan_is_hoid_optimizes(tmp_path):
    """Issue 25's hoid rows: `hoid.optimize` with the offline proposers (here the CPU's few seconds), gated as
    the search's plan is, and its plan exported."""
    argv = ["--tiny", "--device", "cpu", "--repeat", "2", "--rows", "eager,hoid,hoid-export",
            "--optimize-budget", "10s", "--out", str(tmp_path / "out")]
    env = {"HOID_CACHE": str(tmp_path / "cache.sqlite"), "HOID_JOURNAL": str(tmp_path / "journal.sqlite"),
           "HOID_KERNELS": str(tmp_path / "kernels")}
    code, stdout = run_main("workload_bge_m3", argv, env)
    assert code == 0, stdout[-3000:]
    result = json.loads((tmp_path / "out" / "workload-bge-m3-tiny-eager_hoid_hoid-export.json").read_text())
    rows = {r["key"]: r for r in result["rows"]}
    ours = rows["hoid"]
    assert ours["plan"].startswith("hoid.optimize (") and "# hoid optimize" in ours["search"]
    assert ours["plan_s"] > 0 and ours["gate"]["passed"] and not ours["failed"]
    # the optimize's journal comes back with the results, and its progress is in the log as it happens
    assert (tmp_path / "out" / "journal-bge-m3-tiny.sqlite").stat().st_size > 0
    assert "optimize embedding: baseline: seconds=" in stdout and "optimize (budget 10s): " in stdout
    # both hoid rows run the one plan: a single optimize, whose kernels the package holds
    assert stdout.count("optimize (budget 10s): ") == 1
    assert rows["hoid-export"]["kernels"] == ours["kernels"] and rows["hoid-export"]["gate"]["passed"]


def test_a_row_with_no_eager_row_beside_it_is_recorded_failed_and_said_not_judged():
    """A hoid-only run (the H100's of 12-05) printed "gate FAILED" for a row no gate had judged."""
    import forward_loop

    row = {"key": "hoid"}
    forward_loop.judge_row(row, stats=object(), baseline=None)
    assert row["failed"] and not row["gate"]["passed"]  # never recorded as passing
    assert forward_loop.gate_word(row) == "  gate not judged (no eager row beside it)"
    assert forward_loop.gate_word({"gate": {"passed": True}, "failed": False}) == "  gate ok"
    assert forward_loop.gate_word({"gate": {"passed": False}, "failed": True}) == "  gate FAILED"
    assert forward_loop.gate_word({}) == ""

"""`benchmarks/decode.py` end to end on the CPU (the tiny model): every row of the lattice runs or says why
not, hoid's rows are gated, the reference rule holds across two runs, and the parallel mode merges slices."""

import json

import pytest

from .helpers import run_main

pytest.importorskip("transformers")

CUDA_ONLY = {"hf-compile-reduce-overhead", "hf-compile-max-autotune", "fast-reduce-overhead", "fast-max-autotune",
             "fast-max-autotune-cd", "fast-cuda-graph"}


def _run(tmp, *argv) -> tuple[int, str]:
    """(exit code, stdout) of decode.py on the tiny model, 8 new tokens (cache >= 16: hoid's region discovery
    draws positions below 16 whatever the cache, hoid.measure.inputs.random_tensor), run in this process."""
    env = {"TRITON_INTERPRET": "1", "HOID_CACHE": str(tmp / "cache.sqlite"),
           "HOID_KERNELS": str(tmp / "kernels.sqlite"), "HOID_JOURNAL": str(tmp / "journal.sqlite")}
    return run_main("decode", ["qwen3-1.7b", "--tiny", "--device", "cpu", "--new", "8", "--warmup", "1", "--out",
                               str(tmp / "out"), *argv], env)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("decode")
    code, stdout = _run(tmp, "--prompt", "8", "--batch", "2", "--optimize-budget", "0 attempts", "--agent", "library",
                        "--gate-samples", "17")  # batch 2 x 8 new tokens: 16 a sequence, so two sequences
    assert code == 0, stdout[-3000:]
    path = tmp / "out" / "decode-qwen3-1.7b-tiny-p8-b2-n8.json"
    return tmp, json.loads(path.read_text()), stdout


@pytest.mark.slow
def test_every_row_runs_or_says_it_needs_cuda(smoke):
    _, result, _ = smoke
    assert result["format"] == 2 and result["complete"] and result["bandwidth_bytes_per_s"] > 0
    [cell] = result["cells"]
    rows = {r["key"]: r for r in cell["rows"]}
    import decode_hoid
    import decode_stock

    assert list(rows) == list(decode_stock.ROWS) + list(decode_hoid.ROWS)
    for key, row in rows.items():
        if key in CUDA_ONLY:
            assert row["status"] == "skipped" and row["reason"].startswith("needs CUDA"), row
            continue
        assert row["status"] == "ok", row
        assert row["tokens_per_s"] > 0 and row["ttft_s"] > 0 and row["row_s"] > 0
        assert row["roofline_fraction"] == pytest.approx(row["tokens_per_s"] / cell["roofline_tokens_per_s"])
    assert "eager backend" in rows["hf-compile-default"]["compiler"]  # the CPU smoke says what it compiled with
    best = cell["best_stock"]["tokens_per_s"]
    ran = [r for r in cell["rows"] if r["group"] == "stock" and r["status"] == "ok"]
    assert best["value"] == max(r["tokens_per_s"] for r in ran)


@pytest.mark.slow
def test_hoid_rows_are_gated_against_eager(smoke):
    _, result, _ = smoke
    [cell] = result["cells"]
    rows = {r["key"]: r for r in cell["rows"]}
    baseline = rows["hf-eager"]["gate_baseline"]
    assert cell["gate_sequences"] == 2  # ceil(17 / (batch 2 x 8 new tokens))
    assert baseline == cell["gate_baseline"] and baseline["samples"] == 2 * 2 * 8  # sequences x batch x new tokens
    assert 0 < baseline["median"] <= baseline["p99"] and 0 <= baseline["top1"] <= 1
    for key in ("hoid-compile", "hoid-export", "hoid-backend"):
        gate = rows[key]["gate"]
        assert gate["baseline"] == baseline and gate["candidate"]["samples"] == 32 and gate["sequences"] == 2
        assert rows[key]["failed"] is (not gate["passed"])
        assert gate["passed"] == (gate["reasons"] == [])


@pytest.mark.slow
def test_hoid_reports_its_optimization_and_profile(smoke):
    _, result, _ = smoke
    [cell] = result["cells"]
    hoid = next(r for r in cell["rows"] if r["key"] == "hoid-compile")
    opt = hoid["optimize"]
    assert opt["cold"]["seconds"] > 0 and opt["warm"]["seconds"] > 0
    assert opt["cold"]["stop_reason"] == "budget spent: 0 attempts"
    # the rows run the faster run's graph: the warm one only where it beat the cold one
    assert opt["rows_run"] == ("warm" if opt["warm"]["best_s"] < opt["cold"]["best_s"] else "cold")
    assert opt["agents"] == ["library"]  # --agent reaches hoid.optimize
    assert hoid["profile"]["rows"] and hoid["profile"]["step_s"] > 0
    for prof in (hoid["profile"], hoid["prefill_profile"]):  # the prefill's too: where the TTFT goes
        by = prof["by_kernel"]
        assert sum(b["nodes"] for b in by) >= len(prof["rows"]) and by == sorted(by, key=lambda b: -b["seconds"])
        assert sum(b["seconds"] for b in by) >= sum(r["seconds"] for r in prof["rows"]) * (1 - 1e-9)
    assert "embedding" in {b["name"] for b in hoid["prefill_profile"]["by_kernel"]} | {
        b["name"].split(".")[-1] for b in hoid["prefill_profile"]["by_kernel"]}
    assert hoid["captured"] is False and hoid["cuda_graph_reason"] == "the device is not a GPU"


@pytest.mark.slow
def test_the_first_run_commits_the_reference_and_a_later_one_is_checked(smoke):
    tmp, result, _ = smoke
    [cell] = result["cells"]
    assert cell["reference_check"]["status"] == "reference created"
    reference = json.loads((tmp / "out" / "reference.json").read_text())["cells"]
    ok = [r["key"] for r in cell["rows"] if r["group"] == "stock" and r["status"] == "ok"]
    prefix = f"{result['device']}|qwen3-1.7b-tiny|p8-n8-b2|"
    assert sorted(k[len(prefix):] for k in reference) == sorted(ok)
    first = reference[prefix + "hf-static"]["tokens_per_s"]
    code, stdout = _run(tmp, "--prompt", "8", "--batch", "2", "--rows", "hf-static")
    assert code == 0, stdout[-3000:]
    second = json.loads((tmp / "out" / "decode-qwen3-1.7b-tiny-p8-b2-n8-hf-static.json").read_text())
    check = second["cells"][0]["reference_check"]
    assert check["status"] in ("within", "off")
    measured = second["cells"][0]["rows"][0]["tokens_per_s"]
    assert check["metrics"]["tokens_per_s"]["ratio"] == pytest.approx(measured / first)
    assert check["metrics"]["tokens_per_s"]["off"] == (abs(measured / first - 1) > 0.05)
    kept = json.loads((tmp / "out" / "reference.json").read_text())["cells"]
    assert kept[prefix + "hf-static"]["tokens_per_s"] == first  # a later run never replaces the reference


@pytest.mark.slow
def test_slices_over_gpus_merge_into_one_table(tmp_path):
    code, stdout = _run(tmp_path, "--prompt", "8", "--batch", "1", "2", "--rows", "hf-static", "--gpus", "2")
    assert code == 0, stdout[-3000:]
    names = sorted(p.name for p in (tmp_path / "out").glob("decode-*.json"))
    assert names == ["decode-qwen3-1.7b-tiny-p8-b1-n8-hf-static.json", "decode-qwen3-1.7b-tiny-p8-b2-n8-hf-static.json"]
    reference = json.loads((tmp_path / "out" / "reference.json").read_text())["cells"]
    assert sorted(k.split("|", 1)[1] for k in reference) == ["qwen3-1.7b-tiny|p8-n8-b1|hf-static",
                                                              "qwen3-1.7b-tiny|p8-n8-b2|hf-static"]
    assert stdout.count("| qwen3-1.7b-tiny | 8 |") == 2
    assert len(list((tmp_path / "out" / "logs").glob("*.log"))) == 2


@pytest.mark.slow
def test_stock_rows_are_gated_for_information_only(tmp_path):
    code, stdout = _run(tmp_path, "--prompt", "8", "--batch", "1", "--rows", "hf-static,hf-compile-default",
                        "--gate-stock", "--gate-samples", "8")
    assert code == 0, stdout[-3000:]
    path = tmp_path / "out" / "decode-qwen3-1.7b-tiny-p8-b1-n8-hf-static_hf-compile-default.json"
    [cell] = json.loads(path.read_text())["cells"]
    rows = {r["key"]: r for r in cell["rows"]}
    assert "gate_baseline" in rows["hf-eager"]  # the teacher ran for the gate, though --rows did not name it
    # a compiled stock row too: its step returns the logits beside the token, so the gate reads what is timed
    for key in ("hf-static", "hf-compile-default"):
        gate = rows[key]["gate"]
        assert gate["informational"] and "candidate" in gate and "failed" not in rows[key], gate
        assert f"gate (info) {'ok' if gate['passed'] else 'failed'}" in stdout


@pytest.mark.slow
def test_a_stock_row_too_slow_to_gate_says_so_instead(tmp_path):
    code, stdout = _run(tmp_path, "--prompt", "8", "--batch", "1", "--rows", "hf-static", "--gate-stock",
                        "--gate-samples", "8", "--gate-stock-max-s", "0")
    assert code == 0, stdout[-3000:]
    [cell] = json.loads((tmp_path / "out" / "decode-qwen3-1.7b-tiny-p8-b1-n8-hf-static.json").read_text())["cells"]
    rows = {r["key"]: r for r in cell["rows"]}
    gate = rows["hf-static"]["gate"]
    assert gate["informational"] and "over --gate-stock-max-s 0" in gate["skipped"] and "passed" not in gate
    assert "gate (info) skipped" in stdout and "failed" not in rows["hf-static"]
    assert "gate_baseline" in rows["hf-eager"]  # the teacher itself still ran: hoid rows would be gated


@pytest.mark.slow
def test_the_run_archive_brings_back_the_journals_and_the_measurements(smoke):
    """The GPU machine keeps nothing: the optimizes' journals and measurement cache come back in one file."""
    import tarfile

    import ship_measurements

    tmp, _, _ = smoke
    [archive] = (tmp / "out").glob("hoid-run-*.tar.gz")
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"measure.sqlite", "cold_journal.sqlite", "warm_journal.sqlite"} <= names, names
    assert ship_measurements.main([str(archive), "--dry-run"]) == 0


@pytest.mark.slow
def test_the_export_row_counts_torch_s_triton_mutation_analysis_and_puts_it_back(smoke):
    """Where the export's warm-up goes on the H200 (torch.compile analyses each Triton call site); eager on the
    CPU, so none here, and the row leaves torch as it found it."""
    import torch._higher_order_ops.triton_kernel_wrap as wrap

    _, result, _ = smoke
    [cell] = result["cells"]
    export = next(r for r in cell["rows"] if r["key"] == "hoid-export")
    assert export["mutation_analysis"] == {"calls": 0, "seconds": 0.0}
    assert wrap.generate_ttir.__module__ == wrap.__name__  # the counting wrapper is gone

"""benchmarks/decode_report.py: the roofline, best stock, the reference rule, reading and merging results."""

import json

import decode_report as dr
import pytest

pytest.importorskip("transformers")


def _row(key, tps, ttft=0.01, group="stock", status="ok", **kw):
    return {"key": key, "name": key, "group": group, "status": status, "tokens_per_s": tps, "ttft_s": ttft,
            "peak_bytes": 100, "date": "2026-01-01T00:00:00+00:00", **kw}


def test_roofline_counts_weights_once_and_the_mean_kv_read():
    # 1 GB of weights, 1 kB per position, prompt 100, 200 new: 200 positions on average
    assert dr.roofline_tokens_per_s(10**9, 1000, 100, 200, 1, 4e12) == pytest.approx(4e12 / (10**9 + 200_000))
    # batch 8: the weights read once per step for 8 tokens, the KV read per sequence
    assert dr.roofline_tokens_per_s(10**9, 1000, 100, 200, 8, 4e12) == pytest.approx(
        8 * 4e12 / (10**9 + 8 * 200_000))


def test_qwen3_1_7b_roofline_is_the_issues_figure():
    """Issue 21 measured 1241 tok/s for Qwen3-1.7B at prompt 128 (40% of it: 502 tok/s); its shapes and
    the H200's copy bandwidth give that within 3%."""
    from hoid.measure.devices import H200
    from hoid.models import config

    cfg = config("qwen3-1.7b")
    params = 1_720_574_976  # Qwen3-1.7B with the tied embedding once (the model card's 1.7B)
    rate = dr.roofline_tokens_per_s(2 * params, dr.kv_bytes_per_position(cfg), 128, 256, 1, H200.copy_bandwidth)
    assert rate == pytest.approx(1241, rel=0.03)
    assert dr.kv_bytes_per_position(cfg) == 28 * 2 * 8 * 128 * 2


def test_streamed_weights_count_a_tied_embedding_once_and_skip_an_untied_input_table():
    from hoid.models import build_model

    tied = build_model("qwen3-1.7b-tiny")
    everything = sum(p.numel() * 4 for p in tied.parameters())
    assert tied.lm_head.weight.data_ptr() == tied.model.embed_tokens.weight.data_ptr()
    assert dr.streamed_weight_bytes(tied) == everything
    untied = build_model("llama-3.1-8b-tiny")
    table = untied.model.embed_tokens.weight
    assert dr.streamed_weight_bytes(untied) == sum(p.numel() * 4 for p in untied.parameters()) - table.numel() * 4


def test_best_stock_skips_failed_skipped_and_hoid_rows():
    rows = [_row("a", 100, ttft=0.02), _row("b", 300, ttft=0.05), _row("c", 900, status="skipped"),
            _row("d", 800, status="error"), _row("h", 1000, group="hoid"), _row("e", 50, ttft=0.001)]
    best = dr.best_of(rows)
    assert best["tokens_per_s"]["key"] == "b" and best["ttft_s"]["key"] == "e"
    rows.append(_row("g", 2000, group="hoid", failed=True))
    assert dr.best_of(rows, "hoid")["tokens_per_s"]["key"] == "h"  # a failed gate is not a result


def test_the_first_run_is_the_reference_and_later_runs_are_checked_against_it():
    reference = {}
    check, added = dr.check_reference(reference, "gpu|m|p1", [_row("a", 100), _row("b", 200, ttft=0.02)])
    assert check["status"] == "reference created" and added == 2
    # within 5%: valid
    check, added = dr.check_reference(reference, "gpu|m|p1", [_row("a", 96), _row("b", 206, ttft=0.0201)])
    assert check["status"] == "within" and added == 0
    assert check["metrics"]["tokens_per_s"]["ratio"] == pytest.approx(206 / 200)
    # best stock 10% slower: off, and the note is demanded
    check, _ = dr.check_reference(reference, "gpu|m|p1", [_row("a", 100), _row("b", 180, ttft=0.02)])
    assert check["status"] == "off" and check["metrics"]["tokens_per_s"]["off"]
    assert check["note"].startswith("UNEXPLAINED")
    check, _ = dr.check_reference(reference, "gpu|m|p1", [_row("b", 180, ttft=0.02)], note="driver 575")
    assert check["note"] == "driver 575"
    # the reference was never replaced by a later run
    assert reference["cells"]["gpu|m|p1|b"]["tokens_per_s"] == 200


def test_the_reference_compares_only_the_rows_that_ran():
    reference = {}
    dr.check_reference(reference, "c", [_row("weak", 100), _row("strong", 500)])
    check, _ = dr.check_reference(reference, "c", [_row("weak", 101), _row("strong", 1, status="error")])
    assert check["status"] == "within" and check["metrics"]["tokens_per_s"]["reference"] == 100


def _run_file(path, rows, date, device="H200", model="m"):
    cell = {"shape": {"prompt": 128, "new": 256, "batch": 1, "cache_len": 384, "key": "p128-n256-b1"},
            "roofline_tokens_per_s": 1000.0, "rows": rows}
    path.write_text(json.dumps({"benchmark": "decode", "format": 2, "device": device, "model": model, "date": date,
                                "cells": [cell]}))


def test_runs_of_one_cell_merge_by_row_the_later_winning(tmp_path):
    _run_file(tmp_path / "a.json", [_row("s", 100, date="2026-01-01"), _row("hoid-compile", 200, group="hoid",
                                                                            date="2026-01-01")], "2026-01-01")
    _run_file(tmp_path / "b.json", [_row("s", 120, date="2026-02-01")], "2026-02-01")
    (tmp_path / "reference.json").write_text("{}")
    [cell] = dr.load(tmp_path, legacy=None)
    assert {r["key"]: r["tokens_per_s"] for r in cell["rows"]} == {"s": 120, "hoid-compile": 200}
    assert cell["best_stock"]["tokens_per_s"]["value"] == 120
    table = dr.markdown([cell], ("s",))
    assert "| m | 128 | 1 | 120 (s; 1 of 1 rows) | 200 | 1.67x |" in table and "20%" in table
    assert dr.plot([cell], tmp_path / "p.png").stat().st_size > 0


def test_the_first_versions_committed_file_reads_as_a_legacy_cell():
    legacy = dr.RESULTS / "decode.json"
    [cell] = dr.read_cells(legacy)
    assert cell["legacy"] and cell["model"] == "qwen3-1.7b" and cell["shape"]["cache_len"] == 1024
    best = dr.best_of(cell["rows"])
    raw = json.loads(legacy.read_text())["results"]
    stock = [r["tokens_per_s"] for r in raw if "hoid" not in r["name"].lower()]
    assert best["tokens_per_s"]["value"] == max(stock)
    assert any(r["group"] == "hoid" and r["key"] == "legacy-hoid-compiled-cuda-graph" for r in cell["rows"])
    assert "(legacy)" in dr.markdown(dr.load(dr.RESULTS / "decode", legacy=legacy))


def test_kv_bytes_follow_the_config():
    from hoid.models import config

    cfg = config("llama-3.2-1b")
    assert dr.kv_bytes_per_position(cfg) == 16 * 2 * 8 * 64 * 2
    assert dr.kv_bytes_per_position(cfg, dtype_bytes=4) == 2 * dr.kv_bytes_per_position(cfg)


def test_the_issues_musts_name_what_is_missed():
    def cell(hoid_tps, hoid_ttft, warm_s, failed=False):
        hoid = _row("hoid-compile", hoid_tps, ttft=hoid_ttft, group="hoid", failed=failed,
                    optimize={"cold": {"seconds": 500}, "warm": {"seconds": warm_s}})
        return {"rows": [_row("s", 100, ttft=0.02), _row("t", 90, ttft=0.01), hoid]}

    lattice = ("s", "t")
    assert dr.misses(cell(100, 0.01, 300), lattice) == []  # ties meet the musts
    assert dr.misses(cell(99, 0.011, 301), lattice) == ["decode slower than best stock", "TTFT worse than best stock",
                                                        "warm optimize 301 s > 300 s"]
    assert dr.misses(cell(500, 0.001, 10, failed=True), lattice) == ["no hoid-compile row that passed the gate"]
    table = dr.markdown([{**cell(100, 0.01, 300), "model": "m", "shape": {"prompt": 1, "batch": 1}}], lattice)
    assert table.endswith("| met |") and "2 of 2 rows" in table


def test_best_stock_over_part_of_the_lattice_does_not_meet_the_musts():
    """12-04: Qwen3-4B's only stock row was transformers eager (14 tok/s), and the table said 29x, musts met."""
    hoid = _row("hoid-compile", 402, group="hoid", optimize={"warm": {"seconds": 150}})
    cell = {"rows": [_row("hf-eager", 14, ttft=0.06), hoid], "model": "qwen3-4b", "shape": {"prompt": 128, "batch": 1}}
    lattice = dr.stock_lattice()
    assert "hf-eager" in lattice and "fast-reduce-overhead" in lattice  # decode_stock's rows
    [missed] = dr.misses(cell)
    assert missed.startswith("stock rows not run: ") and "fast-reduce-overhead" in missed and "hf-eager" not in missed
    assert f"1 of {len(lattice)} rows" in dr.markdown([cell])
    assert dr.stock_not_run({**cell, "legacy": True}) == []  # the first version's file asked for no lattice


def test_a_stock_row_that_raised_is_named_apart_from_rows_not_run():
    """12-08: max-autotune with coordinate descent raised in Inductor's CUDA-graph trees on Qwen3-30B-A3B; it ran,
    so the musts do not wait on it, and the table says it raised rather than counting it as a result."""
    hoid = _row("hoid-compile", 300, group="hoid", optimize={"warm": {"seconds": 150}})
    raised = _row("cd", None, status="error", reason="RuntimeError: Detected 5 tensor(s)\nDebugging: ...")
    cell = {"rows": [_row("s", 100), raised, hoid], "model": "m", "shape": {"prompt": 1, "batch": 1}}
    lattice = ("s", "cd", "t")
    assert dr.stock_raised(cell, lattice) == {"cd": "RuntimeError: Detected 5 tensor(s)"}
    assert dr.stock_not_run(cell, lattice) == ["t"]
    table = dr.markdown([cell], lattice)
    assert "1 of 3 rows, raised: cd" in table and "stock rows not run: t" in table
    # a later run of the same key that finished wins over the error
    assert dr.stock_raised({**cell, "rows": [*cell["rows"], _row("cd", 90)]}, lattice) == {}

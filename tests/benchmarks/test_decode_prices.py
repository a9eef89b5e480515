"""benchmarks/decode_prices.py: the prompts' graphs price the prefill's kernels, and a run merges its rows
into the shipped file (a row measured again replaces the old one; a stale kernel version is dropped)."""

import pytest

pytest.importorskip("transformers")


def _row(kernel, version, types, median):
    return {"device": "NVIDIA H200", "kernel": kernel, "version": version, "params": {}, "types": types,
            "attrs": {}, "median": median}


def test_a_run_merges_its_rows_into_the_file():
    from decode_prices import merged

    old = {"date": "2026-11-30", "models": ["qwen3-1.7b"], "rows": [
        _row("triton.rmsnorm", "v1", ["bf16[1,2048]"], 2e-6),  # decode row: kept
        _row("torch.sdpa_masked", "t1", ["bf16[1,16,128,128]"], 22e-6),  # measured again: replaced
        _row("triton.rope", "old", ["bf16[1,8]"], 1e-6),  # a version the library no longer has: dropped
    ]}
    new = {"date": "2026-12-03", "models": ["qwen3-4b"], "rows": [
        _row("torch.sdpa_masked", "t1", ["bf16[1,16,128,128]"], 21e-6),
        _row("triton.prefill_attention", "p1", ["bf16[1,16,128,128]"], 6e-6)]}
    out = merged(old, new, {"triton.rmsnorm": "v1", "torch.sdpa_masked": "t1", "triton.rope": "new"})
    assert [(r["kernel"], r["median"]) for r in out["rows"]] == [
        ("triton.rmsnorm", 2e-6), ("torch.sdpa_masked", 21e-6), ("triton.prefill_attention", 6e-6)]
    assert out["merged_with"] == "2026-11-30" and out["models"] == ["qwen3-1.7b", "qwen3-4b"]


def test_a_merge_keeps_the_rows_a_carry_over_prices_today_s_version_with():
    from decode_prices import merged

    old = {"rows": [_row("triton.rope", "old", ["bf16[1,8]"], 1e-6), _row("triton.gemv", "older", ["bf16[1]"], 1e-6)]}
    new = {"models": [], "rows": [_row("triton.rmsnorm", "v1", ["bf16[1,2048]"], 2e-6)]}
    out = merged(old, new, {"triton.rope": "new", "triton.gemv": "new"}, frozenset({("triton.rope", "old")}))
    assert [(r["kernel"], r["version"]) for r in out["rows"]] == [("triton.rope", "old"), ("triton.rmsnorm", "v1")]


def test_the_prompt_s_graph_prices_the_prefill_attention():
    from decode_prices import prefill_graph

    from hoid.measure.devices import H200
    from hoid.search.prices import priced_calls

    names = {call.name for call in priced_calls(prefill_graph("qwen3-1.7b", 128), H200)}
    assert "triton.prefill_attention" in names and "torch.sdpa_masked" in names
    assert "triton.decode_attention" not in names  # one query token only


def test_only_a_kernel_the_graphs_do_not_call_is_refused_by_name(monkeypatch):
    import sys
    from types import SimpleNamespace

    import decode_prices

    calls = {"k": (SimpleNamespace(name="torch.sdpa_masked", op="kernel"), {"qwen3-1.7b@prefill128"})}
    monkeypatch.setattr(decode_prices, "all_calls", lambda device, which="decode": calls)
    monkeypatch.setattr(sys, "argv", ["decode_prices.py", "--graphs", "prefill", "--dry-run",
                                      "--only", "triton.prefil_attention"])
    with pytest.raises(SystemExit, match="no prefill call of triton.prefil_attention.*torch.sdpa_masked"):
        decode_prices.main()


def test_the_merge_reads_the_committed_carry_overs_wherever_the_file_is_written(tmp_path):
    """On the H200 the file is written under $OUT, where no carry-over file lies beside it."""
    import json

    from decode_prices import write_merged

    from hoid.kernels import all_kernels

    spec = next(iter(all_kernels().values()))
    out = tmp_path / "out" / "decode_prices.json"
    out.parent.mkdir()
    out.write_text(json.dumps({"rows": [_row(spec.id, "priced", ["bf16[1]"], 1e-6)]}))
    carryover = tmp_path / "committed" / "price_carryover.json"
    carryover.parent.mkdir()
    carryover.write_text(json.dumps({"carryovers": [{"kernel": spec.id, "from": "priced", "to": spec.version}]}))
    write_merged(out, {"models": [], "rows": []}, carryover)
    assert [r["version"] for r in json.loads(out.read_text())["rows"]] == ["priced"]
    write_merged(out, {"models": [], "rows": []}, tmp_path / "none.json")  # not carried: a stale version
    assert json.loads(out.read_text())["rows"] == []


def test_awaiting_measures_the_awaiting_kernels_these_graphs_call_and_names_the_others(monkeypatch, capsys):
    import sys
    from types import SimpleNamespace

    import decode_prices

    from tests.search import awaiting

    calls = {"a": (SimpleNamespace(name="triton.new", op="kernel"), {"m"}),
             "b": (SimpleNamespace(name="triton.old", op="kernel"), {"m"})}
    monkeypatch.setattr(awaiting, "AWAITING_PRICES", {"triton.new": "edited", "cute.prefill_only": "edited"})
    monkeypatch.setattr(decode_prices, "all_calls", lambda device, which="decode": calls)
    monkeypatch.setattr(sys, "argv", ["decode_prices.py", "--dry-run", "--awaiting"])
    assert decode_prices.main() == 0
    out = capsys.readouterr().out
    assert "awaiting, with no decode call: cute.prefill_only" in out and "1 calls to measure" in out
    assert "triton.new 1" in out and "triton.old" not in out

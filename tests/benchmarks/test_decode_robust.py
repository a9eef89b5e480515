"""`benchmarks/decode.py` under a time limit: every finished row is on disk before the next one starts, a run
stopped inside a row (SIGTERM, Ctrl-C, SystemExit) keeps the earlier rows and says where it stopped, file
names are what a GPU call brings back, and `--no-warm` leaves out the warm optimize run."""

import json
import os
import re
import signal

import pytest

pytest.importorskip("transformers")

import decode  # noqa: E402
import decode_args  # noqa: E402
import decode_stock  # noqa: E402

SAFE = re.compile(r"[A-Za-z0-9._-]+")
TINY = ["qwen3-1.7b", "--tiny", "--device", "cpu", "--prompt", "8", "--batch", "1", "--new", "8", "--warmup", "1",
        "--no-write-reference"]


@pytest.fixture(autouse=True)
def _private_stores(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for var, name in (("HOID_CACHE", "cache"), ("HOID_KERNELS", "kernels"), ("HOID_JOURNAL", "journal")):
        monkeypatch.setenv(var, str(tmp_path / f"{name}.sqlite"))


def _stopping_row(monkeypatch, out, stop):
    """hf-compile-default replaced by a row that reads the run's file (what is on disk as it starts), then
    calls `stop()`."""
    seen = {}

    def build(lm, shape, ctx):
        [path] = out.glob("decode-*.json")
        seen["file"] = json.loads(path.read_text())
        stop()

    monkeypatch.setitem(decode_stock.ROWS, "hf-compile-default", ("stops the run", build))
    return seen


def _check_stopped(out, seen, by: str):
    [path] = out.glob("decode-*.json")
    assert SAFE.fullmatch(path.name) and not list(out.glob("*.tmp*"))  # the rename left no temporary file
    [cell] = seen["file"]["cells"]
    assert [r["key"] for r in cell["rows"]] == ["hf-static"] and cell["rows"][0]["status"] == "ok"
    assert cell["running"]["key"] == "hf-compile-default"  # on disk before the row ran
    result = json.loads(path.read_text())
    assert not result["complete"]
    assert [r["key"] for r in result["cells"][0]["rows"]] == ["hf-static"]
    assert result["cells"][0]["rows"][0]["tokens_per_s"] > 0
    assert result["stopped"]["by"].startswith(by) and result["stopped"]["running"]["key"] == "hf-compile-default"


@pytest.mark.slow
@pytest.mark.parametrize("stop, raised, by", [
    (lambda: (_ for _ in ()).throw(SystemExit("cut off")), SystemExit, "SystemExit: cut off"),
    (lambda: (_ for _ in ()).throw(KeyboardInterrupt()), KeyboardInterrupt, "KeyboardInterrupt"),
    (lambda: os.kill(os.getpid(), signal.SIGTERM), SystemExit, "Stopped: 143"),  # what `timeout` sends
], ids=["system-exit", "keyboard-interrupt", "sigterm"])
def test_a_run_stopped_inside_a_row_keeps_the_rows_before_it(tmp_path, monkeypatch, stop, raised, by):
    out = tmp_path / "out"
    seen = _stopping_row(monkeypatch, out, stop)
    with pytest.raises(raised):
        decode.main([*TINY, "--rows", "hf-static,hf-compile-default", "--out", str(out)])
    _check_stopped(out, seen, by)
    assert signal.getsignal(signal.SIGTERM) is not decode._on_sigterm  # the handler is the run's only


@pytest.mark.slow
def test_a_stopped_run_still_writes_the_reference_cells_of_its_finished_rows(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _stopping_row(monkeypatch, out, lambda: os.kill(os.getpid(), signal.SIGTERM))
    argv = [a for a in TINY if a != "--no-write-reference"]
    with pytest.raises(SystemExit):
        decode.main([*argv, "--rows", "hf-static,hf-compile-default", "--out", str(out)])
    cells = json.loads((out / "reference.json").read_text())["cells"]
    assert [name.split("|")[-1] for name in cells] == ["hf-static"]  # the stopped row is no reference
    [path] = out.glob("decode-*.json")
    assert json.loads(path.read_text())["cells"][0]["reference_check"]["status"] == "reference created"


def test_result_names_use_only_what_a_gpu_call_brings_back():
    name = decode_args.output_name(decode_args.parse(["qwen3-1.7b", "--prompt", "128", "1024", "--batch", "1", "8",
                                                      "--new", "64", "--rows", "fast-cuda-graph, hoid", "--no-warm"]))
    assert name == "decode-qwen3-1.7b-n64-fast-cuda-graph_hoid-nowarm.json"
    name = decode_args.output_name(decode_args.parse(["qwen3-1.7b", "--prompt", "128", "--batch", "1", "2",
                                            "--rows", "hoid-export,hoid-backend"]))
    assert name == "decode-qwen3-1.7b-p128-b1_2-hoid-export_hoid-backend.json"
    args = decode_args.parse(["qwen3-1.7b", "--prompt", "128", "--rows", "fast"])
    args.model = "a+b c/d"  # whatever reaches the name, the name stays plain
    assert decode_args.output_name(args) == "decode-a_b_c_d-p128-fast.json"


@pytest.mark.slow
def test_no_warm_runs_the_cold_optimize_only_and_says_so(tmp_path, capsys):
    out = tmp_path / "out"
    # a spent clock stops hoid.optimize after its baseline: the rows still run on the graph it returns
    code = decode.main([*TINY, "--rows", "hoid-compile", "--no-warm", "--no-gate", "--no-profile", "--agent",
                        "library", "--optimize-budget", "0m", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed[-3000:]
    result = json.loads((out / "decode-qwen3-1.7b-tiny-p8-b1-n8-hoid-compile-nowarm.json").read_text())
    assert result["complete"] and result["warm_optimize"] is False and "--no-warm" in result["argv"]
    [row] = result["cells"][0]["rows"]
    assert row["status"] == "ok" and row["tokens_per_s"] > 0
    opt = row["optimize"]
    assert opt["warm"] is None and opt["warm_skipped"] and opt["same_graph"] is None
    assert opt["cold"]["stop_reason"] == "budget spent: 0 minutes" and opt["prefill_rewrite_s"] > 0
    assert "optimize cold" in printed and "optimize warm" not in printed
    assert re.search(r"^\[ *\d+\.\d s\] hoid-compile: build: \d+\.\d s$", printed, re.M)  # stamped phases
    assert re.search(r"\| \d+ / not run \|", printed)  # the table's optimize column


@pytest.mark.slow
def test_a_backend_slice_imports_no_prefill_and_a_later_slice_reuses_the_gate(tmp_path, capsys):
    out, gates = tmp_path / "out", tmp_path / "gates"
    argv = [*TINY, "--rows", "hoid-backend", "--no-warm", "--agent", "library", "--optimize-budget", "0m",
            "--gate-cache", str(gates), "--gate-samples", "24"]  # 3 sequences of 8 tokens
    runs = []
    for i in range(2):
        code = decode.main([*argv, "--out", str(out / str(i))])
        printed = capsys.readouterr().out
        assert code == 0, printed[-3000:]
        result = json.loads((out / str(i) / "decode-qwen3-1.7b-tiny-p8-b1-n8-hoid-backend-nowarm.json").read_text())
        runs.append((result["cells"][0], printed))
    (first, printed), (second, again) = runs
    assert [r["key"] for r in first["rows"]] == ["hf-eager", "hoid-backend"] and "gate_from" not in first
    assert [p.name for p in gates.iterdir()] == ["gate-qwen3-1.7b-tiny-p8-n8-b1-s0-g3.pt"]
    assert [r["key"] for r in second["rows"]] == ["hoid-backend"] and "hf-eager: build" not in again
    assert second["gate_from"] == str(gates / "gate-qwen3-1.7b-tiny-p8-n8-b1-s0-g3.pt")
    assert second["gate_baseline"] == first["gate_baseline"] and first["gate_baseline"]["samples"] == 24
    assert second["gate_sequences"] == 3
    row = second["rows"][0]
    assert row["status"] == "ok" and row["gate"]["baseline"] == first["gate_baseline"]
    assert row["gate"]["candidate"] == first["rows"][1]["gate"]["candidate"]  # the same teacher, the same verdict
    assert row["optimize"]["prefill_rewrite_s"] is None and "rewrite the prefill" not in printed + again


def test_a_prefill_that_failed_is_not_imported_again_for_the_next_row(tmp_path):
    import tempfile

    import decode_hoid
    from decode_loop import Shape

    plan = decode_hoid.Plan(None, None, {}, tmp_path / "store.sqlite", tempfile.TemporaryDirectory(), "k",
                            lm=None, shape=Shape(8, 8, 1), target=None)  # no model: the import raises
    with pytest.raises(Exception) as first:
        plan.prefill_graph()
    with pytest.raises(RuntimeError, match="failed earlier") as again:
        plan.prefill_graph()
    assert str(first.value) in str(again.value) and plan.prefill is None
    plan.close()

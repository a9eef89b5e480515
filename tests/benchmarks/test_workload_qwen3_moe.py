"""`benchmarks/workload_qwen3_moe.py` on the CPU (the tiny MoE): every row runs or says it needs CUDA, hoid's
rows pass the gate, the layer-wise float32 reference equals the whole-model one, and the roofline counts
only the routed experts."""

import json
import tarfile
import warnings

import pytest
import torch

from .helpers import run_main

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("moe")
    env = {"TRITON_INTERPRET": "1", "HOID_CACHE": str(tmp / "cache.sqlite"),
           "HOID_KERNELS": str(tmp / "kernels.sqlite"), "HOID_JOURNAL": str(tmp / "journal.sqlite")}
    code, stdout = run_main("workload_qwen3_moe", ["--tiny", "--device", "cpu", "--prompt", "8", "--new", "8",
                                                   "--warmup", "1", "--gate-samples", "16", "--rows", "all",
                                                   "--gate-cache", str(tmp / "gate"), "--out", str(tmp / "out")], env)
    assert code == 0, stdout[-3000:]
    result = json.loads((tmp / "out" / "workload-qwen3-moe-qwen3-30b-a3b-tiny-p8-all.json").read_text())
    return result, tmp / "out"


@pytest.mark.slow
def test_every_row_runs_or_says_it_needs_cuda_and_hoid_passes_the_gate(smoke):
    import workload_qwen3_moe as bench

    smoke, out = smoke
    # the plan's databases come back archived, as decode.py's do (on the CPU nothing is timed: none in it)
    with tarfile.open(out / "hoid-run-qwen3-30b-a3b-tiny-p8-n8-b1.tar.gz") as tar:
        assert all(name.endswith(".sqlite") for name in tar.getnames())

    assert smoke["complete"] and smoke["model"] == "qwen3-30b-a3b-tiny"
    [cell] = smoke["cells"]
    rows = {r["key"]: r for r in cell["rows"]}
    assert list(rows) == [*bench.STOCK, *bench.HOID]
    for key, row in rows.items():
        if key in ("hf-eager", "hf-static", "hoid-compile", "hoid-export"):
            assert row["status"] == "ok", row
            assert row["tokens_per_s"] > 0 and row["step_latency_s"] == pytest.approx(1 / row["steps_per_s"])
        else:
            assert row["status"] == "skipped" and row["reason"].startswith("needs CUDA"), row
    baseline = cell["gate_baseline"]
    assert baseline["samples"] == 16 and cell["gate_sequences"] == 2  # 16 samples: the timed sequence and one more
    for key in bench.HOID:
        assert rows[key]["gate"]["baseline"] == baseline
        assert rows[key]["gate"]["passed"] and not rows[key]["failed"], rows[key]["gate"]
    best = cell["best_stock"]["tokens_per_s"]["value"]
    assert best == max(rows[k]["tokens_per_s"] for k in ("hf-eager", "hf-static"))
    ours = max(rows[k]["tokens_per_s"] for k in bench.HOID)
    assert cell["hoid_over_best_stock"] == pytest.approx(ours / best)
    plan = cell["hoid_plan"]
    assert plan["rewritten_nodes"] < plan["nodes"] and plan["ops_left"]["topk"] == 2  # the router survives
    # the experts kernel is not built for a CPU target, and the plan says so instead of warning of a mismatch
    # (tests/models/test_moe.py matches it on every layer for the H200)
    assert "not the target's cpu" in plan["moe_experts_skipped"] and "experts_warning" not in plan
    # on the CPU the search prices by the model and says so (on a GPU it times what the prices lack first)
    assert plan["how"].endswith("priced by the model)") and "extraction" in plan["search"]
    assert plan["prefill_kernels"] is not None  # the prefill the rows compiled was made and recorded


@pytest.mark.slow
def test_a_later_slice_gates_hoid_with_the_first_slice_s_teacher_and_baseline(smoke):
    """hf-eager and the gate's sequences in one call, the hoid row in another (device calls are limited): the
    first slice (eager alone) saves the gate, the second reads it and runs no eager row, and its verdict is
    against the baseline the whole run had."""
    smoke, out = smoke
    env = {"TRITON_INTERPRET": "1", "HOID_CACHE": str(out.parent / "cache.sqlite"),
           "HOID_KERNELS": str(out.parent / "kernels.sqlite"), "HOID_JOURNAL": str(out.parent / "journal.sqlite")}
    common = ["--tiny", "--device", "cpu", "--prompt", "8", "--new", "8", "--warmup", "1", "--gate-samples", "16",
              "--gate-cache", str(out.parent / "slices-gate"), "--out", str(out.parent / "slices")]
    for rows in ("hf-eager", "hoid-compile"):
        code, stdout = run_main("workload_qwen3_moe", [*common, "--rows", rows], env)
        assert code == 0, stdout[-3000:]
    [cell] = json.loads((out.parent / "slices" / "workload-qwen3-moe-qwen3-30b-a3b-tiny-p8-hoid-compile.json")
                        .read_text())["cells"]
    assert [r["key"] for r in cell["rows"]] == ["hoid-compile"] and cell["gate_sequences"] == 2
    assert cell["gate_from"].endswith(".pt") and cell["gate_baseline"] == smoke["cells"][0]["gate_baseline"]
    assert cell["rows"][0]["gate"]["passed"] and cell["rows"][0]["gate"]["baseline"] == cell["gate_baseline"]
    # `report` merges the two slices into one cell: best stock from the first, hoid from the second, each row's
    # file named, and the stock rows that neither ran listed against the lattice
    import workload_qwen3_moe as bench

    slices = sorted((out.parent / "slices").glob("workload-qwen3-moe-*.json"))
    eager = json.loads(slices[0].read_text())["cells"][0]["rows"][0]
    assert len(slices) == 2 and eager["key"] == "hf-eager"
    table = bench.report(slices)
    ratio = cell["rows"][0]["tokens_per_s"] / eager["tokens_per_s"]
    assert f"{eager['tokens_per_s']:.0f} (hf-eager; 1 of {len(bench.STOCK)} rows) |" in table
    assert f"| {ratio:.2f}x |" in table and "stock rows not run: hf-static" in table
    assert f"hoid-compile: {cell['rows'][0]['tokens_per_s']:.1f} tok/s, ok" in table and slices[1].name in table
    code, stdout = run_main("workload_qwen3_moe", ["report", *map(str, slices)], env)
    assert code == 0 and table in stdout


@pytest.fixture(scope="module")
def tiny_bf16():
    from hoid.models import build_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_model("qwen3-30b-a3b-tiny", dtype=torch.bfloat16)


def test_the_layerwise_reference_equals_the_whole_float32_model(tiny_bf16):
    import decode_gate
    import workload_qwen3_moe as bench

    g = torch.Generator().manual_seed(0)
    prompt, tokens = torch.randint(0, 256, (1, 6), generator=g), torch.randint(0, 256, (1, 5), generator=g)
    with torch.no_grad():
        got = bench.reference_logits(tiny_bf16, prompt, tokens)
        want = decode_gate.reference_logits(tiny_bf16, prompt, tokens)
    assert got.shape == want.shape == (5, 1, 256) and got.dtype == torch.float32
    # the same float32 arithmetic; only the mask differs (sdpa's is_causal against an explicit causal mask)
    assert (got - want).norm() / want.norm() < 1e-5


def test_the_roofline_counts_only_the_routed_experts(tiny_bf16):
    import decode_report
    import workload_qwen3_moe as bench

    cfg = tiny_bf16.config
    per_expert = 3 * cfg.moe_intermediate_size * cfg.hidden_size * 2  # gate, up, down in bfloat16
    experts = cfg.num_hidden_layers * cfg.num_experts * per_expert
    unused = experts * (cfg.num_experts - cfg.num_experts_per_tok) // cfg.num_experts
    assert bench.active_weight_bytes(tiny_bf16) == decode_report.streamed_weight_bytes(tiny_bf16) - unused
    assert bench.active_weight_bytes(tiny_bf16, batch=64) == decode_report.streamed_weight_bytes(tiny_bf16)


def test_experts_that_no_kernel_matches_are_named_not_silent(capsys, monkeypatch):
    """The plan counts the layers whose experts `triton.moe_experts` matched, searched for the H200: all of the
    tiny step's two; imported in another form (the ids clamped, as transformers 5.17's batched_mm does, which
    ran the H100's gathers as copies on 12-06), none, and the plan warns."""
    import workload_qwen3_moe as bench

    import hoid
    from hoid.models import build_model, decode_step_graph
    from hoid.models import moe as hoid_moe
    from tests.models.moe_forms import batched_mm_5_17

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = build_model("qwen3-30b-a3b-tiny", dtype=torch.bfloat16)

    def check(step):
        return bench.experts_check(hoid.search.search(step, device="h200").report.library, 2)

    assert check(decode_step_graph(lm, 16)) == {"moe_experts_regions": 2}
    monkeypatch.setattr(hoid_moe, "gathered_experts_forward", batched_mm_5_17)  # what traceable_experts registers
    clamped = decode_step_graph(lm, 16)
    assert "clamp" in clamped.op_counts()
    found = check(clamped)
    assert found["moe_experts_regions"] == 0 and "0 of 2 layers" in found["experts_warning"]
    assert "WARNING: triton.moe_experts's pattern matched" in capsys.readouterr().out


def test_the_tune_table_descends_over_the_kernels_tiles_at_their_widths(tiny_bf16, monkeypatch):
    """`--tune`'s plumbing (the timing itself needs CUDA): each kernel at the model's shapes (the decode ones at
    1 to 16 tokens, the grouped one at the two prompts), by coordinate descent from its defaults, the choice
    and every trial recorded."""
    import importlib

    import moe_kernel_tables as bench

    from hoid.measure.devices import get_device

    tuning = importlib.import_module("hoid.measure.tune")  # the module: hoid.measure's `tune` is its function

    seen = []

    def fake_descend(spec, types, attrs, *, size, rounds, device):
        seen.append((spec.id, types, attrs))
        assert "H100" in device.name and size > 1 and rounds > 1
        candidates = tuning.neighbours(spec, size, types=types, attrs=attrs, target=device.target())
        trials = tuple(tuning.Trial(c, 1e-6 * (i + 1)) for i, c in enumerate(candidates))
        return tuning.TuneResult(spec.id, candidates[0], 1e-6, False, "the defaults", trials)

    monkeypatch.setattr(tuning, "descend", fake_descend)
    rows = bench.tune_table(tiny_bf16, get_device("h100"))
    assert [(r["kernel"], r["tokens"]) for r in rows] == [
        ("triton.moe_experts", 1), ("triton.moe_experts", 4),
        ("triton.moe_router", 1), ("triton.moe_router", 4), ("triton.moe_router", 16),
        ("triton.moe_experts_grouped", 128), ("triton.moe_experts_grouped", 1024),
        ("triton.moe_router_rows", 128), ("triton.moe_router_rows", 1024)]
    cfg = tiny_bf16.config
    _, types, attrs = seen[2]
    assert [t.shape for t in types] == [(1, cfg.hidden_size), (cfg.num_experts, cfg.hidden_size)]
    assert attrs == {"k": cfg.num_experts_per_tok}
    assert [t.shape for t in seen[1][1]][:2] == [(4, cfg.hidden_size), (4, cfg.num_experts_per_tok)]
    assert all(len(r["trials"]) > 1 and r["default_s"] == 1e-6 for r in rows)

    def refuse_the_grouped(spec, types, attrs, **kw):
        if spec.id == "triton.moe_experts_grouped" and types[0].shape[0] == 128:
            raise tuning.TuneRefused(f"tuning {spec.id}: the default params' time is below the roofline floor")
        return fake_descend(spec, types, attrs, **kw)

    monkeypatch.setattr(tuning, "descend", refuse_the_grouped)
    rows = bench.tune_table(tiny_bf16, get_device("h100"))  # one refusal is a row; the ones after it still run
    assert [r["tokens"] for r in rows] == [1, 4, 1, 4, 16, 128, 1024, 128, 1024]
    assert "roofline floor" in rows[5]["error"] and "trials" not in rows[5] and len(rows[6]["trials"]) > 1

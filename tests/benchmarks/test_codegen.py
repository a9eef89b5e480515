"""`benchmarks/codegen.py` on the CPU: every region's Inductor side really compiled (the 2026-12-01 H200 run
timed eager PyTorch once dynamo hit its recompile limit), and the JSON, rewritten after each row, holding
ours at "auto" and tuned beside Inductor's."""

import json

import pytest
import torch

pytest.importorskip("transformers")

import codegen_inductor  # noqa: E402  (benchmarks/ is on the path: conftest)

from hoid.ir import GraphBuilder  # noqa: E402

from .helpers import run_main  # noqa: E402


def _bodies(n: int):
    for k in range(n):  # n regions of different shapes: one code object (region_fn's), n different guards
        b = GraphBuilder(f"r{k}")
        x = b.input("x", (2, 8 + k), "f32")
        yield b.build(b.exp(b.mul(x, 0.5)))


def test_every_region_is_compiled_past_dynamos_recompile_limit():
    limit = torch._dynamo.config.recompile_limit
    for body in _bodies(limit + 2):
        fn = codegen_inductor.region_fn(body)
        x = torch.randn(*body.inputs[0].value.type.shape)
        compiled, out, counted = codegen_inductor.compiled_by_inductor(fn, (x,), None, backend="eager", fullgraph=True)
        assert counted["graphs"] == 1, counted
        torch.testing.assert_close(out[0], torch.exp(x * 0.5))
        torch.testing.assert_close(codegen_inductor.no_recompile(compiled)(x)[0], torch.exp(x * 0.5))


def test_a_function_dynamo_compiles_no_graph_of_is_an_error_not_a_figure():
    with pytest.raises(RuntimeError, match="compiled no graph"):
        codegen_inductor.compiled_by_inductor(lambda x: x, (torch.randn(3),), None, backend="eager")


def test_a_timed_call_that_would_recompile_fails():
    compiled, _, _ = codegen_inductor.compiled_by_inductor(lambda x: x * 2, (torch.randn(3),), None, backend="eager")
    with pytest.raises(Exception, match="[Rr]ecompil"):
        codegen_inductor.no_recompile(compiled)(torch.randn(5))


@pytest.mark.slow
def test_the_regions_part_writes_auto_tuned_and_inductor_per_region(tmp_path):
    code, stdout = run_main("codegen", ["--smoke", "--parts", "regions", "--models", "vit-base-16", "--regions", "2",
                                        "--out", str(tmp_path)], {"TRITON_INTERPRET": "1"})
    assert code == 0, stdout[-3000:]
    result = json.loads((tmp_path / "codegen_smoke-regions-vit-base-16.json").read_text())
    assert result["parts_run"] == ["regions"] and result["part_s"]["regions"] > 0 and not result["errors"]
    (model,) = result["parts"]["regions"]["rows"]
    assert model["model"] == "vit-base-16" and len(model["regions"]) == 2
    for row in model["regions"]:
        assert row["inductor"]["graphs"] >= 1
        assert row["hoid_auto_s"] > 0 and row["hoid_tuned_s"] > 0 and row["inductor_s"] > 0
        assert row["speedup"] == pytest.approx(row["inductor_s"] / min(row["hoid_auto_s"], row["hoid_tuned_s"]))
        assert row["params_auto"] != {} and len(row["tune"]["trials"]) >= 2
        assert row["rel_error_auto_vs_inductor"] < 1e-4 and row["rel_error_tuned_vs_inductor"] < 1e-4
    assert "def fused_kernel(" in stdout  # the smoke prints each timed region's generated Triton
    assert not list(tmp_path.glob("*.tmp"))  # written atomically: no temporary left


@pytest.mark.slow
def test_the_whole_part_gives_no_ratio_where_hoids_time_is_modelled(tmp_path):
    """Without a GPU hoid's best is the H200's model and Inductor's the CPU's clock: the 12-06 smoke printed
    "35.02x" from the two; a ratio is a figure of two measurements only."""
    code, stdout = run_main("codegen", ["--smoke", "--parts", "whole", "--models", "vit-base-16", "--budget", "8",
                                        "--out", str(tmp_path)], {"TRITON_INTERPRET": "1"})
    assert code == 0, stdout[-3000:]
    result = json.loads((tmp_path / "codegen_smoke-whole-vit-base-16.json").read_text())
    (row,) = result["parts"]["whole"]["rows"]
    assert row["max_autotune_s"] > 0 and row["hoid_best_s"] <= row["hoid_baseline_s"]
    assert row["hoid_evidence"] == "modelled" and row["vs_max_autotune"] is None
    assert "no ratio (hoid's time is modelled)" in stdout and not result["errors"]

def _run(date, models, device="NVIDIA H200"):
    """A codegen.py file of one call: a region per model, its speedup given."""
    rows = [{"model": m, "regions": [{"kernel": f"codegen.{m}", "speedup": x, "speedup_auto": x}]}
            for m, x in models.items()]
    return {"benchmark": "codegen", "smoke": False, "device": device, "torch": "2.11", "triton": "3.6",
            "transformers": "5", "python": "3.12", "layers": 2, "dtype": "torch.bfloat16", "date": date,
            "parts_run": ["regions"], "models_run": list(models), "part_s": {"regions": 10.0}, "wall_s": 11.0,
            "parts": {"regions": {"rows": rows}}}


def test_a_sessions_calls_merge_into_one_geomean_the_later_row_winning():
    import codegen_report

    merged = codegen_report.merge([_run("2026-12-04T21:31", {"a": 2.0, "b": 0.5}),
                                   _run("2026-12-04T21:39", {"b": 0.8, "c": 1.25})], ["one.json", "two.json"])
    speedups = {m["model"]: m["regions"][0]["speedup"] for m in merged["parts"]["regions"]["rows"]}
    assert speedups == {"a": 2.0, "b": 0.8, "c": 1.25}  # b ran twice: the later call's row
    assert merged["geomean_vs_inductor"] == pytest.approx((2.0 * 0.8 * 1.25) ** (1 / 3))
    assert [r["model"] for r in merged["regions_below_inductor"]] == ["b"]
    assert merged["part_s"] == {"regions": 20.0} and merged["date"] == "2026-12-04T21:39"
    assert [r["file"] for r in merged["runs"]] == ["one.json", "two.json"]


def test_runs_of_two_devices_are_not_merged():
    import codegen_report

    with pytest.raises(ValueError, match="differ in device"):
        codegen_report.merge([_run("d1", {"a": 1.0}), _run("d2", {"b": 1.0}, device="NVIDIA B200")], ["x", "y"])


def test_inductors_triton_kernels_are_read_with_the_config_its_autotuning_kept():
    """The GPU-only diagnostic (Inductor makes Triton kernels only for CUDA), read from a module as Inductor
    leaves it: an autotuner whose launchers hold the kept config; one seen twice is listed once."""
    import types

    import triton
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    tuner = object.__new__(CachingAutotuner)
    tuner.launchers = [types.SimpleNamespace(config=triton.Config({"XBLOCK": 1024}, num_warps=4, num_stages=1))]
    tuner.configs = [triton.Config({"XBLOCK": 512}, num_warps=8), triton.Config({"XBLOCK": 1024}, num_warps=4)]
    tuner.fn = types.SimpleNamespace(src="def triton_poi_fused_add_0(...): ...")
    module = types.SimpleNamespace(triton_poi_fused_add_0=tuner, other=3)
    (kernel,) = codegen_inductor.triton_kernels([module, module])
    assert kernel == {"name": "triton_poi_fused_add_0", "configs": [{"XBLOCK": 1024, "num_warps": 4, "num_stages": 1}],
                      "source": "def triton_poi_fused_add_0(...): ..."}

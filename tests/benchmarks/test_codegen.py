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

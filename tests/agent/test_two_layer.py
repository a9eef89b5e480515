"""`hoid.optimize` on the 2-layer, full-width Qwen3-1.7B decode step (hidden 2048, 16 query and 8 KV heads
of 128, MLP 6144, bf16, cache 4096; a 512-token vocabulary) with the default offline proposers, priced by
the H200 measurements the project ships and the model: it stops for its budget, keeps kernels, labels
its gain modelled, and the graph it returns computes what the original does."""

import pytest
import torch

import hoid
from hoid.ir import run

pytest.importorskip("transformers")
pytestmark = pytest.mark.slow  # about 35 s here: building the model and its graph is half of it


@pytest.fixture(scope="module")
def step():
    from transformers import AutoModelForCausalLM

    from hoid.models import config, decode_step_graph

    cfg = config("qwen3-1.7b")
    cfg.num_hidden_layers, cfg.vocab_size = 2, 512
    torch.manual_seed(0)
    return decode_step_graph(AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval(), 4096)


def test_optimize_keeps_kernels_on_the_full_width_two_layer_decode_step(step, tmp_path, monkeypatch):
    monkeypatch.setenv("HOID_CACHE", str(tmp_path / "measure.sqlite"))
    opt = hoid.optimize(step, device="h200", budget=hoid.Budget(attempts=1), journal=tmp_path / "j.sqlite",
                        store=False, trials=2)
    assert opt.report.stop_reason == "budget spent: 1 attempts"
    [attempt] = opt.report.attempts
    assert attempt["verdict"] == "passed" and attempt["kept"], attempt
    kernels = [n for n in opt.graph.nodes if n.op == "kernel"]
    assert any(n.attrs["kernel"] == attempt["kernel"] for n in kernels)
    assert len([n for n in kernels if n.attrs["kernel"] == attempt["kernel"]]) >= 2  # at both layers' matches
    assert opt.speedup is None and opt.modelled_gain > 1 and "not a speedup" in str(opt.report)
    assert [a.evidence for a in opt.kernels.accepted] == ["modelled"]
    g = torch.Generator().manual_seed(0)
    caches = [torch.randn(v.type.shape, generator=g).to(torch.bfloat16) for v in step.inputs_of_kind("state")]
    inputs = [torch.tensor([[7]]), torch.tensor([5]), *caches]
    for expected, got in zip(run(step, *inputs), run(opt.graph, *inputs), strict=True):
        torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=2e-2)

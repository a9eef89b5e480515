"""The codegen proposer in the loop: on by default, its generated kernels checked (isolated, as source),
journaled with their source, kept on modelled evidence only with that label, one proposal per distinct
kernel, and every refused region journaled with its reason."""

from __future__ import annotations

import inspect

import torch

import hoid
from hoid.agent import proposer_names
from hoid.agent.agents import DEFAULT_AGENTS, proposers_for
from hoid.agent.codegen_proposer import CodegenProposer
from hoid.agent.proposer import Context
from hoid.ir import GraphBuilder
from hoid.kernels.codegen import find_regions


def _mlp(layers: int = 1):
    """x -> (x @ w + bias -> gelu -> + x, with a column sum over dim 0 (not a row reduction)) per layer."""
    gen = torch.Generator().manual_seed(0)
    b = GraphBuilder("mlp")
    x = b.input("x", (16, 64), "f32")
    h = x
    for i in range(layers):
        w = b.weight(f"w{i}", (64, 64), "f32", torch.randn(64, 64, generator=gen) / 8)
        bias = b.weight(f"b{i}", (64,), "f32", torch.randn(64, generator=gen))
        h = b.add(b.gelu(b.add(b.matmul(h, w), bias)), h)
    return b.build(h, b.exp(b.sum(h, dim=[0], keepdim=True)))


def test_codegen_is_on_by_default_after_the_library():
    assert DEFAULT_AGENTS == ("library", "codegen") and "codegen" in proposer_names()
    assert inspect.signature(hoid.optimize).parameters["agent"].default == DEFAULT_AGENTS
    assert [p.name for p in proposers_for(DEFAULT_AGENTS)] == ["library", "codegen"]


def test_one_proposal_per_distinct_kernel_and_refusals_reported():
    graph = _mlp(layers=2)
    skipped = []
    context = Context(graph, [], None, None, _skip=lambda who, what, why: skipped.append((who, what, why)))
    proposals = list(CodegenProposer().propose(context))
    fusions = [p for p in proposals if "add -> gelu -> add" in p.note]
    assert len(fusions) == 1  # both layers' bias + GELU + residual: one kernel, injected at every match
    assert [p.note.split(" (")[1].split(")")[0] for p in proposals if p not in fusions] == ["exp"]
    assert proposals[0].sweep[0] == {"block_m": "auto", "block_n": "auto", "num_warps": "auto"}
    assert context.region(proposals[0].region).pattern == proposals[0].kernel.pattern.name
    assert any("sum over dim [0]" in why for _, _, why in skipped), skipped


def test_a_generated_kernel_is_kept_as_modelled_with_its_source_journaled(tmp_path):
    opt = hoid.optimize(_mlp(), agent="codegen", journal=tmp_path / "j.sqlite", store=False, trials=8)
    assert opt.speedup is None and opt.modelled_gain > 1  # modelled off the device: never called a speedup
    assert not opt.report.measured and "modelled" in str(opt.report)
    kernels = [n for n in opt.graph.nodes if n.op == "kernel"]
    assert kernels and all(n.attrs["kernel"].startswith("codegen.") for n in kernels)
    rows = opt.report.attempts
    tried = [r for r in rows if r["kernel"].startswith("codegen.")]
    assert tried and tried[0]["verdict"] == "passed" and "@triton.jit" in tried[0]["source"]
    assert "(modelled" in tried[0]["why"]
    refused = opt.report.skipped
    assert refused and all(r["verdict"] == "skipped" and r["why"] for r in refused)
    assert not any(r["verdict"] == "skipped" for r in rows)  # a skip is no attempt: nothing was checked
    # the kept graph still computes the model: its kernels run their bodies where the kernel cannot
    x = torch.randn(16, 64)
    want = hoid.run(_mlp(), x, weights=_mlp().weights)
    got = hoid.run(opt.graph, x, weights=opt.graph.weights)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_a_looped_row_kernel_sweeps_the_tile_it_walks_rows_with():
    """A softmax over rows of 20000 (longer than one tile) is proposed as a looped kernel, its sweep trying
    a longer tile than "auto" first."""
    from hoid.kernels.codegen.legality import MAX_ROW
    from hoid.kernels.codegen.params import auto_params

    b = GraphBuilder("long")
    x = b.input("x", (4, MAX_ROW + 3616), "f32")
    graph = b.build(b.softmax(b.mul(x, 0.5), dim=-1))
    (proposal,) = CodegenProposer().propose(Context(graph, [], None, None, _skip=lambda *a: None))
    assert "def _pass2(" in proposal.kernel.source
    longer = 2 * auto_params(find_regions(graph).regions[0].generated.layout)["block_n"]
    assert proposal.sweep[1] == {"block_m": "auto", "block_n": longer, "num_warps": "auto"}


def test_with_checks_ahead_the_loop_keeps_what_it_keeps_checking_one_at_a_time(tmp_path, monkeypatch):
    """On a GPU machine the generated kernels' isolated checks run several at once (`Evaluations.check_ahead`);
    here (2 cores) one at a time unless asked: both ways keep the same kernels."""
    import threading

    from hoid.agent import evaluations

    one = hoid.optimize(_mlp(), agent="codegen", journal=tmp_path / "one.sqlite", store=False, trials=8)
    threads = []
    check = evaluations.Evaluations._check

    def spy(self, *args):
        threads.append(threading.current_thread().name)
        return check(self, *args)

    monkeypatch.setattr(evaluations, "ISOLATED_AT_ONCE", 2)
    monkeypatch.setattr(evaluations.Evaluations, "_check", spy)
    ahead = hoid.optimize(_mlp(), agent="codegen", journal=tmp_path / "ahead.sqlite", store=False, trials=8)
    assert len(threads) == 2 and all(name.startswith("hoid-check") for name in threads)
    assert ahead.report.kept == one.report.kept and ahead.report.kept
    assert [(a["kernel"], a["verdict"], a["kept"]) for a in ahead.report.attempts] == \
        [(a["kernel"], a["verdict"], a["kept"]) for a in one.report.attempts]

"""Advisory mode against a scripted loopback server: the model reorders the library's candidates and
suggests params; it can neither add a kernel nor widen a declared bound."""

from __future__ import annotations

import json

import pytest

import hoid
from hoid.agent import LibraryProposer
from hoid.agent.advisory import AdvisoryProposer
from hoid.models.examples import mlp_block

from .openai_server import ScriptedServer, call


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HOID_CACHE", str(tmp_path / "measure.sqlite"))


HUGE = 1 << 20  # an int: `check_params` alone lets it through (a spec's heuristics may pick sizes between choices)


def advise(request):
    text = request["json"]["messages"][-1]["content"]
    if "Region silu_mul(" in text:
        return call("rank_candidates", {"ranking": [
            {"kernel": "torch.silu_mul", "risk": "low: one torch call", "why": "tiny rows"},
            {"kernel": "triton.silu_mul", "risk": "medium", "params": {"block": HUGE}},  # outside: refused
            {"kernel": "made.up_kernel", "risk": "low"}]})  # not a candidate: ignored
    if "Region linear(" in text:
        return call("rank_candidates", {"ranking": [
            {"kernel": "triton.linear", "risk": "low", "params": {"block_n": 16, "split_k": 2}}]})
    return call("rank_candidates", {"ranking": []})


class Spy:
    """Runs the proposers on the loop's own context and keeps what they propose (nothing is attempted)."""

    name = "spy"

    def __init__(self, *proposers):
        self.proposers, self.seen = proposers, {}

    def propose(self, context):
        for p in self.proposers:
            self.seen[p.name] = list(p.propose(context))
        return []


def _run(tmp_path, advisor):
    spy = Spy(LibraryProposer(), advisor)
    opt = hoid.optimize(mlp_block(), agent=[spy], device="h200", journal=tmp_path / "j.sqlite", store=False,
                        rules=False)
    return spy.seen["library"], spy.seen[advisor.name], opt


def test_advice_changes_the_first_candidate_and_never_widens_a_bound(tmp_path):
    with ScriptedServer([], after=advise) as server:
        advisor = AdvisoryProposer("test-model", base_url=server.url, api_key="k-test", regions=2, timeout=5)
        library, advised, opt = _run(tmp_path, advisor)
    # the two hottest regions are advised: gate/up's linear (two matches) first, then the SiLU gating
    assert [p.region.split("(")[0] for p in library][:3] == ["linear", "matmul", "silu_mul"]
    gating = lambda ps: [p for p in ps if p.region.startswith("silu_mul(")]  # noqa: E731
    assert [p.kernel.id for p in gating(library)] == ["triton.silu_mul", "torch.silu_mul"]
    assert [p.kernel.id for p in gating(advised)] == ["torch.silu_mul", "triton.silu_mul"]  # the advice, first
    assert "risk: low: one torch call" in gating(advised)[0].note
    # the same proposals, only reordered: nothing added, nothing lost
    key = lambda p: (p.region, p.kernel.id)  # noqa: E731
    assert sorted(map(key, advised)) == sorted(map(key, library))
    triton_silu = next(p for p in advised if p.kernel.id == "triton.silu_mul")
    assert triton_silu.kernel.check_params({"block": HUGE})["block"] == HUGE  # the spec alone would take it
    for p in advised:  # the advisor's sweeps stay within every declared choice
        for params in p.sweep:
            assert all(params[q.name] in q.choices for q in p.kernel.params), (p.kernel.id, params)
    assert triton_silu.sweep == next(p for p in library if p.kernel.id == "triton.silu_mul").sweep
    linear = next(p for p in advised if p.kernel.id == "triton.linear")
    assert linear.sweep[0] == {**linear.kernel.default_params(), "block_n": 16, "split_k": 2}  # a suggestion in bounds
    refused = [a for a in opt.report.attempts if a["verdict"] == "refused"]
    assert len(refused) == 1 and "outside its declared choices" in refused[0]["why"]
    asked = [r["json"]["messages"][-1]["content"] for r in server.requests]
    [about_gating] = [text for text in asked if "Region silu_mul(" in text]
    assert len(asked) == 2 and "triton.silu_mul" in about_gating
    listing = json.loads(about_gating.split("Candidates:\n", 1)[1])
    assert {c["kernel"] for c in listing} == {"triton.silu_mul", "torch.silu_mul"}


def test_no_advice_leaves_the_library_order(tmp_path):
    with ScriptedServer([]) as server:  # garbage only
        advisor = AdvisoryProposer("test-model", base_url=server.url, api_key="k-test", regions=1, timeout=5,
                                   retries=0)
        library, advised, opt = _run(tmp_path, advisor)
    assert [(p.region, p.kernel.id, p.sweep) for p in advised] == [(p.region, p.kernel.id, p.sweep) for p in library]
    [failure] = opt.report.attempts
    assert failure["verdict"] == "failed" and "no answer: the body is not JSON" in failure["why"], failure["why"]

"""The OpenAI proposer's bounds against loopback servers: garbage for the whole budget, the library and
the LLM in one run, the CLI's progress, the packaged prompts, and the redaction of secrets."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
import torch

import hoid
from hoid.agent import Budget
from hoid.agent.llm_endpoint import Redactor
from hoid.agent.llm_tools import TOOL_NAMES, prompt
from hoid.agent.openai_proposer import OpenAIProposer, system_prompt
from hoid.cli import main
from hoid.ir import run
from hoid.models.examples import mlp_block

from .openai_server import Raw, ScriptedServer, Stall, Status, call, prose
from .test_openai_proposer import GATE, SILU, last_tool, propose


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HOID_CACHE", str(tmp_path / "measure.sqlite"))
    monkeypatch.setenv("HOID_KERNELS", str(tmp_path / "kernels.sqlite"))


def test_garbage_for_the_whole_budget_ends_within_it(tmp_path):
    garbage = itertools.cycle([Raw("<html>502 bad gateway</html>", "text/html"), prose("Let me think about it."),
                               call("propose_kernel", None, raw="{'single': quotes}"), Status(503),
                               Raw('{"choices": "none"}'), Stall(5.0), call("nope", {})])
    budget = Budget(minutes=0.15)  # 9 s
    with ScriptedServer([], after=lambda _request: next(garbage)) as server:
        agent = OpenAIProposer("test-model", base_url=server.url, api_key="k-test", timeout=2.0, backoff=0.05,
                               failures=10**6, turns=10**6, tokens=10**9)
        started = time.monotonic()
        opt = hoid.optimize(mlp_block(), agent=[agent], device="h200", journal=tmp_path / "j.sqlite", store=False,
                            rules=False, budget=budget)
        elapsed = time.monotonic() - started
    assert 9 <= elapsed < 9 + 3, elapsed  # the budget, and at most a request's cut-off timeout past it
    assert opt.report.stop_reason == "budget spent: 0.15 minutes"
    attempts = opt.report.attempts
    assert attempts and not any(a["kept"] for a in attempts) and all(a["verdict"] == "failed" for a in attempts)
    text = str(opt.report)
    assert "kept 0" in text and "prose instead of a tool call" in text and "not JSON" in text
    assert "timed out" in text and "HTTP 503" in text and "malformed JSON" in text
    assert not any(n.op == "kernel" for n in opt.graph.nodes)
    x = torch.randn(4, 64)
    torch.testing.assert_close(run(opt.graph, x)[0], run(mlp_block(), x)[0])


def test_a_conversation_keeps_its_own_turns_and_minutes(tmp_path):
    with ScriptedServer([], after=lambda _r: prose("thinking out loud")) as server:
        agent = OpenAIProposer("test-model", base_url=server.url, api_key="k-test", turns=3, failures=99)
        opt = hoid.optimize(mlp_block(), agent=[agent], device="h200", journal=tmp_path / "j.sqlite", store=False,
                            rules=False)
    assert len(server.requests) == 3 and len(opt.report.attempts) == 3  # three turns, three failures recorded
    with ScriptedServer([], after=Stall(3.0)) as server:
        agent = OpenAIProposer("test-model", base_url=server.url, api_key="k-test", minutes=2.5 / 60, timeout=1.0,
                               backoff=0.05, failures=99, turns=99)
        started = time.monotonic()
        hoid.optimize(mlp_block(), agent=[agent], device="h200", journal=tmp_path / "k.sqlite", store=False,
                      rules=False)
        assert time.monotonic() - started < 2.5 + 2.5  # its own 2.5 s, setup and one cut-off request aside


def test_library_and_llm_in_one_run_compete_in_one_egraph(tmp_path, monkeypatch):
    script = [call("read_region", {"values": GATE}), propose(SILU), call("finish", {})]
    with ScriptedServer(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "k-env-secret-1234")
        opt = hoid.optimize(mlp_block(), agent=["library", "openai:test-model"], device="h200", rules=False,
                            journal=tmp_path / "j.sqlite", store=False, trials=4,
                            budget=Budget(minutes=5))
    assert server.requests[0]["headers"]["authorization"] == "Bearer k-env-secret-1234"  # from the environment
    rows = opt.report.attempts
    lib = [a for a in rows if a["proposer"] == "library"]
    llm = next(a for a in rows if a["proposer"] == "openai:test-model" and a["source"] == SILU)
    assert any(a["kernel"] == "triton.silu_mul" and a["kept"] for a in lib)  # the library took silu*mul first ...
    # ... and the LLM's kernel for the same nodes, checked and priced, lost to it in the shared e-graph's extraction
    assert llm["verdict"] == "passed" and not llm["kept"] and llm["kernel_s"] is not None
    assert llm["why"].startswith("no finalist uses it")
    kernels = {n.attrs["kernel"] for n in opt.graph.nodes if n.op == "kernel"}
    assert "triton.silu_mul" in kernels and llm["kernel"] not in kernels
    assert "k-env-secret-1234" not in str(opt.report)
    x = torch.randn(4, 64)
    torch.testing.assert_close(run(opt.graph, x)[0], run(mlp_block(), x)[0], rtol=1e-5, atol=1e-6)


def test_cli_optimize_shows_the_conversation(tmp_path, monkeypatch, capsys):
    script = [call("read_profile", {}, tokens=321), call("read_region", {"region": "1"}, tokens=654),
              call("finish", {"summary": "nothing to gain"})]
    with ScriptedServer(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs no key
        code = main(["optimize", "example:mlp_block", "--agent", "openai:test-model", "--device", "h200",
                     "--journal", str(tmp_path / "j.sqlite"), "--budget", "2m"])
    err = capsys.readouterr().err
    assert code == 0
    assert "openai:test-model: turn 1, 321 tokens: read_profile" in err
    assert "openai:test-model: turn 3, 1075 tokens: finish" in err  # the tokens add up, turn by turn
    assert "# region" in last_tool(server.requests[2])  # the region document went back to the model


def test_no_endpoint_is_a_recorded_failure(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    opt = hoid.optimize(mlp_block(), agent="openai:test-model", device="h200", journal=tmp_path / "j.sqlite",
                        store=False, rules=False)
    assert opt.report.attempts and "no endpoint: set OPENAI_API_KEY" in opt.report.attempts[0]["why"]
    assert "ended after 4 failures in a row" in opt.report.attempts[-1]["why"]


def test_prompts_are_packaged_and_quote_what_the_checks_reject():
    from hoid.kernels.source_check import ALLOWED_IMPORTS
    from hoid.verify.static import REFUSED_ATTRS, REFUSED_CALLS, REFUSED_MODULES
    from hoid.verify.verdict import KINDS

    rejects = prompt("rejects")
    for kind, meaning in KINDS.items():
        assert f"- `{kind}`: {meaning}" in rejects  # quoted as verdict.py says it
    for name in [*ALLOWED_IMPORTS, *REFUSED_MODULES, *REFUSED_CALLS, *REFUSED_ATTRS]:
        assert f"`{name}`" in rejects, name
    assert "autotune" in rejects
    text = system_prompt()
    for tool in TOOL_NAMES - {"read_graph"}:
        assert f"`{tool}`" in text, tool
    for word in ("Hopper", "Blackwell", "Split-K", "Pipelining", "CuTe DSL", "Destination-passing", "PARAMS"):
        assert word in text
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"hoid.agent" = ["prompts/*.md"]' in pyproject
    assert prompt("advisory")


def test_redaction():
    redact = Redactor("k-secret-value")
    text = redact('key k-secret-value; {"Authorization": "Bearer abc.def"}; authorization: Basic xyz; sk-abcdefghijkl')
    assert not any(s in text for s in ("k-secret-value", "abc.def", "xyz", "sk-abcdefghijkl"))
    assert text.count("[redacted]") >= 4
    assert "secret" not in repr(OpenAIProposer("m", api_key="k-secret-value"))

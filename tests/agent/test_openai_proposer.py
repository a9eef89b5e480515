"""The OpenAI proposer against a scripted loopback server (real HTTP, the real `openai` client), on
`mlp_block` without rule sets for a modelled H200 plan: one kernel replacing a cut region of several ops
is priced cheaper than the ops, so "kept" does not hang on a noisy CPU timer. The kernels are torch
sources (the protocol is the point); their checks run isolated, as every LLM kernel's do."""

from __future__ import annotations

import json
import sqlite3

import pytest
import torch

import hoid
from hoid.agent import Budget, Journal
from hoid.agent.openai_proposer import OpenAIProposer
from hoid.ir import run
from hoid.models.examples import mlp_block

from .openai_server import Raw, ScriptedServer, Stall, Status, call, completion, prose

KEY = "sk-test-0123456789abcdef-secret"
NORM = ["t1", "t2", "t3", "t4", "t5"]  # pow, mean, add, rsqrt, mul over t0: x * rsqrt(mean(x^2) + 1e-6)
GATE = ["t10", "t13"]  # silu(gate) * up

WRONG = """import torch


def launch(x, out):
    out.copy_(x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6))  # sum, not mean: wrong
"""
RIGHT = """import torch

PARAMS = {"CHUNK": (4, 2)}
EPS = 1e-6


def launch(x, out, *, CHUNK=4):
    for r in range(0, x.shape[0], CHUNK):
        xs = x[r:r + CHUNK]
        out[r:r + CHUNK] = xs * torch.rsqrt(xs.pow(2).mean(-1, keepdim=True) + EPS)
"""
CHEAT = """import torch

SEEN = {}


def launch(x, out):
    if "y" not in SEEN:
        SEEN["y"] = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    out.copy_(SEEN["y"])
"""
SILU = """import torch


def launch(gate, up, out):
    torch.mul(torch.nn.functional.silu(gate), up, out=out)
"""
HOSTILE_IMPORT = "import os\n\n\ndef launch(x, out):\n    os.system('echo pwned')\n"
HOSTILE_DUNDER = "def launch(x, out):\n    __import__('os').system('echo pwned')\n    out.zero_()\n"


def last_tool(request) -> str:
    return [m for m in request["json"]["messages"] if m.get("role") == "tool"][-1]["content"]


def propose(source, hypothesis="the cut region runs five launches where one kernel streams x once"):
    return lambda request: call("propose_kernel", {"region": last_tool(request), "hypothesis": hypothesis,
                                                   "source": source, "name": "norm"})


def propose_again(source):
    """After a read_region: the same region document as the last propose used."""
    def step(request):
        region = next(json.loads(c["function"]["arguments"])["region"]
                      for m in reversed(request["json"]["messages"]) if m.get("role") == "assistant"
                      for c in (m.get("tool_calls") or []) if c["function"]["name"] == "propose_kernel"
                      and c["function"]["arguments"].startswith("{\"region\""))
        return call("propose_kernel", {"region": region, "source": source, "name": "norm",
                                       "hypothesis": "the counterexample shows sum where mean is meant; divide by K"})
    return step


def echo_key(request):  # a hostile server: it sends back the Authorization header it received
    return prose(f"ok, your header was Authorization: {request['headers'].get('authorization')}")


SCRIPT = [
    Status(429, headers=(("retry-after", "0"),)),  # rate limited: retried
    call("read_profile", {}),
    lambda r: Status(500, json.dumps({"error": {"message": f"boom {r['headers'].get('authorization')}"}})),
    call("read_region", {"values": NORM}),
    propose(WRONG),  # rejected: the counterexample goes back
    propose_again(RIGHT),  # corrected: kept
    propose_again(CHEAT),  # rejected: the cheat named
    call("propose_kernel", None, raw="{\"region\": \"1\", \"source\": "),  # malformed JSON
    call("rm_rf", {"path": "/"}),  # an unknown tool
    echo_key,  # prose (echoing the key)
    Raw("this is { not json", "application/json"),  # a body that is not JSON
    Stall(4.0),  # timed out, then retried
    call("read_region", {"values": GATE}),
    propose(SILU, hypothesis=f"silu and mul are two launches; one kernel writes the product {KEY}"),  # kept
    call("read_region", {"values": NORM}),
    propose(HOSTILE_IMPORT),  # refused before any check
    propose_again(HOSTILE_DUNDER),  # refused by the static pass
    completion({"content": None, "refusal": "I cannot help with that"}),
    call("propose_kernel", {"region": "1", "source": RIGHT}, finish="length"),  # truncated
    call("propose_kernel", {"region": "1", "source": RIGHT}),  # no hypothesis: bad arguments
    call("finish", {"summary": "done"}),
]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    root = tmp_path_factory.mktemp("openai")
    mp = pytest.MonkeyPatch()
    mp.setenv("HOID_CACHE", str(root / "cache.sqlite"))
    events = []
    with ScriptedServer(SCRIPT) as server:
        agent = OpenAIProposer("test-model", base_url=server.url, api_key=KEY, timeout=1.5, backoff=0.05,
                               failures=10, turns=40)
        opt = hoid.optimize(mlp_block(), agent=[agent], device="h200", journal=root / "j.sqlite", store=False,
                            rules=False, trials=4, budget=Budget(minutes=6), progress=events.append)
    mp.undo()
    with Journal(root / "j.sqlite") as journal:
        rows = journal.attempts(opt.report.run)
    return root, opt, rows, server, events


def test_kept_rejected_corrected_and_the_verdicts_go_back(scenario):
    _, opt, rows, server, _ = scenario
    checked = [r for r in rows if r["region"] != "-"]
    by_source = {r["source"]: r for r in checked}
    wrong, right, cheat, silu = (by_source[s] for s in (WRONG, RIGHT, CHEAT, SILU))
    assert wrong["verdict"] == "rejected" and "worst" in wrong["why"] and not wrong["kept"]
    assert right["kept"] and silu["kept"]
    assert cheat["verdict"] == "rejected" and not cheat["kept"]
    assert "returns cached results" in cheat["why"]  # the cheat, named
    # the answer to the wrong proposal, as the model read it on the next turn: kind and counterexample
    verdicts = [json.loads(last_tool(r)) for r in server.requests
                if r["json"]["messages"][-1].get("role") == "tool" and last_tool(r).startswith("{\"kernel\"")]
    first = verdicts[0]
    assert first["verdict"] == "rejected" and first["kind"] == "mismatch" and "seed" in first["why"]
    assert [v["kind"] for v in verdicts if v["verdict"] == "rejected"][1:] == ["cached", "static"]
    kept = [v for v in verdicts if v["kept"]]
    assert len(kept) == 2 and all(v["floor_s"] > 0 and v["speed_vs_region"] > 0 for v in kept)
    kernels = {n.attrs["kernel"] for n in opt.graph.nodes if n.op == "kernel"}
    assert kernels == {right["kernel"], silu["kernel"]}
    x = torch.randn(4, 64)
    torch.testing.assert_close(run(opt.graph, x)[0], run(mlp_block(), x)[0], rtol=1e-5, atol=1e-6)


def test_every_failure_is_a_failed_attempt_with_its_reason(scenario):
    _, opt, rows, _, _ = scenario
    failures = [r["why"] for r in rows if r["region"] == "-"]
    for expected in ("HTTP 429", "HTTP 500", "malformed JSON", "unknown tool 'rm_rf'", "prose instead of a tool call",
                     "not JSON", "timed out", "import of 'os'", "refused: I cannot help", "truncated",
                     "state your hypothesis"):
        assert any(expected in why for why in failures), (expected, failures)
    dunder = next(r for r in rows if r["source"] == HOSTILE_DUNDER)
    assert dunder["verdict"] == "rejected" and "__import__" in dunder["why"]
    assert next(r for r in rows if "import of 'os'" in (r["why"] or ""))["verdict"] == "rejected"
    assert opt.report.stop_reason == "every proposer ran dry"  # it finished; nothing crashed


def test_the_hypothesis_is_recorded_and_reported(scenario):
    _, opt, rows, _, _ = scenario
    silu = next(r for r in rows if r["source"] == SILU)
    assert silu["note"].startswith("hypothesis: silu and mul are two launches")
    assert "hypothesis: silu and mul are two launches" in str(opt.report)


def test_no_key_nor_authorization_in_the_journal_or_the_report(scenario):
    root, opt, _, server, _ = scenario
    assert all(r["headers"].get("authorization") == f"Bearer {KEY}" for r in server.requests)  # it was sent
    assert all(KEY not in json.dumps(r["json"]) for r in server.requests)  # nor echoed back to the model
    db = sqlite3.connect(root / "j.sqlite")
    dump = "\n".join(db.iterdump())
    db.close()
    for text in (dump, str(opt.report), (root / "j.sqlite").read_bytes().decode("latin-1")):
        assert KEY not in text and "Bearer sk" not in text
    assert "[redacted]" in dump  # the echo was caught, not lost


def test_progress_shows_turns_tokens_and_verdicts(scenario):
    *_, events = scenario
    llm = [e for e in events if e["kind"] == "llm"]
    assert llm and max(e["turn"] for e in llm) >= 15 and max(e["tokens"] for e in llm) >= 1000
    assert any("kept" in e["what"] for e in llm) and any("(mismatch)" in e["what"] for e in llm)

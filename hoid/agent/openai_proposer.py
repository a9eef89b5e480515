"""`OpenAIProposer` (`agent="openai:<model>"`): a tool-calling conversation with any OpenAI-compatible
endpoint (OpenAI, vLLM, llama.cpp, SGLang, ...) through the `openai` client, in which the model reads the
profile and the regions, states a hypothesis, and proposes kernels; the loop checks and measures each.

The conversation is a generator inside the loop's `propose`: when the model calls `propose_kernel`, the
proposal is yielded; the loop checks it, measures it and decides before the generator resumes, so the
verdict (the counterexample, the cheat named, the time against the region's and its floor) is the tool's
answer on the next turn. Tools: `hoid/agent/llm_tools.py`; prompts: `hoid/agent/prompts/`; the endpoint,
its retries and the redaction of secrets: `hoid/agent/llm_endpoint.py`.

Bounds: each conversation has its own turns, tokens and minutes, and the run's `Budget` (turns, tokens,
minutes) is read through the context before every call; every request's timeout is cut to what is left.
Failures (no answer after the retries, a body that is not a completion, prose instead of a tool call, a
refusal, a truncated answer, arguments that are not JSON, an unknown tool, bad arguments, a source that
cannot be loaded) are journaled as failed attempts with their reason and told to the model; after
`failures` of them in a row the conversation ends. Nothing here raises into the loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from .llm_endpoint import CallFailed, Endpoint
from .llm_tools import TOOL_NAMES, TOOLS, Toolbox, ToolError, prompt
from .proposer import Context, Proposal

NUDGE = ("Answer with one tool call (read_profile, read_region, read_examples, propose_kernel, read_verdict, "
         "finish); prose is not read.")


def system_prompt() -> str:
    return "\n\n".join(prompt(n) for n in ("system", "contract", "rejects", "guidance"))


class OpenAIProposer:
    """model: the endpoint's model name; base_url, api_key: else `OPENAI_BASE_URL`, `OPENAI_API_KEY`.
    Per conversation: turns, tokens, minutes; conversations: how many (each starts afresh, seeing the
    earlier ones' outcomes in the profile's history); failures: in a row before a conversation ends;
    timeout, retries, backoff: per request (see `Endpoint`); answer_tokens: max_tokens of each answer."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None, turns: int = 16,
                 tokens: int = 200_000, minutes: float = 20.0, conversations: int = 1, failures: int = 4,
                 timeout: float = 120.0, retries: int = 3, backoff: float = 1.0, answer_tokens: int | None = 8192):
        self.endpoint = Endpoint(model, base_url=base_url, api_key=api_key, timeout=timeout, retries=retries,
                                 backoff=backoff)
        self.name = f"openai:{model}"
        self.turns, self.tokens, self.minutes = turns, tokens, minutes
        self.conversations, self.failures, self.answer_tokens = conversations, failures, answer_tokens

    def __repr__(self) -> str:  # the key stays out of every repr, log and traceback
        return f"OpenAIProposer({self.endpoint.model!r}, base_url={self.endpoint.base_url!r})"

    def propose(self, context: Context) -> Iterable[Proposal]:
        tools = Toolbox(context, self.name)
        for _ in range(self.conversations):
            ended = yield from _Conversation(self, context, tools).run()
            if ended == "budget":
                return


class _Conversation:
    def __init__(self, owner: OpenAIProposer, context: Context, tools: Toolbox):
        self.owner, self.context, self.tools = owner, context, tools
        self.redact = owner.endpoint.redact
        self.turn = self.tokens = self.in_row = 0
        self.deadline = time.monotonic() + owner.minutes * 60

    def run(self):
        """Yields proposals; returns why it ended ("finished", "bounds", "budget", "failures")."""
        messages = [{"role": "system", "content": system_prompt()},
                    {"role": "user", "content": self._task()}]
        while True:
            ended = self._bounded()
            if ended is not None:
                return ended
            try:
                answer = self.owner.endpoint.chat(messages, tools=TOOLS, deadline=self._deadline(),
                                                  max_tokens=self.owner.answer_tokens)
            except CallFailed as e:
                self._spend(0)  # a failed call is a turn: a server that only fails still runs out of turns
                self._fail(f"turn {self.turn}", f"no answer: {e.reason}")
                continue
            for reason in answer.retries:  # each failed request is recorded, even when a retry answered
                self._record(f"turn {self.turn + 1}", f"retried: {self.redact(reason)}")
            self._spend(answer.tokens)
            ended = yield from self._answer(answer, messages)
            if ended is not None:
                return ended

    # --- one answer ------------------------------------------------------------------------------
    def _answer(self, answer, messages):
        message = answer.message
        where = f"turn {self.turn}"
        refusal = getattr(message, "refusal", None)
        calls = list(getattr(message, "tool_calls", None) or [])
        content = self.redact(getattr(message, "content", None) or "")
        if refusal:
            self._fail(where, f"refused: {self.redact(refusal)[:300]}")
            messages.append({"role": "user", "content": NUDGE})
            return None
        if answer.finish == "length":
            self._fail(where, f"truncated at the answer's token limit ({len(calls)} tool calls cut off unrun)")
            messages.append({"role": "user", "content": "Your answer was cut off at the token limit; send a "
                             "shorter one: one tool call, a smaller source."})
            return None
        if not calls:
            what = "prose instead of a tool call" if content.strip() else "an empty answer"
            self._fail(where, f"{what}: {' '.join(content.split())[:200]!r}")
            if content:
                messages.append({"role": "assistant", "content": content[:4000]})
            messages.append({"role": "user", "content": NUDGE})
            return None
        calls = calls[:4]  # a bounded number of tool calls per answer
        ids = [str(getattr(c, "id", None) or f"call_{self.turn}_{i}") for i, c in enumerate(calls)]
        messages.append({"role": "assistant", "content": content or None, "tool_calls": [
            {"id": i, "type": "function", "function": {
                "name": self.redact(getattr(getattr(c, "function", None), "name", "") or "")[:64],
                "arguments": self.redact(getattr(getattr(c, "function", None), "arguments", "") or "")[:60_000]}}
            for i, c in zip(ids, calls)]})
        finished = False
        for call_id, call in zip(ids, calls):
            result = yield from self._call(call, where)
            if result is None:  # finish
                finished = True
                result = "finished"
            messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        return "finished" if finished else None

    def _call(self, call, where: str):
        """Run one tool call; yields the proposal of a propose_kernel; returns the tool's answer (None: finish)."""
        function = getattr(call, "function", None)
        name = self.redact(getattr(function, "name", "") or "")
        raw = self.redact(getattr(function, "arguments", "") or "")
        if name not in TOOL_NAMES:
            self._fail(where, f"unknown tool {name[:60]!r}")
            return f"error: unknown tool {name[:60]!r}; the tools are {', '.join(sorted(TOOL_NAMES))}"
        try:
            args = json.loads(raw) if raw.strip() else {}
        except (json.JSONDecodeError, RecursionError) as e:
            self._fail(f"{where}: {name}", f"malformed JSON arguments ({e.__class__.__name__}: {e})"[:300])
            return f"error: the arguments of {name} are not JSON ({e}); send a JSON object"
        if not isinstance(args, dict):
            self._fail(f"{where}: {name}", f"bad arguments: a JSON {type(args).__name__}, not an object")
            return "error: the arguments must be a JSON object"
        if name == "finish":
            self.context.emit(kind="llm", proposer=self.owner.name, turn=self.turn, tokens=self.tokens,
                              what="finish")
            return None
        if name != "propose_kernel":
            try:
                text = self.tools.read(name, args)
            except ToolError as e:
                self._fail(f"{where}: {name}", f"bad arguments: {self.redact(e.reason)[:300]}")
                return f"error: {e.reason}"
            self.in_row = 0
            self.context.emit(kind="llm", proposer=self.owner.name, turn=self.turn, tokens=self.tokens, what=name)
            return text
        try:
            proposal, base = self.tools.proposal(args)
        except ToolError as e:
            self._fail(f"{where}: propose_kernel", self.redact(e.reason)[:2000], verdict=e.verdict)
            return f"{e.verdict}: {e.reason}"
        before = len(self.context.history)
        yield proposal  # the loop checks, measures and decides before this resumes
        self.in_row = 0
        new = self.context.history[before:]
        outcome = next((o for o in reversed(new) if o.kernel == proposal.kernel.id), None)
        answer = self.tools.verdict(outcome, proposal, base)
        self.context.emit(kind="llm", proposer=self.owner.name, turn=self.turn, tokens=self.tokens,
                          what=f"propose_kernel {proposal.kernel.id}: "
                               f"{'kept' if outcome and outcome.kept else outcome.verdict if outcome else 'skipped'}"
                               f"{f' ({outcome.kind})' if outcome and outcome.kind else ''}")
        return answer

    # --- bounds and records ----------------------------------------------------------------------
    def _bounded(self) -> str | None:
        if self.context.exhausted() is not None:
            return "budget"
        left = self.context.seconds_left()
        if left is not None and left < 0.5:  # too little for a request: let the last moment pass, so that the
            time.sleep(left)                 # loop reads the budget as spent and says so
            return "budget"
        o = self.owner
        if self.turn >= o.turns or self.tokens >= o.tokens or time.monotonic() >= self.deadline:
            return "bounds"
        if self.in_row >= o.failures:
            self._record("conversation", f"ended after {self.in_row} failures in a row")
            return "failures"
        return None

    def _deadline(self) -> float:
        left = self.context.seconds_left()
        return min(self.deadline, time.monotonic() + left - 0.25) if left is not None else self.deadline

    def _spend(self, tokens: int) -> None:
        self.turn += 1
        self.tokens += tokens
        self.context.spend(tokens=tokens, turns=1)

    def _fail(self, where: str, why: str, *, verdict: str = "failed") -> None:
        self.in_row += 1
        self._record(where, why, verdict)

    def _record(self, where: str, why: str, verdict: str = "failed") -> None:
        why = " ".join(self.redact(why).split())  # one line: the report lists each failure as one item
        self.context.record_failure(self.owner.name, where, why, verdict=verdict)
        self.context.emit(kind="llm", proposer=self.owner.name, turn=self.turn, tokens=self.tokens,
                          what=f"{where}: {verdict}: {why[:120]}")

    def _task(self) -> str:
        device = self.context.device
        done = [f"- {o.kernel} for {o.region}: {o.verdict}{' (kept)' if o.kept else ''}: {o.why[:160]}"
                for o in self.context.history if o.proposer == self.owner.name and o.region][-8:]
        return (f"Optimize graph {self.context.graph.name!r} for {getattr(device, 'name', device)} "
                f"({getattr(device, 'arch', '?')}). Its hot regions:\n{self.tools.profile()}\n\n"
                + ("Earlier attempts of yours:\n" + "\n".join(done) + "\n\n" if done else "")
                + "Start with read_region or read_examples for the region you think can gain most; state your "
                  "hypothesis and propose_kernel; finish when no region can gain.")

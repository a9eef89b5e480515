"""`AdvisoryProposer` (`agent="openai-advisor:<model>"`): the LLM advises, the library proposes.

For each hot region (hottest first) the model sees the library's candidates (what `LibraryProposer` would
propose, with each kernel's declared params and choices) and answers one `rank_candidates` call: an order,
a risk label per kernel, and params it suggests. Safe by construction: the proposals are the library's
own, only reordered (a kernel the model names that is not a candidate is ignored; those it leaves out
follow in the library's order), and a suggested param set is used only when `KernelSpec.check_params`
accepts it and every value is one of the declared choices (`llm_tools.strict_params`); anything else is
refused, journaled, and the library's sweep is used unchanged. No advice (a failed call, garbage) means
the library's order: the advisor never proposes less than the library would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from .library_proposer import LibraryProposer
from .llm_endpoint import CallFailed, Endpoint
from .llm_tools import ToolError, prompt, strict_params
from .proposer import Context, Proposal

RANK = {"type": "function", "function": {
    "name": "rank_candidates", "description": "Rank the library's candidate kernels for the region, best first.",
    "parameters": {"type": "object", "required": ["ranking"], "properties": {"ranking": {"type": "array", "items": {
        "type": "object", "required": ["kernel"], "properties": {
            "kernel": {"type": "string"}, "risk": {"type": "string", "description": "low, medium or high, and why"},
            "params": {"type": "object", "description": "a param set within the kernel's declared choices"},
            "why": {"type": "string"}}}}}}}}


class AdvisoryProposer:
    """model, base_url, api_key, timeout, retries, backoff: as `OpenAIProposer`; regions: how many of the
    hottest regions get advice (the rest are proposed in the library's order); library: the proposer
    whose candidates are ranked (default `LibraryProposer()`)."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None, regions: int = 8,
                 timeout: float = 60.0, retries: int = 2, backoff: float = 1.0, library=None):
        self.endpoint = Endpoint(model, base_url=base_url, api_key=api_key, timeout=timeout, retries=retries,
                                 backoff=backoff)
        self.name = f"openai-advisor:{model}"
        self.regions = regions
        self.library = library or LibraryProposer()

    def __repr__(self) -> str:
        return f"AdvisoryProposer({self.endpoint.model!r}, base_url={self.endpoint.base_url!r})"

    def propose(self, context: Context) -> Iterable[Proposal]:
        by_region: dict[str, list[Proposal]] = {}
        for p in self.library.propose(context):
            by_region.setdefault(p.region, []).append(p)
        asked = 0
        for region in context.regions:
            candidates = by_region.get(region.key, [])
            if not candidates:
                continue
            advice = {}
            if asked < self.regions and (len(candidates) > 1 or candidates[0].kernel.params):  # else nothing to advise
                asked += 1
                advice = self._advise(context, region, candidates)
            yield from self._ordered(context, candidates, advice)

    def _ordered(self, context: Context, candidates: list[Proposal], advice: dict) -> list[Proposal]:
        ranked = [p for k in advice for p in candidates if p.kernel.id == k]
        rest = [p for p in candidates if p.kernel.id not in advice]
        out = []
        for rank, p in enumerate(ranked, 1):
            item = advice[p.kernel.id]
            sweep = p.sweep
            if isinstance(item.get("params"), dict) and item["params"]:
                try:
                    suggested = strict_params(p.kernel, item["params"])
                    sweep = (suggested, *[s for s in p.sweep if s != suggested])
                except ToolError as e:  # outside the declared bounds: refused, the library's sweep stands
                    self._record(context, p.kernel.id, f"suggested params refused: {e.reason}", "refused")
            note = f"advisor rank {rank}; risk: {str(item.get('risk') or '?')[:80]}; {str(item.get('why') or '')[:200]}"
            out.append(Proposal(p.region, p.kernel, sweep, note=self.endpoint.redact(note)))
        return out + rest

    def _advise(self, context: Context, region, candidates: list[Proposal]) -> dict:
        """{kernel id: its advice} in the model's order, for candidates only; {} when there is none."""
        if context.exhausted() is not None:
            return {}
        listing = [{"kernel": p.kernel.id, "backend": p.kernel.backend, "doc": p.kernel.doc[:200],
                    "params": {q.name: list(q.choices) for q in p.kernel.params}} for p in candidates]
        messages = [
            {"role": "system", "content": prompt("advisory") + "\n\n" + prompt("guidance")},
            {"role": "user", "content": f"Region {region.key} ({region.share:.1%} of the graph's time, "
             f"{region.seconds:.3g} s, {region.evidence}) on {getattr(context.device, 'name', '?')}. Candidates:\n"
             + json.dumps(listing, default=str)}]
        left = context.seconds_left()
        deadline = time.monotonic() + (min(self.endpoint.timeout, left) if left is not None else self.endpoint.timeout)
        try:
            answer = self.endpoint.chat(messages, tools=[RANK], deadline=deadline, max_tokens=2048)
        except CallFailed as e:
            context.spend(turns=1)
            self._record(context, f"advice for {region.key[:60]}", f"no answer: {e.reason}")
            return {}
        context.spend(tokens=answer.tokens, turns=1)
        ranking = self._ranking(answer)
        if ranking is None:
            self._record(context, f"advice for {region.key[:60]}", "no rank_candidates call with a ranking list")
            return {}
        known = {p.kernel.id for p in candidates}
        advice = {}
        for item in ranking:
            if isinstance(item, dict) and item.get("kernel") in known and item["kernel"] not in advice:
                advice[item["kernel"]] = item
        return advice

    def _ranking(self, answer):
        message = answer.message
        texts = [getattr(getattr(c, "function", None), "arguments", "") or ""
                 for c in (getattr(message, "tool_calls", None) or [])
                 if getattr(getattr(c, "function", None), "name", "") == "rank_candidates"]
        texts.append(getattr(message, "content", None) or "")  # a model without tool calls may answer in JSON
        for text in texts:
            try:
                value = json.loads(self.endpoint.redact(text))
            except (json.JSONDecodeError, RecursionError, TypeError):
                continue
            if isinstance(value, dict) and isinstance(value.get("ranking"), list):
                return value["ranking"]
        return None

    def _record(self, context: Context, what: str, why: str, verdict: str = "failed") -> None:
        why = self.endpoint.redact(why)
        context.record_failure(self.name, what, why, verdict=verdict)
        context.emit(kind="llm", proposer=self.name, turn=None, tokens=None, what=f"{what}: {verdict}: {why[:120]}")

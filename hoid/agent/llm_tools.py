"""The tools an LLM proposer offers its model, and what each does: reads of the graph, its profile, its
regions and the library, and the one write, `propose_kernel`, which builds a `Proposal` by the directory
proposer's path (`KernelSource` + a region document + declared `PARAMS`: `dir_proposer.region_spec`).

Reads answer with text; a bad argument raises `ToolError` with what was wrong and what is accepted, which
goes back to the model as the tool's answer (and into the journal as a failed attempt). Every answer is
cut to `LIMIT` characters so that one tool call cannot eat the token budget.
"""

from __future__ import annotations

import json
import re
from importlib import resources

from ..errors import HoidError
from .proposer import Context, Outcome, Proposal, RegionInfo

LIMIT = 12_000


class ToolError(Exception):
    """A tool call with bad arguments (or a kernel that cannot be loaded): the reason, for the model.
    `verdict`: how the journal records it ("failed", or "rejected" for source refused before any check)."""

    def __init__(self, reason: str, verdict: str = "failed"):
        super().__init__(reason)
        self.reason, self.verdict = reason, verdict


def prompt(name: str) -> str:
    """A prompt file of `hoid/agent/prompts/` (packaged as data)."""
    return resources.files("hoid.agent").joinpath("prompts", f"{name}.md").read_text()


def _function(name: str, doc: str, properties: dict, required=()) -> dict:
    return {"type": "function", "function": {"name": name, "description": doc, "parameters": {
        "type": "object", "properties": properties, "required": list(required)}}}


_REGION = {"type": "string", "description": "a rank (1 = hottest) or key from read_profile"}
TOOLS = [
    _function("read_profile", "The hot regions, hottest first: rank, key, share of the graph's time, current "
              "time, roofline floor, and how far above the floor.", {}),
    _function("read_graph", "The whole graph as a .hoid document (weights declared, not their values).", {}),
    _function("read_region", "A region as a .hoid document: inputs in launch order, outputs in write order. Give "
              "a region from the profile, or `values` (names of graph values) to cut any convex set of nodes.",
              {"region": _REGION, "values": {"type": "array", "items": {"type": "string"}}}),
    _function("read_examples", "The library's kernels for a region's pattern (their sources) and the kernel "
              "contract your kernel must follow.", {"region": _REGION}),
    _function("propose_kernel", "Propose a kernel for a region. It is checked in isolation, measured, and kept "
              "only if the whole graph gets faster; the answer is the verdict.",
              {"region": {"type": "string", "description": "a rank or key from read_profile, or a region .hoid "
                          "document from read_region"},
               "hypothesis": {"type": "string", "description": "what is slow and why, and what this kernel "
                              "changes (recorded with the attempt)"},
               "source": {"type": "string", "description": "the whole module: launch(*inputs, *outputs, "
                          "**params), PARAMS declared"},
               "name": {"type": "string", "description": "a short name for the kernel, e.g. rmsnorm_rows"},
               "sweep": {"type": "array", "items": {"type": "object"},
                         "description": "param sets to measure, each within the declared PARAMS"}},
              ("region", "hypothesis", "source")),
    _function("read_verdict", "The verdict of an earlier proposal (default: the last).",
              {"kernel": {"type": "string", "description": "the kernel id a proposal's verdict named"}}),
    _function("finish", "End the conversation.", {"summary": {"type": "string"}}),
]
TOOL_NAMES = {t["function"]["name"] for t in TOOLS}


class Toolbox:
    """The tools over one run's `Context`, for proposer `proposer` (see the module doc)."""

    def __init__(self, context: Context, proposer: str):
        self.context, self.proposer = context, proposer
        self.base = list(context.regions)  # the loop's own regions (the model's are added to context.regions)
        self._floors: dict[str, float] = {}
        self._space = None
        self.verdicts: dict[str, str] = {}
        self.count = 0

    # --- reads -----------------------------------------------------------------------------------
    def read(self, name: str, args: dict) -> str:
        if name == "read_profile":
            return self.profile()
        if name == "read_graph":
            from ..ir.text import dumps

            return _cut(dumps(self.context.graph))
        if name == "read_region":
            return self.region_text(args)
        if name == "read_examples":
            return self.examples(args)
        if name == "read_verdict":
            return self.read_verdict(args)
        raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(sorted(TOOL_NAMES))}")

    def profile(self) -> str:
        from ..measure.timing import format_seconds

        lines = [f"graph {self.context.graph.name!r} on {getattr(self.context.device, 'name', '?')}: "
                 f"{len(self.base)} regions, hottest first"]
        for i, r in enumerate(self.base, 1):
            floor = self.floor(r)
            above = f"{r.seconds / floor:.1f}x its floor" if floor > 0 else "floor unknown"
            lines.append(f"{i}. share {r.share:.1%}, {format_seconds(r.seconds)} ({r.evidence}) at each of "
                         f"{r.matches} match(es), floor {format_seconds(floor)}, {above}: {r.key}")
        return _cut("\n".join(lines))

    def floor(self, region: RegionInfo) -> float:
        from ..measure.roofline import region_floor

        if region.key not in self._floors:
            try:
                self._floors[region.key] = region_floor(region.body, self.context.device)
            except Exception:  # noqa: BLE001  a device without a roofline (a CPU) has no floor to give
                self._floors[region.key] = 0.0
        return self._floors[region.key]

    def region(self, ref) -> RegionInfo:
        """A region of the profile by rank or key."""
        text = str(ref if ref is not None else "").strip()
        if not text:
            raise ToolError("name a region: a rank (1 = hottest) or a key from read_profile")
        if text.isdigit() and 1 <= int(text) <= len(self.base):
            return self.base[int(text) - 1]
        for r in self.base:
            if r.key == text:
                return r
        raise ToolError(f"no region {text[:80]!r}: give a rank 1 to {len(self.base)} or a key from read_profile")

    def region_text(self, args: dict) -> str:
        from ..ir import Region
        from ..ir.text import dumps

        values = args.get("values")
        if values:
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise ToolError("values: a list of value names of the graph, e.g. [\"t3\", \"t4\"]")
            try:
                cut = Region.of(self.context.graph, [v.strip() for v in values])
                cut.check_convex()
                return _cut(dumps(cut.body()))
            except HoidError as e:
                raise ToolError(f"values {values[:8]}: {' '.join(str(e).split())}") from None
            except (KeyError, ValueError) as e:
                raise ToolError(f"values {values[:8]}: {e}") from None
        r = self.region(args.get("region"))
        return _cut(f"# region {r.key}\n{dumps(r.body)}")

    def examples(self, args: dict) -> str:
        from ..kernels.registry import library_kernels

        r = self.region(args.get("region")) if args.get("region") else None
        parts = [prompt("contract")]
        for spec in library_kernels().values():
            if r is None or spec.pattern.name == r.pattern:
                if spec.source:
                    parts.append(f"## library kernel {spec.id} ({spec.backend}; the library's contract passes the "
                                 f"pattern's attrs as keyword arguments, yours has them fixed)\n{spec.source}")
        return _cut("\n\n".join(parts))

    def read_verdict(self, args: dict) -> str:
        if not self.verdicts:
            raise ToolError("no proposal has a verdict yet: propose_kernel first")
        kernel = args.get("kernel")
        if kernel:
            if kernel not in self.verdicts:
                raise ToolError(f"no verdict for {str(kernel)[:80]!r}; known: {', '.join(self.verdicts)}")
            return self.verdicts[kernel]
        return next(reversed(self.verdicts.values()))

    # --- the write -------------------------------------------------------------------------------
    def proposal(self, args: dict) -> tuple[Proposal, RegionInfo]:
        """The `Proposal` for a propose_kernel call, its region added to the context's (raises ToolError)."""
        from ..kernels.loader import KernelSource, KernelSourceError
        from .dir_proposer import region_spec

        hypothesis = args.get("hypothesis")
        if not isinstance(hypothesis, str) or len(hypothesis.split()) < 3:
            raise ToolError("state your hypothesis first (`hypothesis`: what is slow and why, what the kernel "
                            "changes); a proposal without one is refused")
        source = args.get("source")
        if not isinstance(source, str) or not source.strip():
            raise ToolError("`source`: the whole kernel module as text")
        base, body = self._region_of(args.get("region"))
        try:
            kernel = KernelSource(source, "launch")
        except KernelSourceError as e:
            raise ToolError(f"static: {e}", verdict="rejected") from None
        slug = re.sub(r"[^a-z0-9_]+", "_", str(args.get("name") or base.pattern).lower()).strip("_")[:32] or "kernel"
        self.count += 1
        kernel_id = f"llm.{slug}_{kernel.version[:8]}"  # the source's hash: two sources never share an id
        try:
            spec = region_spec(kernel, body, kernel_id, doc=hypothesis[:200])
        except (HoidError, ValueError) as e:
            raise ToolError(f"the kernel's spec cannot be built: {' '.join(str(e).split())}", "rejected") from None
        types = tuple(gi.value.type for gi in body.inputs)
        key = RegionInfo.key_of(spec.pattern.name, types, {})
        region = RegionInfo(key, spec.pattern.name, types, {}, body, base.seconds, base.share, base.evidence)
        if all(r.key != key for r in self.context.regions):
            self.context.regions.append(region)
        sweep = self._sweep(spec, args.get("sweep"))
        return Proposal(key, spec, sweep, note=f"hypothesis: {' '.join(hypothesis.split())}"), base

    def _region_of(self, ref):
        """(the profile region the proposal prices against, the region document it is built for)."""
        from ..ir.text import dumps, loads

        text = str(ref if ref is not None else "")
        if "\n" not in text:
            r = self.region(text)
            return r, r.body
        try:
            body = loads(text)
        except (HoidError, ValueError) as e:
            raise ToolError(f"region: not a .hoid document: {' '.join(str(e).split())[:300]}") from None
        for r in self.base:
            if dumps(r.body) == dumps(body):
                return r, body
        found = self._occurs(body)
        if found is None:
            raise ToolError("region: that document does not occur in the graph; cut it with read_region(values=...) "
                            "or name a region of read_profile")
        return found, body

    def _occurs(self, body) -> RegionInfo | None:
        """The region of a cut document as the loop would find it (matched in the graph's e-graph)."""
        from ..kernels.pattern import graph_pattern
        from ..search.space import SearchSpace
        from .dir_proposer import region_spec
        from .regions import discover

        try:
            graph_pattern(body, "region:probe")
            if self._space is None:
                self._space = SearchSpace(self.context.graph, target=self.context.device.target())
            from ..kernels.loader import KernelSource

            probe = region_spec(KernelSource("def launch(*a):\n    pass\n"), body, "llm.probe")
            found = discover(self._space, [probe], self.context.device, measured=False)
        except (HoidError, ValueError, KeyError) as e:
            raise ToolError(f"region: {' '.join(str(e).split())[:300]}") from None
        return found[0] if found else None

    def _sweep(self, spec, sweep) -> tuple[dict, ...]:
        from ..measure.tune import neighbours

        if sweep in (None, [], {}):
            return neighbours(spec, 6)
        if isinstance(sweep, dict):
            sweep = [sweep]
        if not isinstance(sweep, list) or not all(isinstance(p, dict) for p in sweep):
            raise ToolError("sweep: a list of param sets, e.g. [{\"BLOCK\": 128}, {\"BLOCK\": 256}]")
        out = []
        for params in sweep[:8]:
            out.append(strict_params(spec, params))
        return tuple(out)

    # --- the verdict -----------------------------------------------------------------------------
    def verdict(self, outcome: Outcome | None, proposal: Proposal, base: RegionInfo) -> str:
        """What the model reads back: the outcome with its figures against the region's time and floor."""
        if outcome is None:
            text = {"kernel": proposal.kernel.id, "verdict": "skipped", "why": "already accepted at this region"}
        else:
            floor = self.floor(base)
            text = {"kernel": proposal.kernel.id, "verdict": outcome.verdict, "kind": outcome.kind,
                    "kept": outcome.kept, "why": outcome.why[:4000], "region_s": base.seconds, "floor_s": floor}
            if outcome.kernel_s:
                text.update(kernel_s=outcome.kernel_s, evidence=outcome.evidence,
                            speed_vs_region=round(base.seconds / outcome.kernel_s, 3),
                            share_of_floor=round(floor / outcome.kernel_s, 3) if floor else None)
            if outcome.graph_s is not None:
                text["graph_s"] = outcome.graph_s
        answer = json.dumps(text, default=str)
        self.verdicts[proposal.kernel.id] = answer
        return answer


def strict_params(spec, params: dict) -> dict:
    """`params` completed with defaults, refused (ToolError) unless every value is one of its declared
    choices: `KernelSpec.check_params` also lets through any int where the grid has ints (for a spec's
    own heuristics); a model's suggestion gets no such room."""
    try:
        completed = spec.check_params(dict(params))
    except (ValueError, TypeError) as e:
        raise ToolError(str(e), "refused") from None
    declared = {p.name: p.choices for p in spec.params}
    for name, value in completed.items():
        if value not in declared.get(name, ()):
            raise ToolError(f"kernel {spec.id}: param {name}={value!r} is outside its declared choices "
                            f"{declared.get(name)}", "refused")
    return completed


def _cut(text: str) -> str:
    return text if len(text) <= LIMIT else text[:LIMIT] + f"\n... ({len(text) - LIMIT} more characters cut)"

"""The proposer protocol: how anything that suggests kernels (the library, a directory of kernels, an
LLM, your own code) talks to the loop.

    class MyProposer:
        name = "mine"
        def propose(self, context: Context) -> Iterable[Proposal]:
            for region in context.regions:                  # hottest first (share of modelled/measured time)
                if region.pattern == "rmsnorm":
                    yield Proposal(region.key, my_spec, sweep=[{"BLOCK": 256}, {"BLOCK": 1024}])

    hoid.optimize(graph, agent=[MyProposer(), "library"])

A proposer is any object with a `name` (stable: the journal and resume key attempts by it) and
`propose(context)`, an iterable of `Proposal`s, read lazily: the loop stops reading when the budget is
spent. It only suggests; the loop checks every proposal (`hoid.verify`, in a separate process for kernel
source), measures it, injects it into the e-graph at every match of its region, and keeps it only when
the whole graph gets faster beyond the noise. A proposer never sees a verdict it could game: it may read
`context.history` (earlier attempts' outcomes) to adapt. Proposers that spend LLM tokens report them
with `context.spend(tokens=, turns=)` so the budget can stop them. Offline proposers must be
deterministic (same context, same proposals in the same order): that is what makes runs reproducible.
A proposer whose proposals never depend on the outcomes of earlier ones (it reads neither `history` nor
`accepted`) says so with `independent = True`: then a pool of workers (`hoid.agent.WorkerPool`) may read
its proposals ahead and check and measure several at once; the loop still decides them in its order.
An independent proposer may also say `together = True`: its proposals are then decided as a batch first,
one extraction and one whole-graph measurement for all that pass (`hoid/agent/together.py`).

The loop's regions are those of the library's patterns. A proposer whose kernels implement other
patterns (a region cut from the graph, as `DirectoryProposer`'s do) lists their specs in an optional
`region_specs()`, and the loop finds their regions too. The names `agent=` accepts ("library",
"dir:PATH", ...) are `hoid.agent.agents`'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..ir import Graph, TensorType
from ..kernels.spec import KernelSpec


@dataclass(frozen=True)
class RegionInfo:
    """A region the loop can replace: a pattern (`pattern`, the name of a `hoid.kernels.Pattern`) matched
    in the graph's e-graph at input `types` with `attrs`; `body`: that region as a graph (the reference a
    kernel is checked against); `seconds`: one match's time; `matches`: how many places in the graph it
    matches (a kernel accepted for the region is injected at every one); `share`: all of them together as a
    share of the graph's time (how it ranks: Amdahl's law, so the RMSNorm of every layer, 57 matches of 7 us
    each in the Qwen3-1.7B step, ranks above a single 200 us lm head); `evidence`: "measured" or
    "modelled" (where `seconds` came from)."""

    key: str
    pattern: str
    types: tuple[TensorType, ...]
    attrs: dict
    body: Graph
    seconds: float
    share: float
    evidence: str
    matches: int = 1

    @property
    def total_seconds(self) -> float:
        """Its time at every match: what a kernel for it could save, at most."""
        return self.seconds * self.matches

    @staticmethod
    def key_of(pattern: str, types: Sequence[TensorType], attrs: dict) -> str:
        """The stable name of a region: its pattern, input types and attrs."""
        attrs_text = ",".join(f"{k}={attrs[k]!r}" for k in sorted(attrs))
        return f"{pattern}({', '.join(map(str, types))}){'{' + attrs_text + '}' if attrs_text else ''}"


@dataclass(frozen=True)
class Proposal:
    """A kernel for a region. region: a `RegionInfo.key` from the context; kernel: a `KernelSpec` whose
    pattern is the region's (a library kernel, or `KernelSource.to_spec(...)` for source: untrusted);
    sweep: the params to tune over (default: the spec's defaults, its "auto" resolved for the device);
    note: why (for the journal)."""

    region: str
    kernel: KernelSpec
    sweep: tuple[dict, ...] = ()
    note: str = ""

    def key(self, proposer: str) -> str:
        """What identifies this attempt across runs (resume skips a finished one): who, where, which code."""
        return f"{proposer}|{self.region}|{self.kernel.id}@{self.kernel.version}"


@dataclass(frozen=True)
class Outcome:
    """What became of an earlier attempt, as proposers may read it."""

    proposer: str
    region: str
    kernel: str
    verdict: str  # "passed", "rejected", "refused" (constraints), "reused", "failed" (a proposer's own failure)
    kept: bool
    why: str
    # what an LLM proposer reads back as the verdict: the rejection's kind (`hoid.verify.verdict.KINDS`), the
    # kernel's time and the best finalist's with it, and their evidence (None where not reached)
    kind: str | None = None
    kernel_s: float | None = None
    graph_s: float | None = None
    evidence: str | None = None


@dataclass
class Context:
    """What a proposer sees: the graph, its regions hottest first, the device the run optimizes for (a
    `hoid.measure.devices.Device`), the kernels accepted so far (`hoid.kernels.KernelSet`), and the
    outcomes of earlier attempts."""

    graph: Graph
    regions: list[RegionInfo]
    device: object
    accepted: object
    history: list[Outcome] = field(default_factory=list)
    _spend: Callable[[int, int], None] | None = None
    _skip: Callable[[str, str, str], None] | None = None
    # the run's budget and what it has spent: a proposer that works between proposals (an LLM conversation)
    # must stop itself, since the loop checks the budget only when a proposal arrives
    budget: object | None = None
    spent: object | None = None
    _record: Callable[[str, str, str, str], None] | None = None
    _emit: Callable[..., None] | None = None

    def region(self, key: str) -> RegionInfo:
        for r in self.regions:
            if r.key == key:
                return r
        raise KeyError(f"no region {key!r} in this context")

    def add_region(self, region: RegionInfo) -> RegionInfo:
        """Make a region the proposer cut itself (the codegen proposer's fusions: `hoid.ir.Region`) one
        that proposals may name; a region already there (same key) is kept as it is."""
        if all(r.key != region.key for r in self.regions):
            self.regions.append(region)
        return self.region(region.key)

    def skip(self, proposer: str, what: str, reason: str) -> None:
        """Record that `proposer` left `what` (a region, in words) without a proposal, and why: the journal
        keeps it beside the attempts (a refused fusion, say)."""
        if self._skip is not None:
            self._skip(proposer, what, reason)

    def spend(self, *, tokens: int = 0, turns: int = 0) -> None:
        """Report LLM tokens and turns spent, against the run's budget."""
        if self._spend is not None:
            self._spend(tokens, turns)

    def exhausted(self) -> str | None:
        """The run's spent limit in words (as the loop's stop reason), or None while the budget has room."""
        if self.budget is None or self.spent is None:
            return None
        return self.spent.exhausted(self.budget)

    def seconds_left(self) -> float | None:
        """Wall-clock seconds the run's budget has left (None: unbounded)."""
        if self.budget is None or self.spent is None or self.budget.minutes is None:
            return None
        return max(0.0, (self.budget.minutes - self.spent.minutes) * 60)

    def record_failure(self, proposer: str, what: str, why: str, *, verdict: str = "failed") -> None:
        """Journal a failure that never became a proposal (an LLM's malformed answer, a source that cannot be
        loaded) as a failed attempt with its reason, so the report shows it."""
        if self._record is not None:
            self._record(proposer, what, why, verdict)
        self.history.append(Outcome(proposer, "", what, verdict, False, why))

    def emit(self, **event) -> None:
        """A progress event for the CLI (a dict with a "kind"), e.g. an LLM turn."""
        if self._emit is not None:
            self._emit(**event)


@runtime_checkable
class Proposer(Protocol):
    """See the module doc."""

    name: str

    def propose(self, context: Context) -> Iterable[Proposal]: ...

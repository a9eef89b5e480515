"""What the loop extracts and times: a cost model that admits only some kernels, the finalists' whole-graph
times, whether a finalist runs a kernel where a proposal put it, and whether its time beats the best's
(`faster`; for a close call, timed again in turn with the best: `faster_in_turn`).

The e-graph holds every candidate ever injected; what an extraction may choose is decided by the cost
model alone: a kernel e-node that is neither kept nor on trial costs `OUT_OF_REACH`, so the extraction
sees the accepted kernels plus the ones being decided, and nothing else.
"""

from __future__ import annotations

from ..ir import Graph
from ..ir.graph import attr_key
from ..kernels.kernel_set import signature
from ..measure.noise import INTERLEAVED_MIN_GAIN, compare, compare_rounds
from ..measure.timing import Timing
from .executor import Evidence, WorkerLost

OUT_OF_REACH = 1e3  # seconds: what a kernel that is neither kept nor on trial costs in an extraction
MODELLED_MIN_GAIN = 1e-3  # a modelled price has no noise; below this a "gain" is the kernels' tie-break
INTERLEAVED_ROUNDS = 5  # a close call's rounds in turn: all five agreeing by chance, with no gain, is one in 32


class Allowed:
    """The cost model extraction sees: `inner`, with every kernel e-node not in `allowed` out of reach.
    `allowed` holds `signature`s."""

    def __init__(self, inner, allowed: set):
        self.inner, self.allowed = inner, allowed

    def prepare(self, kernels) -> None:
        """What extraction tells a cost model of the e-graph's kernels, passed on (`PricedCost.prepare`)."""
        if (prepare := getattr(self.inner, "prepare", None)) is not None:
            prepare(kernels)

    def __call__(self, call):
        if call.op == "kernel":
            if signature(call.attrs["kernel"], call.inputs, call.attrs["attrs"]) not in self.allowed:
                return OUT_OF_REACH
        return self.inner(call)


def measure_finalists(executor, graphs, stop=None) -> list[Evidence]:
    """The finalists' whole-graph times (`graphs`: (graph, modelled cost) pairs, cheapest first): together
    where the executor can (a pool), else one by one, and then, with `stop` (a callable: why no more may be
    timed, else None), the first always and the others only while `stop()` says nothing: the times of a
    prefix of `graphs`. A model-sized graph costs seconds to compile and time, and a batch's finalists
    (k per extraction, one extraction more for each kernel left out) are many: BGE-M3's optimize at a
    2-minute budget ran past 5 on the H100 (12-05)."""
    if hasattr(executor, "measure_graphs"):
        return executor.measure_graphs(graphs)
    timed = []
    for g, modelled in graphs:
        if timed and stop is not None and stop() is not None:
            break
        timed.append(executor.measure_graph(g, modelled=modelled))
    return timed


def uses(graph: Graph, kernel_id: str, region) -> bool:
    """Does `graph` run `kernel_id` at `region`'s signature (shapes and dtypes: the e-graph's, no layouts)?"""
    key = attr_key(region.attrs)
    return any(n.op == "kernel" and n.attrs["kernel"] == kernel_id and len(n.inputs) == len(region.types)
               and all(v.type.same_data_type(t) for v, t in zip(n.inputs, region.types, strict=True))
               and attr_key(n.attrs["attrs"]) == key for n in graph.nodes)


def faster(candidate: Evidence, best: Evidence) -> tuple[bool, str]:
    """Is `candidate` faster than `best`: beyond the measured noise, or (modelled) at all; and why."""
    if candidate.evidence == "measured" and best.evidence == "measured":
        # each repeat of the best's measurement is one timing of the baseline: their spread is the noise
        base = [Timing((s,), "given") for s in (best.samples or (best.seconds,))]
        timing = Timing(candidate.samples or (candidate.seconds,), "given")
        verdict = compare(timing, base * 2 if len(base) < 2 else base)
        return verdict.faster, f"whole graph {verdict.reason} (measured)"
    gain = best.seconds / candidate.seconds - 1 if candidate.seconds > 0 else 0.0
    if gain > MODELLED_MIN_GAIN:
        return True, f"whole graph {gain:.1%} cheaper (modelled)"
    return False, f"whole graph not cheaper: {gain:+.2%} (modelled)"


def close_call(candidate: Evidence, best: Evidence) -> bool:
    """A measured gain that `faster`'s noise floor may refuse and timing in turn may still resolve: both
    measured, the candidate's median ahead by more than `noise.INTERLEAVED_MIN_GAIN`."""
    return (candidate.evidence == "measured" and best.evidence == "measured" and candidate.seconds > 0
            and best.seconds / candidate.seconds - 1 > INTERLEAVED_MIN_GAIN)


def faster_in_turn(executor, graph, candidate: Evidence, best_graph, best: Evidence) -> tuple[bool, str, Evidence]:
    """`faster`; and where it refused a close call, `graph` and `best_graph` timed again in turn on the
    executor (`time_interleaved`, `INTERLEAVED_ROUNDS` each) and judged round by round (`noise.compare_rounds`).
    (faster, why, the candidate's evidence: from those rounds where they ran). A timing in turn whose worker
    was lost leaves the call refused, saying so."""
    kept, why = faster(candidate, best)
    if kept or best_graph is None or not close_call(candidate, best):
        return kept, why, candidate
    timer = getattr(executor, "time_interleaved", None)
    if timer is None:
        return False, (f"{why}; a close call, not timed again: {type(executor).__name__} cannot time two graphs "
                       "in turn (time_interleaved)"), candidate
    try:
        best_again, again = timer([best_graph, graph], rounds=INTERLEAVED_ROUNDS)
    except WorkerLost as e:
        return False, f"{why}; a close call, not timed again: {e}", candidate
    verdict = compare_rounds(again.samples, best_again.samples)
    return verdict.faster, f"{why}; a close call, timed again in turn with the best: {verdict.reason}", again

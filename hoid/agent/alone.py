"""Deciding one proposal alone: how the loop decides every proposal that no batch (`together.py`) decided.

    its evaluation (check, then the kernel measured over its sweep) -> inject it -> extract the top k with
    it on trial beside the accepted kernels -> time whole the finalists that run it -> keep it, and the
    best finalist, only on a gain beyond the noise

Every outcome is an attempt finished in the journal: rejected (the check), passed (and kept or not, with
why), or failed (a worker lost twice, its evaluation or its finalists' timing).
"""

from __future__ import annotations

from ..kernels.kernel_set import KernelSet
from .executor import Evaluation, WorkerLost
from .proposer import Proposal


def decide_alone(run, proposer: str, proposal: Proposal, region) -> None:
    """Decide `proposal` of `proposer` at `region` for the loop's `run` (a `loop.Runner`): its attempt
    begun, decided (a kept kernel admitted, its best finalist the best graph) and finished."""
    attempt = run.begin_attempt(proposer, proposal, region)
    try:
        result = run.evaluations.take(proposal.key(proposer), proposal.kernel, region, proposal.sweep).result()
    except WorkerLost as e:
        verdict, kept, why, fields, kind = "failed", False, str(e), {}, None
    else:
        verdict, kept, why, fields = _decide(run, proposal.kernel, region, result, attempt)
        kind = getattr(result.verdict, "kind", None)  # goes back to the proposer with the outcome
    run.finish_attempt(attempt, proposer, region, proposal.kernel, verdict, kept, why, fields, kind=kind)


def retried_note(result: Evaluation) -> str:
    return f"; evaluated again after its worker was lost ({result.retried})" if result.retried else ""


def rejection(result: Evaluation) -> tuple[str, dict] | None:
    """(why, the journal's fields) where the check (or what came before it) rejected `result`, else None."""
    if result.verdict is None:
        return result.error + retried_note(result), {}
    if not result.verdict.ok:
        return result.verdict.reason + retried_note(result), {"verdict_reason": result.verdict.reason}
    return None


def _decide(run, spec, region, result: Evaluation, attempt: int) -> tuple[str, bool, str, dict]:
    """The verdict word, kept, why and the journal's fields of `spec` at `region`, evaluated as `result`."""
    if (rejected := rejection(result)) is not None:
        return "rejected", False, *rejected
    retried, verdict = retried_note(result), result.verdict
    fields = {"verdict_reason": verdict.reason}
    if result.kernel is None:
        return "passed", False, result.error + retried, fields
    params, kernel = result.params, result.kernel
    fields.update(params=params, kernel_s=kernel.seconds, kernel_evidence=kernel.evidence,
                  kernel_method=kernel.method)
    trial = KernelSet.empty().accept(spec, region.types, region.attrs, params, evidence=kernel.evidence)
    try:
        best = run.best_finalist(trial)
    except WorkerLost as e:
        return "failed", False, f"finalists not measured: {e}", fields
    if best is None:
        return "passed", False, "no finalist uses it: the extraction found it no cheaper where it applies", fields
    best_f, best_e = best
    gain, why, best_e = run.beats_best(best_e, best_f.graph)
    fields.update(graph_s=best_e.seconds, graph_evidence=best_e.evidence)
    if not gain:
        return "passed", False, why + retried, fields
    measured = kernel.evidence == "measured" and best_e.evidence == "measured"
    run.admit_kernel(spec, region, params, measured)
    run.keep_graph(best_f.graph, best_e, attempt)
    return "passed", True, why + ("" if measured else " (modelled: provisional, not stored)") + retried, fields

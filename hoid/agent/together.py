"""Deciding a batch of proposals at once (a proposer with `together = True`: the library's, a kernel
directory's, codegen's).

One by one, each proposal costs an extraction and a whole-graph measurement of its finalists: for a
decode step's dozen library regions that is a dozen whole-graph compiles and timings (5-7 s each for
Qwen3-1.7B on the H200), and a 1-minute `hoid.optimize` kept one library kernel. Together:

    check and measure each kernel as alone -> inject all that passed -> one extraction over them all
    -> one whole-graph measurement of its finalists -> on a gain, keep those the best finalist uses

Why passing over the others is sound: the batch's best finalist is feasible with any one unused kernel
added beside the kept ones, so under the extraction's prices it could only tie alone. Without a gain (or
with fewer than two passing) nothing is decided here: the loop decides them one by one as any proposal,
their checks and kernel measurements reused: a batch that gains nothing costs one extra measurement.
"""

from __future__ import annotations

from ..kernels.kernel_set import KernelSet, signature
from .budget import Budget
from .executor import WorkerLost
from .finalists import Allowed, measure_finalists, uses
from .journal import graph_hash, source_text
from .proposer import Context, Proposal


def decide_together(run, proposer: str, proposals: list[Proposal], context: Context) -> set[str]:
    """Decide `proposals` of `proposer` at once for the loop's `run` (a `loop.Runner`); returns the keys
    of those decided (journaled, kept or passed over), none when they are left to be decided one by one."""
    passed = [c for c in _evaluate(run, proposer, proposals, context)
              if c[3].verdict is not None and c[3].verdict.ok and c[3].kernel is not None]
    if len(passed) < 2:
        return set()
    trial = KernelSet.empty()
    for proposal, _, region, result in passed:
        trial = trial.accept(proposal.kernel, region.types, region.attrs, result.params,
                             evidence=result.kernel.evidence)
    run._apply_library(run.space, trial)
    signatures = {signature(p.kernel.id, r.types, r.attrs) for p, _, r, _ in passed}
    finalists = run.space.extract(Allowed(run.cost, run.allowed | signatures), k=run.k).finalists
    # a finalist that runs none of the batch says nothing about it
    finalists = [f for f in {graph_hash(f.graph): f for f in finalists}.values()
                 if any(uses(f.graph, p.kernel.id, r) for p, _, r, _ in passed)]
    if not finalists:
        run._emit(kind="together", proposer=proposer, passed=len(passed), used=0, kept=False,
                  why="no finalist uses any of them")
        return set()
    try:
        timed = measure_finalists(run.executor, [(f.graph, f.cost) for f in finalists])
    except WorkerLost:
        return set()  # decided one by one, where a lost measurement is recorded
    best_f, best_e = min(zip(finalists, timed, strict=True), key=lambda fe: fe[1].seconds)
    gain, why = run._gain(best_e)
    used = {key for proposal, key, region, _ in passed if uses(best_f.graph, proposal.kernel.id, region)}
    run._emit(kind="together", proposer=proposer, passed=len(passed), used=len(used), kept=gain, why=why)
    if not gain or not used:
        return set()
    attempt = None
    for proposal, key, region, result in passed:
        run.spend.attempts += 1
        kernel, keep = result.kernel, key in used
        measured = kernel.evidence == "measured" and best_e.evidence == "measured"
        if keep:
            said = f"kept, decided together with the {len(passed)} of {proposer}'s that passed: {why}" + (
                "" if measured else " (modelled: provisional, not stored)")
        else:  # the batch's optimum is feasible with this one and the kept alone: it could only tie
            said = f"decided together: the extraction over all {len(passed)} of {proposer}'s that passed chose others"
        if result.retried:
            said += f"; evaluated again after its worker was lost ({result.retried})"
        fields = dict(verdict_reason=result.verdict.reason, params=result.params, kernel_s=kernel.seconds,
                      kernel_evidence=kernel.evidence, kernel_method=kernel.method)
        if keep:
            fields.update(graph_s=best_e.seconds, graph_evidence=best_e.evidence)
        attempt_id = run.journal.begin_attempt(run.run_id, key, proposer, region, proposal.kernel, proposal.sweep,
                                               source_text(proposal.kernel), note=proposal.note)
        if keep:
            run._admit(proposal.kernel, region, result.params, measured)
            attempt = attempt_id
        run._pending.pop(key, None)
        run._record(attempt_id, proposer, region, proposal.kernel, "passed", keep, said, fields,
                    kind=getattr(result.verdict, "kind", None))
    run._keep(best_f.graph, best_e, attempt)
    return {key for _, key, _, _ in passed}


def _evaluate(run, proposer: str, proposals: list[Proposal], context: Context) -> list[tuple]:
    """(proposal, key, region, evaluation) of each proposal not yet decided, evaluated (submitted ahead
    where the executor is a pool) as far as the budget's attempts and minutes allow."""
    room = None if run.budget.attempts is None else run.budget.attempts - run.spend.attempts
    fresh = []
    for proposal in proposals:
        key, region = proposal.key(proposer), context.region(proposal.region)
        if signature(proposal.kernel.id, region.types, region.attrs) in run.allowed or \
                run.journal.finished_attempt(run.run_id, key) is not None:
            continue  # its own turn replays or skips it
        if room is not None and len(fresh) >= room or \
                run.spend.exhausted(Budget(minutes=run.budget.minutes)) is not None:
            break  # out of attempts or time: what was evaluated is still decided, together
        if key not in run._pending:
            run._pending[key] = run._submit(proposal.kernel, region, proposal.sweep)
        fresh.append((proposal, key, region))
    evaluated = []
    for proposal, key, region in fresh:
        try:
            evaluated.append((proposal, key, region, run._pending[key].result()))
        except WorkerLost:
            continue  # decided alone, where it is recorded as failed
    return evaluated

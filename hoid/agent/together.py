"""Deciding a batch of proposals at once (a proposer with `together = True`: the library's, a kernel
directory's, codegen's).

One by one, each proposal costs an extraction and a whole-graph measurement of its finalists: for a
decode step's dozen library regions that is a dozen whole-graph compiles and timings (5-7 s each for
Qwen3-1.7B on the H200), and a 1-minute `hoid.optimize` kept one library kernel. Together:

    check and measure each kernel as alone -> inject all that passed -> one extraction over them all
    -> one whole-graph measurement of its finalists -> on a gain, keep those the best finalist uses

Under a budget of minutes with a proposer still to come, each kernel is measured at its sweep's first params
first, and the rest of the sweeps (the costliest regions' first) only within the batch's share of the
minutes (`loop.py` says why); a proposal whose sweep was cut says so in the journal.

Why passing over the others is sound: the batch's best finalist is feasible with any one unused kernel
added beside the kept ones, so under the extraction's prices it could only tie alone. Prices are times
alone, and a kernel can lose in the graph what it wins alone (a fused kernel that breaks its neighbours'
overlap): so the finalists include, for each kernel the cheapest runs, the cheapest without it
(`Runner.best_finalist`), and one the measurement passed over is journaled with both times. Without a gain (or
with fewer than two passing) nothing is decided here: the loop decides them one by one as any proposal,
their checks and kernel measurements reused: a batch that gains nothing costs one extra measurement.
A proposal its check rejects needs no measurement: it is journaled with why at once, so that a budget
that ends after the batch does not lose it (nor does the report); so are those that passed in a batch that
gained nothing, when the budget's minutes end with it (they would get no turn of their own).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field, replace

from ..kernels.kernel_set import KernelSet
from .alone import rejection, retried_note
from .executor import Evaluation, WorkerLost
from .finalists import uses
from .proposer import Context, Proposal


def decide_together(run, proposer: str, proposals: list[Proposal], context: Context) -> set[str]:
    """Decide `proposals` of `proposer` at once for the loop's `run` (a `loop.Runner`); returns the keys
    of those decided (journaled, kept or passed over), none when they are left to be decided one by one."""
    start = time.perf_counter()
    evaluated, not_reached = _evaluate(run, proposer, proposals, context)
    tails = _measure_tails(run, evaluated) if run.shares.tails_wait() else Tails()
    evaluated = tails.apply(evaluated)
    passed = [c for c in evaluated if _passed(c[3])]
    # where a 1-minute budget goes (the H200's warm run spent 61 s on 24 library kernels), and how far it
    # reached: the proposals a spent budget left unevaluated (the H200's 1-minute runs of 2026-12-03 never
    # reached the merged QKV projection), said with the event
    spent = {"evaluated": len(evaluated), "failed": len(evaluated) - len(passed), "not_reached": not_reached,
             "evaluate_s": round(time.perf_counter() - start, 2),
             "check_s": round(sum(e.check_s or 0.0 for *_, e in evaluated), 2),
             "measure_kernels_s": round(sum(e.measure_s or 0.0 for *_, e in evaluated), 2), **tails.spent()}
    rejected = _record_rejections(run, proposer, evaluated)  # no measurement decides these: said now, not lost
    if len(passed) < 2:
        # nothing to decide together; said all the same, so that the log shows where the turn's time went
        # (BGE-M3 on the CPU, 12-05: codegen's turn checked two kernels in 116 s in the interpreter, the budget
        # ended, and neither the log nor the journal said a word of it)
        run.emit(kind="together", proposer=proposer, passed=len(passed), used=0, kept=False,
                 why="fewer than two passed: each is decided alone", **spent)
        return rejected | _record_unreached(run, proposer, passed, "nothing beside it passed to decide it with, and "
                                                           "no time was left to measure it alone", tails)
    trial = KernelSet.empty()
    for proposal, _, region, result in passed:
        trial = trial.accept(proposal.kernel, region.types, region.attrs, result.params,
                             evidence=result.kernel.evidence)
    try:
        best = run.best_finalist(trial)
    except WorkerLost:
        return rejected  # the rest decided one by one, where a lost measurement is recorded
    spent.update({k: round(v, 2) if isinstance(v, float) else v for k, v in run.finalist_timing.items()})
    if best is None:
        run.emit(kind="together", proposer=proposer, passed=len(passed), used=0, kept=False,
                 why="no finalist uses any of them", **spent)
        return rejected | _record_unreached(run, proposer, passed, "which gained nothing: no finalist used any of "
                                                                   "them", tails)
    best_f, best_e = best
    gain, why, best_e = run.beats_best(best_e, best_f.graph)
    used = {key for proposal, key, region, _ in passed if uses(best_f.graph, proposal.kernel.id, region)}
    run.emit(kind="together", proposer=proposer, passed=len(passed), used=len(used), kept=gain, why=why, **spent)
    if not gain or not used:
        return rejected | _record_unreached(run, proposer, passed, "which gained nothing: " + (
            why if not gain else "no finalist used any of them"), tails)
    attempt = None
    for proposal, key, region, result in passed:
        kernel, keep = result.kernel, key in used
        measured = kernel.evidence == "measured" and best_e.evidence == "measured"
        if keep:
            said = f"kept, decided together with the {len(passed)} of {proposer}'s that passed: {why}" + (
                "" if measured else " (modelled: provisional, not stored)")
        elif (timed_with := _fastest_using(run.finalists_timed, proposal.kernel.id, region)) is not None:
            ran = "ran" if best_e.evidence == "measured" else "costs"  # a modelled plan's graphs are priced
            said = (f"decided together, {best_e.evidence}: the best graph without it {ran} {best_e.seconds * 1e3:.4g} "
                    f"ms, the best with it {timed_with * 1e3:.4g} ms (of the {len(passed)} of {proposer}'s that "
                    f"passed)")
        else:  # the batch's optimum is feasible with this one and the kept alone: it could only tie
            said = f"decided together: the extraction over all {len(passed)} of {proposer}'s that passed chose others"
        said += tails.note(key) + retried_note(result)
        fields = _passed_fields(result)
        if keep:
            fields.update(graph_s=best_e.seconds, graph_evidence=best_e.evidence)
        attempt_id = run.begin_attempt(proposer, proposal, region)
        if keep:
            run.admit_kernel(proposal.kernel, region, result.params, measured)
            attempt = attempt_id
        run.evaluations.drop(key)
        run.finish_attempt(attempt_id, proposer, region, proposal.kernel, "passed", keep, said, fields,
                           kind=getattr(result.verdict, "kind", None))
    run.keep_graph(best_f.graph, best_e, attempt)
    return rejected | {key for _, key, _, _ in passed}


def _fastest_using(timed: list[tuple], kernel_id: str, region) -> float | None:
    """The fastest whole-graph seconds among the timed finalists that run `kernel_id` at `region`; None when
    none does (then the extraction, not the measurement, passed it over)."""
    times = [evidence.seconds for finalist, evidence in timed if uses(finalist.graph, kernel_id, region)]
    return min(times, default=None)


def _record_unreached(run, proposer: str, passed: list[tuple], why: str, tails: Tails) -> set[str]:
    """Where the budget's minutes ended with a batch that gained nothing, the passing proposals get no turn of
    their own: each is journaled now as passed and not kept, with the batch's outcome (the H200's warm run of
    2026-12-04 evaluated 8 codegen kernels in 51 s, its batch gained 0.0%, and the journal held none of them).
    Their keys; none while there is time for their turns (the module doc says why those come)."""
    if run.shares.out_of_time() is None:
        return set()
    keys = set()
    for proposal, key, region, result in passed:
        attempt = run.begin_attempt(proposer, proposal, region)
        run.evaluations.drop(key)
        said = f"passed; not decided alone, the budget ended after its batch of {len(passed)}: {why}"
        said += tails.note(key) + retried_note(result)
        run.finish_attempt(attempt, proposer, region, proposal.kernel, "passed", False, said, _passed_fields(result),
                           kind=getattr(result.verdict, "kind", None))
        keys.add(key)
    return keys


def _passed_fields(result) -> dict:
    """What the journal keeps of a passing proposal's evaluation: its check's words, params and kernel time."""
    kernel = result.kernel
    return dict(verdict_reason=result.verdict.reason, params=result.params, kernel_s=kernel.seconds,
                kernel_evidence=kernel.evidence, kernel_method=kernel.method)


def _record_rejections(run, proposer: str, evaluated: list[tuple]) -> set[str]:
    """Finish the attempt of each evaluated proposal that its check (or its build) rejected, with the reason;
    returns their keys. Left for their own turns, a budget that ended first lost them from the journal."""
    keys = set()
    for proposal, key, region, result in evaluated:
        if (rejected := rejection(result)) is None:
            continue
        attempt = run.begin_attempt(proposer, proposal, region)
        run.evaluations.drop(key)
        run.finish_attempt(attempt, proposer, region, proposal.kernel, "rejected", False, *rejected,
                           kind=getattr(result.verdict, "kind", None))
        keys.add(key)
    return keys


def _passed(result) -> bool:
    return result.verdict is not None and result.verdict.ok and result.kernel is not None


def _evaluate(run, proposer: str, proposals: list[Proposal], context: Context) -> tuple[list[tuple], int]:
    """((proposal, key, region, evaluation) of each proposal not yet decided, evaluated (submitted ahead
    where the executor is a pool) as far as the budget's attempts and the turn's minutes allow; how many
    were not reached). Those past the turn's share are left for a later turn (the proposals come ranked: the
    costliest regions first). Where `run.shares.tails_wait()`, each is measured at its sweep's first params only
    (`_measure_tails` measures the rest)."""
    room = run.attempts_left()
    first_only = run.shares.tails_wait()
    # (position, proposal, key, region, sweep) of those not yet decided (a decided one's own turn replays or
    # skips it), as far as the budget's attempts go
    undecided = []
    for i, p in enumerate(proposals):
        key, region = p.key(proposer), context.region(p.region)
        if not run.already_decided(key, p.kernel, region):
            undecided.append((i, p, key, region, p.sweep[:1] if first_only else p.sweep))
    # checked ahead a chunk at a time, each chunk measured before the next is checked: where the minutes end
    # inside the batch, those checked and measured are still decided (all checks first, SDXL's codegen batch
    # checked until its minutes were spent and measured none)
    items = [(key, p.kernel, region, sweep) for _, p, key, region, sweep in undecided[:room]]
    chunk = run.evaluations.checks_per_chunk
    fresh = []
    for n, (i, proposal, key, region, sweep) in enumerate(undecided):
        if room is not None and len(fresh) >= room or run.shares.turn_over() is not None:
            # out of attempts or time: what was evaluated is still decided, together
            return _results(fresh), len(proposals) - i
        if n % chunk == 0:
            run.evaluations.check_ahead(items[n:n + chunk], stop=run.shares.turn_over)
        pending = run.evaluations.held(key) or run.evaluations.submit(key, proposal.kernel, region, sweep)
        fresh.append((proposal, key, region, pending))
    return _results(fresh), 0


def _results(fresh: list[tuple]) -> list[tuple]:
    evaluated = []
    for proposal, key, region, pending in fresh:
        try:
            evaluated.append((proposal, key, region, pending.result()))
        except WorkerLost:
            continue  # decided alone, where it is recorded as failed
    return evaluated


@dataclass
class Tails:
    """What measuring a batch's sweep tails did: the evaluations that replace the first params' (by
    proposal key), the keys whose tails the batch's share did not reach (with why), those whose tails
    failed (with the error: their first params stand), and the seconds spent."""

    results: dict = field(default_factory=dict)
    cut: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    seconds: float = 0.0

    def apply(self, evaluated: list[tuple]) -> list[tuple]:
        return [(p, key, region, self.results.get(key, result)) for p, key, region, result in evaluated]

    def spent(self) -> dict:
        """For the batch's event (nothing where no tail waited)."""
        if not (self.results or self.cut or self.failed):
            return {}
        return {"tails_measured": len(self.results), "tails_not_reached": len(self.cut),
                "tails_failed": len(self.failed), "tails_s": round(self.seconds, 2)}

    def note(self, key: str) -> str:
        """What the journal says of `key`'s sweep, where not all of it was measured."""
        if key in self.cut:
            return f"; measured at its first params only ({self.cut[key]} before the rest of its sweep)"
        if key in self.failed:
            return f"; measured at its first params only (the rest of its sweep failed: {self.failed[key]})"
        return ""


def _measure_tails(run, evaluated: list[tuple]) -> Tails:
    """The rest of each passing proposal's sweep, in the batch's order (the costliest regions first), while
    `run.shares.tails_over()` allows: submitted with its check's verdict (not checked again), `parallel` at a time
    on a pool; the first params' measurement comes back from the cache and competes with the rest."""
    start, tails = time.perf_counter(), Tails()
    width = max(1, getattr(run.evaluations.executor, "parallel", 1))
    todo = [(p, key, region, result) for p, key, region, result in evaluated if _passed(result) and len(p.sweep) > 1]
    waiting: deque = deque()

    def collect() -> None:
        key, first, pending = waiting.popleft()
        try:
            result = pending.result()
        except WorkerLost as e:
            result = Evaluation(first.verdict, error=f"its worker was lost: {e}")
        if result.kernel is None:
            tails.failed[key] = result.error or "not measured"
            run.evaluations.hold(key, first)  # a later turn of its own takes the first params' evaluation
            return
        tails.results[key] = replace(result, check_s=first.check_s, retried=first.retried or result.retried,
                                     measure_s=(first.measure_s or 0.0) + (result.measure_s or 0.0))

    for n, (proposal, key, region, first) in enumerate(todo):
        if (why := run.shares.tails_over()) is not None:
            tails.cut.update({k: why for _, k, _, _ in todo[n:]})
            break
        pending = run.evaluations.submit(key, proposal.kernel, region, proposal.sweep, checked=first.verdict)
        waiting.append((key, first, pending))
        if len(waiting) >= width:
            collect()
    while waiting:
        collect()
    tails.seconds = time.perf_counter() - start
    return tails

"""The trials of one check, and the verdict they lead to.

The sweep runs `trials` trials (the first ones walk every value distribution over every input, dim
sizes vary at random), then the timing runs a benchmark would make, then a few fresh re-checks: a
candidate that counts its calls and turns wrong once it believes it is being timed fails there.

Every set of dim sizes the sweep draws runs at least twice, with fresh contents: a size drawn for the
first time is drawn again by the next trial, the first re-check runs on the sizes the timing runs
used, and the last trial draws no new sizes. A candidate that memoizes by anything that follows from
the input signature (shape, dtype, strides, numel, device, address) would otherwise never be asked
the same signature twice when every dim varies, and a stale answer would never be seen.

A failure is diagnosed before it is reported: output identical to the previous trial's although the
input values changed is a cache; a first trial that passed and now fails when replayed is a candidate
whose results depend on how often it was called. Failures of a candidate that is still running are
then shrunk (`shrink.py`); crashes and timeouts are not, since every retry would cost a new process.
"""

from __future__ import annotations

import random
from dataclasses import replace

from .inputs import DISTRIBUTIONS, TrialSpec, describe, dims_of, draw, sweep_spec
from .poison import bits
from .shrink import shrink
from .trials import Outcome, TrialRunner
from .verdict import Counterexample, Failure, Verdict, VerifyError

DEFAULT_TRIALS = 20
TIMING_RUNS = 30
RECHECKS = 3
# Failures a new trial cannot reproduce without a new process.
_NOT_SHRUNK = ("crashed", "timeout", "race")  # a race is read from the build: smaller inputs say nothing more


def run_check(trial_runner: TrialRunner, *, trials: int, seed: int, timing_runs: int = TIMING_RUNS,
              rechecks: int = RECHECKS) -> Verdict:
    """Run the sweep, the timing runs and the re-checks; the verdict, shrunk and diagnosed on failure."""
    if trials < 1:
        raise VerifyError(f"trials must be at least 1, got {trials}")
    inputs = trial_runner.plan.inputs
    dims = dims_of(inputs)
    rng = random.Random(seed)
    first: TrialSpec | None = None
    previous: dict[tuple, Outcome] = {}  # the last passing trial of each input signature
    last: tuple[TrialSpec, Outcome] | None = None
    calls = 0
    seen_dists: set[str] = set()
    runs_of: dict[tuple, int] = {}  # dim sizes -> trials run on them so far
    total = trials + rechecks
    for t in range(total):
        if t == trials:  # the loop a benchmark would run, between the sweep and the re-checks
            failure = trial_runner.timing_runs(last[1].key, timing_runs)
            calls += timing_runs
            if failure is not None:
                return _reject(trial_runner, failure, last[0], seed, t, shrinkable=False)
        spec = sweep_spec(t, inputs, dims, rng)
        if last is not None and (runs_of[last[0].sizes] == 1 or t in (trials, total - 1)):
            spec = replace(spec, sizes=last[0].sizes)  # the same signature again, with new contents
        runs_of[spec.sizes] = runs_of.get(spec.sizes, 0) + 1
        outcome = trial_runner.run(spec)
        calls += 2
        if outcome.failure is not None:
            failure = _diagnose(trial_runner, outcome, previous.get(outcome.key), first,
                                after_timing=t >= trials, calls=calls)
            return _reject(trial_runner, failure, spec, seed, t + 1)
        first = first or spec
        last = (spec, outcome)
        previous[outcome.key] = outcome
        seen_dists |= set(spec.dists) - {"-"}
    runs = "bitwise identical" if trial_runner.plan.deterministic else "within tolerance"
    used = ", ".join(d for d in DISTRIBUTIONS if d in seen_dists) or "none: no float inputs"
    reason = (f"passed {trials} trials (value distributions: {used}; two runs per trial, {runs}), "
              f"{timing_runs} timing runs and {rechecks} re-checks after them")
    return Verdict(True, reason, trials=trials + rechecks, seed=seed, notes=tuple(trial_runner.notes))


def _same(a: list, b: list) -> bool:
    return all(bool((bits(x) == bits(y)).all()) for x, y in zip(a, b, strict=True))


def _diagnose(trial_runner: TrialRunner, outcome: Outcome, previous: Outcome | None, first: TrialSpec | None,
              *, after_timing: bool, calls: int) -> Failure:
    """Name the cheat behind a failed trial where one can be told: a cache, or call counting."""
    failure = outcome.failure
    if failure.kind not in ("mismatch", "nonfinite", "unwritten", "output_type"):
        return failure
    if previous is not None and outcome.outputs and _same(outcome.outputs, previous.outputs) and not _same(
            outcome.values, previous.values):
        return Failure("cached", "the outputs are bit for bit those of the previous trial although new values "
                       "were written into the same input buffers: the candidate returns cached results instead "
                       f"of computing them. {failure.message}", failure.figures)
    if first is not None and trial_runner.run(first).failure is not None:
        when = "after the trials and the timing runs" if after_timing else f"after {calls} calls"
        return Failure("stateful", f"the first trial passed at first and fails when replayed {when}: the "
                       f"candidate is right for its first calls, then wrong. {failure.message}", failure.figures)
    return failure


def _reject(trial_runner: TrialRunner, failure: Failure, spec: TrialSpec, seed: int, trials: int, *,
            shrinkable: bool = True) -> Verdict:
    """The verdict on a failure: shrunk where the candidate can still run, with its counterexample."""
    inputs = trial_runner.plan.inputs
    worst = failure.figures.get("worst")
    notes = list(trial_runner.notes)
    if shrinkable and failure.kind not in _NOT_SHRUNK:
        smallest, shrunk = shrink(spec, dims_of(inputs), lambda s: trial_runner.run(s).failure, seed)
        if smallest != spec and shrunk is not None:
            spec, worst = smallest, shrunk.figures.get("worst", worst)
            if shrunk.kind == failure.kind:  # a diagnosis (cached, stateful) keeps its own words
                failure = shrunk
    else:
        notes.append(f"a {failure.kind} failure is not shrunk: the counterexample is the failing trial itself")
    values = draw(inputs, spec, trial_runner.plan.device)  # those of the failing trial: drawn where it ran
    example = Counterexample(spec.size_map, describe(inputs, spec, values), worst or None, seed)
    figures = {k: v for k, v in failure.figures.items() if k != "worst"}
    return Verdict(False, f"{failure.message} [replay with seed={seed}]", kind=failure.kind, counterexample=example,
                   figures=figures, trials=trials, seed=seed, notes=tuple(notes))

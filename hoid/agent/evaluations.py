"""The candidates' evaluations (the numerical check with the sweep's first params, then the kernel's
measurement over its sweep), held by proposal key until the proposal's turn takes its own.

With a pool (`parallel` > 1) the loop reads an independent proposer's proposals ahead (`read_ahead`) and
submits them, two per worker, so that no worker waits while the loop decides one by one in the
proposer's order. A batch (`together.py`) submits its proposals too, and what it leaves undecided keeps
its evaluation here for its own turn: a batch that gains nothing checks and measures no kernel twice.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future

from .executor import Evaluation, done, evaluate


class Evaluations:
    """The evaluations submitted to `executor` and not yet taken, by proposal key. An executor without
    `submit` (in-process) evaluates a candidate when it is submitted: its future is already done."""

    def __init__(self, executor, device):
        self.executor, self.device = executor, device
        self._held: dict[str, Future] = {}

    def submit(self, key: str, spec, region, sweep, checked=None) -> Future:
        """`spec`'s evaluation at `region`, submitted now and held for `key`'s turn (replacing one held);
        `checked`: the passing verdict of an earlier evaluation at the same region (not checked again)."""
        self._held[key] = self._submit(spec, region, sweep, checked)
        return self._held[key]

    def hold(self, key: str, evaluation: Evaluation) -> None:
        """Hold `evaluation`, already known, for `key`'s turn (a sweep's tail that failed: its first
        params' evaluation stands)."""
        self._held[key] = done(evaluation)

    def held(self, key: str) -> Future | None:
        """The evaluation held for `key`, if one was submitted and not yet taken."""
        return self._held.get(key)

    def take(self, key: str, spec, region, sweep) -> Future:
        """The evaluation for `key`'s turn: the one held (no longer held), else one submitted now."""
        return self._held.pop(key, None) or self._submit(spec, region, sweep)

    def drop(self, key: str) -> None:
        """`key` was decided with its evaluation (a batch): no turn will take it."""
        self._held.pop(key, None)

    def cancel(self) -> None:
        """The run ends: what is still held is not wanted (a pool's queued tasks are left unstarted)."""
        for pending in self._held.values():
            pending.cancel()

    def _submit(self, spec, region, sweep, checked=None) -> Future:
        from ..kernels.launch import resolve_params

        sweep = sweep or (spec.default_params(),)
        try:
            params = resolve_params(spec, region.types, region.attrs, sweep[0], self.device.target())
        except Exception as e:  # noqa: BLE001  a candidate that cannot even be checked is rejected, not fatal
            return done(Evaluation(error=f"could not be checked: {type(e).__name__}: {e}"))
        if hasattr(self.executor, "submit"):
            return self.executor.submit(spec, region, params, sweep, checked)
        return done(evaluate(self.executor, spec, region, params, sweep, checked))


def read_ahead(run, proposer, context):
    """`proposer`'s proposals in its order, for the loop's `run` (a `loop.Runner`); with a pool, an
    independent proposer's are read ahead (two per worker, as far as the budget's attempts allow) and
    submitted to `run.evaluations`, so that no worker waits."""
    proposals = iter(proposer.propose(context))
    width = 2 * getattr(run.evaluations.executor, "parallel", 1)
    if width <= 2 or not getattr(proposer, "independent", False):
        yield from proposals
        return
    ahead: deque = deque()
    while True:
        while len(ahead) < width and ((left := run.attempts_left()) is None or len(ahead) < left):
            if (proposal := next(proposals, None)) is None:
                break
            ahead.append(proposal)
            key = proposal.key(proposer.name)
            region = next((r for r in context.regions if r.key == proposal.region), None)
            if region is None or run.already_decided(key, proposal.kernel, region):
                continue  # its turn says what is wrong with it, replays it or skips it: nothing to evaluate
            run.evaluations.submit(key, proposal.kernel, region, proposal.sweep)
        if not ahead:
            return
        yield ahead.popleft()

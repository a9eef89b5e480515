"""The candidates' evaluations (the numerical check with the sweep's first params, then the kernel's
measurement over its sweep), held by proposal key until the proposal's turn takes its own.

With a pool (`parallel` > 1) the loop reads an independent proposer's proposals ahead (`read_ahead`) and
submits them, two per worker, so that no worker waits while the loop decides one by one in the
proposer's order. A batch (`together.py`) submits its proposals too, and what it leaves undecided keeps
its evaluation here for its own turn: a batch that gains nothing checks and measures no kernel twice.
Without a pool, a batch's kernel-source candidates (generated, a directory's) are checked ahead, several
isolated children at once, and then measured one at a time (`check_ahead`), a chunk at a time
(`checks_per_chunk`), so that minutes ending inside a batch leave what was checked and measured decided.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from .executor import Evaluation, check_candidate, done, evaluate, from_source

# isolated checks at once in this process (children each import torch and build their kernel: a few cores
# each): 4 on the GPU machines' 16 cores, 1 (one after another, as before) on a CPU of 2 to 7 cores
ISOLATED_AT_ONCE = max(1, min(4, (os.cpu_count() or 1) // 4))


class Evaluations:
    """The evaluations submitted to `executor` and not yet taken, by proposal key. An executor without
    `submit` (in-process) evaluates a candidate when it is submitted: its future is already done."""

    def __init__(self, executor, device, *, isolated_at_once: int | None = None):
        self.executor, self.device = executor, device
        self.isolated_at_once = ISOLATED_AT_ONCE if isolated_at_once is None else isolated_at_once
        self._held: dict[str, Future] = {}
        self._checked: dict[str, Evaluation] = {}  # key -> its check alone (`check_ahead`), until its submit

    def submit(self, key: str, spec, region, sweep, checked=None) -> Future:
        """`spec`'s evaluation at `region`, submitted now and held for `key`'s turn (replacing one held);
        `checked`: the passing verdict of an earlier evaluation at the same region (not checked again)."""
        self._held[key] = self._start(key, spec, region, sweep, checked)
        return self._held[key]

    @property
    def checks_per_chunk(self) -> int:
        """How many candidates a batch checks ahead before it measures them: twice the checks at once, so that
        the children stay busy through a chunk and a budget ending mid-batch leaves most of it decided."""
        return 2 * max(self.isolated_at_once, 1)

    def check_ahead(self, items, stop=lambda: None) -> None:
        """The checks of the kernel-source candidates among `items` ((key, spec, region, sweep)), each in its
        child process, `isolated_at_once` at a time, where this process evaluates (no pool: a pool's workers
        check and measure on their own GPUs already); each one's submit then only measures it, one at a time
        as before and never beside a check (a child's kernels on the GPU would disturb a timing). The H100's
        BGE-M3 run (12-05) checked codegen's 10 kernels one after another: 55 s of its 4-minute budget.

        `stop()` says why no more may start (the budget's minutes: `Shares.turn_over`), else None: a check
        not yet begun then is not run, and the candidate's submit checks it if its turn ever comes. Without
        it, SDXL's 3-minute run (H100, 12-06) began codegen's 44 checks with its minutes already spent and
        waited 107 s for them, to decide none."""
        if self.isolated_at_once < 2 or hasattr(self.executor, "workers"):
            return
        todo = [(key, spec, region, sweep) for key, spec, region, sweep in items
                if from_source(spec) and key not in self._held and key not in self._checked]
        if len(todo) < 2 or stop() is not None:
            return

        def check_unless_stopped(spec, region, sweep) -> Evaluation | None:
            return None if stop() is not None else self._check(spec, region, sweep)

        with ThreadPoolExecutor(self.isolated_at_once, thread_name_prefix="hoid-check") as pool:
            futures = [(key, pool.submit(check_unless_stopped, spec, region, sweep))
                       for key, spec, region, sweep in todo]
        for key, future in futures:
            if (checked := future.result()) is not None:
                self._checked[key] = checked

    def hold(self, key: str, evaluation: Evaluation) -> None:
        """Hold `evaluation`, already known, for `key`'s turn (a sweep's tail that failed: its first
        params' evaluation stands)."""
        self._held[key] = done(evaluation)

    def held(self, key: str) -> Future | None:
        """The evaluation held for `key`, if one was submitted and not yet taken."""
        return self._held.get(key)

    def take(self, key: str, spec, region, sweep) -> Future:
        """The evaluation for `key`'s turn: the one held (no longer held), else one submitted now."""
        return self._held.pop(key, None) or self._start(key, spec, region, sweep, None)

    def drop(self, key: str) -> None:
        """`key` was decided with its evaluation (a batch): no turn will take it."""
        self._held.pop(key, None)

    def cancel(self) -> None:
        """The run ends: what is still held is not wanted (a pool's queued tasks are left unstarted)."""
        for pending in self._held.values():
            pending.cancel()

    def _start(self, key: str, spec, region, sweep, checked) -> Future:
        """`_submit`, with the check `check_ahead` ran for `key` where there is one (taken once)."""
        ahead = self._checked.pop(key, None) if checked is None else None
        if ahead is None:
            return self._submit(spec, region, sweep, checked)
        if ahead.error or not ahead.verdict.ok:
            return done(ahead)
        return done(replace(self._submit(spec, region, sweep, ahead.verdict).result(), check_s=ahead.check_s))

    def _check(self, spec, region, sweep) -> Evaluation:
        """One candidate's check alone (`executor.check_candidate`), on a thread of `check_ahead` (the check
        itself runs in a child process)."""
        params = self._first_params(spec, region, sweep)
        return params if isinstance(params, Evaluation) else check_candidate(self.executor, spec, region, params)

    def _first_params(self, spec, region, sweep) -> dict | Evaluation:
        """The params a candidate is checked with: its sweep's first (the spec's defaults without one), its
        "auto"s resolved for the target; or, where they cannot be resolved, the evaluation that says why (the
        candidate is rejected, not fatal)."""
        from ..kernels.launch import resolve_params

        first = sweep[0] if sweep else spec.default_params()
        try:
            return resolve_params(spec, region.types, region.attrs, first, self.device.target())
        except Exception as e:  # noqa: BLE001
            return Evaluation(error=f"could not be checked: {type(e).__name__}: {e}")

    def _submit(self, spec, region, sweep, checked=None) -> Future:
        sweep = sweep or (spec.default_params(),)
        params = self._first_params(spec, region, sweep)
        if isinstance(params, Evaluation):
            return done(params)
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

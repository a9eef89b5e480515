"""`optimize`: the loop, run unattended within a `Budget`, resumable from its journal.

    profile -> rank regions -> propose -> check -> measure the kernel (its param sweep) -> inject it at
    every match -> extract the top k -> time each finalist whole -> keep only a gain beyond the noise ->
    record -> repeat until the budget is spent or no proposer has more

Proposers take turns in the order given. Under a budget of minutes a proposer that decides one proposal at a
time (an LLM) has its turn capped at an equal share of the minutes left when it begins (the last proposer
has all that is left), so that it cannot starve the ones after it; time left once every proposer has had its
turn goes to the turns their share cut short, in the same order. A `together` batch (the library's, the
generated kernels', a kernel directory's) is decided whole: it is one extraction and one whole-graph
measurement over all that pass, and a share cut it where it was worth most. Measured on the H200
(Qwen3-1.7B decode, 1-minute runs, 2026-12-03): with every turn shared the library's batch stopped after 14
of its proposals, the generated kernels' turn spent the rest finding regions, and the step took 1.72 ms
(582 tok/s) against 1.40 ms (712 tok/s) with the library's batch whole; the directory's fused kernels it
made room for never had a turn either. What a batch's share bounds is its sweeps: every proposal is checked
and measured at its first params (a kernel's own default), and the other params of its sweep are measured
only within the batch's share, so that one kernel's tuning cannot starve the next proposer's first look.
Measured on the H200 (BGE-M3, 2-minute run, 2026-12-05): the library's batch spent 62 s measuring sweeps,
60 of them building 40 CuTe GEMMs that all lost to cuBLAS, and codegen's turn never came.

The e-graph is built (and saturated with the rule sets) once; every candidate is injected into it, and
a cost model that prices any kernel not yet kept (nor being tried) out of reach makes extraction see
only the accepted kernels plus the candidate. A kept kernel's chosen params are in its kernel nodes.

`Runner` owns one run: its phases (the baseline, the stored kernels, the rule sets alone, each
proposer's proposals in turn) and what it has kept. How a proposal is decided lives beside it and goes
through the Runner's public steps only (its doc lists them):

    alone.py        one by one: a proposal's own extraction and whole-graph measurement of its finalists
    together.py     a `together` proposer's (the library's) proposals first, in one extraction and one
                    whole-graph measurement; what that leaves undecided goes one by one
    evaluations.py  the checks and kernel measurements, held by proposal key; with a pool (`parallel` >
                    1) an independent proposer's are read ahead and submitted together, still decided in
                    the proposer's order, so a run keeps the same kernels whichever executor it has
    finalists.py    extraction's cost model, the finalists' timing, and whether the best of them beats the
                    best so far: beyond the noise of its repeats (1% at least), or, a close call between
                    0.2% and that, in every one of five rounds timed in turn with the best (the H200
                    repeats a whole graph within 0.27%: the 1% floor alone refused a 0.9% gain)

A candidate whose worker was lost twice is recorded as failed; a run that has lost every worker stops,
resumable.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from ..ir import Graph, expect_graph
from ..ir.text import loads
from ..kernels.kernel_set import Accepted, KernelSet, signature
from ..kernels.registry import library_kernels
from ..kernels.store import AcceptedStore
from ..measure.cache import MeasureCache
from ..measure.devices import Device, get_device
from ..measure.local import has_cuda, local_device
from .agents import DEFAULT_AGENTS, proposers_for
from .alone import decide_alone
from .budget import Budget, Shares, Spend
from .evaluations import Evaluations, read_ahead
from .executor import Evidence, NoWorkers, WorkerLost, start_executor
from .finalists import Allowed, faster_in_turn, measure_finalists, uses
from .journal import Journal, graph_hash, source_text
from .proposer import Context, Outcome, Proposal
from .regions import discover
from .report import Report
from .together import decide_together


@dataclass
class Optimized:
    """The result: the best graph, the report, the times (with `report` saying measured or modelled),
    `kernels`: the accepted `KernelSet` (library kernels at the signatures kept, and any others)."""

    graph: Graph
    report: Report
    baseline_s: float
    best_s: float
    kernels: KernelSet

    @property
    def speedup(self) -> float | None:
        """baseline / best, only where both were measured on the device; None for a modelled plan."""
        return self.report.gain if self.report.measured else None

    @property
    def modelled_gain(self) -> float | None:
        return None if self.report.measured else self.report.gain


def resolve_device(device) -> Device:
    """None: this machine's GPU, else a modelled plan for the H200; "cpu": this CPU, measured."""
    if isinstance(device, Device):
        return device
    if device is None:
        return local_device() if has_cuda() else get_device("h200")
    if str(device).lower() == "cpu":
        return local_device() if not has_cuda() else get_device("cpu")
    return get_device(device)


def optimize(graph: Graph, *, agent=DEFAULT_AGENTS, budget: Budget | None = None, device=None, journal=None,
             rules: bool = True, k: int = 3, cache=None, store=None, executor=None, trials: int | None = None,
             progress=None) -> Optimized:
    """Optimize `graph` for `device` with the proposers of `agent` within `budget`; see `hoid/agent/loop.py`.

    agent: a proposer name ("library", "codegen"), a proposer object, or a list of them (default: the library
    proposer, then the codegen proposer's generated kernels for the regions no library kernel covers).
    budget: `hoid.Budget` (default: until the proposers run dry). device: "h200", "b200", "cpu", a `Device`,
    or None (this GPU, else a modelled H200 plan). journal: the journal file (default `HOID_JOURNAL`, else the
    user cache); an unfinished run of the same graph, device and proposers there is resumed. rules: saturate the rule
    sets first. k: finalists per extraction. cache: a `hoid.measure.MeasureCache` or its path; store: a
    `hoid.kernels.AcceptedStore` or its path (default: `HOID_KERNELS`'s; False for none): measured
    acceptances, stored and reused per device; executor: where checks and
    measurements run (default `LocalExecutor`; `hoid.agent.WorkerPool(n)` for a worker per local GPU,
    `hoid.agent.RayPool(address)` for a Ray cluster); trials: numerical-check trials; progress: a callable
    given each event (a dict) as it happens, for the CLI.
    """
    graph = expect_graph(graph, "hoid.optimize")
    runner = Runner(graph, agent=agent, budget=budget or Budget(), device=resolve_device(device), journal=journal,
                    rules=rules, k=k, cache=cache, store=store, executor=executor, trials=trials, progress=progress)
    return runner.run()


class Runner:
    """One run of the loop (see the module doc); `run()` returns the `Optimized` and never raises for a
    proposal's failure (that is a rejection, journaled).

    What a decision (`alone.py`, `together.py`) uses of the run, and nothing else: `evaluations`;
    `already_decided`, `attempts_left` (what is left to decide); `shares` (`budget.Shares`: the turn's room,
    and a batch's sweeps: their first params first, the rest within its share);
    `begin_attempt` and `finish_attempt` (journaled, in the history, reported); `best_finalist` (a trial
    extracted and its finalists timed), `beats_best`; `admit_kernel` and `keep_graph` (what is kept);
    `emit` (a progress event).
    """

    def __init__(self, graph, *, agent, budget, device, journal, rules, k, cache, store, executor, trials, progress):
        self.spend = Spend()  # the budget's clock starts with the call: opening the executor counts
        self.shares = Shares(budget, self.spend)
        self.graph, self.budget, self.device, self.rules, self.k = graph, budget, device, rules, k
        self.finalist_timing: dict = {}  # what the last `best_finalist` spent: extraction, whole-graph timing
        self.finalists_timed: list = []  # the last `best_finalist`'s (Finalist, Evidence) pairs
        self.proposers = proposers_for(agent)
        self._owns_journal = not isinstance(journal, Journal)
        self._opened_cache = None  # a cache given by path: this run opens it, and closes it
        if cache is not None and not isinstance(cache, MeasureCache):
            if not isinstance(cache, (str, os.PathLike)):
                raise TypeError(f"hoid.optimize(cache={cache!r}): expected a hoid.measure.MeasureCache or the path "
                                "of its file (default: HOID_CACHE's)")
            cache = self._opened_cache = MeasureCache(cache)
        self.journal = journal if isinstance(journal, Journal) else Journal(journal)
        self.progress = progress or (lambda event: None)
        self.store = AcceptedStore() if store is None else (None if store is False else store)  # HOID_KERNELS
        agents = ",".join(p.name for p in self.proposers)
        key = f"{graph_hash(graph)}|{device.name}|{agents}|rules={rules}"
        self.run_id, self.resumed = self.journal.open_run(key, graph.name, device.name, agents, str(budget))
        self.executor, self._owns_executor = start_executor(executor, device, cache=cache, trials=trials,
                                                            journal=self.journal, run=self.run_id,
                                                            progress=self.progress)
        self.evaluations = Evaluations(self.executor, device)
        self.allowed: set = set()
        self.accepted = KernelSet.empty()
        self.history: list[Outcome] = []
        self.reused: list[str] = []
        self.stale: dict[str, str] = {}
        self._turned: set[str] = set()  # proposal keys that had their turn (or were decided together) in this run
        self._offered: dict[str, list[str] | None] = {}  # proposer -> its proposals' keys (None: not listed ahead)
        self._unfinished: set[str] = set()  # proposers whose turn began and has not run through their proposals

    # --- the run ----------------------------------------------------------------------------------
    def run(self) -> Optimized:
        try:
            return self._run()
        finally:
            self.evaluations.cancel()
            if self._owns_executor:
                self.executor.close()
            if self._owns_journal:  # closing checkpoints its write-ahead log: the file alone holds the run
                self.journal.close()
            if self._opened_cache is not None:
                self._opened_cache.close()

    def _run(self) -> Optimized:
        from ..search.library import apply_library
        from ..search.rules import default_rulesets
        from ..search.space import SearchSpace

        self.space = SearchSpace(self.graph, target=self.device.target())
        if self.rules:
            self.space.saturate(default_rulesets())
        self.cost = self.executor.cost_model()
        self._apply_library = apply_library
        self.baseline = self.executor.measure_graph(self.graph, modelled=self._price(self.graph))
        self.journal.set_baseline(self.run_id, self.baseline.seconds, self.baseline.evidence)
        self.best_graph, self.best = self.graph, self.baseline
        self.emit(kind="baseline", seconds=self.baseline.seconds, evidence=self.baseline.evidence)
        self._reuse_stored()
        stop = "every proposer ran dry"
        try:
            # the phases before the first attempt check the clock too: on a large graph each whole-graph
            # measurement (and a measured region profile) costs a compile, and a spent budget runs no more
            self._stop_if_out_of_time()
            # the library's patterns, and those of proposers that bring their own (`region_specs()`)
            specs = list(library_kernels().values()) + [s for p in self.proposers
                                                        for s in getattr(p, "region_specs", list)()]
            regions = discover(self.space, specs, self.device, measured=getattr(self.executor, "profiles_here", False),
                               cache=getattr(self.executor, "cache", None))
            context = Context(self.graph, regions, self.device, self.accepted, self.history, self._spend_llm,
                              self._skip, budget=self.budget, spent=self.spend, _record=self._record_failure,
                              _emit=self.emit)
            self.emit(kind="regions", count=len(regions))
            if self.rules:
                self._stop_if_out_of_time()
                self._try_rules_only()
            cut = self._turns(self.proposers, context, shared=self.budget.minutes is not None)
            if cut:  # every proposer had its share and time is left: the turns a share ended go on
                self._turns(cut, context, shared=False)
            # a proposer that stops itself on the budget (an LLM conversation) ends dry: say which limit
            stop = self.spend.exhausted(self.budget) or stop
        except _Stop as e:
            stop = str(e)
        except NoWorkers as e:  # every worker lost: what is accepted stays, the rest is resumable
            stop = f"no workers left: {e}"
        except KeyboardInterrupt:  # Ctrl-C: stop cleanly with the best so far; the run stays resumable
            stop = "interrupted"
        resumable = stop == "interrupted" or stop.startswith("no workers left")
        self.journal.finish_run(self.run_id, stop, self.best.seconds, self.best.evidence, resumable=resumable)
        return self._result(stop)

    def _turns(self, proposers: list, context: Context, *, shared: bool) -> list:
        """Each proposer's turn in order, `shared`: each capped at its share of the minutes left, except a
        `together` batch (the module doc says why). Returns the proposers whose turn its share ended, with
        proposals left undecided."""
        cut = []
        for i, proposer in enumerate(proposers):
            # a batch is one decision (the module doc says why): its share bounds only its sweeps' tails
            self.shares.begin_turn(len(proposers) - i, batch=getattr(proposer, "together", False), shared=shared)
            if self._turn(proposer, context):
                cut.append(proposer)
        self.shares.end_turns()
        return cut

    def _turn(self, proposer, context: Context) -> bool:
        """`proposer`'s proposals, each decided (a batch together where the proposer asks); True when its share
        of the minutes ended the turn before they were all decided."""
        self._unfinished.add(proposer.name)
        self._offered.setdefault(proposer.name, None)
        proposals = read_ahead(self, proposer, context)
        if getattr(proposer, "together", False):
            proposals = list(proposals)
            self._offered[proposer.name] = [p.key(proposer.name) for p in proposals]
            self._turned |= decide_together(self, proposer.name, proposals, context)
        for proposal in proposals:
            key = proposal.key(proposer.name)
            if key in self._turned:  # decided together, or had its turn before a share cut this one
                continue
            reason = self.spend.exhausted(self.budget)
            if reason is not None:
                raise _Stop(reason)
            if (share := self.shares.share_spent()) is not None:
                self.emit(kind="share", proposer=proposer.name, why=f"{share}: the next proposer's turn")
                return True
            self._turned.add(key)
            self._take_turn(proposer.name, proposal, context)
            context.accepted = self.accepted
        self._unfinished.discard(proposer.name)
        return False

    def _stop_if_out_of_time(self) -> None:
        """Raises `_Stop` once the budget's minutes are spent (attempts are counted before each attempt)."""
        reason = self.shares.out_of_time()
        if reason is not None:
            raise _Stop(reason)

    def _reuse_stored(self) -> None:
        """Measured acceptances stored for this device: reused as they are; those whose kernel changed
        since are left to be proposed, checked and measured again."""
        if self.store is None:
            return
        if not isinstance(self.store, AcceptedStore):
            self.store = AcceptedStore(self.store)
        found = self.store.load(self.device.name)
        for kernel_id, why in found.stale:
            self.stale[kernel_id] = why
            self.emit(kind="stale", kernel=kernel_id, why=why)
        for a in found.current:
            self.allowed.add(a.signature())
            self.accepted = self.accepted.accept(a.spec, a.types, a.attrs, a.params, evidence="measured")
            self._apply_library(self.space, KernelSet.empty().accept(a.spec, a.types, a.attrs, a.params))
            self.reused.append(f"{a.spec.id} at {', '.join(map(str, a.types))}")
        if found.current:
            self._keep_if_faster("store", "the reused kernels")

    def _try_rules_only(self) -> None:
        """The rule sets alone (no kernel): a finalist like any other, kept if it gains."""
        if (decided := self._keep_if_faster("rules", "the rule sets alone")) is not None:
            self.emit(kind="rules", kept=decided[0], why=decided[1])

    def _keep_if_faster(self, proposer: str, what: str) -> tuple[bool, str] | None:
        """The extraction over the accepted kernels alone, measured whole and kept if it beats the best:
        (kept, why); None where its measurement was lost (journaled as `proposer`'s `what`, failed)."""
        finalist = self.space.extract(Allowed(self.cost, set(self.allowed)), k=0).finalists[0]
        if graph_hash(finalist.graph) == graph_hash(self.best_graph):  # timed, it read "takes -0.0% longer"
            return False, "the extraction is the best graph as it stands: nothing to measure"
        try:
            evidence = self.executor.measure_graph(finalist.graph, modelled=finalist.cost)
        except WorkerLost as e:
            self._record_failure(proposer, what, f"not measured: {e}", "failed")
            return None
        kept, why, evidence = self.beats_best(evidence, finalist.graph)
        if kept:
            self.keep_graph(finalist.graph, evidence, None)
        return kept, why

    def _take_turn(self, proposer: str, proposal: Proposal, context: Context) -> None:
        """`proposal`'s turn: replayed where the journal finished it, skipped where its kernel is already
        accepted at the region's signature, else decided alone (`alone.py`)."""
        key = proposal.key(proposer)
        region = context.region(proposal.region)
        spec = proposal.kernel
        done = self.journal.finished_attempt(self.run_id, key)
        if done is not None:  # finished before a crash: replay its outcome, measure nothing again
            self.spend.attempts += 1
            if done.kept:
                self.admit_kernel(spec, region, done.params or {}, done.kernel_evidence == "measured"
                                  and done.graph_evidence == "measured")
                self._restore_best()
            self.history.append(Outcome(proposer, region.key, spec.id, done.verdict, done.kept, done.why))
            self.emit(kind="replayed", proposer=proposer, kernel=spec.id, region=region.key, kept=done.kept)
            return
        if signature(spec.id, region.types, region.attrs) in self.allowed:  # no attempt spent
            self.emit(kind="skipped", kernel=spec.id, region=region.key, why="already accepted")
            return
        decide_alone(self, proposer, proposal, region)

    def _restore_best(self) -> None:
        """After replaying a kept attempt: the best graph is the journal's last accepted document."""
        found = self.journal.best_graph(self.run_id)
        if found is None:
            return
        text, seconds, evidence = found
        graph = loads(text)
        weights = self.graph.weights
        graph.weights = {v.name: weights[v.name] for v in graph.weight_inputs if v.name in weights}
        self.best_graph, self.best = graph, Evidence(seconds, evidence, "from the journal", fresh=False)

    # --- the steps a decision takes (`alone.py`'s, `together.py`'s) -------------------------------
    def already_decided(self, key: str, spec, region) -> bool:
        """Is the proposal of `key` finished in the journal, or `spec` accepted at `region`'s signature?
        Then its own turn replays or skips it: there is nothing to evaluate."""
        return self.journal.finished_attempt(self.run_id, key) is not None or \
            signature(spec.id, region.types, region.attrs) in self.allowed

    def attempts_left(self) -> int | None:
        """How many more attempts the budget allows (None: no limit)."""
        return None if self.budget.attempts is None else self.budget.attempts - self.spend.attempts

    def begin_attempt(self, proposer: str, proposal: Proposal, region) -> int:
        """A proposal's attempt, counted against the budget and begun in the journal: its id there."""
        self.spend.attempts += 1
        return self.journal.begin_attempt(self.run_id, proposal.key(proposer), proposer, region, proposal.kernel,
                                          proposal.sweep, source_text(proposal.kernel), note=proposal.note)

    def finish_attempt(self, attempt, proposer, region, spec, verdict_word, kept, why, fields, *, kind) -> None:
        """A decided attempt: finished in the journal, in the history the proposers read, and reported."""
        self.journal.update_attempt(attempt, verdict=verdict_word, kept=kept, why=why, finished=1, **fields)
        self.history.append(Outcome(proposer, region.key, spec.id, verdict_word, kept, why, kind=kind,
                                    kernel_s=fields.get("kernel_s"), graph_s=fields.get("graph_s"),
                                    evidence=fields.get("kernel_evidence")))
        self.emit(kind="attempt", proposer=proposer, kernel=spec.id, region=region.key, verdict=verdict_word,
                  kept=kept, why=why, best=self.best.seconds, evidence=self.best.evidence)

    def best_finalist(self, trial: KernelSet) -> tuple | None:
        """`trial`'s kernels injected and on trial beside the accepted ones: the fastest of the extraction's
        finalists that run one of them, with its whole-graph `Evidence`; None when none does (a finalist
        without a candidate says nothing about it). Raises `WorkerLost` from the measurement."""
        start = time.perf_counter()
        self._apply_library(self.space, trial)
        on_trial = {a.signature() for a in trial.accepted}
        # a batch's kernels, each also left out whole: a kernel's price is its time alone, and a fused one
        # can lose in the graph what it wins alone (the H200's Qwen3-1.7B run of 2026-12-04 chose the fused
        # norm + RoPE + attention, 7.03 us alone against the pair's 7.08, and every finalist ran it; the next
        # run's finalist without it timed 1.38 ms whole against 1.457 with it): the whole-graph measurement
        # decides. Each kernel the best runs costs one more extraction and one more whole-graph timing (the
        # library's batch for Qwen3-1.7B on the H200: 10 finalists instead of 4, 13.7 s of extraction and
        # 8.4 of timing instead of 3.7 and 3.2). Alone, a kernel left out is the best so far: none.
        ids = tuple(dict.fromkeys(a.spec.id for a in trial.accepted))
        ablate = ids if len(ids) > 1 else ()
        finalists = self.space.extract(Allowed(self.cost, self.allowed | on_trial), k=self.k,
                                       without_kernels=ablate).finalists
        finalists = sorted((f for f in {graph_hash(f.graph): f for f in finalists}.values()
                            if any(uses(f.graph, a.spec.id, a) for a in trial.accepted)), key=lambda f: f.cost)
        self.finalist_timing = {"extract_s": time.perf_counter() - start, "finalists": len(finalists)}
        self.finalists_timed = []
        if not finalists:
            return None
        start = time.perf_counter()
        # cheapest first, and once the budget's minutes are spent no more than the cheapest: the rest untimed
        timed = measure_finalists(self.executor, [(f.graph, f.cost) for f in finalists], stop=self.shares.out_of_time)
        self.finalist_timing.update(measure_s=time.perf_counter() - start, untimed=len(finalists) - len(timed))
        self.finalists_timed = list(zip(finalists, timed))
        return min(self.finalists_timed, key=lambda pair: pair[1].seconds)

    def beats_best(self, candidate: Evidence, graph: Graph) -> tuple[bool, str, Evidence]:
        """Is `graph`, measured as `candidate`, faster than the best so far; why; and its evidence (timed again
        in turn with the best where the noise floor refused a close call: `finalists.faster_in_turn`)."""
        return faster_in_turn(self.executor, graph, candidate, self.best_graph, self.best)

    def admit_kernel(self, spec, region, params: dict, measured: bool) -> None:
        """`spec` at this region's signature becomes part of every later extraction (and, on measured
        evidence, of the device's store)."""
        accepted_at = signature(spec.id, region.types, region.attrs)
        if accepted_at in self.allowed:
            return
        self.allowed.add(accepted_at)
        evidence = "measured" if measured else "modelled"
        self.accepted = self.accepted.accept(spec, region.types, region.attrs, params, evidence=evidence)
        self._apply_library(self.space, KernelSet.empty().accept(spec, region.types, region.attrs, params))
        if measured and self.store is not None:
            self.store.save(self.device.name, Accepted(spec, tuple(region.types), dict(region.attrs), dict(params)))

    def keep_graph(self, graph: Graph, evidence: Evidence, attempt) -> None:
        """`graph` is the best from now on (its whole-graph `evidence`), journaled with the attempt that kept
        it (None: the rule sets alone, or the stored kernels)."""
        self.journal.record_graph(self.run_id, attempt, graph, self.best_graph, evidence.seconds, evidence.evidence)
        self.best_graph, self.best = graph, evidence

    def emit(self, **event) -> None:
        """A progress event (a dict) to the caller's `progress`."""
        self.progress(event)

    # --- helpers ----------------------------------------------------------------------------------
    def _price(self, graph) -> float:
        from ..search.space import SearchSpace

        return SearchSpace(graph, target=self.device.target()).extract(self.cost).cost

    def _skip(self, proposer: str, what: str, reason: str) -> None:
        """A region a proposer left without a proposal, journaled as a finished attempt "skipped" (no
        kernel, no budget spent) so that the report and the journal say why."""
        from types import SimpleNamespace

        key = f"{proposer}|{what}|skipped"
        if self.journal.finished_attempt(self.run_id, key) is not None:
            return
        region = SimpleNamespace(key=what, types=(), attrs={})
        attempt = self.journal.begin_attempt(self.run_id, key, proposer, region,
                                             SimpleNamespace(id="-", version="-"), (), None)
        self.journal.update_attempt(attempt, verdict="skipped", kept=False, why=reason, finished=1)
        self.emit(kind="region skipped", proposer=proposer, region=what, why=reason)

    def _record_failure(self, proposer: str, what: str, why: str, verdict: str) -> None:
        self.journal.record_failure(self.run_id, proposer, what, why, verdict)
        self.emit(kind="attempt", proposer=proposer, kernel=what, region="-", verdict=verdict, kept=False, why=why,
                  best=self.best.seconds, evidence=self.best.evidence)

    def _unreached(self, stop: str) -> list[str]:
        """What the run's end left untried, by proposer: a short budget on a large graph otherwise reads as
        "nothing gained" (BGE-M3's 1-minute run on an H100, 12-05, reached 1 of the library's 24 proposals and
        codegen's turn never came, and its report listed the one)."""
        left = []
        for proposer in self.proposers:
            name = proposer.name
            if name not in self._offered:
                left.append(f"{name}: no turn ({stop})")
            elif (keys := self._offered[name]) is not None:
                undecided = [k for k in keys if k not in self._turned]
                if undecided:
                    left.append(f"{name}: {len(undecided)} of its {len(keys)} proposals not decided ({stop})")
            elif name in self._unfinished:
                left.append(f"{name}: its turn ended with proposals left ({stop})")
        return left

    def _spend_llm(self, tokens: int, turns: int) -> None:
        self.spend.tokens += tokens
        self.spend.turns += turns

    def _result(self, stop: str) -> Optimized:
        kept = [f"{n.attrs['kernel']} {json.dumps(n.attrs['params'], sort_keys=True)}"
                for n in self.best_graph.nodes if n.op == "kernel"]
        report = Report(self.graph.name, self.device.name, self.baseline.seconds, self.baseline.evidence,
                        self.best.seconds, self.best.evidence, stop, str(self.journal.path), self.run_id,
                        self.resumed, self.journal.attempts(self.run_id), sorted(set(kept)), self.reused,
                        [f"{k}: {why}" for k, why in self.stale.items()], unreached=self._unreached(stop))
        return Optimized(self.best_graph, report, self.baseline.seconds, self.best.seconds, self.accepted)


class _Stop(Exception):
    """The budget is spent (raised inside the proposal loop, caught by `run`)."""


"""A `together` proposer's batch: one extraction and one whole-graph measurement, kept or passed over
with the reason, and one by one where the batch gains nothing (CPU, modelled H200 prices)."""

from __future__ import annotations

import json
import time

import pytest
import torch

import hoid
from hoid.agent import Proposal
from hoid.agent.executor import Evidence, LocalExecutor
from hoid.ir import GraphBuilder
from hoid.kernels import KernelSpec
from hoid.kernels.pattern import op_pattern
from hoid.kernels.spec import Param
from hoid.measure.devices import get_device

from .helpers import SLOW_RMSNORM, Only, norm_graph


def _rmsnorm(x, w, out, *, eps):
    out.copy_(w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)))


FAST_RMSNORM = KernelSpec(id="test.rmsnorm", pattern=op_pattern("rmsnorm", 2), backend="torch", launch=_rmsnorm,
                          deterministic=True)


class Batch(Only):
    together = True


class Priced(LocalExecutor):
    """Modelled H200 prices, with some kernels priced by hand (seconds)."""

    def __init__(self, prices: dict[str, float], **kw):
        super().__init__(get_device("h200"), **kw)
        self.prices = prices

    def cost_model(self):
        inner = super().cost_model()

        def cost(call):
            return self.prices.get(call.attrs["kernel"]) or inner(call) if call.op == "kernel" else inner(call)
        return cost


def _run(tmp_path, name, proposer, prices, **kw):
    executor = Priced(prices)
    events = []
    opt = hoid.optimize(norm_graph(), agent=[proposer], device="h200", journal=tmp_path / f"{name}.sqlite",
                        store=False, trials=4, executor=executor, progress=events.append, **kw)
    attempts = {a["kernel"]: a for a in opt.report.attempts}
    return opt, attempts, [e for e in events if e["kind"] == "together"]


def test_the_unused_kernel_of_a_batch_is_passed_over_with_why_and_the_batch_keeps_what_one_by_one_keeps(tmp_path):
    # the fast one under the rmsnorm op's modelled price (the rules alone fuse the norm into it), the slow one far over
    prices = {FAST_RMSNORM.id: 1e-8, SLOW_RMSNORM.id: 1e-3}
    alone, alone_attempts, _ = _run(tmp_path, "alone", Only("p", FAST_RMSNORM, SLOW_RMSNORM), prices)
    opt, attempts, [event] = _run(tmp_path, "batch", Batch("p", FAST_RMSNORM, SLOW_RMSNORM), prices)
    assert event["passed"] == 2 and event["used"] == 1 and event["kept"]
    assert event["evaluated"] == 2 and event["failed"] == 0 and event["not_reached"] == 0
    # where the batch's time went, said with it: the checks and kernel timings within the evaluation
    assert event["evaluate_s"] >= event["check_s"] > 0 and event["measure_kernels_s"] >= 0
    assert event["finalists"] >= 1 and event["extract_s"] > 0 and event["measure_s"] >= 0
    fast, slow = attempts[FAST_RMSNORM.id], attempts[SLOW_RMSNORM.id]
    assert fast["kept"] and "decided together" in fast["why"] and fast["graph_s"] == pytest.approx(opt.best_s)
    assert slow["verdict"] == "passed" and not slow["kept"] and "chose others" in slow["why"]
    assert slow["graph_s"] is None  # it was not measured on its own: nothing to claim for it
    assert alone_attempts[FAST_RMSNORM.id]["kept"] and not alone_attempts[SLOW_RMSNORM.id]["kept"]
    assert opt.best_s == pytest.approx(alone.best_s) and opt.report.kept == alone.report.kept
    assert len(opt.report.attempts) == 2 and opt.report.stop_reason == alone.report.stop_reason


def test_a_batch_that_gains_nothing_is_decided_one_by_one(tmp_path):
    prices = {FAST_RMSNORM.id: 1.0, SLOW_RMSNORM.id: 2.0}  # both slower than the graph as it is
    opt, attempts, [event] = _run(tmp_path, "nogain", Batch("p", FAST_RMSNORM, SLOW_RMSNORM), prices)
    assert event["passed"] == 2 and not event["kept"]
    assert not opt.report.kept and not any(n.op == "kernel" for n in opt.graph.nodes)
    assert opt.report.unreached == [] and "not reached" not in str(opt.report)  # every proposal had its turn
    for attempt in attempts.values():  # decided on their own turn, each with its own reason
        assert attempt["verdict"] == "passed" and not attempt["kept"] and "decided together" not in attempt["why"]


def test_a_batch_stops_at_the_attempts_budget_and_the_rest_is_left(tmp_path):
    opt, attempts, events = _run(tmp_path, "budget", Batch("p", FAST_RMSNORM, SLOW_RMSNORM),
                                    {FAST_RMSNORM.id: 1e-8, SLOW_RMSNORM.id: 1e-3}, budget=hoid.Budget(attempts=1))
    [event] = events  # one evaluated within the budget: no batch of two to decide, and the event says so
    assert event["evaluated"] == 1 and event["passed"] == 1 and event["not_reached"] == 1 and not event["kept"]
    assert list(attempts) == [FAST_RMSNORM.id] and attempts[FAST_RMSNORM.id]["kept"]
    assert opt.report.stop_reason == "budget spent: 1 attempts"
    # the report says what the budget left untried, not only what it tried
    assert opt.report.unreached == ["p: 1 of its 2 proposals not decided (budget spent: 1 attempts)"]
    assert "## not reached (the run ended first)\n- p: 1 of its 2" in str(opt.report)


def test_a_batch_cut_by_the_budget_says_how_many_it_did_not_reach(tmp_path):
    """On the H200 a 1-minute budget ended the library's batch before its merged QKV projection, and the
    event did not say so: it counts them now."""
    twin = KernelSpec(id="test.rmsnorm_twin", pattern=op_pattern("rmsnorm", 2), backend="torch", launch=_rmsnorm,
                      deterministic=True)
    prices = {FAST_RMSNORM.id: 1e-8, twin.id: 2e-8, SLOW_RMSNORM.id: 1e-3}
    _, attempts, [event] = _run(tmp_path, "cut", Batch("p", FAST_RMSNORM, twin, SLOW_RMSNORM), prices,
                                budget=hoid.Budget(attempts=2))
    assert event["evaluated"] == 2 and event["passed"] == 2 and event["not_reached"] == 1
    assert SLOW_RMSNORM.id not in attempts


def _wrong_rmsnorm(x, w, out, *, eps):
    out.copy_(w * x)  # no normalization: the check must reject it


def test_a_rejection_in_a_batch_is_journaled_with_why_even_when_the_budget_ends_after_the_batch(tmp_path):
    wrong = KernelSpec(id="test.wrong_rmsnorm", pattern=op_pattern("rmsnorm", 2), backend="torch",
                       launch=_wrong_rmsnorm, deterministic=True)
    prices = {FAST_RMSNORM.id: 1e-8, SLOW_RMSNORM.id: 1e-3, wrong.id: 1e-9}
    _, attempts, [event] = _run(tmp_path, "rejects", Batch("p", FAST_RMSNORM, wrong, SLOW_RMSNORM), prices,
                                budget=hoid.Budget(attempts=3))
    assert event["evaluated"] == 3 and event["failed"] == 1 and event["passed"] == 2
    assert attempts[wrong.id]["verdict"] == "rejected" and attempts[wrong.id]["why"]
    assert attempts[FAST_RMSNORM.id]["kept"]


def test_a_batch_that_gains_nothing_as_the_budget_ends_is_journaled_with_its_outcome(tmp_path, monkeypatch):
    """The H200's warm run of 12-04: the codegen batch passed 8, gained 0.0%, the budget ended, and the
    journal held none of the 8."""
    from hoid.agent.budget import Spend

    skew = {"minutes": 0.0}
    minutes = Spend.minutes.fget
    monkeypatch.setattr(Spend, "minutes", property(lambda self: minutes(self) + skew["minutes"]))

    def progress(event):
        if event["kind"] == "together":  # the batch's evaluation and measurement took the budget's minutes
            skew["minutes"] = 60.0

    prices = {FAST_RMSNORM.id: 1.0, SLOW_RMSNORM.id: 2.0}  # both slower than the graph as it is
    opt = hoid.optimize(norm_graph(), agent=[Batch("p", FAST_RMSNORM, SLOW_RMSNORM)], device="h200",
                        journal=tmp_path / "j.sqlite", store=False, trials=4, executor=Priced(prices),
                        progress=progress, budget=hoid.Budget(minutes=10))
    attempts = {a["kernel"]: a for a in opt.report.attempts}
    assert set(attempts) == {FAST_RMSNORM.id, SLOW_RMSNORM.id}
    for attempt in attempts.values():
        assert attempt["verdict"] == "passed" and not attempt["kept"] and "gained nothing" in attempt["why"]
        assert attempt["kernel_s"] is not None  # its measurement, which the batch made, kept with it
    assert opt.report.stop_reason == "budget spent: 10 minutes"


def test_a_batch_whose_minutes_end_with_one_passed_says_so_and_journals_it(tmp_path, monkeypatch):
    """BGE-M3 on the CPU (12-05): codegen's batch checked two kernels in the interpreter, the budget ended
    before a batch of two, and neither the log nor the journal said a word of the turn."""
    from hoid.agent.budget import Spend

    skew = {"minutes": 0.0}
    minutes = Spend.minutes.fget
    monkeypatch.setattr(Spend, "minutes", property(lambda self: minutes(self) + skew["minutes"]))

    class SlowCheck(Priced):  # the first check takes the budget's minutes
        def check(self, spec, region, params):
            skew["minutes"] = 60.0
            return super().check(spec, region, params)

    events = []
    opt = hoid.optimize(norm_graph(), agent=[Batch("p", FAST_RMSNORM, SLOW_RMSNORM), Batch("q", MID_RMSNORM)],
                        device="h200", journal=tmp_path / "j.sqlite", store=False, trials=4,
                        executor=SlowCheck({FAST_RMSNORM.id: 1.0, SLOW_RMSNORM.id: 2.0}), progress=events.append,
                        budget=hoid.Budget(minutes=10))
    [event] = [e for e in events if e["kind"] == "together"]
    assert event["passed"] == 1 and event["not_reached"] == 1 and "fewer than two" in event["why"]
    [attempt] = opt.report.attempts
    assert attempt["kernel"] == FAST_RMSNORM.id and attempt["verdict"] == "passed" and not attempt["kept"]
    assert attempt["kernel_s"] is not None
    assert opt.report.stop_reason == "budget spent: 10 minutes"
    assert opt.report.unreached == ["p: 1 of its 2 proposals not decided (budget spent: 10 minutes)",
                                    "q: no turn (budget spent: 10 minutes)"]


MID_RMSNORM = KernelSpec(id="test.mid_rmsnorm", pattern=op_pattern("rmsnorm", 2), backend="torch", launch=_rmsnorm,
                         deterministic=True)


class InContext(Priced):
    """Priced, and a graph that runs `slow_in_graph` anywhere is slower whole than its prices add up to: what a
    fused kernel that breaks its neighbours' overlap does on the GPU (a stand-in for the measurement)."""

    def __init__(self, prices, slow_in_graph: str, evidence: str | None = None, **kw):
        super().__init__(prices, **kw)
        self.slow_in_graph, self.evidence = slow_in_graph, evidence  # evidence: say "measured" for the prices

    def measure_graph(self, graph, *, modelled=None, **kw):
        evidence = super().measure_graph(graph, modelled=modelled, **kw)
        slow = any(n.op == "kernel" and n.attrs["kernel"] == self.slow_in_graph for n in graph.nodes)
        return Evidence(evidence.seconds + 1e-3 * slow, self.evidence or evidence.evidence, evidence.method)


def _two_norms():
    """x -> rmsnorm -> rmsnorm (two weights): two regions of one signature, so banning one e-class's choice
    (the top-k's hot classes) cannot take a kernel out of the graph."""
    gen = torch.Generator().manual_seed(0)
    b = GraphBuilder("two_norms")
    y = b.input("x", (64, 256), "f32")
    for i in range(2):
        w = b.weight(f"w{i}", (256,), "f32", 1 + 0.1 * torch.randn(256, generator=gen))
        y = b.mul(w, b.mul(y, b.rsqrt(b.add(b.mean(b.pow(y, 2.0), dim=[-1], keepdim=True), 1e-6))))
    return b.build(y)


@pytest.mark.parametrize("evidence", ["measured", "modelled"])
def test_a_kernel_cheapest_alone_but_slower_in_the_graph_is_measured_out_with_both_times(tmp_path, evidence):
    # the fast one is cheapest by its price everywhere; the finalists (k=0: the cheapest only, before the
    # batch's kernels were also left out one at a time) now include the cheapest without it, and the
    # whole-graph measurement, which says the fast one is slower in context, decides; the attempt says whether
    # the graphs' times were measured or modelled (a plan without a GPU said "measured", 12-05)
    prices = {FAST_RMSNORM.id: 1e-8, MID_RMSNORM.id: 2e-8}
    events = []
    opt = hoid.optimize(_two_norms(), agent=[Batch("p", FAST_RMSNORM, MID_RMSNORM)], device="h200", k=0,
                        journal=tmp_path / "j.sqlite", store=False, trials=4, progress=events.append,
                        executor=InContext(prices, slow_in_graph=FAST_RMSNORM.id,
                                           evidence="measured" if evidence == "measured" else None))
    attempts = {a["kernel"]: a for a in opt.report.attempts}
    [event] = [e for e in events if e["kind"] == "together"]
    assert event["kept"] and event["finalists"] == 2
    kernels = {n.attrs["kernel"] for n in opt.graph.nodes if n.op == "kernel"}
    assert kernels == {MID_RMSNORM.id}
    fast = attempts[FAST_RMSNORM.id]
    said = {"measured": "measured: the best graph without it ran",
            "modelled": "modelled: the best graph without it costs"}
    assert not fast["kept"] and said[evidence] in fast["why"], fast["why"]
    assert attempts[MID_RMSNORM.id]["kept"]


# --- a batch's sweeps: the first params of every proposal first, the rest within the batch's share ---------

def _tuned_rmsnorm(x, w, out, *, eps, block):
    _rmsnorm(x, w, out, eps=eps)


TUNED_RMSNORM = KernelSpec(id="test.tuned_rmsnorm", pattern=op_pattern("rmsnorm", 2), backend="torch",
                           launch=_tuned_rmsnorm, deterministic=True, params=(Param("block", (1, 2, 4), 1),))
SWEEP = ({"block": 1}, {"block": 2}, {"block": 4})


class Swept(Batch):
    """Proposes its kernels, those with params over SWEEP."""

    def propose(self, context):
        for p in super().propose(context):
            yield Proposal(p.region, p.kernel, SWEEP if p.kernel.params else p.sweep)


class Counting(Priced):
    """Priced; counts each kernel's checks and records each measurement's sweep; the larger the block, the
    faster (by hand); where `then` is set, it runs once the first measurement is done."""

    def __init__(self, prices, then=None, **kw):
        super().__init__(prices, **kw)
        self.checks, self.sweeps, self.then = {}, [], then

    def check(self, spec, region, params):
        self.checks[spec.id] = self.checks.get(spec.id, 0) + 1
        return super().check(spec, region, params)

    def measure_kernel(self, spec, region, sweep):
        self.sweeps.append((spec.id, [p.get("block") for p in sweep]))
        then, self.then = self.then, None
        if then is not None:
            then()
        best = max(self.candidates(spec, region, sweep), key=lambda p: p.get("block", 0))
        return best, Evidence(1e-8 / best.get("block", 1), "modelled", "priced by hand")


def _swept_run(tmp_path, agent, then=None, budget=None):
    executor = Counting({TUNED_RMSNORM.id: 1e-8, SLOW_RMSNORM.id: 1e-3}, then=then)
    events = []
    opt = hoid.optimize(norm_graph(), agent=agent, device="h200", journal=tmp_path / "j.sqlite", store=False,
                        trials=4, executor=executor, progress=events.append, budget=budget)
    [event, *_] = [e for e in events if e["kind"] == "together"]
    return opt, {a["kernel"]: a for a in opt.report.attempts}, event, executor


def test_a_batch_with_a_proposer_after_it_measures_first_params_first_and_then_the_rest_unchecked(tmp_path):
    """BGE-M3 on the H200 (12-05, 2 minutes): the library's sweeps took 62 s and codegen's turn never came."""
    opt, attempts, event, executor = _swept_run(
        tmp_path, [Swept("p", TUNED_RMSNORM, SLOW_RMSNORM), Batch("q", MID_RMSNORM)], budget=hoid.Budget(minutes=10))
    assert [s for s in executor.sweeps if s[0] == TUNED_RMSNORM.id] == [(TUNED_RMSNORM.id, [1]),
                                                                         (TUNED_RMSNORM.id, [1, 2, 4])]
    assert executor.checks[TUNED_RMSNORM.id] == 1  # the tail's measurement is not checked again
    assert event["tails_measured"] == 1 and event["tails_not_reached"] == 0 and event["tails_failed"] == 0
    tuned = attempts[TUNED_RMSNORM.id]
    assert tuned["kept"] and json.loads(tuned["params"]) == {"block": 4} and "first params only" not in tuned["why"]


@pytest.mark.parametrize("agent, budget", [("alone", hoid.Budget(minutes=10)), ("two", None)])
def test_a_batch_with_no_turn_to_wait_for_measures_its_sweeps_whole(tmp_path, agent, budget):
    proposers = [Swept("p", TUNED_RMSNORM, SLOW_RMSNORM)] + ([Batch("q", MID_RMSNORM)] if agent == "two" else [])
    opt, attempts, event, executor = _swept_run(tmp_path, proposers, budget=budget)
    assert [s for s in executor.sweeps if s[0] == TUNED_RMSNORM.id] == [(TUNED_RMSNORM.id, [1, 2, 4])]
    assert "tails_measured" not in event and json.loads(attempts[TUNED_RMSNORM.id]["params"]) == {"block": 4}


def test_a_batch_whose_share_ends_before_the_tails_keeps_the_first_params_and_says_so(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from hoid.agent import budget as budget_module
    from hoid.agent import loop as loop_module

    skew = {"s": 0.0}
    clock = SimpleNamespace(monotonic=lambda: time.monotonic() + skew["s"], perf_counter=time.perf_counter,
                            time=time.time)
    monkeypatch.setattr(loop_module, "time", clock)
    monkeypatch.setattr(budget_module, "time", clock)

    def six_minutes_pass():  # past the batch's share (half of 10 minutes), within the budget
        skew["s"] = 360.0

    opt, attempts, event, executor = _swept_run(
        tmp_path, [Swept("p", TUNED_RMSNORM, SLOW_RMSNORM), Batch("q", MID_RMSNORM)], then=six_minutes_pass,
        budget=hoid.Budget(minutes=10))
    assert [s for s in executor.sweeps if s[0] == TUNED_RMSNORM.id] == [(TUNED_RMSNORM.id, [1])]
    assert event["tails_measured"] == 0 and event["tails_not_reached"] == 1
    tuned = attempts[TUNED_RMSNORM.id]
    assert tuned["kept"] and json.loads(tuned["params"]) == {"block": 1}
    assert ("measured at its first params only (its share of the budget's minutes is spent before the rest of "
            "its sweep)") in tuned["why"]
    assert MID_RMSNORM.id in attempts  # the next proposer had its turn

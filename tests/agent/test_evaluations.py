"""Evaluations: held by proposal key until its turn takes it, submitted again only when none is held."""

from concurrent.futures import Future
from types import SimpleNamespace

from hoid.agent.evaluations import Evaluations
from hoid.measure.devices import get_device

from .helpers import SLOW_RMSNORM

REGION = SimpleNamespace(key="rmsnorm(...)", types=(), attrs={})


class Recording:
    """An executor that evaluates nothing: it hands out futures and says what it was given."""

    def __init__(self):
        self.submitted: list[tuple] = []

    def submit(self, spec, region, params, sweep, checked=None) -> Future:
        self.submitted.append((spec.id, region.key, params, sweep))
        return Future()


def test_a_turn_takes_the_evaluation_held_for_it_and_a_later_one_submits_again():
    executor = Recording()
    evaluations = Evaluations(executor, get_device("h200"))
    held = evaluations.submit("p|r|k", SLOW_RMSNORM, REGION, ())
    assert evaluations.held("p|r|k") is held and len(executor.submitted) == 1
    assert evaluations.take("p|r|k", SLOW_RMSNORM, REGION, ()) is held and len(executor.submitted) == 1
    assert evaluations.held("p|r|k") is None
    again = evaluations.take("p|r|k", SLOW_RMSNORM, REGION, ())
    assert again is not held and len(executor.submitted) == 2
    # no sweep: the spec's default params, checked with the first of the sweep
    assert executor.submitted[0][2:] == ({}, ({},))


def test_dropped_and_cancelled_evaluations_are_no_longer_held():
    evaluations = Evaluations(Recording(), get_device("h200"))
    dropped = evaluations.submit("a", SLOW_RMSNORM, REGION, ())
    kept = evaluations.submit("b", SLOW_RMSNORM, REGION, ())
    evaluations.drop("a")
    assert evaluations.held("a") is None and evaluations.held("b") is kept
    evaluations.cancel()
    assert kept.cancelled() and not dropped.cancelled()


def test_params_that_cannot_be_resolved_are_an_evaluation_with_the_error_never_submitted():
    executor = Recording()
    pending = Evaluations(executor, get_device("h200")).take("p|r|k", SLOW_RMSNORM, REGION, ({"nope": 1},))
    assert executor.submitted == []
    result = pending.result(timeout=0)
    assert result.verdict is None and result.error.startswith("could not be checked: ValueError") \
        and "unknown param 'nope'" in result.error


# --- kernel source's checks ahead, several at once, before any measurement ------------------------------------

SOURCE = """import torch


def launch(x, w, out, *, eps):
    out.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w)
"""


def _source_spec(i: int):
    from hoid.kernels.loader import KernelSource
    from hoid.kernels.pattern import op_pattern

    return KernelSource(SOURCE + f"# variant {i}\n").to_spec(f"test.source_{i}", op_pattern("rmsnorm", 2))


class Timed:
    """An in-process executor whose checks take 0.2 s each: it records when each check and measurement ran;
    the spec named `failing` fails its check."""

    def __init__(self, failing: str = ""):
        import threading

        self.lock, self.failing = threading.Lock(), failing
        self.checks: list[tuple[str, float, float]] = []
        self.measures: list[tuple[str, float]] = []

    def check(self, spec, region, params):
        import time

        from hoid.verify import Verdict

        start = time.perf_counter()
        time.sleep(0.2)
        with self.lock:
            self.checks.append((spec.id, start, time.perf_counter()))
        return Verdict(spec.id != self.failing, "planted" if spec.id == self.failing else "ok")

    def measure_kernel(self, spec, region, sweep):
        import time

        from hoid.agent.executor import Evidence

        self.measures.append((spec.id, time.perf_counter()))
        return {}, Evidence(1e-6, "modelled", "by hand")


def test_source_kernels_are_checked_two_at_a_time_before_any_is_measured():
    executor = Timed(failing="test.source_2")
    evaluations = Evaluations(executor, get_device("h200"), isolated_at_once=2)
    specs = [_source_spec(i) for i in range(4)]
    evaluations.check_ahead([(s.id, s, REGION, ()) for s in specs])
    assert len(executor.checks) == 4 and executor.measures == []
    overlapping = [(a, b) for a in executor.checks for b in executor.checks
                   if a[0] < b[0] and a[1] < b[2] and b[1] < a[2]]
    assert overlapping  # at once, not one after another
    results = {s.id: evaluations.submit(s.id, s, REGION, ()).result() for s in specs}
    assert len(executor.checks) == 4  # the submits measured; none checked again
    assert [m[0] for m in executor.measures] == ["test.source_0", "test.source_1", "test.source_3"]
    assert min(t for _, t in executor.measures) > max(end for *_, end in executor.checks)
    assert not results["test.source_2"].verdict.ok and results["test.source_2"].kernel is None
    assert all(r.check_s >= 0.2 for r in results.values())  # each keeps its own check's seconds


def test_one_at_a_time_or_a_library_kernel_is_checked_in_its_submit_as_before():
    executor = Timed()
    one = Evaluations(executor, get_device("h200"), isolated_at_once=1)
    specs = [_source_spec(i) for i in range(2)]
    one.check_ahead([(s.id, s, REGION, ()) for s in specs])
    assert executor.checks == []
    two = Evaluations(executor, get_device("h200"), isolated_at_once=2)
    two.check_ahead([("a", SLOW_RMSNORM, REGION, ()), ("b", SLOW_RMSNORM, REGION, ())])
    assert executor.checks == []  # a library kernel is checked in this process, where it is submitted


def test_checks_ahead_stop_starting_once_the_minutes_are_spent():
    """Only the checks begun before `stop` says so run; the others wait for their submit (if their turn ever
    comes): a spent budget no longer waits for a batch's every check."""
    executor = Timed()
    evaluations = Evaluations(executor, get_device("h200"), isolated_at_once=2)
    specs = [_source_spec(i) for i in range(6)]
    evaluations.check_ahead([(s.id, s, REGION, ()) for s in specs],
                            stop=lambda: "budget spent: 1 minutes" if len(executor.checks) >= 2 else None)
    assert 2 <= len(executor.checks) < 6
    checked = len(executor.checks)
    evaluations.submit(specs[-1].id, specs[-1], REGION, ()).result()
    assert len(executor.checks) == checked + 1  # not checked ahead: its submit checks it
    spent = Evaluations(Timed(), get_device("h200"), isolated_at_once=2)
    spent.check_ahead([(s.id, s, REGION, ()) for s in specs], stop=lambda: "budget spent: 1 minutes")
    assert spent.executor.checks == []


def test_a_batch_checks_a_chunk_ahead_then_measures_it_before_the_next():
    """`together._evaluate` with checks ahead: a chunk (twice the checks at once) is checked, then measured,
    then the next; where the minutes end after the first chunk, its candidates are evaluated (decided
    together) and the rest are not reached."""
    from hoid.agent import together
    from hoid.agent.proposer import Proposal

    executor = Timed()
    evaluations = Evaluations(executor, get_device("h200"), isolated_at_once=2)
    specs = [_source_spec(i) for i in range(7)]
    proposals = [Proposal(REGION.key, s, ()) for s in specs]
    spent = {"after": None}

    def turn_over():
        return "budget spent: 1 minutes" if spent["after"] is not None and len(executor.measures) >= spent["after"] \
            else None

    run = SimpleNamespace(attempts_left=lambda: None, already_decided=lambda *a: False, evaluations=evaluations,
                          shares=SimpleNamespace(tails_wait=lambda: False, turn_over=turn_over))
    context = SimpleNamespace(region=lambda key: REGION)
    spent["after"] = evaluations.checks_per_chunk  # the minutes end once the first chunk is measured
    evaluated, not_reached = together._evaluate(run, "codegen", proposals, context)
    assert evaluations.checks_per_chunk == 4
    assert len(evaluated) == 4 and not_reached == 3
    assert [m[0] for m in executor.measures] == [s.id for s in specs[:4]]
    # the first chunk's four checks ran at once, before any measurement; nothing of the rest was checked
    assert len(executor.checks) == 4 and max(end for *_, end in executor.checks) < executor.measures[0][1]

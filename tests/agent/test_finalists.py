"""`finalists.faster_in_turn`: a measured gain the noise floor refuses is timed again in turn with the best
and judged round by round; a modelled or tiny gain is not; an executor that cannot time in turn says so.
Fake executors stand in for the GPU (the rounds they return are the H200's kind: a drift shared by both)."""

import pytest

from hoid.agent.executor import Evidence, LocalExecutor
from hoid.agent.finalists import INTERLEAVED_ROUNDS, faster_in_turn
from hoid.measure.devices import get_device

from .helpers import norm_graph

BEST, CANDIDATE = norm_graph(), norm_graph(rows=32)


def measured(seconds: float, samples=None) -> Evidence:
    return Evidence(seconds, "measured", "given", tuple(samples or (seconds,) * 3))


class InTurn:
    """Times the best and the candidate in turn: each round the machine's drift, then the candidate's gain."""

    def __init__(self, gains: list[float], drift: float = 0.02):
        self.gains, self.drift, self.calls = gains, drift, []

    def time_interleaved(self, graphs, *, rounds):
        self.calls.append((graphs, rounds))
        assert len(self.gains) == rounds
        base = [1e-3 * (1 + self.drift * (i % 2)) for i in range(rounds)]
        candidate = [b / (1 + g) for b, g in zip(base, self.gains, strict=True)]
        return [measured(sorted(base)[rounds // 2], base), measured(sorted(candidate)[rounds // 2], candidate)]


def test_a_close_call_that_holds_in_every_round_is_kept_on_the_rounds_evidence():
    executor = InTurn([0.006] * INTERLEAVED_ROUNDS)
    kept, why, evidence = faster_in_turn(executor, CANDIDATE, measured(1e-3 / 1.006), BEST, measured(1e-3))
    assert kept and "within the noise" in why and "timed again in turn with the best" in why
    assert "beyond 0.2% in every round" in why
    [(graphs, rounds)] = executor.calls
    assert graphs == [BEST, CANDIDATE] and rounds == INTERLEAVED_ROUNDS  # the best first, then the candidate
    assert len(evidence.samples) == INTERLEAVED_ROUNDS  # what the run keeps is what decided


def test_a_close_call_that_one_round_contradicts_is_refused():
    executor = InTurn([0.006, 0.006, -0.001, 0.006, 0.006])
    kept, why, _ = faster_in_turn(executor, CANDIDATE, measured(1e-3 / 1.006), BEST, measured(1e-3))
    assert not kept and "in 4 of them, not in every one" in why


@pytest.mark.parametrize("candidate, best, kept", [
    (measured(1e-3 / 1.001), measured(1e-3), False),  # under the floor of timing in turn: nothing to resolve
    (measured(1e-3 / 1.05), measured(1e-3), True),  # beyond the noise already
    (Evidence(1e-3 / 1.006, "modelled", "priced"), Evidence(1e-3, "modelled", "priced"), True),  # no noise
    (Evidence(1e-3 / 1.0005, "modelled", "priced"), Evidence(1e-3, "modelled", "priced"), False),  # a tie-break
    (measured(1e-3 / 0.99), measured(1e-3), False),  # slower
], ids=["tiny", "clear", "modelled", "modelled-tie", "slower"])
def test_only_a_measured_gain_the_noise_floor_refuses_is_timed_again(candidate, best, kept):
    executor = InTurn([0.006] * INTERLEAVED_ROUNDS)
    decided, _, evidence = faster_in_turn(executor, CANDIDATE, candidate, BEST, best)
    assert decided == kept and executor.calls == [] and evidence is candidate


def test_an_executor_that_cannot_time_in_turn_leaves_the_close_call_refused_and_says_so():
    kept, why, _ = faster_in_turn(object(), CANDIDATE, measured(1e-3 / 1.006), BEST, measured(1e-3))
    assert not kept and "not timed again: object cannot time two graphs in turn" in why


def test_the_local_executor_times_graphs_in_turn(monkeypatch):
    order = []

    def timer(self, graph):
        return (lambda: order.append(graph.name) or 1e-3 * (len(order))), "fake timer"

    monkeypatch.setattr(LocalExecutor, "_graph_timer", timer)
    executor = LocalExecutor(_cpu(), shipped=False)
    a, b = norm_graph(), norm_graph(rows=32)
    a.name, b.name = "a", "b"
    first, second = executor.time_interleaved([a, b], rounds=3)
    assert order == ["a", "b"] * 3  # in turn, not all of one then all of the other
    assert first.samples == pytest.approx((1e-3, 3e-3, 5e-3)) and second.samples == pytest.approx((2e-3, 4e-3, 6e-3))
    assert first.evidence == "measured" and "timed in turn" in first.method


def test_timings_in_turn_are_journaled_as_their_own_kind_and_never_read_back(monkeypatch, tmp_path):
    from hoid.agent import Journal

    monkeypatch.setattr(LocalExecutor, "_graph_timer", lambda self, graph: ((lambda: 1e-3), "fake timer"))
    with Journal(tmp_path / "j.sqlite") as journal:
        run, _ = journal.open_run("key", "graph", "cpu", "agents", "budget")
        executor = LocalExecutor(_cpu(), shipped=False, journal=journal, run=run)
        a, b = norm_graph(), norm_graph(rows=32)
        executor.time_interleaved([a, b], rounds=2)
        assert [m["kind"] for m in journal.measurements(run)] == ["graph in turn"] * 2
        assert executor.known_graph(a) is None  # a later measurement of `a` times it, as the first does


def test_off_the_target_there_is_nothing_to_time_in_turn():
    executor = LocalExecutor(get_device("h200"), shipped=False)
    with pytest.raises(RuntimeError, match="needs the target, NVIDIA H200"):
        executor.time_interleaved([BEST, CANDIDATE], rounds=3)


def _cpu():
    from hoid.agent.loop import resolve_device

    return resolve_device("cpu")


class CloseCalls(LocalExecutor):
    """The CPU as the target: a graph that runs a kernel measured `gain` faster than one without (1 ms), and
    `rounds_gain` as each round in turn finds it."""

    def __init__(self, gain: float, rounds_gain: list[float]):
        super().__init__(_cpu(), shipped=False)
        self.gain, self.in_turn = gain, InTurn(rounds_gain)

    def measure_graph(self, graph, *, modelled=None, repeats=3):
        return measured(1e-3 / (1 + self.gain) if any(n.op == "kernel" for n in graph.nodes) else 1e-3)

    def cost_model(self):  # every kernel nearly free: the extraction takes it, the measurement decides
        inner = super().cost_model()
        return lambda call: 1e-9 if call.op == "kernel" else inner(call)

    def time_interleaved(self, graphs, *, rounds):
        return self.in_turn.time_interleaved(graphs, rounds=rounds)


@pytest.mark.parametrize("rounds_gain, kept", [([0.005] * INTERLEAVED_ROUNDS, True),
                                               ([0.005, 0.005, 0.0, 0.005, 0.005], False)],
                         ids=["holds", "contradicted"])
def test_the_loop_decides_a_close_call_in_turn_and_journals_why(tmp_path, rounds_gain, kept):
    import hoid
    from hoid.agent.journal import Journal

    from .helpers import TorchLibrary

    executor = CloseCalls(0.005, rounds_gain)
    opt = hoid.optimize(norm_graph(), agent=[TorchLibrary()], device="cpu", journal=tmp_path / "j.sqlite",
                        store=False, trials=4, executor=executor)
    assert executor.in_turn.calls, "no close call was timed again"
    with Journal(tmp_path / "j.sqlite") as journal:
        decided = [a for a in journal.attempts() if "timed again in turn" in (a["why"] or "")]
    assert decided and all(bool(a["kept"]) == kept for a in decided)
    assert (opt.best_s < 1e-3) == kept


@pytest.mark.gpu
def test_on_the_gpu_two_compiled_graphs_are_timed_in_turn():
    from hoid.measure.local import local_device

    executor = LocalExecutor(local_device(), shipped=False)
    small, large = norm_graph(rows=64, hidden=256), norm_graph(rows=8192, hidden=4096)
    first, second = executor.time_interleaved([large, small], rounds=3)
    assert "hoid.compile, CUDA-graph replay, 2 graphs timed in turn" == first.method
    assert len(first.samples) == len(second.samples) == 3 and first.seconds > second.seconds > 0


def test_a_close_call_whose_worker_is_lost_stays_refused_and_says_why():
    from hoid.agent.executor import WorkerLost

    class Lost:
        def time_interleaved(self, graphs, *, rounds):
            raise WorkerLost("gpu0: died: killed by SIGKILL; gpu1: died: killed by SIGKILL")

    kept, why, evidence = faster_in_turn(Lost(), CANDIDATE, measured(1e-3 / 1.006), BEST, measured(1e-3))
    assert not kept and "a close call, not timed again: gpu0: died" in why and evidence.seconds == 1e-3 / 1.006


def test_once_the_budget_is_spent_only_the_cheapest_finalist_is_timed():
    """A model's finalists cost seconds each to compile and time: after the budget's minutes, the cheapest
    (first) is still timed, so the batch is decided, and the rest are not (BGE-M3 ran 2.5x its budget)."""
    from hoid.agent.finalists import measure_finalists

    class Counting:
        def __init__(self):
            self.timed = []

        def measure_graph(self, graph, *, modelled):
            self.timed.append(graph)
            return Evidence(modelled, "measured", "test")

    graphs = [("a", 1.0), ("b", 2.0), ("c", 3.0)]
    for stop, expected in [(None, ["a", "b", "c"]), (lambda: None, ["a", "b", "c"]),
                           (lambda: "budget spent", ["a"])]:
        executor = Counting()
        times = measure_finalists(executor, graphs, stop=stop)
        assert executor.timed == expected and [t.seconds for t in times] == [1.0, 2.0, 3.0][:len(expected)]
    # a stop that fires after the second timing: a prefix of two
    executor, calls = Counting(), iter([None, "spent"])
    assert len(measure_finalists(executor, graphs, stop=lambda: next(calls))) == 2

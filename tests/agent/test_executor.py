"""The executors on the CPU: a pool of worker processes keeps what the loop keeps in-process (offline
proposers, modelled costs: the outcome is deterministic); a worker killed mid-run loses nothing accepted
and its candidate is retried; a candidate that kills every worker it meets is recorded as failed while
the run goes on; a hung worker is killed; workers on another kind of device are left out."""

import os
import signal
import time
from pathlib import Path

import pytest
import torch

import hoid
from hoid.agent import Budget, Journal, LibraryProposer, Proposal, WorkerPool
from hoid.ir import run
from hoid.kernels import KernelSpec, get
from hoid.kernels.pattern import op_pattern
from hoid.models.examples import mlp_block

from .helpers import SLOW_RMSNORM, Only, norm_graph

pytestmark = pytest.mark.slow  # worker processes import torch and hoid: seconds each on this CPU


# --- kernels that take their worker down (module level: workers import them by reference) -------------

def _rmsnorm(x, w, out, eps):
    out.copy_(w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)))


def _dies_once(x, w, out, *, eps):
    """Correct, but the first process to run it (anywhere) is killed with SIGKILL as it does."""
    marker = Path(os.environ["HOID_TEST_FAULTS"]) / "died"
    if not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    _rmsnorm(x, w, out, eps)


def _always_dies(x, w, out, *, eps):
    os.kill(os.getpid(), signal.SIGKILL)


def _hangs(x, w, out, *, eps):
    time.sleep(3600)


DIES_ONCE = KernelSpec(id="test.dies_once", pattern=op_pattern("rmsnorm", 2), backend="torch", launch=_dies_once)
ALWAYS_DIES = KernelSpec(id="test.always_dies", pattern=op_pattern("rmsnorm", 2), backend="torch",
                         launch=_always_dies)
HANGS = KernelSpec(id="test.hangs", pattern=op_pattern("rmsnorm", 2), backend="torch", launch=_hangs)


class WithFaults(LibraryProposer):
    """The library proposer, with `faults` proposed for the first rmsnorm region after its `after`-th
    proposal (so that workers are busy with others when one goes down)."""

    def __init__(self, *faults, after: int = 2):
        super().__init__()
        self.name, self.faults, self.after = "library+faults", faults, after

    def propose(self, context):
        norm = next(r for r in context.regions if r.pattern == "rmsnorm")
        for i, proposal in enumerate(super().propose(context)):
            if i == self.after:
                yield from (Proposal(norm.key, spec, (spec.default_params(),)) for spec in self.faults)
            yield proposal


class Listed(Only):
    """`Only`, independent: a pool reads its proposals ahead."""

    independent = True


@pytest.fixture(autouse=True)
def _private(tmp_path, monkeypatch):
    monkeypatch.setenv("HOID_CACHE", str(tmp_path / "measure.sqlite"))
    monkeypatch.setenv("HOID_KERNELS", str(tmp_path / "kernels.sqlite"))
    monkeypatch.setenv("HOID_TEST_FAULTS", str(tmp_path))  # the workers inherit it


def outcomes(opt):
    return [(a["kernel"], a["region"], a["verdict"], a["kept"], a["params"]) for a in opt.report.attempts]


BUDGET = Budget(attempts=7)  # the library's first six proposals for mlp_block (two kept) and the fault


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The run in this process, the fault's marker already there (so it never fires)."""
    folder = tmp_path_factory.mktemp("in_process")
    (folder / "died").touch()
    old = {k: os.environ.get(k) for k in ("HOID_CACHE", "HOID_TEST_FAULTS")}
    os.environ.update(HOID_CACHE=str(folder / "measure.sqlite"), HOID_TEST_FAULTS=str(folder))
    try:
        return hoid.optimize(mlp_block(), agent=[WithFaults(DIES_ONCE)], device="h200", budget=BUDGET,
                             journal=folder / "j.sqlite", store=False, trials=4)
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def test_a_killed_worker_loses_nothing_and_the_pool_keeps_what_in_process_keeps(in_process, tmp_path):
    events = []
    pool = WorkerPool(2)
    opt = hoid.optimize(mlp_block(), agent=[WithFaults(DIES_ONCE)], device="h200", budget=BUDGET,
                        journal=tmp_path / "j.sqlite", store=False, trials=4, executor=pool, progress=events.append)
    assert (tmp_path / "died").exists()  # the fault fired: a worker died evaluating it
    assert opt.report.stop_reason == in_process.report.stop_reason == "budget spent: 7 attempts"
    assert outcomes(opt) == outcomes(in_process)  # same verdicts, same kernels kept with the same params
    assert len(in_process.report.kept) == 2 and opt.report.kept == in_process.report.kept
    assert sorted(map(str, opt.kernels.accepted)) == sorted(map(str, in_process.kernels.accepted))
    [fault] = [a for a in opt.report.attempts if a["kernel"] == "test.dies_once"]
    assert fault["verdict"] == "passed" and "evaluated again after its worker was lost" in fault["why"]
    assert "SIGKILL" in fault["why"]
    [lost] = [e for e in events if e["kind"] == "worker lost"]
    assert lost["retry"] and "test.dies_once" in lost["task"]
    assert len(pool.lost) == 1 and pool.parallel == 1
    # the workers were busy together: the pool had candidates in flight and queued beside the one decided
    assert max(e["busy"] + e["queued"] for e in events if e["kind"] == "workers") >= 2
    x = torch.randn(4, 64)
    torch.testing.assert_close(run(opt.graph, x)[0], run(mlp_block(), x)[0], rtol=1e-5, atol=1e-6)


def test_a_candidate_that_kills_every_worker_fails_and_the_run_goes_on(tmp_path):
    pool = WorkerPool(3)
    proposer = Listed("faulty", get("torch.rmsnorm"), ALWAYS_DIES, SLOW_RMSNORM)
    opt = hoid.optimize(norm_graph(), agent=[proposer], device="h200", journal=tmp_path / "j.sqlite", store=False,
                        trials=4, executor=pool)
    assert opt.report.stop_reason == "every proposer ran dry"
    verdicts = {a["kernel"]: a for a in opt.report.attempts}
    failed = verdicts["test.always_dies"]
    assert failed["verdict"] == "failed" and not failed["kept"]
    assert "lost on two workers" in failed["why"] and failed["why"].count("SIGKILL") == 2
    # the others were checked on the workers left: nothing else failed
    assert verdicts["torch.rmsnorm"]["verdict"] == "passed" and verdicts["test.slow_rmsnorm"]["verdict"] == "passed"
    assert len(pool.lost) == 2 and pool.parallel == 1
    with Journal(tmp_path / "j.sqlite") as j:
        assert j.run_row(opt.report.run)["finished"] is not None


def test_a_hung_worker_is_killed_with_the_reason(tmp_path):
    """A worker that does not answer within the timeout is killed; the pool's retry path is the one a
    death takes (the tests above)."""
    import cloudpickle

    from hoid.agent.loop import resolve_device
    from hoid.agent.proposer import RegionInfo
    from hoid.agent.workers import Lost, ProcessWorker
    from hoid.ir import TensorType

    worker = ProcessWorker("worker 0", {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"})
    try:
        worker.send(cloudpickle.dumps(("hello", {"sys_path": list(__import__("sys").path), "trials": 2,
                                                 "device": resolve_device("h200"),
                                                 "cache": str(tmp_path / "c.sqlite")})))
        status, info = __import__("pickle").loads(worker.receive(300))
        assert status == "ok" and info["pid"] == worker.pid
        types = (TensorType((4, 64), "f32"), TensorType((64,), "f32"))
        region = RegionInfo("r", "rmsnorm", types, {"eps": 1e-6}, op_pattern("rmsnorm", 2).graph(list(types),
                            {"eps": 1e-6}), 1e-6, 1.0, "modelled")
        worker.send(cloudpickle.dumps(("evaluate", (HANGS, region, {}, None, None))))
        with pytest.raises(Lost, match=r"no answer in 3 s \(hung\): killed"):
            worker.receive(3)
        assert worker.process.poll() is not None
    finally:
        worker.stop()


def test_workers_on_another_kind_of_device_are_left_out():
    from hoid.agent.pool import select_workers

    infos = {"a": {"device": "h200"}, "b": {"device": "b200"}, "c": {"device": "h200"}}
    use, why = select_workers(infos, "h200")
    assert use == ["a", "c"] and "b200" in why and "mix two kinds" in why
    # a modelled plan (no worker on the target) uses them all, to check
    assert select_workers(infos, "cpu") == (["a", "b", "c"], "")


def test_the_cli_runs_on_workers_and_shows_them(tmp_path, capsys):
    """Measured on the CPU (device cpu): kernels and whole graphs timed on the workers, every journal key
    naming the device, and the progress lines showing the workers and their queue."""
    from hoid.agent.loop import resolve_device
    from hoid.cli import main

    journal = tmp_path / "j.sqlite"
    code = main(["optimize", "example:mlp_block", "--agent", "library", "--budget", "2 attempts", "--device", "cpu",
                 "--journal", str(journal), "--workers", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "workers: 2 on cpu" in err and "[workers 2: " in err and "queued]" in err
    device = resolve_device("cpu").name
    with Journal(journal) as j:
        rows = j.measurements()
    fresh = [r for r in rows if r["fresh"]]
    # "graph in turn": a close call (a gain between 0.2% and the noise) timed again, A B A B, which the CPU's
    # noise makes now and then (a clean run of 12-05 evening did)
    assert {"kernel", "graph"} <= {r["kind"] for r in fresh} <= {"kernel", "graph", "graph in turn"}
    assert all(r["key"].startswith(f"{device}|") for r in rows)
    assert all("on worker" in r["method"] for r in fresh if r["kind"].startswith("graph"))


def test_the_cli_refuses_a_pool_of_no_workers(tmp_path, capsys):
    from hoid.cli import main

    assert main(["optimize", "example:mlp_block", "--workers", "0", "--journal", str(tmp_path / "j")]) == 2
    assert "--workers 0" in capsys.readouterr().err


def test_on_the_target_the_workers_time_the_plain_side_too(tmp_path, monkeypatch):
    # in-process, a passed kernel's region has its plain ops timed (the other side of the choice, so both
    # are priced from measurements); the workers did not, and the pool's extraction priced them modelled
    from hoid.agent.loop import resolve_device
    from hoid.agent.regions import discover
    from hoid.kernels.registry import library_kernels
    from hoid.measure.cache import MeasureCache
    from hoid.search.prices import body_calls, price_key
    from hoid.search.rules import default_rulesets
    from hoid.search.space import SearchSpace

    monkeypatch.setenv("HOID_CACHE", str(tmp_path / "cache.sqlite"))  # nothing timed before this run
    pool = WorkerPool(1)
    opt = hoid.optimize(norm_graph(), agent=[Only("slow", SLOW_RMSNORM)], device="cpu",
                        journal=tmp_path / "j.sqlite", store=False, trials=4, executor=pool)
    assert [a["verdict"] for a in opt.report.attempts] == ["passed"]
    device = resolve_device("cpu")
    space = SearchSpace(norm_graph(), target=device.target())
    space.saturate(default_rulesets())
    [region] = [r for r in discover(space, list(library_kernels().values()), device, measured=False)
                if r.pattern == "rmsnorm"]
    calls = list(body_calls(region.body))
    assert calls
    with MeasureCache(tmp_path / "cache.sqlite") as cache:
        assert all(cache.get(price_key(device.name, c)) is not None for c in calls)


def test_a_worker_elsewhere_sends_its_plain_side_timings_into_the_run_s_cache(tmp_path):
    from hoid.measure.cache import MeasureCache, MeasureKey
    from hoid.measure.timing import Timing

    class Elsewhere:
        info = {"host": "another-host", "cache": "/elsewhere/cache.sqlite"}

    pool = WorkerPool.__new__(WorkerPool)  # only its cache is used here
    pool.cache = MeasureCache(tmp_path / "run.sqlite")
    key = MeasureKey.of("cpu", "torch.rmsnorm", "v1", {}, [hoid.TensorType((4, 8), "f32")], {"eps": 1e-6})
    pool._keep_plain(Elsewhere(), [(key, Timing.of(3e-6), 1e-6)])
    assert pool.cache.get(key).median == 3e-6
    pool.cache.close()


def test_a_worker_times_two_graphs_in_turn_for_a_close_call(tmp_path):
    from hoid.agent.loop import resolve_device
    from hoid.measure.cache import MeasureCache

    pool = WorkerPool(1)
    pool.start(resolve_device("cpu"), cache=MeasureCache(tmp_path / "cache.sqlite"))
    try:
        first, second = pool.time_interleaved([norm_graph(rows=4096), norm_graph(rows=8)], rounds=2)
    finally:
        pool.close()
    for evidence in (first, second):
        assert evidence.evidence == "measured" and len(evidence.samples) == 2 and evidence.seconds > 0
        assert "2 graphs timed in turn, on " in evidence.method
    assert first.seconds > second.seconds  # 512 times the rows: each graph's own timings, not mixed up


def test_a_pool_times_a_graph_as_often_as_it_is_asked(tmp_path):
    from hoid.agent.loop import resolve_device
    from hoid.measure.cache import MeasureCache

    pool = WorkerPool(1)
    pool.start(resolve_device("cpu"), cache=MeasureCache(tmp_path / "cache.sqlite"))
    try:
        evidence = pool.measure_graph(norm_graph(rows=64), repeats=5)
    finally:
        pool.close()
    assert evidence.evidence == "measured" and len(evidence.samples) == 5  # the pool once took 3, whatever asked

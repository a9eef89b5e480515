"""`RayPool` on a local Ray cluster (`ray.init(num_cpus=2)`): the loop keeps the kernels the in-process
executor keeps (offline proposers, modelled costs), and an actor killed mid-run loses nothing accepted,
its candidate evaluated again on the other. Skipped where Ray is not installed (pip install 'hoid[ray]')."""

import os

import pytest

import hoid
from hoid.agent import RayPool
from hoid.models.examples import mlp_block

from .test_executor import BUDGET, DIES_ONCE, WithFaults, outcomes

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # the actors inherit this process's environment when the cluster starts: the fault's marker folder and
    # the measurement cache go in first
    folder = tmp_path_factory.mktemp("ray")
    old = {k: os.environ.get(k) for k in ("HOID_CACHE", "HOID_TEST_FAULTS")}
    os.environ.update(HOID_CACHE=str(folder / "measure.sqlite"), HOID_TEST_FAULTS=str(folder))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield folder
    ray.shutdown()
    for k, v in old.items():
        os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def _in_process(folder, agent):
    (folder / "died").touch()  # the fault never fires in this process
    try:
        return hoid.optimize(mlp_block(), agent=[agent], device="h200", budget=BUDGET, journal=folder / "ref.sqlite",
                             store=False, trials=4)
    finally:
        (folder / "died").unlink()


def test_a_ray_cluster_keeps_what_in_process_keeps_and_a_killed_actor_loses_nothing(cluster):
    reference = _in_process(cluster, WithFaults(DIES_ONCE))
    events = []
    pool = RayPool(workers=2)
    opt = hoid.optimize(mlp_block(), agent=[WithFaults(DIES_ONCE)], device="h200", budget=BUDGET,
                        journal=cluster / "ray.sqlite", store=False, trials=4, executor=pool, progress=events.append)
    assert (cluster / "died").exists()  # an actor died evaluating the fault
    assert opt.report.stop_reason == reference.report.stop_reason == "budget spent: 7 attempts"
    assert outcomes(opt) == outcomes(reference)
    assert len(reference.report.kept) == 2 and opt.report.kept == reference.report.kept
    [fault] = [a for a in opt.report.attempts if a["kernel"] == "test.dies_once"]
    assert fault["verdict"] == "passed" and "evaluated again after its worker was lost" in fault["why"]
    [lost] = [e for e in events if e["kind"] == "worker lost"]
    assert lost["retry"] and lost["worker"].startswith("ray worker")
    assert len(pool.lost) == 1 and pool.parallel == 1
    assert {e["alive"] for e in events if e["kind"] == "workers"} == {2, 1}

"""`RayPool`: the pool's workers as Ray actors, one per GPU of a Ray cluster (Ray pins each to its GPU),
or CPU actors on a cluster without GPUs. Needs Ray: `pip install 'hoid[ray]'`.

    ray start --head            # on the head node; `ray start --address HEAD:6379` on the others
    hoid optimize FILE --ray auto
    hoid.optimize(graph, executor=RayPool("auto"), device="h200")

Everything else is `hoid.agent.pool.PoolExecutor`'s: the same messages, the same choice of workers by
device (a cluster of mixed GPUs measures on the target's kind only), the same retries. Every node needs
hoid and its dependencies installed (the actors import it); kernel source and weights travel with the
tasks. A Ray actor that dies is lost (no restarts: its task is retried once elsewhere, as a process's).
"""

from __future__ import annotations

from .pool import PoolExecutor
from .workers import Lost, WorkerSide


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError("RayPool needs Ray: pip install 'hoid[ray]' (or pip install ray), on every node of the "
                          "cluster") from None
    return ray


class RayWorkerActor:
    """The actor: a `WorkerSide` in a Ray worker process."""

    def __init__(self):
        self.side = WorkerSide()

    def handle(self, blob: bytes) -> bytes:
        return self.side.handle(blob)


class RayWorker:
    """The run's handle on one actor, as `hoid.agent.workers.ProcessWorker` is on a process."""

    def __init__(self, name: str, actor):
        self.name, self.actor, self._ref = name, actor, None

    def send(self, blob: bytes) -> None:
        self._ref = self.actor.handle.remote(blob)

    def receive(self, timeout: float) -> bytes:
        ray = _ray()
        try:
            return ray.get(self._ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            self.kill()
            raise Lost(f"no answer in {timeout:g} s (hung): killed") from None
        except ray.exceptions.RayError as e:  # the actor died (its process, its node)
            raise Lost(f"died: {type(e).__name__}: {' '.join(str(e).split())[:300]}") from None

    def kill(self) -> None:
        try:
            _ray().kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001  already gone
            pass

    def stop(self) -> None:
        self.kill()


class RayPool(PoolExecutor):
    """address: the cluster's (as `ray.init` takes it: "auto", "ray://head:10001"; None: the cluster this
    process is connected to, else a local one); workers: how many actors (default: one per GPU of the
    cluster, or one per CPU where it has none); timeout_s: see `PoolExecutor`."""

    def __init__(self, address: str | None = None, *, workers: int | None = None, timeout_s: float = 900.0):
        if workers is not None and workers < 1:
            raise ValueError(f"workers={workers}: a pool needs at least one worker")
        super().__init__(timeout_s=timeout_s)
        self.address, self.count = address, workers
        _ray()  # say now, not at the run's start, that Ray is missing

    def _launch(self) -> list:
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=self.address)
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        n = self.count or gpus or int(resources.get("CPU", 1))
        options = {"num_gpus": 1, "num_cpus": 1} if gpus else {"num_cpus": 1}
        if gpus and n > gpus:
            raise ValueError(f"workers={n}: the Ray cluster has {gpus} GPU(s), one per worker")
        actor = ray.remote(max_restarts=0, max_task_retries=0)(RayWorkerActor)
        return [RayWorker(f"ray worker {i}", actor.options(**options).remote()) for i in range(n)]

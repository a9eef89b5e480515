"""Executors that fan candidates out to workers: `WorkerPool` (a worker process per local GPU, or N CPU
workers) and, through the same machinery, `hoid.agent.ray_executor.RayPool` (a Ray cluster).

    opt = hoid.optimize(graph, executor=hoid.agent.WorkerPool())     # every GPU of this machine
    hoid optimize FILE --workers 4                                   # the same from the CLI

The loop submits a candidate's check and kernel measurement (`submit`) and its finalists' whole-graph
timings (`measure_graphs`); the pool queues them, and one thread per worker sends each to its worker and
waits for the answer. Verdicts and measurements come back into this process, which journals them, puts
the kernel timings in its own cache and decides; a worker holds nothing the run would lose.

- Devices: every worker says which device it runs on. Where some run on the run's target, only those
  are used, so every measurement (and every cache key and whole-graph comparison) names one kind of GPU;
  the others are stopped and the run says so. For a modelled plan (no worker on the target) workers only
  check; prices come from this process.
- Faults: a worker that dies, or does not answer within `timeout_s` (then it is killed), is gone for the
  rest of the run; its task goes to another worker once, and if that is lost too the candidate is
  recorded as failed with both reasons (`WorkerLost`). A run without workers stops (`NoWorkers`),
  resumable, with everything accepted so far in its journal.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from concurrent.futures import Future

from ..kernels.registry import all_kernels, library_kernels
from ..measure.cache import MeasureKey
from ..measure.local import has_cuda
from .executor import Evaluation, LocalExecutor, NoWorkers, WorkerLost, register_checked
from .workers import Lost, ProcessWorker

STARTUP_S = 600.0  # a worker's first answer: it imports torch and hoid, and measures a CPU


class _Task:
    def __init__(self, what: str, message):
        self.what, self.message = what, message  # message(worker) -> bytes
        self.future: Future = Future()
        self.lost: list[str] = []


class _Pending:
    """A submitted evaluation: `result()` waits for the worker's answer and finishes it in this thread."""

    def __init__(self, pool, task, finish):
        self.pool, self.task, self.finish = pool, task, finish

    def result(self) -> Evaluation:
        status, answer, worker = self.pool.wait(self.task)
        if status != "ok":  # the worker could not even take the task (a spec it cannot import): not checked
            return Evaluation(error=f"could not be checked on {worker.label}: {answer}")
        return self.finish(answer, worker)

    def cancel(self) -> None:
        self.pool.cancel(self.task)


class PoolExecutor(LocalExecutor):
    """The machinery shared by `WorkerPool` and `RayPool`: subclasses start the workers (`_launch`, a list
    of handles with `name`, `send`, `receive`, `kill`, `stop`). `timeout_s`: how long one task may take
    before its worker counts as hung."""

    def __init__(self, *, timeout_s: float = 900.0):
        self.timeout_s = timeout_s
        self.workers: list = []
        self.lost: list[str] = []  # "worker: why", for the report and the tests

    # --- starting and stopping -------------------------------------------------------------------
    def start(self, device, *, cache=None, trials=None, journal=None, run=None, progress=None) -> None:
        import cloudpickle

        LocalExecutor.__init__(self, device, cache=cache, trials=trials, journal=journal, run=run)
        self.progress = progress or (lambda event: None)
        self._lock = threading.Condition()
        self._queue: deque = deque()
        self._events: list[dict] = []
        self._busy: set = set()
        self._closing = False
        handles = self._launch()
        hello = cloudpickle.dumps(("hello", {"sys_path": list(sys.path), "device": device, "trials": trials,
                                             "cache": str(self.cache.path)}))
        infos, started = {}, []
        for h in handles:  # all at once: each spends its first seconds importing
            try:
                h.send(hello)
                started.append(h)
            except Lost as e:
                self._lose(h, f"{h.name} {e}")
        for h in started:
            try:
                status, info = _answer(h.receive(STARTUP_S))
                if status != "ok":
                    raise Lost(f"could not start: {info}")
                infos[h] = info
            except Lost as e:
                self._lose(h, f"{h.name} {e}")
        use, why = select_workers(infos, device.name)
        for h in set(infos) - set(use):
            h.stop()
            self._emit(kind="worker left out", worker=h.name, why=why)
        if not use:
            raise NoWorkers(f"no worker started ({'; '.join(self.lost) or why})")
        for h in use:
            h.info = infos[h]
            h.label = f"{h.name} ({h.info['device']}, pid {h.info['pid']}{_host(h.info)})"
            h.weights, h.specs = {}, set()
        self.workers = list(use)
        self.on_device = any(h.info["device"] == device.name for h in use)
        self.profiles_here = self.on_device and self.local.name == device.name
        for h in use:
            threading.Thread(target=self._serve, args=(h,), daemon=True, name=f"hoid {h.name}").start()
        self._state()

    def _launch(self) -> list:
        raise NotImplementedError

    def close(self) -> None:
        """Stop the workers: idle ones are asked to, busy ones (a task read ahead, now not wanted) killed."""
        with self._lock:
            self._closing = True
            for task in self._queue:
                task.future.cancel()
            self._queue.clear()
            busy = set(self._busy)
            self._lock.notify_all()
        for h in self.workers:
            if h in busy:
                h.kill()
            else:
                h.stop()

    @property
    def parallel(self) -> int:
        return len(self.workers)

    # --- what the loop asks ----------------------------------------------------------------------
    def submit(self, spec, region, params: dict, sweep, checked=None) -> _Pending:
        """The candidate's check and (passed) kernel measurement on a worker; `result()` waits for them.
        `checked`: a passing verdict of the same kernel at the same region, not checked again (`evaluate`'s)."""
        from ..measure.kernel_bench import KernelMeasurement

        try:
            candidates, error = self.candidates(spec, region, sweep), ""
        except Exception as e:  # noqa: BLE001  said once the check has passed, as in-process
            candidates, error = [], f"could not be measured: {type(e).__name__}: {e}"
        known: dict[int, KernelMeasurement] = {}
        if self.on_device:  # what this run's cache holds is not timed again, wherever the worker runs
            for i, p in enumerate(candidates):
                key = MeasureKey.of(self.device.name, spec.id, spec.version, p, region.types, region.attrs)
                if (hit := self.cache.get(key)) is not None:
                    known[i] = KernelMeasurement(key, hit.median, hit.spread, hit.floor or 0.0, None, None)
        to_time = [p for i, p in enumerate(candidates) if i not in known] if self.on_device and not error else None
        payload = _message("evaluate", (spec, region, params, to_time, checked))
        task = self._enqueue(f"{spec.id} for {region.key}", lambda worker: payload)

        def finish(answer, worker) -> Evaluation:
            evaluation, timed, plain = answer
            retried = "; ".join(task.lost)
            if evaluation.verdict is None or not evaluation.verdict.ok or evaluation.error or error:
                return Evaluation(evaluation.verdict, error=evaluation.error or error, retried=retried)
            register_checked(spec)  # as in-process: from here on its nodes may be bound
            try:
                if not self.on_device:
                    params, kernel = self.modelled_kernel(spec, region, candidates)
                else:
                    fresh = iter(timed)
                    measured = [known[i] if i in known else next(fresh) for i in range(len(candidates))]
                    self._keep_timings(worker, measured)
                    self._keep_plain(worker, plain)
                    params, kernel = self.choose(spec, candidates, measured, where=f" on {worker.label}")
            except Exception as e:  # noqa: BLE001
                return Evaluation(evaluation.verdict, error=f"could not be measured: {type(e).__name__}: {e}",
                                  retried=retried)
            return Evaluation(evaluation.verdict, params, kernel, retried=retried)

        return _Pending(self, task, finish)

    def measure_graphs(self, graphs, repeats: int = 3) -> list:
        """Each (graph, modelled price): on the target, timed on the workers at once, `repeats` timings each (a
        measurement the journal holds is not repeated); elsewhere modelled."""
        if not self.on_device:
            return [self.modelled_graph(g, modelled) for g, modelled in graphs]
        found = [self.known_graph(g) for g, _ in graphs]
        tasks = {i: self._graph_task([g], repeats) for i, (g, _) in enumerate(graphs) if found[i] is None}
        for i, task in tasks.items():
            [samples], method = self._timed(task)
            found[i] = self.timed_graph(graphs[i][0], samples, method)
        return found

    def measure_graph(self, graph, *, modelled: float | None = None, repeats: int = 3):
        return self.measure_graphs([(graph, modelled)], repeats)[0]

    def time_graphs(self, graphs, rounds: int) -> tuple[list[list[float]], str]:
        """`LocalExecutor.time_graphs` on one worker (graphs timed in turn must share a GPU): what
        `time_interleaved` decides a close call on."""
        return self._timed(self._graph_task(list(graphs), rounds))

    def _timed(self, task: _Task) -> tuple[list[list[float]], str]:
        """A graph task's samples per graph and how they were taken (the worker named); its error raised as an
        in-process one would be."""
        status, answer, worker = self.wait(task)
        if status != "ok":
            raise RuntimeError(f"{worker.label}: timing {task.what}: {answer}")
        samples, method = answer
        return samples, f"{method}, on {worker.label}"

    # --- tasks -----------------------------------------------------------------------------------
    def _graph_task(self, graphs: list, rounds: int) -> _Task:
        """`graphs` timed on one worker, `rounds` timings each, in turn (`LocalExecutor.time_graphs`)."""
        from ..ir.text import dumps

        texts = [dumps(g) for g in graphs]
        library = library_kernels()
        registered = all_kernels()
        ids = {n.attrs["kernel"] for g in graphs for n in g.nodes if n.op == "kernel"}
        specs = [registered[i] for i in sorted(ids) if i in registered and i not in library]
        weights = {n: t for g in graphs for n, t in g.weights.items()}

        def message(worker) -> bytes:
            # what the worker lacks: kernel source it has not registered, weights it has not been sent
            new_specs = [s for s in specs if (s.id, s.version) not in worker.specs]
            new = {n: t for n, t in weights.items() if worker.weights.get(n) is not t}
            blob = _message("graphs", (texts, new_specs, {n: t.detach().cpu() for n, t in new.items()}, rounds))
            worker.specs |= {(s.id, s.version) for s in new_specs}
            worker.weights.update(new)
            return blob

        return self._enqueue(f"graph {' and '.join(g.name for g in graphs)}", message)

    def _enqueue(self, what: str, message) -> _Task:
        task = _Task(what, message)
        with self._lock:
            if not self.workers:
                raise NoWorkers(f"every worker is lost ({'; '.join(self.lost)})")
            self._queue.append(task)
            self._lock.notify_all()
        self._state()
        return task

    def wait(self, task: _Task):
        """The task's (status, answer, worker): status "ok", or "error" with the worker's traceback as the
        answer; raises `WorkerLost` (lost on two workers) or `NoWorkers`."""
        try:
            return task.future.result()
        finally:
            self._state()

    def cancel(self, task: _Task) -> None:
        with self._lock:
            if task in self._queue:
                self._queue.remove(task)
                task.future.cancel()

    def _serve(self, worker) -> None:
        """One worker's thread: take the next task, send it, wait for the answer."""
        while True:
            with self._lock:
                while not self._queue and not self._closing:
                    self._lock.wait()
                if self._closing:
                    return
                task = self._queue.popleft()
                self._busy.add(worker)
            try:
                worker.send(task.message(worker))
                answer = _answer(worker.receive(self.timeout_s))
            except Lost as e:
                if not self._closing:  # killed by close(): not a fault
                    self._fail(worker, task, str(e))
                return
            except Exception as e:  # noqa: BLE001  a task that cannot be sent or read fails, not the worker
                with self._lock:
                    self._busy.discard(worker)
                task.future.set_exception(e)
                continue
            with self._lock:
                self._busy.discard(worker)
            task.future.set_result((*answer, worker))

    def _fail(self, worker, task: _Task, why: str) -> None:
        """`worker` is gone: its task goes to another worker once, else fails; with none left, all fail."""
        with self._lock:
            self._busy.discard(worker)
            self._lose(worker, f"{worker.label} {why}")
            task.lost.append(f"{worker.label} {why} during {task.what}")
            retry = len(task.lost) < 2 and bool(self.workers)
            self._events.append({"kind": "worker lost", "worker": worker.label, "why": why, "task": task.what,
                                 "retry": retry})
            if retry:
                self._queue.appendleft(task)
                self._lock.notify_all()
            elif len(task.lost) >= 2:
                task.future.set_exception(WorkerLost(f"lost on two workers: {'; '.join(task.lost)}"))
            if not self.workers:
                gone = NoWorkers(f"every worker is lost ({'; '.join(self.lost)})")
                for t in [task, *self._queue] if not task.future.done() else list(self._queue):
                    t.future.set_exception(gone)
                self._queue.clear()

    def _lose(self, worker, why: str) -> None:
        worker.kill()
        if worker in self.workers:
            self.workers.remove(worker)
        self.lost.append(why)

    def _keep_timings(self, worker, measured) -> None:
        """Fresh timings from a worker whose cache is not this run's go into this run's cache too."""
        if not self._shares_cache(worker):
            for m in measured:
                if m.timing is not None and not m.suspect:
                    self.cache.put(m.key, m.timing, floor=m.floor)

    def _keep_plain(self, worker, plain) -> None:
        """The plain side's fresh timings (key, timing, floor), as `_keep_timings`: what prices the choice's
        other side from a measurement in this run's extraction."""
        if not self._shares_cache(worker):
            for key, timing, floor in plain:
                self.cache.put(key, timing, floor=floor)

    def _shares_cache(self, worker) -> bool:
        return (worker.info["host"], worker.info["cache"]) == (_hostname(), str(self.cache.path.resolve()))

    # --- progress --------------------------------------------------------------------------------
    def _state(self) -> None:
        """Progress events (in the run's thread): losses since the last call, then the workers and queue."""
        with self._lock:
            events, self._events = self._events, []
            state = {"kind": "workers", "alive": len(self.workers), "lost": len(self.lost),
                     "busy": len(self._busy), "queued": len(self._queue),
                     "device": ", ".join(sorted({h.info["device"] for h in self.workers}))}
        for event in events:
            self._emit(**event)
        self._emit(**state)

    def _emit(self, **event) -> None:
        self.progress(event)


class WorkerPool(PoolExecutor):
    """A worker process per GPU of this machine (`workers`: how many, default all; each pinned to its own
    GPU with `CUDA_VISIBLE_DEVICES`), or, without a GPU, `workers` CPU processes (default 1), sharing the
    cores: what tests and the CPU's own runs use. `timeout_s`: see `PoolExecutor`."""

    def __init__(self, workers: int | None = None, *, timeout_s: float = 900.0):
        if workers is not None and workers < 1:
            raise ValueError(f"workers={workers}: a pool needs at least one worker")
        super().__init__(timeout_s=timeout_s)
        self.count = workers

    def _launch(self) -> list:
        if has_cuda():
            import torch

            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            gpus = [g.strip() for g in visible.split(",") if g.strip()] if visible else \
                [str(i) for i in range(torch.cuda.device_count())]
            n = self.count or len(gpus)
            if n > len(gpus):
                raise ValueError(f"workers={n}: this machine has {len(gpus)} GPU(s), and a worker runs on one GPU "
                                 f"of its own; ask for at most {len(gpus)}, or use RayPool for several machines")
            envs = [{**os.environ, "CUDA_VISIBLE_DEVICES": gpus[i]} for i in range(n)]
        else:
            n = self.count or 1
            threads = str(max(1, (os.cpu_count() or 1) // n))  # the workers share the cores
            envs = [{**os.environ, "CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": threads}
                    for _ in range(n)]
        return [ProcessWorker(f"worker {i}", env) for i, env in enumerate(envs)]


def select_workers(infos: dict, target: str) -> tuple[list, str]:
    """The workers a run uses (`infos`: handle -> what it said at hello), and why any are left out: those
    on the target where any are (one kind of device for every measurement), else all (they only check)."""
    on_target = [h for h, info in infos.items() if info["device"] == target]
    if on_target:
        others = sorted({info["device"] for info in infos.values()} - {target})
        return on_target, (f"the run measures on {target}; workers on {', '.join(others)} would mix two kinds of "
                           "device in one comparison" if others else "")
    return list(infos), ""


def _message(op: str, payload) -> bytes:
    import cloudpickle

    return cloudpickle.dumps((op, payload))


def _answer(blob: bytes):
    import pickle

    return pickle.loads(blob)


def _hostname() -> str:
    import socket

    return socket.gethostname()


def _host(info: dict) -> str:
    return "" if info["host"] == _hostname() else f" on {info['host']}"

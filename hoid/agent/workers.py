"""A pool's worker: the process (or Ray actor) that checks candidates and times kernels and graphs for
the run, and its handle on the run's side.

The run sends a worker messages and waits for each answer (`WorkerSide.handle`, cloudpickled both ways,
since kernel specs hold closures that plain pickle refuses):

    ("hello", setup)       the run's sys.path, target device, cache file and check trials -> what the worker
                           runs on (its device's name: which kind of GPU), its pid and host
    ("evaluate", task)     (spec, region, params, to_time, checked): the check (skipped where `checked`
                           holds an earlier passing verdict), then (passed) each param set of `to_time`
                           timed at the region's real shapes (None: check only, the run prices it)
                           -> (Evaluation, [KernelMeasurement])
    ("graphs", task)       (documents, specs, weights, rounds): whole graphs timed, in turn where there are
                           several -> (samples per graph, method); kernel source the graphs run and weights
                           the worker lacks come with them, once

A worker keeps nothing the run needs: its answers carry every verdict and measurement back, and the run
journals them. The run's cache file is the worker's (local processes share it; SQLite in WAL mode takes
several writers). Worker processes are fresh interpreters (`python -c`), as `hoid.verify`'s isolated
children are, each pinned to one GPU with `CUDA_VISIBLE_DEVICES` by the pool that starts it.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

STOP = b"stop"


class Lost(Exception):
    """The worker died or did not answer in time (and was killed): what happened, in words."""


class WorkerSide:
    """What a worker does with each message (see the module doc)."""

    def __init__(self):
        self.executor = None
        self.weights: dict = {}

    def handle(self, blob: bytes) -> bytes:
        import cloudpickle

        try:
            op, payload = pickle.loads(blob)  # a spec whose module this worker cannot import fails here
            answer = ("ok", getattr(self, f"_{op}")(payload))
        except Exception as e:  # noqa: BLE001  an error of the task goes back to the run, the worker lives on
            answer = ("error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}")
        return cloudpickle.dumps(answer)

    def _hello(self, setup: dict) -> dict:
        sys.path[:0] = [p for p in setup["sys_path"] if p not in sys.path]  # the run's modules: its kernels
        from ..measure.cache import MeasureCache
        from .executor import LocalExecutor

        self.executor = LocalExecutor(setup["device"], cache=MeasureCache(setup["cache"]), trials=setup["trials"],
                                      shipped=False)  # the run merged the shipped measurements already
        return {"device": self.executor.local.name, "pid": os.getpid(), "host": socket.gethostname(),
                "cache": str(self.executor.cache.path.resolve())}

    def _evaluate(self, task):
        from .executor import Evaluation, register_checked

        spec, region, params, to_time, checked = task
        try:
            verdict = checked if checked is not None else self.executor.check(spec, region, params)
        except Exception as e:  # noqa: BLE001  as in the run's own process: a rejection, not a failure
            return Evaluation(error=f"could not be checked: {type(e).__name__}: {e}"), [], []
        if not verdict.ok or to_time is None:
            return Evaluation(verdict), [], []
        try:
            register_checked(spec)
            timed = [self.executor.time_kernel(spec, region, p) for p in to_time]
            plain: list = []  # the other side of the choice, as the run's own process times it
            self.executor.time_plain_side(region, plain)
            return Evaluation(verdict), timed, plain
        except Exception as e:  # noqa: BLE001
            return Evaluation(verdict, error=f"could not be measured: {type(e).__name__}: {e}"), [], []

    def _graphs(self, task):
        from ..ir.text import loads
        from ..kernels.registry import register

        texts, specs, weights, rounds = task
        for spec in specs:
            register(spec, replace=True)
        self.weights.update(weights)
        graphs = [loads(text) for text in texts]
        for graph in graphs:
            graph.weights = {v.name: self.weights[v.name] for v in graph.weight_inputs}
        return self.executor.time_graphs(graphs, rounds)


def _worker_main(fd: int) -> None:
    """A worker process: answer the run's messages until it says stop or goes away."""
    conn = Connection(fd)
    side = WorkerSide()
    while True:
        try:
            blob = conn.recv_bytes()
        except EOFError:
            return
        if blob == STOP:
            return
        conn.send_bytes(side.handle(blob))


class ProcessWorker:
    """The run's handle on a worker process started with `env` (its `CUDA_VISIBLE_DEVICES` pins it)."""

    def __init__(self, name: str, env: dict):
        self.name = name
        ours, theirs = socket.socketpair()
        root = str(Path(__file__).resolve().parents[2])
        code = (f"import sys; sys.path.insert(0, {root!r}); from hoid.agent.workers import _worker_main; "
                "_worker_main(int(sys.argv[1]))")
        self.process = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno())],
                                        pass_fds=[theirs.fileno()], env=env)
        theirs.close()
        self.conn = Connection(ours.detach())

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, blob: bytes) -> None:
        try:
            self.conn.send_bytes(blob)
        except OSError:
            raise Lost(self._death()) from None

    def receive(self, timeout: float) -> bytes:
        try:
            if not self.conn.poll(timeout):
                self.kill()
                raise Lost(f"no answer in {timeout:g} s (hung): killed")
            return self.conn.recv_bytes()
        except (EOFError, OSError):
            raise Lost(self._death()) from None

    def _death(self) -> str:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            return "its connection broke: killed"
        if code < 0:
            return f"died: killed by {signal.Signals(-code).name}"
        return f"died: exit status {code}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        try:
            self.conn.send_bytes(STOP)
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()
        self.conn.close()

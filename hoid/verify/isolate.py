"""Running a candidate in a separate process, so that whatever it does cannot touch the check.

One child per check, a fresh interpreter (`python -c`, not a fork: nothing of the parent's state, no
reference anywhere in it, and no re-running of the user's `__main__` script as multiprocessing's spawn
would do), reused for every trial, since importing torch costs a second or two; and one more started
ahead, so that the next check finds its child warm. Every buffer lives in
POSIX shared memory that the parent allocates and the child maps once per input signature; for each call
the parent writes new input values and poisons the outputs, the child runs the candidate on the same
buffers (copied to and from its own device buffers when the check runs on a GPU) and answers in a few
bytes, and the parent compares what the buffers hold with its reference, which the child never sees.
An in-place output (`Plan.aliases`) is its input's block, mapped once: the candidate gets one tensor for both.
A child that dies (os._exit, a segfault, a CUDA error that kills it) or does not answer in time (it is
then killed) is a verdict, not a crash of the parent.
"""

from __future__ import annotations

import atexit
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory

import torch

from ..ir import TensorType
from ..kernels.loader import KernelSource, load_entry
from .races import unsynced_tickets
from .runners import invoke
from .verdict import Failure, VerifyError

# Starting the child imports torch (and the candidate, Triton's interpreter...): allowed on top of timeout_s.
STARTUP_S = 120.0
# The parent waits this much longer than the child's own timer, so that the child reports its timeouts itself.
_GRACE_S = 2.0


def _shared(name: str, t: TensorType) -> tuple[torch.Tensor, SharedMemory]:
    """A tensor of type `t` (its layout included) over new shared memory, or over the block `name`."""
    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.layout(), strict=True)) if t.numel else 0
    itemsize = t.torch_dtype.itemsize
    memory = SharedMemory(name=name) if name else SharedMemory(create=True, size=max(span, 1) * itemsize)
    flat = torch.frombuffer(memory.buf, dtype=t.torch_dtype, count=max(span, 1))
    return flat.as_strided(t.shape, t.layout()), memory


def _child_loop(conn: Connection) -> None:
    """The child: load the candidate, then answer `prepare`, `call` and `stop` messages."""
    candidate, destination_passing, timeout_s, device = conn.recv()
    try:
        fn = load_entry(candidate) if isinstance(candidate, KernelSource) else pickle.loads(candidate)
    except BaseException as exc:  # the harness reports any load failure, whatever the candidate raised
        conn.send(Failure("raised", f"loading the candidate failed: {type(exc).__name__}: {exc}"))
        return
    conn.send(None)
    mapped: dict = {}  # key -> (shared tensors, their device copies, how many are inputs, kwargs)
    read: set[int] = set()  # the candidate's compiled Triton kernels already read for races
    memories: list[SharedMemory] = []  # alive as long as the tensors viewing them: closing one unmaps it
    while True:
        message, key, payload = conn.recv()
        if message == "prepare":
            (ins, outs, kwargs), by_name = payload, {}
            for name, t in (*ins, *outs):
                if name in by_name:  # an in-place output names its input's block: the same tensor, not a 2nd map
                    continue
                tensor, memory = _shared(name, t)
                # The parent owns the memory: keep this process's tracker from unlinking it at exit.
                resource_tracker.unregister(memory._name, "shared_memory")
                memories.append(memory)
                by_name[name] = tensor
            shared = [by_name[name] for name, _ in (*ins, *outs)]
            on_device = _on(device, shared)
            mapped[key] = (shared, on_device, len(ins), kwargs)
            conn.send(None)
        elif message == "call":
            shared, on_device, n_in, kwargs = mapped[key]
            failure = None
            for _ in range(payload):
                try:
                    if on_device is not shared:
                        for d, s in zip(on_device, shared, strict=True):
                            d.copy_(s)
                    failure = invoke(fn, on_device[:n_in], on_device[n_in:], kwargs,
                                     destination_passing=destination_passing, timeout_s=timeout_s)
                    if on_device is not shared:  # inputs too: the parent checks them for writes
                        for d, s in zip(on_device, shared, strict=True):
                            s.copy_(d)
                except Exception as exc:  # a CUDA error outlives the call that caused it: say what it was
                    failure = failure or Failure("raised", f"the device failed after the candidate ran: "
                                                 f"{type(exc).__name__}: {exc}")
                if failure is None and device.type == "cuda":  # what it built there (a CPU interprets)
                    failure = unsynced_tickets(fn, read)
                if failure is not None:
                    break
            conn.send(failure)
        else:
            return


def _on(device: torch.device, shared: list[torch.Tensor]) -> list[torch.Tensor]:
    """The buffers the candidate gets on `device`: one device buffer per shared one, so that an in-place
    output is its input there too (`outputs[o] is inputs[i]`)."""
    if device.type == "cpu":
        return shared
    made: dict[int, torch.Tensor] = {}
    for s in shared:
        if id(s) not in made:
            made[id(s)] = _like(s, device)
    return [made[id(s)] for s in shared]


def _like(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A buffer of the same shape, dtype and strides on `device` (`.to` would make it contiguous)."""
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device=device)


def _child_main(fd: int) -> None:
    try:
        _child_loop(Connection(fd))
    except EOFError:  # the parent went away (a spare child that was never used): nothing to report to
        pass


# --- children started ahead --------------------------------------------------------------------------
# A child spends its first seconds importing torch and hoid, before it knows its candidate: so when a
# check ends, one more is started for the next check, which then starts warm (an optimizer checks
# candidates one after another). It waits, idle, until taken or until this process exits.

_spare: tuple[dict, subprocess.Popen, Connection] | None = None
_spare_lock = threading.Lock()


def _start_child(env: dict) -> tuple[subprocess.Popen, Connection]:
    ours, theirs = socket.socketpair()
    code = f"import sys; from {__name__} import _child_main; _child_main(int(sys.argv[1]))"
    process = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                               env=env)
    theirs.close()
    return process, Connection(ours.detach())


def _take_child(env: dict) -> tuple[subprocess.Popen, Connection]:
    """The spare child if it was started with this environment and still runs, else a new one."""
    global _spare
    with _spare_lock:
        spare, _spare = _spare, None
    if spare is not None:
        spare_env, process, conn = spare
        if spare_env == env and process.poll() is None:
            return process, conn
        _stop(process, conn)
    return _start_child(env)


def _start_spare(env: dict) -> None:
    global _spare
    with _spare_lock:
        if _spare is None:
            _spare = (env, *_start_child(env))


def release_spare() -> None:
    """Stop the child waiting for the next check, if any (also done when this process exits)."""
    global _spare
    with _spare_lock:
        spare, _spare = _spare, None
    if spare is not None:
        _stop(*spare[1:])


def _stop(process: subprocess.Popen, conn: Connection) -> None:
    process.kill()
    process.wait()
    conn.close()


atexit.register(release_spare)


class IsolatedRunner:
    """The protocol of `runners.InProcessRunner`, with the candidate in a child process.

    `candidate`: a `KernelSource`, or a callable that pickles by reference (a module-level function of an
    importable module, or a `functools.partial` of one); `triton_interpret`: run Triton's interpreter
    there."""

    def __init__(
        self,
        candidate: Callable | KernelSource,
        *,
        destination_passing: bool,
        timeout_s: float,
        device: torch.device,
        triton_interpret: bool,
    ):
        payload = candidate if isinstance(candidate, KernelSource) else _pickled(candidate)
        self.timeout_s, self.device = timeout_s, device
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        if triton_interpret:  # must be set before anything in the child imports triton
            env["TRITON_INTERPRET"] = "1"
        self._process, self._conn = _take_child(env)
        self._conn.send((payload, destination_passing, timeout_s, device))
        self._memory: dict[int, SharedMemory] = {}  # by the address of the tensor viewing it
        self._dead: Failure | None = None  # once set (the child died, or could not load), every call answers it
        self._dead = self._receive(STARTUP_S + timeout_s)  # the child says it loaded the candidate
        self._env = env

    def allocate(self, types: list[TensorType]) -> list[torch.Tensor]:
        """CPU tensors in shared memory (the child moves them to the device when the check runs on one)."""
        tensors = []
        for t in types:
            tensor, memory = _shared("", t)
            self._memory[tensor.data_ptr()] = memory
            tensors.append(tensor)
        return tensors

    def _names(self, tensors: list[torch.Tensor]) -> list[tuple[str, TensorType]]:
        if any(t.data_ptr() not in self._memory for t in tensors):
            raise VerifyError("IsolatedRunner.prepare takes only buffers made by its allocate()")
        return [(self._memory[t.data_ptr()].name, TensorType.of(t)) for t in tensors]

    def prepare(
        self, key, inputs: list[torch.Tensor], outputs: list[torch.Tensor], kwargs: dict
    ) -> Failure | None:
        return self._ask(
            ("prepare", key, (self._names(inputs), self._names(outputs), kwargs)), self.timeout_s
        )

    def call(self, key) -> Failure | None:
        return self._ask(("call", key, 1), self.timeout_s)

    def repeat(self, key, times: int) -> Failure | None:
        return self._ask(("call", key, times), self.timeout_s * times)

    def _ask(self, message: tuple, timeout: float) -> Failure | None:
        """Send `message` and wait for the child's answer; a dead or silent child becomes the failure."""
        if self._dead is not None:
            return self._dead
        try:
            self._conn.send(message)
        except OSError:
            return self._died()
        return self._receive(timeout + _GRACE_S)

    def _receive(self, timeout: float) -> Failure | None:
        try:
            if not self._conn.poll(timeout):
                self._process.kill()
                self._process.wait()
                self._dead = Failure(
                    "timeout",
                    f"the candidate did not return within {timeout:.0f} s (an endless "
                    "loop?); the process running it was killed",
                )
                return self._dead
            return self._conn.recv()
        except (EOFError, OSError):
            return self._died()

    def _died(self) -> Failure:
        try:
            code = self._process.wait(5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            code = self._process.wait()
        if code < 0:
            name = signal.Signals(-code).name
            how = f"was killed by {name}" + (
                " (a segmentation fault: an invalid memory access)" if name == "SIGSEGV" else ""
            )
        else:
            how = f"exited with status {code} in the middle of a call (os._exit, sys.exit or a fatal error)"
        self._dead = Failure("crashed", f"the isolated process running the candidate {how}")
        return self._dead

    def close(self) -> None:
        """Stop the child, free the shared memory, and start the spare child for the next check (now,
        not earlier: its imports would compete with this check's trials)."""
        if self._process.poll() is None:
            try:
                self._conn.send(("stop", None, None))
                self._process.wait(2)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._conn.close()
        for memory in self._memory.values():
            memory.unlink()  # the name goes now; the mapping goes with the last tensor viewing it
        self._memory.clear()
        _start_spare(self._env)


def _pickled(candidate: Callable) -> bytes:
    module = getattr(candidate, "__module__", None) or getattr(
        getattr(candidate, "func", None), "__module__", None
    )
    if module == "__main__":
        raise VerifyError(
            "isolate=True: the candidate is defined in the __main__ script, which the child process "
            "cannot import; move it into a module, or pass its source as KernelSource(text, entry)"
        )
    try:
        return pickle.dumps(candidate)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise VerifyError(
            f"isolate=True needs a candidate the child process can import: a module-level function "
            f"(not a lambda or a closure), a functools.partial of one, or kernel source; pickling it "
            f"failed: {exc}"
        ) from None

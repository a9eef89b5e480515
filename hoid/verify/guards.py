"""Guards around one call of a candidate, wherever it runs (in this process or an isolated one).

- Patching: the namespaces a cheat would patch (torch, `torch.Tensor`, `torch.nn.functional`,
  `torch.testing`, `torch.cuda`, builtins, and every loaded `hoid` module) are snapshotted before the call;
  an entry replaced or deleted by the call is put back and reported. Entries the call adds are allowed
  (torch adds submodules to its namespace as they are first imported), except on `torch.Tensor` where
  they shadow a method of its bases (removed and reported), and so are new values of private
  data (`torch.cuda._cached_device_count`, a registry's `_loaded` flag: caches filled on first use);
  replacing a function or class is a patch, private or not.
- Uninitialized memory: during the call torch fills every fresh allocation with NaN
  (`torch.utils.deterministic.fill_uninitialized_memory` under deterministic mode, warnings only), so an
  output left unwritten, or one that hopes to find the reference's freed results, reads as NaN.
- Time: where the call runs on the main thread, a timer interrupts it after `timeout_s` (isolated
  candidates are also killed from outside; this is what keeps an in-process loop from hanging a test).
  A timer the caller had armed is held during the call and re-armed after it with the time it had left.
"""

from __future__ import annotations

import builtins
import contextlib
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable

import torch
import torch.utils.deterministic

from .verdict import Failure

_hoid_modules: tuple[int, list[str]] = (-1, [])


def _watched() -> dict[str, dict]:
    global _hoid_modules
    if _hoid_modules[0] != len(sys.modules):  # scanning every module on every call would cost milliseconds
        _hoid_modules = (len(sys.modules), [n for n in sys.modules if n == "hoid" or n.startswith("hoid.")])
    spaces = {"torch": vars(torch), "torch.Tensor": vars(torch.Tensor),
              "torch.nn.functional": vars(torch.nn.functional), "torch.testing": vars(torch.testing),
              "torch.cuda": vars(torch.cuda), "builtins": vars(builtins)}
    spaces.update((name, vars(sys.modules[name])) for name in _hoid_modules[1] if name in sys.modules)
    return spaces


class PatchWatch:
    """Snapshot of the watched namespaces; `undo()` restores what changed and names it."""

    def __init__(self):
        self._spaces = _watched()
        self._saved = {name: dict(space) for name, space in self._spaces.items()}

    def undo(self) -> list[str]:
        changed = []
        for name, saved in self._saved.items():
            space = self._spaces[name]
            for key, value in saved.items():
                now = space.get(key, _MISSING)
                if now is not value and _is_patch(key, value, now):
                    changed.append(f"{name}.{key}")
                    # mappingproxy (a class's namespace) cannot be assigned to; setattr works for both.
                    setattr(torch.Tensor if name == "torch.Tensor" else sys.modules[name], key, value)
        changed += _new_tensor_overrides(self._saved["torch.Tensor"])
        return changed


def _new_tensor_overrides(saved: dict) -> list[str]:
    """Remove (and name) keys the call added to `torch.Tensor` that shadow an attribute of its bases: most
    tensor methods (`__mul__`, `sum`) live on `torch._C.TensorBase`, so a new key there replaces them."""
    added = [key for key in vars(torch.Tensor) if key not in saved
             and any(key in vars(base) for base in torch.Tensor.__mro__[1:])]
    for key in added:
        delattr(torch.Tensor, key)
    return [f"torch.Tensor.{key}" for key in added]


_MISSING = object()


def _is_patch(key: str, before, after) -> bool:
    private_data = key.startswith("_") and not key.startswith("__") and not callable(before) and not callable(after)
    return not private_data


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    # torch.use_deterministic_algorithms also sets an inductor option, and importing inductor replaces
    # torch.manual_seed (through dynamo) the first time: the watch would take that for a patch.
    torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)


@contextlib.contextmanager
def _uninitialized_is_nan():
    was_on = torch.are_deterministic_algorithms_enabled()
    was_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    was_fill = torch.utils.deterministic.fill_uninitialized_memory
    _set_deterministic(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*deterministic.*")
            yield
    finally:
        _set_deterministic(was_on, warn_only=was_warn)
        torch.utils.deterministic.fill_uninitialized_memory = was_fill


class CallTimeout(BaseException):
    """Raised into a candidate that ran past its time (a BaseException, so `except Exception` in the
    candidate cannot swallow it)."""


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise CallTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    started = time.monotonic()
    # The caller's own timer (pytest-timeout's signal method, an alarm of theirs) waits until the call is
    # over, then gets back what it had left (and goes off at once if it fell due meanwhile).
    outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay > 0:
            left = max(outer_delay - (time.monotonic() - started), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


def _where_raised(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def guarded_call(fn: Callable, args: list, kwargs: dict, *, timeout_s: float | None
                 ) -> tuple[object, Failure | None]:
    """Call `fn(*args, **kwargs)` under the guards; returns (its result, None) or (None, the failure).
    Patches are undone however the call ends; a patch is the verdict even if the call also failed."""
    watch = PatchWatch()
    result, failure = None, None
    try:
        with _uninitialized_is_nan(), _time_limit(timeout_s):
            result = fn(*args, **kwargs)
            if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
                torch.cuda.synchronize()
    except CallTimeout:
        failure = Failure("timeout", f"the candidate did not return within {timeout_s} s (an endless loop?)")
    except (Exception, SystemExit) as exc:  # the candidate's own error is the verdict, with its words
        failure = Failure("raised", f"the candidate raised {type(exc).__name__}: {exc}{_where_raised(exc)}")
    patched = watch.undo()
    if patched:
        return None, _patched(patched)
    return (None, failure) if failure is not None else (result, None)


def _patched(names: list[str]) -> Failure:
    return Failure(
        "patched",
        f"the candidate replaced {', '.join(names[:5])}; a kernel may not patch torch, hoid "
        "or builtins (the replacement was undone)",
    )

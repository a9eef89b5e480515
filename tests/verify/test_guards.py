"""Guards around a candidate call: patches undone and reported, fresh memory NaN, time limits."""

import signal
import time

import torch

import hoid.verify.compare
import hoid.verify.guards
from hoid.verify.guards import guarded_call


def _patch_allclose():
    torch.allclose = lambda *args, **kwargs: True


def _patch_hoid():
    hoid.verify.compare.compare_output = lambda *args: None


def test_patches_of_torch_and_hoid_are_undone_and_reported():
    original, compare = torch.allclose, hoid.verify.compare.compare_output
    _, failure = guarded_call(_patch_allclose, [], {}, timeout_s=None)
    assert failure.kind == "patched" and "torch.allclose" in failure.message
    assert torch.allclose is original
    _, failure = guarded_call(_patch_hoid, [], {}, timeout_s=None)
    assert "hoid.verify.compare.compare_output" in failure.message
    assert hoid.verify.compare.compare_output is compare


def test_fresh_allocations_hold_nan_during_the_call_only():
    result, failure = guarded_call(torch.empty, [64], {}, timeout_s=None)
    assert failure is None and bool(result.isnan().all())
    assert not torch.are_deterministic_algorithms_enabled()


def _spin():
    while True:
        pass


def test_an_endless_call_is_interrupted():
    _, failure = guarded_call(_spin, [], {}, timeout_s=0.2)
    assert failure.kind == "timeout"


def test_exceptions_become_failures_that_say_where():
    _, failure = guarded_call(int, ["not a number"], {}, timeout_s=None)
    assert failure.kind == "raised" and "ValueError" in failure.message


def _fill_cache():
    # New private data, as a cache filled on first use (torch.cuda._cached_device_count, say) gets.
    hoid.verify.guards._hoid_modules = (-1, [])


def _patch_private_function():
    hoid.verify.compare._compare_finite = lambda *args: None


def test_private_caches_may_fill_but_private_functions_may_not_change():
    assert guarded_call(_fill_cache, [], {}, timeout_s=None)[1] is None
    original = hoid.verify.compare._compare_finite
    _, failure = guarded_call(_patch_private_function, [], {}, timeout_s=None)
    assert failure.kind == "patched" and "_compare_finite" in failure.message
    assert hoid.verify.compare._compare_finite is original


def _patch_then_spin():
    torch.allclose = lambda *args, **kwargs: True
    _spin()


def test_patches_are_undone_even_when_the_call_times_out_and_sys_exit_is_a_failure():
    original = torch.allclose
    _, failure = guarded_call(_patch_then_spin, [], {}, timeout_s=0.2)
    assert failure.kind == "patched" and torch.allclose is original
    _, failure = guarded_call(exit, [3], {}, timeout_s=None)
    assert failure.kind == "raised" and "SystemExit" in failure.message


def _patch_tensor_mul():
    # __mul__ lives on torch._C.TensorBase: set on torch.Tensor, it is a new key that overrides it.
    torch.Tensor.__mul__ = lambda self, other: torch.zeros_like(self)


def test_a_new_tensor_method_that_shadows_torchs_own_is_a_patch_and_is_removed():
    try:
        _, failure = guarded_call(_patch_tensor_mul, [], {}, timeout_s=None)
        assert "__mul__" not in vars(torch.Tensor)
        assert failure is not None and failure.kind == "patched" and "torch.Tensor.__mul__" in failure.message
        assert torch.equal(torch.ones(2) * 2, torch.full((2,), 2.0))
    finally:
        if "__mul__" in vars(torch.Tensor):
            del torch.Tensor.__mul__


def test_the_callers_own_timer_survives_the_call():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        assert guarded_call(int, ["1"], {}, timeout_s=5)[1] is None
        assert 25 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
        # An outer timer due during the call goes off once the call is over.
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        assert guarded_call(time.sleep, [0.15], {}, timeout_s=5)[1] is None
        time.sleep(0.1)
        assert fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

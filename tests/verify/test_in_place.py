"""In-place outputs (`aliases`): checked in the aliased mode they run in, with every other defence kept.

The cheaters of this mode (reading what they have overwritten, writing an input they did not declare)
are in `cheaters.py` and rejected in `test_cheaters.py`; here, honest in-place candidates pass, the
declaration is what makes them pass, and kernel specs and isolated children get the same buffers.
"""

import concurrent.futures

import pytest

from hoid.ir import TensorType
from hoid.kernels import KernelSpec, op_pattern
from hoid.verify import VerifyError, check, check_kernel

from . import cheaters as C
from . import honest as H
from . import references as R
from .test_cheaters import CACHE, IN_PLACE, WINDOW

HONEST = [
    (H.cache_append_in_place, R.cache_append, CACHE),
    (H.cache_swap_in_place, R.cache_swap, CACHE),
    (H.cache_shift_in_place, R.cache_shift_in, WINDOW),
    # Would differ between its two runs if the second started from the first one's result.
    (H.cache_accumulate_in_place, R.cache_accumulate, WINDOW[:1] * 2),
]


@pytest.mark.parametrize("candidate, reference, inputs", HONEST, ids=[row[0].__name__ for row in HONEST])
def test_an_honest_in_place_candidate_passes_the_aliased_check(candidate, reference, inputs):
    verdict = check(candidate, reference, inputs, trials=8, seed=11, **IN_PLACE)
    assert verdict.ok, verdict


def test_without_the_declaration_the_output_is_a_fresh_poisoned_buffer():
    # Writing only the new slot is right in place, and leaves a separate buffer unwritten.
    verdict = check(H.cache_append_in_place, R.cache_append, CACHE, trials=4, seed=11, destination_passing=True)
    assert verdict.kind == "unwritten", verdict


def test_alias_declarations_that_cannot_hold_are_refused():
    with pytest.raises(VerifyError, match="destination-passing"):
        check(R.cache_append, R.cache_append, CACHE, aliases=((0, 0),))
    with pytest.raises(VerifyError, match="input 5 does not exist"):
        check(H.cache_append_in_place, R.cache_append, CACHE, destination_passing=True, aliases=((0, 5),))
    with pytest.raises(VerifyError, match="needs its input's type"):  # the output is f32, pos is i64
        check(H.cache_append_in_place, R.cache_append, CACHE, destination_passing=True, aliases=((0, 1),))


def test_the_isolated_child_gets_the_input_buffer_as_the_output_too():
    def isolated(candidate):
        return check(candidate, R.cache_swap, CACHE, trials=4, seed=3, isolate=True, **IN_PLACE)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        honest, cheater = pool.map(isolated, [H.cache_swap_in_place, C.cache_swap_reads_after_write])
    assert honest.ok, honest  # it refuses to run on an output that is not the cache's own buffer
    assert cheater.kind == "mismatch" and "output 1 differs" in cheater.reason, cheater


# --- a kernel spec declares its aliases; check_kernel and check(spec) use them ------------------------
_calls: list[bool] = []


def _append_slot(x, index, source, out, *, dim=1):  # check(spec) passes no attrs
    _calls.append(out is x)
    out.index_copy_(dim, index, source)  # writes only the slots at index: out already holds x


def _append_then_scales_source(x, index, source, out, *, dim):
    out.index_copy_(dim, index, source)
    source.mul_(2)  # an input it did not declare in place


def _examples(rng):
    b, s = rng.randint(1, 2), rng.randint(2, 8)
    return [TensorType((b, s, 16), "f32"), TensorType((1,), "i64"), TensorType((b, 1, 16), "f32")], {"dim": 1}


def _spec(launch, aliases=((0, 0),)) -> KernelSpec:
    return KernelSpec(id=f"test.{launch.__name__}", pattern=op_pattern("index_copy"), backend="torch",
                      launch=launch, examples=_examples, aliases=aliases,
                      index_bounds=lambda types, attrs: {1: types[0].shape[1]})


def test_check_kernel_runs_a_spec_in_its_aliased_mode():
    _calls.clear()
    verdict = check_kernel(_spec(_append_slot), examples=2, trials=4, seed=5)
    assert verdict.ok, verdict
    assert _calls and all(_calls)  # every call got the input itself as its output
    assert check(_spec(_append_slot), R.cache_append, CACHE, trials=4, seed=5).ok
    # Without its declaration the same launch leaves a fresh output unwritten.
    assert check_kernel(_spec(_append_slot, aliases=()), examples=1, trials=4, seed=5).kind == "unwritten"


def test_a_spec_in_place_still_may_not_write_its_other_inputs():
    verdict = check_kernel(_spec(_append_then_scales_source), examples=1, trials=4, seed=5)
    assert verdict.kind == "mutated" and "source" in verdict.reason, verdict

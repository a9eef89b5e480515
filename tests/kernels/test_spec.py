"""KernelSpec: its version (a hash of what the launch runs, so that caches keyed on it never go stale) and
its aliases (in-place outputs)."""

import pytest

from hoid.ir import TensorType
from hoid.kernels import KernelSpec, op_pattern
from hoid.kernels.spec import output_buffers


def _launch_without_a_file(body: str):
    """A launch defined where no source file exists (as in `python -c`): getsource fails for it."""
    namespace = {"__name__": "hoid_test_no_such_module"}
    exec(compile(f"def launch(x, out):\n    {body}\n", "<no file>", "exec"), namespace)
    return namespace["launch"]


def _version(launch) -> str:
    return KernelSpec(id="user.relu", pattern=op_pattern("relu"), backend="torch", launch=launch).version


def test_launches_without_source_get_versions_from_their_code_not_their_name():
    relu = _version(_launch_without_a_file("out.copy_(x.clamp_min(0))"))
    assert relu != _version(_launch_without_a_file("out.copy_(x.clamp_min(1))"))
    assert relu != _version(_launch_without_a_file("out.copy_(x.abs())"))
    assert relu == _version(_launch_without_a_file("out.copy_(x.clamp_min(0))"))
    nested = "out.copy_((lambda t: t.clamp_min({}))(x))"
    assert _version(_launch_without_a_file(nested.format(0))) != _version(_launch_without_a_file(nested.format(1)))


# --- aliases: in-place outputs ------------------------------------------------------------------------
def _index_copy_spec(aliases, examples=None) -> KernelSpec:
    return KernelSpec(id="user.append", pattern=op_pattern("index_copy"), backend="torch",
                      launch=lambda x, index, source, out, *, dim: out.index_copy_(dim, index, source),
                      aliases=aliases, examples=examples)


def _cache_example(rng):
    return [TensorType((2, 8, 16), "f32"), TensorType((1,), "i64"), TensorType((2, 1, 16), "f32")], {"dim": 1}


def test_aliases_say_which_input_buffer_each_in_place_output_is_written_into():
    spec = _index_copy_spec(((0, 0),), _cache_example)
    assert spec.alias_of(0) == 0 and spec.alias_of(1) is None
    assert _index_copy_spec(()).alias_of(0) is None
    inputs, fresh = ["x", "index", "source"], iter(["new 0", "new 1"])
    assert output_buffers(spec.aliases, inputs, 2, lambda k: next(fresh)) == ["x", "new 0"]


@pytest.mark.parametrize("aliases, words", [
    (((0, 3),), "input 3 does not exist"),
    (((0, 0), (1, 0)), "each input one output"),
    (((0, 0), (0, 2)), "each output may alias one input"),
    ([(0, 0)], "must be a tuple"),
    (((0, -1),), "ints >= 0"),
    (((0, 1),), r"output 0 \(f32\[2,8,16\]\) is declared to alias input 1 \(index: i64\[1\]\)"),
    (((1, 0),), "the kernel has 1 output"),
])
def test_aliases_that_cannot_hold_are_refused_when_the_spec_is_made(aliases, words):
    with pytest.raises(ValueError, match=words):
        _index_copy_spec(aliases, _cache_example)


def test_alias_types_are_checked_at_any_signature():
    spec = _index_copy_spec(((0, 0),))
    types, attrs = _cache_example(None)
    assert spec.alias_mismatch(types, attrs) is None
    assert "needs its input's type" in spec.alias_mismatch([TensorType((2, 8, 16), "f32", (1, 2, 16))] + types[1:],
                                                           attrs)

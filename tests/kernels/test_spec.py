"""KernelSpec: its version (a hash of what the launch runs, its helpers included, so that caches keyed on it
never go stale) and its aliases (in-place outputs)."""

import dataclasses
import hashlib
import importlib

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


# --- helpers: the version covers the modules of the kernel's package that its launch imports --------------

def _package(tmp_path, monkeypatch, name: str):
    """A package `name` with a kernel module, helpers it imports (one at module level, one through that
    helper, one inside the launch) and a module it does not import."""
    root = tmp_path / name
    root.mkdir()
    files = {
        "__init__.py": "",
        "kern.py": "from ._helper import scale\n\ndef launch(x, out):\n    from ._lazy import bias\n"
                   "    out.copy_(x * scale() + bias())\n",
        "_helper.py": "from ._deep import two\n\ndef scale():\n    return two()\n",
        "_deep.py": "def two():\n    return 2.0\n",
        "_lazy.py": "def bias():\n    return 0.0\n",
        "_unused.py": "X = 1\n",
    }
    for file, text in files.items():
        (root / file).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(f"{name}.kern")
    return root, module.launch


@pytest.mark.parametrize("helper", ["_helper.py", "_deep.py", "_lazy.py"])
def test_editing_a_helper_the_launch_imports_changes_the_version(tmp_path, monkeypatch, helper):
    root, launch = _package(tmp_path, monkeypatch, f"hoid_test_pkg_{helper.strip('_.py')}")
    before = _version(launch)
    assert _version(launch) == before  # stable while nothing changes
    (root / helper).write_text((root / helper).read_text() + "# edited\n")
    assert _version(launch) != before


def test_modules_the_launch_does_not_import_leave_the_version_alone(tmp_path, monkeypatch):
    root, launch = _package(tmp_path, monkeypatch, "hoid_test_pkg_unused")
    before = _version(launch)
    (root / "_unused.py").write_text("X = 2\n")
    (root / "__init__.py").write_text("# the package's list of kernels grew\n")
    assert _version(launch) == before


def test_library_kernels_cover_their_shared_helpers(monkeypatch):
    from hoid.kernels import get, version

    ids = ("triton.rmsnorm", "triton.add_rmsnorm", "torch.rmsnorm", "torch.matmul")
    before = {i: _respec(get(i)).version for i in ids}
    assert before == {i: get(i).version for i in ids}  # a rebuilt spec has the registered version
    real = version.module_source

    def edited(target):
        return lambda name: real(name) + "\n# edited" if name == f"{version.LIBRARY}.{target}" else real(name)

    monkeypatch.setattr(version, "module_source", edited("_triton_compile"))
    after = {i: _respec(get(i)).version for i in ids}
    # add_rmsnorm reaches _triton_compile through triton_rmsnorm; the torch kernels do not import it
    assert [i for i in ids if after[i] != before[i]] == ["triton.rmsnorm", "triton.add_rmsnorm"]
    # torch.rmsnorm's launch lives in _torch_vendor, though its explicit source is its own module's
    monkeypatch.setattr(version, "module_source", edited("_torch_vendor"))
    after = {i: _respec(get(i)).version for i in ids}
    assert [i for i in ids if after[i] != before[i]] == ["triton.add_rmsnorm", "torch.rmsnorm", "torch.matmul"]
    # the build-only module (compiling for an arch without a GPU) runs in no launch: an edit changes nothing
    monkeypatch.setattr(version, "module_source", edited("_triton_build"))
    assert {i: _respec(get(i)).version for i in ids} == before


def _respec(spec):
    return dataclasses.replace(spec)  # __post_init__ hashes again


def test_explicit_source_outside_the_library_hashes_that_source_alone():
    text = "def launch(x, out):\n    out.copy_(x)\n"
    spec = KernelSpec(id="user.copy", pattern=op_pattern("relu"), backend="torch",
                      launch=_launch_without_a_file("pass"), source=text)
    assert spec.version == hashlib.sha256(text.encode()).hexdigest()[:12]


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


def test_launch_counts_default_to_one_for_generated_code_and_unknown_for_vendor_calls():
    from hoid.kernels import get

    t = TensorType((2, 8), "f32")
    assert get("triton.rmsnorm").launch_count([t, TensorType((8,), "f32")], {"eps": 1e-6}, {}) == 1
    assert get("torch.rmsnorm").launch_count([t, TensorType((8,), "f32")], {"eps": 1e-6}, {}) is None
    q, kv = TensorType((1, 4, 1, 16), "f32"), TensorType((1, 2, 40, 16), "f32")
    assert get("triton.decode_attention_nomask").launch_count([q, kv, kv], {}, {}) == 2
    softmax = get("triton.softmax")  # its params decide: rows one launch, chunks two, "auto" the device
    counts = [softmax.launch_count([t], {"dim": -1}, {**softmax.default_params(), "split": s})
              for s in ("rows", "chunks", "auto")]
    assert counts == [1, 2, None]


def test_a_declared_count_must_be_a_count_and_pdl_needs_generated_code():
    with pytest.raises(ValueError, match="launches=-1"):
        KernelSpec("user.k", op_pattern("relu"), "triton", launch=lambda x, out: None, launches=-1)
    with pytest.raises(ValueError, match="only Triton and CuTe"):
        KernelSpec("user.k", op_pattern("relu"), "torch", launch=lambda x, out: None, pdl=True)


def test_pdl_exists_from_hopper_on():
    from hoid.kernels.spec import supports_pdl

    assert [supports_pdl(a) for a in ("sm_80", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120")] == \
        [False, False, True, True, True, True]
    assert not supports_pdl(None) and not supports_pdl("cpu")


def test_workspace_types_are_open_until_the_params_that_size_them_are_resolved():
    from hoid.kernels import get

    spec = get("triton.linear")
    x, w = TensorType((1, 256), "f32"), TensorType((64, 256), "f32")
    params = spec.check_params({"split_k": 4, "block_k": 64, "block_n": 16})
    assert spec.workspace_types([x, w], {}, params) == (TensorType((4, 2, 1, 64), "f32"),)
    assert spec.workspace_types([x, w], {}, {**params, "split_k": 1}) == ()  # nothing to reduce
    assert spec.workspace_types([x, w], {}, spec.default_params()) is None  # split_k "auto": the device decides
    assert get("triton.rmsnorm").workspace_types([x, TensorType((256,), "f32")], {}, {}) == ()

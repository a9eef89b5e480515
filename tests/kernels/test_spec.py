"""KernelSpec's version: a hash of what the launch runs, so that caches keyed on it never go stale."""

from hoid.kernels import KernelSpec, op_pattern


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

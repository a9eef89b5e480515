"""The one launcher: a kernel node bound to its spec, version and arch checked, outputs allocated once."""

import pytest
import torch

import hoid
from hoid.ir import KernelImpl, TensorType
from hoid.kernels import KernelSpec, KernelUnavailable, Param, bind, op_pattern
from hoid.kernels.launch import bind_spec


def _scale_spec(calls):
    def launch(x, out, *, factor):
        calls.append(factor)
        torch.mul(x, factor, out=out)

    return KernelSpec("test.scale", op_pattern("exp", 1), "torch", launch=launch,
                      params=(Param("factor", (1.0, 2.0), 1.0),))


def _node(spec, version=None, params=None):
    b = hoid.GraphBuilder("g")
    x = b.input("x", (4,), "f32")
    body_b = hoid.GraphBuilder("body")
    body = body_b.build(body_b.exp(body_b.input("x", (4,), "f32")))
    impl = KernelImpl(spec.id, spec.version if version is None else version, params or {}, body)
    out = b.op("kernel", x, **impl.node_attrs())
    return b.build(out).nodes[0]


def test_bind_launches_with_the_node_params_into_allocated_outputs():
    calls = []
    spec = _scale_spec(calls)
    call = bind(_node(spec, params={"factor": 2.0}), kernels={spec.id: spec})
    (out,) = call(torch.ones(4))
    assert calls == [2.0] and torch.equal(out, torch.full((4,), 2.0))
    buffer = torch.empty(4)
    assert call(torch.ones(4), out=[buffer])[0] is buffer


def test_a_node_made_with_another_version_is_unavailable_and_says_why():
    spec = _scale_spec([])
    with pytest.raises(KernelUnavailable, match="made with 0123abcd"):
        bind(_node(spec, version="0123abcd"), kernels={spec.id: spec})


def test_an_unknown_kernel_or_arch_is_unavailable():
    spec = _scale_spec([])
    with pytest.raises(KernelUnavailable, match="not in the kernel set"):
        bind(_node(spec), kernels={})
    triton_like = KernelSpec("test.sm90", op_pattern("exp", 1), "triton", launch=lambda x, out: None,
                             archs=("sm_90",))
    with pytest.raises(KernelUnavailable, match="not sm_80"):
        bind(_node(triton_like), kernels={triton_like.id: triton_like}, arch="sm_80")


def test_an_aliased_output_is_its_input_buffer_and_no_allocation():
    def append(cache, row, out):
        out[0] = row  # writes only the slot that changes

    spec = KernelSpec("test.append", op_pattern("add", 2), "torch", launch=append, aliases=((0, 0),))
    t = TensorType((3, 2), "f32")
    call = bind_spec(spec, [t, TensorType((2,), "f32")], {})
    cache = torch.zeros(3, 2)
    (out,) = call(cache, torch.ones(2))
    assert out is cache and cache[0].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="aliases input 0"):
        call(cache, torch.ones(2), out=[torch.empty(3, 2)])
    flat = call.flat([cache, torch.ones(2)])
    assert len(flat) == 2  # inputs only: the aliased output follows its input


def _pdl_spec(calls):
    def launch(x, out, *, pdl=False):
        calls.append(pdl)
        torch.exp(x, out=out)

    return KernelSpec("test.pdl", op_pattern("exp", 1), "triton", launch=launch, pdl=True,
                      archs=("sm_80", "sm_90", "sm_100"))


def test_pdl_is_a_launch_keyword_only_where_asked_and_the_spec_supports_it():
    calls = []
    spec = _pdl_spec(calls)
    node = _node(spec)
    plain = bind(node, kernels={spec.id: spec}, arch="sm_90")
    chained = bind(node, kernels={spec.id: spec}, arch="sm_90", pdl=True)
    assert not plain.pdl and "pdl" not in plain.keywords and chained.pdl and chained.keywords["pdl"] is True
    plain(torch.ones(4))
    chained(torch.ones(4))
    assert calls == [False, True]
    other = _scale_spec([])  # no PDL support: asking for it launches it as before
    assert not bind(_node(other), kernels={other.id: other}, arch="sm_90", pdl=True).pdl


def test_pdl_on_an_arch_without_it_is_refused_with_the_fix():
    spec = _pdl_spec([])
    with pytest.raises(ValueError, match="sm_90 or later.*pdl=False"):
        bind(_node(spec), kernels={spec.id: spec}, arch="sm_80", pdl=True)


def test_recording_sees_each_launch_in_order_with_its_device_kernels():
    from hoid.kernels.launch import note_device_launch, recording

    def launch(x, out, *, factor):
        for name in ("first", "second")[:int(factor)]:
            note_device_launch(name)  # as a backend's launch wrapper reports each device kernel
        torch.mul(x, factor, out=out)

    spec = KernelSpec("test.two", op_pattern("exp", 1), "torch", launch=launch,
                      params=(Param("factor", (1.0, 2.0), 1.0),))
    one = bind(_node(spec), kernels={spec.id: spec})
    two = bind(_node(spec, params={"factor": 2.0}), kernels={spec.id: spec})
    with recording() as records:
        one(torch.ones(4))
        two(torch.ones(4))
    note_device_launch("outside")  # nothing records after the block
    assert [(r.kernel, r.device_kernels) for r in records] == [("test.two", ["first"]),
                                                               ("test.two", ["first", "second"])]


def test_a_workspace_of_the_wrong_type_is_refused_by_name():
    from hoid.kernels import get

    spec = get("triton.linear")
    types = [TensorType((1, 64), "f32"), TensorType((16, 64), "f32")]
    call = bind_spec(spec, types, {}, {"split_k": 2, "block_k": 32, "block_n": 16, "num_warps": 4, "num_stages": 1})
    assert call.workspace == (TensorType((2, 2, 1, 16), "f32"),)
    with pytest.raises(ValueError, match=r"workspace \[\(\(2, 2, 1, 8\).*needs"):
        call(torch.ones(1, 64), torch.ones(16, 64), workspace=[torch.empty(2, 2, 1, 8)])

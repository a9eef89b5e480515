"""What a compiled call launches, from the specs, against what really launches (the recording launcher on
the CPU: Triton's launches, interpreted); where a PDL chain breaks; and that a call allocates nothing."""

import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import hoid
from hoid.kernels.launch import recording
from hoid.runtime import compile
from hoid.runtime.profile import print_profile

from .conftest import kernel_chain

CHAIN = [("triton.add_rmsnorm", ["rmsnorm_rows"]), ("triton.linear", ["gemv_tile"]),
         ("triton.decode_attention_nomask", ["attend_split", "combine_splits"]),
         ("triton.linear_add", ["gemv_tile"]), ("triton.rmsnorm", ["rmsnorm_rows"])]


def _recorded(compiled, inputs):
    with recording() as records:
        outputs = compiled(*inputs)
    return [(r.kernel, r.device_kernels) for r in records], outputs


def test_the_declared_launches_are_the_launches_in_order():
    graph, inputs = kernel_chain()
    compiled = compile(graph, device="cpu")
    plan = compiled.launches
    declared = [(s.what.removeprefix("kernel "), s.count) for s in plan.kernels]
    assert declared == [(kernel, len(names)) for kernel, names in CHAIN]
    assert plan.declared == 6 and plan.undeclared == []  # the views launch nothing
    for _ in range(2):  # the first call and a later one launch the same
        recorded, outputs = _recorded(compiled, inputs)
        assert recorded == CHAIN
    for k, (a, b) in enumerate(zip(outputs, hoid.run(graph, *inputs), strict=True)):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-5), f"output {k}"


def test_a_rewritten_decode_step_launches_what_its_kernel_nodes_declare(tiny_rewritten):
    compiled = compile(tiny_rewritten, device="cpu")
    plan = compiled.launches
    recorded, _ = _recorded(compiled, _decode_inputs(compiled))
    assert [kernel for kernel, _ in recorded] == [s.what.removeprefix("kernel ") for s in plan.kernels]
    assert [len(names) for _, names in recorded] == [s.count for s in plan.kernels]
    ops = {s.what for s in plan.steps if s.count is None}
    assert "matmul" in ops and not any(s.count is None for s in plan.kernels if s.what.startswith("kernel triton"))
    assert all(s.count == 0 for s in plan.steps if s.what in ("reshape", "slice", "transpose", "expand"))


def _decode_inputs(compiled):
    return [torch.tensor([[3]]), torch.tensor([4]), *compiled.state]


def test_a_chain_of_library_kernels_overlaps_at_every_boundary():
    graph, _ = kernel_chain()
    plan = compile(graph, device="cpu").launches
    assert not plan.pdl  # no PDL on the CPU; the chain is what a GPU of sm_90+ would get
    # norm -> linear -> attention (split -> combine) -> linear_add -> norm: the attention's two launches broke
    # the chain until they took PDL too (28 times a token on Qwen3-1.7B)
    assert plan.breaks() == [] and plan.overlaps() == (5, 5)
    assert "5 of 5 launch boundaries can overlap" in plan.summary() and "break the chain" not in plan.summary()


def test_a_torch_op_between_pdl_kernels_breaks_the_chain_and_the_summary_names_it(tiny_rewritten):
    plan = compile(tiny_rewritten, device="cpu").launches
    broken = {s.what for s in plan.breaks()}
    assert "matmul" in broken  # the tiny model's projections stay torch ops (its attention: as priced)
    assert not any(s.pdl_capable for s in plan.breaks())
    overlapped, boundaries = plan.overlaps()
    assert 0 < overlapped < boundaries
    assert "step(s) without PDL break the chain" in plan.summary() and plan.breaks()[0].node in plan.summary()


def test_the_printed_profile_says_what_launches(capsys):
    from rich.console import Console

    from hoid.runtime.profile import example_inputs, profile

    graph, _ = kernel_chain()
    compiled = compile(graph, device="cpu")
    result = profile(compiled, example_inputs(compiled), min_runs=1, min_seconds=0.0, warmup=0)
    print_profile(result, console=Console(width=200), launches=compiled.launches)
    out = capsys.readouterr().out
    assert "launches per call: 6 from 5 kernel nodes" in out and "5 of 5 launch boundaries can overlap" in out


class _Allocations(TorchDispatchMode):
    """Tensors hoid's own code allocates (an op whose result has storage none of its operands has), by
    the hoid file and line that asked: the Triton interpreter's copies of its arguments are not counted."""

    def __init__(self):
        super().__init__()
        self.where: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            operands = {a.untyped_storage().data_ptr() for a in [*args, *(kwargs or {}).values()]
                        if isinstance(a, torch.Tensor)}
            if out.untyped_storage().data_ptr() not in operands:
                self._note()
        return out

    def _note(self):
        frame, torch_dir, hoid_dir = sys._getframe(2), os.path.dirname(torch.__file__), os.path.dirname(hoid.__file__)
        while frame is not None and frame.f_code.co_filename.startswith(torch_dir):
            frame = frame.f_back
        if frame is not None and frame.f_code.co_filename.startswith(hoid_dir):
            self.where.append((os.path.relpath(frame.f_code.co_filename, hoid_dir), frame.f_lineno))


def test_a_call_allocates_nothing_after_the_first():
    graph, inputs = kernel_chain()
    compiled = compile(graph, device="cpu")
    assert set(compiled.plan.workspaces) == {"t1", "t3", "t5"}  # the split-K GEMVs and the split attention
    compiled(*inputs)
    with _Allocations() as seen:
        compiled(*inputs)
        compiled(*inputs)
    assert seen.where == []
    # the count sees allocations: the same kernels launched without the plan allocate outputs and scratch
    bound = compiled.lowered.kernels["t1"]
    with _Allocations() as unplanned:
        bound(inputs[0], compiled.namespace["w_q"])
    assert {path for path, _ in unplanned.where} == {"kernels/launch.py", "kernels/library/triton_gemv.py"}


def test_workspaces_share_slots_with_dead_buffers():
    graph, _ = kernel_chain()
    compiled = compile(graph, device="cpu")
    plan = compiled.plan
    used = [s for slots in plan.workspaces.values() for s in slots]
    assert set(used) & set(plan.buffers.values()), "a workspace reuses a buffer that is dead by then"
    pointers = {name: compiled.namespace[name].data_ptr() for names in compiled.program.workspaces.values()
                for name in names}
    assert "ws_t3_0" in compiled.source and len(pointers) == 4


def test_a_pdl_gemv_reads_its_weight_before_its_wait_only_where_it_is_a_weight():
    # lowered for a PDL arch without running: the chain's two GEMVs read bound weights (early), a GEMV over
    # an activation as its "weight" (written by the kernel before it in a call) must wait first
    from hoid.ir import KernelImpl
    from hoid.kernels import get, resolve_params
    from hoid.runtime.lower import lower

    graph, _ = kernel_chain()
    assert not any(b.pdl_early for b in lower(graph, arch="sm_90", pdl=True).kernels.values())  # opt-in
    lowered = lower(graph, arch="sm_90", pdl=True, pdl_early=True)
    gemvs = [b for b in lowered.kernels.values() if b.spec.id.startswith("triton.linear")]
    assert len(gemvs) == 2 and all(b.pdl_early and b.keywords["pdl_early"] for b in gemvs)
    assert not any(b.pdl_early for b in lowered.kernels.values() if not b.spec.id.startswith("triton.linear"))

    b = hoid.GraphBuilder("activation_weight")
    x, a = b.input("x", (1, 64), "f32"), b.input("a", (48, 64), "f32")
    made = b.op("exp", a)  # written in the call, by the op before the GEMV
    spec = get("triton.linear")
    types = [x.type, made.type]
    impl = KernelImpl(spec.id, spec.version, resolve_params(spec, types, {}, {}), spec.pattern.graph(types, {}), {})
    out = b.op("kernel", x, made, **impl.node_attrs())
    (bound,) = lower(b.build(out), arch="sm_90", pdl=True, pdl_early=True).kernels.values()
    assert bound.pdl and not bound.pdl_early and "pdl_early" not in bound.keywords

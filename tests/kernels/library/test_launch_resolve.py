""""auto" params resolved where a kernel node is made: every library kernel's resolved params run exactly as
its launch-time "auto" does, so what a node holds is what was measured and what runs."""

import random

import pytest
import torch

from hoid.kernels import all_kernels
from hoid.kernels.launch import bind_spec, resolve_params
from hoid.kernels.spec import Target
from hoid.measure.inputs import random_inputs

CPU = Target("cpu", 4)  # the multiprocessors the interpreter's launches assume (num_sms on the CPU)
AUTO = sorted(k.id for k in all_kernels().values()
              if k.backend == "triton" and any(p.default == "auto" for p in k.params))


def test_every_triton_kernel_with_auto_params_can_resolve_them():
    missing = [i for i in AUTO if all_kernels()[i].resolve is None]
    assert AUTO and not missing, f"kernels with 'auto' params and no resolve: {missing}"


@pytest.mark.parametrize("kernel_id", AUTO)
def test_resolved_params_are_concrete_and_run_as_auto_does(kernel_id):
    spec = all_kernels()[kernel_id]
    types, attrs = spec.examples(random.Random(1))
    attrs = {**{a.name: a.default for a in spec.pattern.attrs}, **attrs}
    resolved = resolve_params(spec, types, attrs, target=CPU)
    assert "auto" not in resolved.values()
    bounds = spec.index_bounds(types, attrs) if spec.index_bounds else {}
    inputs = random_inputs(types, index_bounds=bounds, seed=3)
    auto = bind_spec(spec, types, attrs)(*[t.clone() for t in inputs])
    fixed = bind_spec(spec, types, attrs, resolved)(*[t.clone() for t in inputs])
    for a, b in zip(auto, fixed, strict=True):
        assert torch.equal(a, b)


def test_resolving_for_a_bigger_gpu_splits_a_small_gemv_further():
    spec = all_kernels()["triton.linear"]
    from hoid.ir import TensorType

    types = [TensorType((1, 4096), "bf16"), TensorType((256, 4096), "bf16")]
    small = resolve_params(spec, types, {}, target=Target("sm_90", 4))["split_k"]
    big = resolve_params(spec, types, {}, target=Target.H200)["split_k"]
    assert big > small

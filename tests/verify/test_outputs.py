"""Validation of returned outputs: plain tensors of the declared types, sharing no memory."""

import torch

from hoid import TensorType
from hoid.verify.outputs import aliasing, outputs_of

CPU = torch.device("cpu")
F32 = [TensorType((2, 3), "f32")]


def test_a_plain_tensor_or_tuple_of_the_declared_type_passes():
    x = torch.zeros(2, 3)
    assert outputs_of(x, F32, CPU) == ([x], None)
    assert outputs_of((x,), F32, CPU)[1] is None


def test_wrong_count_form_dtype_shape_and_device_fail():
    assert "returned 2 output(s), expected 1" in outputs_of((torch.zeros(2, 3),) * 2, F32, CPU)[1].message
    assert "nn.parameter.Parameter" in outputs_of(torch.nn.Parameter(torch.zeros(2, 3)), F32, CPU)[1].message
    assert "builtins.list" in outputs_of([[0.0] * 3] * 2, [TensorType((2,), "f32")] * 2, CPU)[1].message
    assert "dtype float16" in outputs_of(torch.zeros(2, 3, dtype=torch.float16), F32, CPU)[1].message
    assert "broadcasts" in outputs_of(torch.zeros(1, 3), F32, CPU)[1].message
    assert "broadcasts" not in outputs_of(torch.zeros(3, 2), F32, CPU)[1].message
    assert "device meta" in outputs_of(torch.zeros(2, 3, device="meta"), F32, CPU)[1].message


def test_outputs_sharing_memory_with_inputs_or_each_other_fail():
    x = torch.zeros(4, 4)
    assert aliasing([torch.zeros(4)], [x]) is None
    assert "input 0" in aliasing([x[1]], [x]).message
    out = torch.zeros(8)
    assert "outputs 0 and 1" in aliasing([out[:4], out[4:]], [x]).message

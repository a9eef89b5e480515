"""IsolatedRunner: buffers in shared memory, handed to a child once and refilled between calls."""

import torch

from hoid import TensorType
from hoid.verify import KernelSource, isolate
from hoid.verify.isolate import IsolatedRunner

DOUBLE = "def double(x, out):\n    out.copy_(x * 2)\n"


def test_the_child_writes_shared_outputs_and_sees_new_input_values():
    runner = IsolatedRunner(KernelSource(DOUBLE, "double"), destination_passing=True, timeout_s=20,
                            device=torch.device("cpu"), triton_interpret=False)
    try:
        # x is a transposed view: the child maps the same memory with the same strides.
        x, out = runner.allocate([TensorType((2, 3), "f32", strides=(1, 2)), TensorType((2, 3), "f32")])
        assert x.stride() == (1, 2)
        x.copy_(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
        assert runner.prepare("k", [x], [out], {}) is None
        assert runner.call("k") is None and out.tolist() == [[2.0, 4.0, 6.0], [8.0, 10.0, 12.0]]
        x.fill_(5.0)  # new values, same buffer: the child sees them
        assert runner.repeat("k", 3) is None and out.tolist() == [[10.0] * 3] * 2
    finally:
        runner.close()



def test_the_next_check_takes_the_child_started_ahead():
    def runner():
        return IsolatedRunner(KernelSource(DOUBLE, "double"), destination_passing=True, timeout_s=20,
                              device=torch.device("cpu"), triton_interpret=False)

    runner().close()
    spare = isolate._spare
    assert spare is not None and spare[1].poll() is None
    second = runner()
    try:
        assert second._process is spare[1]  # warm: it had imported torch already
    finally:
        second.close()
    isolate.release_spare()
    assert isolate._spare is None

"""Running a candidate on the checker's buffers, in this process.

Both runners (this one and `isolate.IsolatedRunner`) share one protocol: the checker owns the input and
output buffers of every input signature (`prepare` hands them over once: the same buffers get new
values every trial, so a candidate caching by address is caught), and `call` runs the candidate once.
A destination-passing candidate writes the output buffers (poisoned by the checker before the call); a
returning candidate's outputs are validated (`outputs.py`) and copied into them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..ir import TensorType
from .guards import guarded_call
from .outputs import aliasing, outputs_of
from .verdict import Failure


def invoke(
    fn: Callable,
    inputs: Sequence[torch.Tensor],
    outputs: Sequence[torch.Tensor],
    kwargs: dict,
    *,
    destination_passing: bool,
    timeout_s: float | None,
) -> Failure | None:
    """One guarded call of `fn(*inputs[, *outputs], **kwargs)`; None when it ran and gave outputs of the
    right form. A destination-passing candidate's return value is ignored (`return out` is harmless)."""
    args = [*inputs, *outputs] if destination_passing else list(inputs)
    result, failure = guarded_call(fn, args, kwargs, timeout_s=timeout_s)
    if failure is not None or destination_passing:
        return failure
    expected = [TensorType.of(buf) for buf in outputs]
    device = outputs[0].device if outputs else torch.device("cpu")
    outs, failure = outputs_of(result, expected, device)
    failure = failure or aliasing(outs, inputs)
    if failure is None:
        for buf, out in zip(outputs, outs, strict=True):
            buf.copy_(out)
    return failure


class InProcessRunner:
    """Runs a trusted (or at least statically checked) candidate in this process, under the guards."""

    def __init__(
        self, fn: Callable, *, destination_passing: bool, timeout_s: float | None, device: torch.device
    ):
        self.fn, self.destination_passing, self.timeout_s, self.device = (
            fn,
            destination_passing,
            timeout_s,
            device,
        )
        self._buffers: dict[object, tuple[list[torch.Tensor], list[torch.Tensor], dict]] = {}

    def allocate(self, types: Sequence[TensorType]) -> list[torch.Tensor]:
        """Buffers for these types (their layouts too), on the device; their contents are the caller's."""
        return [torch.empty_strided(t.shape, t.layout(), dtype=t.torch_dtype, device=self.device) for t in types]

    def prepare(
        self, key, inputs: list[torch.Tensor], outputs: list[torch.Tensor], kwargs: dict
    ) -> Failure | None:
        """Hand over the buffers (and keyword arguments: a kernel's attrs and params) of one signature."""
        self._buffers[key] = (inputs, outputs, kwargs)
        return None

    def call(self, key) -> Failure | None:
        return invoke(
            self.fn,
            *self._buffers[key],
            destination_passing=self.destination_passing,
            timeout_s=self.timeout_s,
        )

    def repeat(self, key, times: int) -> Failure | None:
        """`times` calls in a row, as a timing loop would make them; the first failure, if any."""
        for _ in range(times):
            failure = self.call(key)
            if failure is not None:
                return failure
        return None

    def close(self) -> None:
        self._buffers.clear()

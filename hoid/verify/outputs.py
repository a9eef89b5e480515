"""What a returning candidate gave back: is it plain tensors of the declared types, sharing no memory?

These checks run where the outputs exist (in the isolated process for isolated candidates), before any
value is compared: a tensor subclass or a lazy object could compute its values only when the checker
reads them, or compare equal to anything, so only an exact `torch.Tensor` of the expected shape, dtype and
device is accepted, and it may not be an input (or a view of one) or share memory with another output.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..ir import TensorType
from .verdict import Failure


def _words(t: TensorType) -> str:
    return f"{list(t.shape)} {t.torch_dtype}".replace("torch.", "")


def outputs_of(
    result, expected: Sequence[TensorType], device: torch.device
) -> tuple[list[torch.Tensor], Failure | None]:
    """The outputs as a list of tensors, or the failure that says how they differ from `expected`."""
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(items) != len(expected):
        return [], Failure(
            "output_type",
            f"returned {len(items)} output(s), expected {len(expected)} "
            f"({', '.join(_words(t) for t in expected)})",
        )
    for k, (out, want) in enumerate(zip(items, expected, strict=True)):
        if type(out) is not torch.Tensor:
            what = "a tensor subclass" if isinstance(out, torch.Tensor) else "an object"
            return [], Failure(
                "output_type",
                f"output {k} is {what} of type {type(out).__module__}."
                f"{type(out).__qualname__}, not a plain torch.Tensor; return the computed tensor "
                "itself (no subclass, wrapper or lazy value)",
            )
        if out.device != device:
            return [], Failure("output_type", f"output {k} is on device {out.device}, expected {device}")
        if out.dtype != want.torch_dtype:
            return [], Failure(
                "output_type",
                f"output {k} has dtype {str(out.dtype).replace('torch.', '')}, "
                f"expected {str(want.torch_dtype).replace('torch.', '')}",
            )
        if tuple(out.shape) != want.shape:
            broadcast = (
                " (a shape that broadcasts to the expected one is still wrong)"
                if _broadcasts(tuple(out.shape), want.shape)
                else ""
            )
            return [], Failure(
                "output_type",
                f"output {k} has shape {list(out.shape)}, expected {list(want.shape)}{broadcast}",
            )
    return items, None


def _broadcasts(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return torch.broadcast_shapes(shape, target) == target
    except RuntimeError:
        return False


def _span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


def aliasing(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> Failure | None:
    """The failure of an output that is an input, a view of one, or shares memory with another output."""
    for k, out in enumerate(outputs):
        for i, tensor in enumerate(inputs):
            if _overlap(out, tensor):
                return Failure(
                    "alias",
                    f"output {k} shares memory with input {i} (it is that input or a view of "
                    "it); return a new tensor holding the result",
                )
        for j in range(k):
            if _overlap(out, outputs[j]):
                return Failure(
                    "alias", f"outputs {j} and {k} share memory; each output must be its own tensor"
                )
    return None

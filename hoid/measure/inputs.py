"""Tensors to measure with: random inputs of given types, and outputs to write into.

Never time on zeros: they hide unwritten outputs and can run faster than real data (a bf16 matmul on
zeros ran 13% faster than on random data on an H200 here). Integer inputs that index get values below
their bound, so gathers read where real ones would.

Values are drawn where the tensor lives (a generator on that device): drawing a decode weight on the host
first cost more than timing it. Llama-3.1-8B's merged gate/up weight ([28672, 4096]) took 1.3 s to draw in
float32 on a 2-core host and 0.4 s more to round to bf16, and the loop draws every param set's inputs
afresh (its first cold optimize of that model on the H200, 2026-12-04, spent 81 s of its 2 minutes on 73
param sets' measurements).
The same seed gives the same values on the same kind of device, not across kinds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ..ir import TensorType
from ..ir.dtypes import FLOAT_DTYPES
from ..kernels.launch import empty_outputs  # noqa: F401  (one allocation helper, the launcher's)


def random_tensor(t: TensorType, *, device: str | torch.device = "cpu", high: int = 16,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """A tensor of type `t` (layout included): normal floats, integers in [0, high), random booleans."""
    dense = _random_dense(t, device, high, generator)
    if t.is_contiguous:
        return dense
    out = torch.empty_strided(t.shape, t.layout(), dtype=t.torch_dtype, device=device)
    return out.copy_(dense)


def _random_dense(t: TensorType, device, high: int, generator) -> torch.Tensor:
    # drawn where the generator is (the default one of `device` without one), then moved if need be
    at = generator.device if generator is not None else torch.device(device)
    if t.dtype in FLOAT_DTYPES:
        return torch.randn(t.shape, generator=generator, device=at).to(device=device, dtype=t.torch_dtype)
    if t.dtype == "bool":
        return torch.randint(0, 2, t.shape, generator=generator, device=at).to(device=device, dtype=torch.bool)
    return torch.randint(0, max(high, 1), t.shape, generator=generator, device=at).to(device=device,
                                                                                      dtype=t.torch_dtype)


def random_inputs(types: Sequence[TensorType], *, device: str | torch.device = "cpu",
                  index_bounds: Mapping[int, int] | None = None, seed: int = 0) -> list[torch.Tensor]:
    """One random tensor per type, drawn on `device`; `index_bounds` maps input positions to the exclusive
    bound of their values (integer inputs that index)."""
    generator = torch.Generator(device=device).manual_seed(seed)
    bounds = dict(index_bounds or {})
    return [random_tensor(t, device=device, high=bounds.get(i, 16), generator=generator)
            for i, t in enumerate(types)]

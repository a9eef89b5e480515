"""Declaring a candidate's inputs, and drawing fresh values for them every trial.

An input is declared as a `TensorType`, a `(shape, dtype)` pair, or an `Input` when it needs more:
symbolic dims that vary between trials (`Dim("n", 1, 64)`; the same name is the same size everywhere),
a value range (integer inputs that index: `Input((b,), "i64", low=0, high=cache_len)`), bounds that
depend on earlier inputs, or values derived entirely from earlier inputs (a mask from a position).
Bounds and derivations are callables `fn(earlier, sizes)` of the tensors drawn before this input (in
declaration order) and of the dim sizes, so a correct kernel is never fed impossible inputs.

A trial is described by a `TrialSpec` (dim sizes, a value distribution per input, a seed): everything
else follows from it, which is what lets hypothesis shrink a failure and a seed replay it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..ir import TensorType
from ..ir.dtypes import dtype_name, is_float
from .verdict import VerifyError

# Value distributions of float inputs, simplest first (shrinking moves toward the front).
DISTRIBUTIONS = ("normal", "uniform", "large", "small", "positive", "negative", "outliers", "zeros")
# Magnitudes of the "large"/"small" distributions and of outliers; float16 has a narrower range.
_LARGE = {"f16": 1e2}
_SMALL = {"f16": 1e-3}
_DEFAULT_LARGE, _DEFAULT_SMALL = 1e4, 1e-4

Bound = float | int | Callable[[list[torch.Tensor], dict[str, int]], Any] | None


@dataclass(frozen=True)
class Dim:
    """A dim whose size the checker varies between trials, from `low` to `high` inclusive."""

    name: str
    low: int
    high: int

    def __post_init__(self):
        if not 0 <= self.low <= self.high:
            raise VerifyError(
                f"Dim {self.name!r}: needs 0 <= low <= high, got low={self.low}, high={self.high}"
            )


@dataclass(frozen=True)
class Input:
    """shape: ints and `Dim`s; dtype: an IR name or torch dtype; low/high: the value range (integers:
    high exclusive; floats: values are clamped into it), each a number, a tensor or `fn(earlier, sizes)`;
    derive: `fn(earlier, sizes) -> Tensor` computing the whole input from earlier ones; name: for
    messages; strides: the layout the candidate gets the input in (a view such as a transposed weight),
    in elements, for fixed shapes only (default contiguous)."""

    shape: tuple
    dtype: str
    low: Bound = None
    high: Bound = None
    derive: Callable[[list[torch.Tensor], dict[str, int]], torch.Tensor] | None = None
    name: str = ""
    strides: tuple[int, ...] | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "dtype", dtype_name(self.dtype))
        for size in self.shape:
            if not isinstance(size, (int, Dim)) or isinstance(size, bool):
                raise VerifyError(f"input {self.name}: shape entries must be ints or Dim, got {size!r}")
        if self.strides is not None:
            if any(isinstance(size, Dim) for size in self.shape):
                raise VerifyError(f"input {self.name}: strides need a fixed shape (no Dim)")
            if 0 in self.strides:
                raise VerifyError(f"input {self.name}: stride 0 (an expanded view) cannot hold drawn values; "
                                  "declare the input before the expand")
            TensorType(self.shape, self.dtype, self.strides)  # checks the rank

    @property
    def takes_distribution(self) -> bool:
        return self.derive is None and is_float(self.dtype)

    def type(self, sizes: dict[str, int]) -> TensorType:
        shape = tuple(sizes[s.name] if isinstance(s, Dim) else s for s in self.shape)
        return TensorType(shape, self.dtype, self.strides)


def as_input(declared, position: int) -> Input:
    """An `Input` from a `TensorType` (its layout kept), a `(shape, dtype)` pair or an `Input`; errors
    name the forms."""
    if isinstance(declared, Input):
        return declared if declared.name else replace(declared, name=f"#{position}")
    if isinstance(declared, TensorType):
        return Input(declared.shape, declared.dtype, name=f"#{position}", strides=declared.strides)
    if isinstance(declared, (tuple, list)) and len(declared) == 2:
        return Input(tuple(declared[0]), declared[1], name=f"#{position}")
    raise VerifyError(f"input {position}: expected a hoid.TensorType, a (shape, dtype) pair or a "
                      f"hoid.verify.Input, got {declared!r}")


def dims_of(inputs: Sequence[Input]) -> dict[str, Dim]:
    """Every symbolic dim, by name; a name used with two different ranges is an error."""
    dims: dict[str, Dim] = {}
    for inp in inputs:
        for size in inp.shape:
            if isinstance(size, Dim):
                if dims.setdefault(size.name, size) != size:
                    raise VerifyError(
                        f"dim {size.name!r} is declared with two ranges: {dims[size.name]} and {size}"
                    )
    return dims


@dataclass(frozen=True)
class TrialSpec:
    """Everything a trial's inputs follow from: dim sizes, a distribution per input ("-" where none
    applies: integer, bool and derived inputs), and the seed of the values."""

    sizes: tuple[tuple[str, int], ...]
    dists: tuple[str, ...]
    seed: int

    @property
    def size_map(self) -> dict[str, int]:
        return dict(self.sizes)


def sweep_spec(trial: int, inputs: Sequence[Input], dims: dict[str, Dim], rng) -> TrialSpec:
    """The spec of trial number `trial` of a check: the first trials walk every distribution over every
    float input (shifted by one per input, so inputs see different ones), later trials pick at random."""
    sizes = tuple((name, rng.randint(d.low, d.high)) for name, d in dims.items())

    def dist(i: int) -> str:
        if trial < len(DISTRIBUTIONS):
            return DISTRIBUTIONS[(trial + i) % len(DISTRIBUTIONS)]
        return rng.choice(DISTRIBUTIONS)

    dists = tuple(dist(i) if inp.takes_distribution else "-" for i, inp in enumerate(inputs))
    return TrialSpec(sizes, dists, rng.getrandbits(31))


def float_values(shape: tuple[int, ...], dtype: str, dist: str, gen: torch.Generator) -> torch.Tensor:
    """Values of one distribution, in float64 on `gen`'s device (rounded to `dtype` by the caller)."""
    large, small = _LARGE.get(dtype, _DEFAULT_LARGE), _SMALL.get(dtype, _DEFAULT_SMALL)
    on = gen.device
    x = torch.randn(shape, generator=gen, dtype=torch.float64, device=on)
    if dist == "normal":
        return x
    if dist == "uniform":
        return torch.rand(shape, generator=gen, dtype=torch.float64, device=on) * 2 - 1
    if dist == "large":
        return x * large
    if dist == "small":
        return x * small
    if dist == "positive":
        return x.abs() + 1e-3
    if dist == "negative":
        return -(x.abs() + 1e-3)
    if dist in ("outliers", "zeros"):
        # About 1% outliers and a third zeros (fewer zeros would rarely matter); at least one of each.
        share = 0.01 if dist == "outliers" else 0.33
        picked = torch.rand(shape, generator=gen, dtype=torch.float64, device=on) < share
        if x.numel() and not bool(picked.any()):
            picked.view(-1)[torch.randint(x.numel(), (1,), generator=gen, device=on)] = True
        return torch.where(picked, x * large / 10, x) if dist == "outliers" else torch.where(picked, 0.0, x)
    raise VerifyError(f"unknown distribution {dist!r}; expected one of {', '.join(DISTRIBUTIONS)}")


def _bound(bound: Bound, earlier: list[torch.Tensor], sizes: dict[str, int]):
    return bound(earlier, sizes) if callable(bound) else bound


def _int_range(dtype: str) -> tuple[int, int]:
    if dtype == "bool":
        return 0, 2
    if dtype == "u8":
        return 0, 256
    return -100, 100


def input_values(
    inp: Input,
    t: TensorType,
    dist: str,
    earlier: list[torch.Tensor],
    sizes: dict[str, int],
    gen: torch.Generator,
) -> torch.Tensor:
    """The values of one input for one trial (on `gen`'s device, in its dtype)."""
    on = gen.device
    if inp.derive is not None:
        value = torch.as_tensor(inp.derive(earlier, sizes)).to(on)
        if tuple(value.shape) != t.shape or value.dtype != t.torch_dtype:
            raise VerifyError(
                f"input {inp.name}: derive returned {list(value.shape)} {value.dtype}, declared {t}"
            )
        return value
    low, high = _bound(inp.low, earlier, sizes), _bound(inp.high, earlier, sizes)
    if is_float(t.dtype):
        x = float_values(t.shape, t.dtype, dist, gen)
        if low is not None or high is not None:
            x = torch.clamp(
                x,
                min=torch.as_tensor(low, dtype=torch.float64, device=on) if low is not None else None,
                max=torch.as_tensor(high, dtype=torch.float64, device=on) if high is not None else None,
            )
        return x.to(t.torch_dtype)
    default_low, default_high = _int_range(t.dtype)
    low = default_low if low is None else low
    high = default_high if high is None else high
    lo, hi = (torch.as_tensor(b, dtype=torch.float64, device=on) for b in (low, high))
    if bool((hi - lo <= 0).any()):
        raise VerifyError(f"input {inp.name}: empty value range [{low}, {high}) for an integer input")
    u = torch.rand(t.shape, generator=gen, dtype=torch.float64, device=on)
    # The clamp keeps u = 1 - 2^-53 from rounding up to `high` itself.
    return torch.floor(lo + u * (hi - lo)).clamp(max=hi - 1).to(t.torch_dtype)


def draw(inputs: Sequence[Input], spec: TrialSpec, device=None) -> list[torch.Tensor]:
    """Fresh values for every input of a trial, on `device` (default the CPU); the caller writes them into
    its buffers. Drawn where the check runs: a GPU draws a decode model's 150k x 2k weight in milliseconds,
    a CPU core in 10-30 s, every trial (the lm_head check of a 1-minute `hoid.optimize` on the H200 took
    6 minutes so). A seed replays the same values on the same kind of device; CPU and CUDA draws differ."""
    gen = torch.Generator(device=device if device is not None else "cpu").manual_seed(spec.seed)
    sizes = spec.size_map
    values: list[torch.Tensor] = []
    for inp, dist in zip(inputs, spec.dists, strict=True):
        values.append(input_values(inp, inp.type(sizes), dist, values, sizes, gen))
    return values


def describe(inputs: Sequence[Input], spec: TrialSpec, values: Sequence[torch.Tensor]) -> tuple[str, ...]:
    """One line per input: name, type, distribution and value range, for counterexamples."""
    lines = []
    for inp, dist, v in zip(inputs, spec.dists, values, strict=True):
        how = "derived" if inp.derive is not None else (dist if dist != "-" else "uniform integers")
        if v.numel() and v.dtype != torch.bool:
            lo, hi = v.min().item(), v.max().item()
            span = f"values in [{lo:.4g}, {hi:.4g}]" if v.is_floating_point() else f"values in [{lo}, {hi}]"
        else:
            span = "empty" if not v.numel() else f"{int(v.sum())} of {v.numel()} true"
        lines.append(f"{inp.name}: {inp.type(spec.size_map)} {how}, {span}")
    return tuple(lines)

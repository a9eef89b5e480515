"""`KernelSpec`: the contract every kernel (library, user or agent) is held to.

A spec names what the kernel implements (a `Pattern`), the constraints under which it is valid, its
tunable parameters and their choices, its backend, whether it is bitwise deterministic, and a version
hash of its source. Kernels are destination-passing: `launch(*inputs, *outputs, **attrs, **params)`
writes every output in place and returns nothing; the caller allocates the outputs (the checker poisons
them first; the runtime plans their memory).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ir import TensorType
from .pattern import Pattern
from .version import kernel_version

BACKENDS = ("triton", "cute", "torch")
Example = tuple[list[TensorType], dict]


@dataclass(frozen=True)
class Constraint:
    """A condition on input types and attrs, with the words that say it ("last dim a multiple of 8")."""

    description: str
    holds: Callable[[Sequence[TensorType], dict], bool]


@dataclass(frozen=True)
class Param:
    """A tunable parameter: its name, the values it may take, and the value used when untuned."""

    name: str
    choices: tuple
    default: Any

    def accepts(self, value) -> bool:
        """A value among the choices (the tuning grid), or an int where the grid has ints: a spec's own
        heuristic may resolve "auto" to a size between or below the grid's points (a block of 64 for a
        row of 64)."""
        if value in self.choices:
            return True
        return (isinstance(value, int) and not isinstance(value, bool) and value > 0
                and any(isinstance(c, int) and not isinstance(c, bool) for c in self.choices))

    def __post_init__(self):
        if self.default not in self.choices:
            raise ValueError(f"param {self.name}: default {self.default!r} is not among its choices "
                             f"{self.choices}")


@dataclass(frozen=True)
class Target:
    """What a kernel's parameter heuristics know of the GPU it will run on: its arch and how many
    multiprocessors it has (split-K and split attention cut their work to fill them)."""

    arch: str
    multiprocessors: int


Target.H200 = Target("sm_90", 132)
Target.B200 = Target("sm_100", 148)


@dataclass(frozen=True)
class KernelSpec:
    """id: unique, dotted (`triton.rmsnorm`); pattern: what it implements; launch: the implementation;
    examples(rng) -> (input types, attrs): a draw from the declared shape space, used by
    `hoid.verify.check_kernel`; index_bounds(types, attrs) -> {input position: exclusive bound} for integer
    inputs that index; compile(arch) builds it for a GPU arch without a GPU (Triton/CuTe) and raises on
    failure; source: the text the version hash covers (defaults to launch's module source; either way
    the hash also covers the library helpers the launch's module imports: see `version.py`).

    resolve(types, attrs, params, target) -> params: every "auto" param replaced by the value the kernel's
    own heuristic picks for these input types on `target` (`hoid.kernels.launch.resolve_params` calls it
    where a kernel node is made, so a node holds what runs). aliases: (output index, input index) pairs:
    that output is written into that input's buffer (the caller passes the input tensor itself as the
    output's destination, so the kernel writes only what changes, e.g. the appended cache slot)."""

    id: str
    pattern: Pattern
    backend: str
    launch: Callable[..., None]
    constraints: tuple[Constraint, ...] = ()
    params: tuple[Param, ...] = ()
    deterministic: bool = False
    examples: Callable[[random.Random], Example] | None = None
    index_bounds: Callable[[Sequence[TensorType], dict], dict[int, int]] | None = None
    compile: Callable[[str], Any] | None = None
    archs: tuple[str, ...] = ("sm_90", "sm_100")
    source: str | None = None
    resolve: Callable[[Sequence[TensorType], dict, dict, Target], dict] | None = None
    aliases: tuple[tuple[int, int], ...] = ()
    doc: str = ""
    version: str = field(init=False)

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"kernel {self.id}: unknown backend {self.backend!r}; "
                             f"expected one of {BACKENDS}")
        clash = {p.name for p in self.params} & {a.name for a in self.pattern.attrs}
        if clash:
            raise ValueError(f"kernel {self.id}: params {sorted(clash)} clash with the pattern's attrs")
        object.__setattr__(self, "version", kernel_version(self.launch, self.source))

    def alias_of(self, output: int) -> int | None:
        """The input whose buffer output `output` is written into, or None."""
        return dict(self.aliases).get(output)

    def default_params(self) -> dict:
        return {p.name: p.default for p in self.params}

    def check_params(self, params: dict) -> dict:
        """`params` completed with defaults; raises ValueError on unknown names or values outside choices."""
        known = {p.name: p for p in self.params}
        for name, value in params.items():
            if name not in known:
                raise ValueError(f"kernel {self.id}: unknown param {name!r}; its params are {sorted(known)}")
            if not known[name].accepts(value):
                raise ValueError(f"kernel {self.id}: param {name}={value!r} is not among "
                                 f"{known[name].choices}")
        return {**self.default_params(), **params}

    def rejects(self, types: Sequence[TensorType], attrs: dict) -> str | None:
        """None when the kernel is valid for these input types and attrs, else the first unmet constraint."""
        if len(types) != len(self.pattern.operands):
            return f"takes {len(self.pattern.operands)} inputs, got {len(types)}"
        for c in self.constraints:
            try:
                ok = c.holds(types, attrs)
            except Exception as e:  # a constraint that cannot be evaluated does not hold
                ok, c = False, Constraint(f"{c.description} (could not be checked: {e})", c.holds)
            if not ok:
                return c.description
        return None

    def output_types(self, types: Sequence[TensorType], attrs: dict) -> tuple[TensorType, ...]:
        return self.pattern.output_types(types, attrs)


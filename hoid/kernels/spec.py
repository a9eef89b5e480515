"""`KernelSpec`: the contract every kernel (library, user or agent) is held to.

A spec names what the kernel implements (a `Pattern`), the constraints under which it is valid, its
tunable parameters and their choices, its backend, whether it is bitwise deterministic, and a version
hash of its source. Kernels are destination-passing: `launch(*inputs, *outputs, **attrs, **params)`
writes every output in place and returns nothing; the caller allocates the outputs (the checker poisons
them first; the runtime plans their memory), except the outputs the spec declares in-place (`aliases`),
whose buffer is the input they update.

What the runtime needs to schedule a call is declared here too: how many device kernels one call launches
(`launches`), the scratch buffers it needs (`workspace`, planned by the runtime instead of allocated per
launch) and whether it supports programmatic dependent launch (`pdl`).
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
# a count, or a function of (input types, attrs, params) giving it where the kernel's params decide (None:
# params the device resolves, "auto", leave it open)
Count = int | Callable[[Sequence[TensorType], dict, dict], int | None]
PDL_MIN_ARCH = 90  # programmatic dependent launch exists from Hopper on (sm_90, sm_100, ...)


def supports_pdl(arch: str | None) -> bool:
    """Whether a GPU of `arch` ("sm_90") has programmatic dependent launch; False for the CPU (None, "cpu")."""
    if not arch or not arch.startswith("sm_"):
        return False
    digits = "".join(ch for ch in arch[3:] if ch.isdigit())
    return bool(digits) and int(digits) >= PDL_MIN_ARCH


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
    where a kernel node is made, so a node holds what runs).

    aliases: in-place outputs, as pairs (output index, input index): output `o` is written into the buffer
    of input `i`, which must have exactly its type (shape, dtype, layout). The call stays destination-passing,
    `launch(*inputs, *outputs, **attrs, **params)`, with `outputs[o] is inputs[i]`: the buffer already holds
    the input's contents, so the kernel writes only what changes (the appended cache slot), and must not
    read back what it has overwritten. A kernel that appends to a KV cache declares its cache outputs so:
    without the alias, every call would copy the whole cache into a fresh output.

    launches: the device kernels one call launches, an int or a function of (types, attrs, params) (split
    attention launches two: the splits, then their combination). None, the default: one for a Triton or
    CuTe kernel, unknown for a torch vendor call (cuBLAS and torch's backends choose at run time). The
    runtime reports the count a compiled graph should launch from these (`CompiledGraph.launches`).

    workspace(types, attrs, params) -> the types of the scratch buffers one launch needs (split-K partials,
    attention partials; contents undefined between launches), or None where the params leave it open
    ("auto" that only the device resolves). A kernel that declares one takes `workspace=` (a tuple of
    tensors of those types, or None: then it allocates its own, as a checker's one-off call may): the
    runtime plans them once, by liveness, so a compiled call allocates nothing per launch.

    pdl: the kernel supports programmatic dependent launch. Its launch then takes `pdl=` (bool): with True
    it launches every device kernel with the PDL attribute, and each waits for its predecessor's memory
    (`griddepcontrol.wait`) before touching any global memory and lets its successor launch early. Only on
    archs where `supports_pdl` (sm_90+); the runtime decides per device (`hoid.compile(pdl=...)`), so the
    choice stays a launch parameter, not a fork of the kernel.

    pdl_early: the inputs (indices) a PDL launch may read before its wait, when launched with
    `pdl_early=True` as well (a GEMV's weight tiles, which can stream in while the previous kernel drains).
    Sound only where no kernel of the chain writes them: the runtime asks for it only when each is a
    bind-time value (a weight, or computed from weights alone), never for an activation or state.

    work(types, attrs) -> (flops, bytes): the least arithmetic and memory traffic any inputs of these types
    need, for a kernel that needs less than its pattern's region as written: a routed kernel multiplies only
    the (token, expert) pairs the routing selects, where the dense region it replaces multiplies every expert
    on every token and zeroes the rest (at Qwen3-30B-A3B's 1024-token prompt, 77 GFLOP against 1.24 TFLOP).
    The roofline's sanity gate judges a measured time against this floor: against the region's, a correct
    time is flagged as impossible (12-07: `--tune` refused `triton.moe_experts_grouped` so). Prices keep the
    region's floor scaled by the measured efficiency, which may then exceed 1: the price is the time measured."""

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
    launches: Count | None = None
    workspace: Callable[[Sequence[TensorType], dict, dict], tuple[TensorType, ...] | None] | None = None
    pdl: bool = False
    pdl_early: tuple[int, ...] = ()
    work: Callable[[Sequence[TensorType], dict], tuple[int, int]] | None = None
    doc: str = ""
    version: str = field(init=False)

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"kernel {self.id}: unknown backend {self.backend!r}; "
                             f"expected one of {BACKENDS}")
        clash = {p.name for p in self.params} & {a.name for a in self.pattern.attrs}
        if clash:
            raise ValueError(f"kernel {self.id}: params {sorted(clash)} clash with the pattern's attrs")
        self._check_aliases()
        if self.pdl and self.backend == "torch":
            raise ValueError(f"kernel {self.id}: pdl=True, but a torch vendor call launches what torch picks, "
                             "without the PDL attribute; only Triton and CuTe kernels can support it")
        if self.pdl_early and not self.pdl:
            raise ValueError(f"kernel {self.id}: pdl_early={self.pdl_early} without pdl=True: only a PDL launch has "
                             "a wait to read ahead of")
        if any(not 0 <= i < len(self.pattern.operands) for i in self.pdl_early):
            raise ValueError(f"kernel {self.id}: pdl_early={self.pdl_early} names no input of its "
                             f"{len(self.pattern.operands)} operands")
        if isinstance(self.launches, int) and (isinstance(self.launches, bool) or self.launches < 0):
            raise ValueError(f"kernel {self.id}: launches={self.launches!r}; give a count >= 0 or a function")
        object.__setattr__(self, "version", kernel_version(self.launch, self.source))

    def alias_of(self, output_index: int) -> int | None:
        """The input whose buffer output `output_index` is written into, or None for a fresh output."""
        return next((i for o, i in self.aliases if o == output_index), None)

    def alias_mismatch(self, types: Sequence[TensorType], attrs: dict) -> str | None:
        """None when every aliased output has its input's type at these input types, else what differs."""
        if not self.aliases:
            return None
        outs = self.output_types(types, attrs)
        for o, i in self.aliases:
            if o >= len(outs):
                return f"output {o} is declared to alias input {i}, but the kernel has {len(outs)} output(s)"
            if outs[o] != types[i]:
                return (f"output {o} ({outs[o]}) is declared to alias input {i} "
                        f"({self.pattern.operands[i]}: {types[i]}): an in-place output needs its input's type")
        return None

    def _check_aliases(self) -> None:
        error = alias_error(self.aliases, self.pattern.operands)
        if error is not None:
            raise ValueError(f"kernel {self.id}: {error}")
        if self.aliases and self.examples is not None:  # types are known per signature: check one example
            types, attrs = self.examples(random.Random(0))
            mismatch = self.alias_mismatch(types, attrs)
            if mismatch is not None:
                raise ValueError(f"kernel {self.id}: {mismatch} (at its example {[str(t) for t in types]})")

    def launch_count(self, types: Sequence[TensorType], attrs: dict, params: dict) -> int | None:
        """Device kernels one call launches at these types, attrs and params (see `launches`)."""
        if self.launches is None:
            return None if self.backend == "torch" else 1
        if self.pdl_early and not self.pdl:
            raise ValueError(f"kernel {self.id}: pdl_early={self.pdl_early} without pdl=True: only a PDL launch has "
                             "a wait to read ahead of")
        if any(not 0 <= i < len(self.pattern.operands) for i in self.pdl_early):
            raise ValueError(f"kernel {self.id}: pdl_early={self.pdl_early} names no input of its "
                             f"{len(self.pattern.operands)} operands")
        if isinstance(self.launches, int):
            return self.launches
        found = self.launches(list(types), dict(attrs), dict(params))
        return None if found is None else int(found)

    def workspace_types(self, types: Sequence[TensorType], attrs: dict, params: dict
                        ) -> tuple[TensorType, ...] | None:
        """The scratch buffers one call needs at these types (see `workspace`); () where it needs none."""
        if self.workspace is None:
            return ()
        found = self.workspace(list(types), dict(attrs), dict(params))
        return None if found is None else tuple(found)

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


def alias_error(aliases, operands: Sequence[str]) -> str | None:
    """What is wrong with `aliases` as (output index, input index) pairs over inputs `operands`, or None.
    One-to-one: two outputs in one buffer, or one output in two buffers, cannot both hold their values."""
    if not isinstance(aliases, tuple) or not all(
            isinstance(p, tuple) and len(p) == 2 and all(type(k) is int and k >= 0 for k in p) for p in aliases):
        return f"aliases {aliases!r} must be a tuple of (output index, input index) pairs of ints >= 0"
    outs, ins = [o for o, _ in aliases], [i for _, i in aliases]
    if len(set(outs)) != len(outs) or len(set(ins)) != len(ins):
        return f"aliases {aliases!r}: each output may alias one input, and each input one output"
    bad = [i for i in ins if i >= len(operands)]
    if bad:
        return (f"aliases {aliases!r}: input {bad[0]} does not exist; there are {len(operands)} "
                f"({', '.join(operands)})")
    return None


def output_buffers(aliases, inputs: Sequence, n_outputs: int, allocate: Callable[[int], Any]) -> list:
    """The output buffers of one destination-passing call: for an output aliasing input `i` (`aliases`, as
    in `KernelSpec.aliases`), that input's buffer itself; for every other output `k`, `allocate(k)`. The one
    rule by which the checker, the benchmark and the runtime place a kernel's outputs."""
    aliased = dict(aliases)
    return [inputs[aliased[k]] if k in aliased else allocate(k) for k in range(n_outputs)]


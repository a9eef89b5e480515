"""The one launcher of a kernel node: `bind(node)` -> a `BoundKernel` that calls the implementation.

    call = bind(node)                      # a `kernel` node, or a `hoid.ir.KernelImpl`
    outs = call(*inputs)                   # outputs allocated once (`allocate`), then reused
    call(*inputs, out=buffers)             # into buffers the caller planned (the runtime does)
    call(*inputs, out=buffers, workspace=scratch)   # and its scratch buffers too (`call.workspace` types)
    with recording() as launches: ...      # every launch in order, with the device kernels it ran

Binding looks the spec up, refuses a node made with another version of its source or for an arch it
does not build for (`KernelUnavailable`, which says why: the runtime then runs the node's body), and
merges the node's attrs and params into the launch's keywords. Params are used as the node holds them:
"auto" is resolved when a node is created (`resolve_params`, from tuning or the spec's heuristic), never
here, so what was measured is what runs. Outputs a spec declares as aliases of inputs (a cache append
writes into the cache it is given) are those inputs' buffers, never allocations. With `pdl=True` a spec
that supports programmatic dependent launch is launched with it (the runtime asks where the arch has it).

Everything in hoid that launches a kernel (verification, measurement, profiling, the runtime, export)
goes through this module: `KernelSpec.launch` is called here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch

from ..errors import HoidError
from ..ir import TensorType
from ..ir.ops.kernel import KernelImpl
from .spec import PDL_MIN_ARCH, KernelSpec, Target, output_buffers, supports_pdl


class KernelUnavailable(HoidError, RuntimeError):
    """A kernel node cannot run its implementation here: unknown id, another version, unsupported arch."""


def empty_outputs(types: Sequence[TensorType], *, device: str | torch.device = "cpu") -> list[torch.Tensor]:
    """Destination tensors for a kernel's outputs (contiguous, as the kernel contract allocates them)."""
    return [torch.empty(t.shape, dtype=t.torch_dtype, device=device) for t in types]


def resolve_params(spec: KernelSpec, types: Sequence[TensorType], attrs: dict, params: dict | None = None,
                   target: Target | None = None) -> dict:
    """`params` completed with the spec's defaults, and every "auto" left replaced by the spec's own
    heuristic for these input types on `target` (default: the H200). Called where a kernel node is made;
    tuning, which measures, chooses values before this and passes them in."""
    full = spec.check_params(params or {})
    if spec.resolve is None or not any(v == "auto" for v in full.values()):
        return full
    chosen = spec.resolve(list(types), dict(attrs), dict(full), target or Target.H200)
    resolved = spec.check_params({k: chosen[k] if full[k] == "auto" else v for k, v in full.items()})
    left = sorted(k for k, v in resolved.items() if v == "auto")
    if left:
        raise ValueError(f"kernel {spec.id}: its resolve left {left} at \"auto\"")
    return resolved


@dataclass
class LaunchRecord:
    """One `BoundKernel.launch` seen by `recording()`: the kernel, and the device kernels it launched, by
    name, in order (as the backends report them: Triton's launches, interpreted or compiled)."""

    kernel: str
    device_kernels: list[str] = field(default_factory=list)


_RECORDERS: list[list[LaunchRecord]] = []
_DEVICE_OBSERVERS: list[Callable[[str], None]] = []


def note_device_launch(name: str) -> None:
    """Called by a backend's launch wrapper for every device kernel it launches (`_triton_compile`)."""
    for observe in _DEVICE_OBSERVERS:
        observe(name)


@contextmanager
def recording() -> Iterator[list[LaunchRecord]]:
    """Record every kernel launched through this module inside the block, in order, each with the device
    kernels it launched: how a test checks a compiled graph's launches against what the specs declare."""
    records: list[LaunchRecord] = []

    def observe(name: str) -> None:
        if records:
            records[-1].device_kernels.append(name)

    _RECORDERS.append(records)
    _DEVICE_OBSERVERS.append(observe)
    try:
        yield records
    finally:
        _RECORDERS.remove(records)
        _DEVICE_OBSERVERS.remove(observe)


@dataclass(frozen=True)
class BoundKernel:
    """A kernel ready to launch at one signature. `keywords`: the attrs and params it is launched with
    (and `pdl=True` where it launches with programmatic dependent launch); `outputs`: the output types;
    `aliases`: output index -> the input index whose buffer it is; `workspace`: the types of its scratch
    buffers (None where its params leave them open: it allocates its own); `launches`: the device kernels
    one call launches (None where torch decides); `pdl`: launched with programmatic dependent launch;
    `pdl_early`: and reading the spec's `pdl_early` inputs before its wait (`early()` makes it so)."""

    spec: KernelSpec
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]
    keywords: dict
    aliases: dict[int, int]
    workspace: tuple[TensorType, ...] | None = ()
    launches: int | None = 1
    pdl: bool = False
    pdl_early: bool = False

    def early(self) -> BoundKernel:
        """This launch reading its spec's `pdl_early` inputs before its wait; the caller vouches that no kernel
        of the chain writes them (the runtime: they are bind-time values). Itself where it has nothing to
        read early (no PDL launch, or a spec without `pdl_early`)."""
        if not (self.pdl and self.spec.pdl_early):
            return self
        return replace(self, keywords={**self.keywords, "pdl_early": True}, pdl_early=True)

    def allocate(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The destination buffers for a launch over `inputs`: an aliased output is its input's tensor,
        every other output a new tensor on the inputs' device."""
        device = inputs[0].device if inputs else "cpu"
        return output_buffers(self.aliases.items(), inputs, len(self.outputs),
                              lambda k: empty_outputs([self.outputs[k]], device=device)[0])

    def launch(self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
               workspace: Sequence[torch.Tensor] | None = None) -> None:
        """Launch into `outputs` (the one call of `KernelSpec.launch` in hoid). Aliased outputs must be
        their inputs' tensors: the kernel writes only what changes. `workspace`: scratch buffers of the
        `workspace` types (default: the kernel allocates its own)."""
        for o, i in self.aliases.items():
            if outputs[o] is not inputs[i]:
                raise ValueError(f"kernel {self.spec.id}: output {o} aliases input {i}; pass that input's "
                                 "tensor as its buffer")
        keywords = self.keywords
        if workspace is not None:
            self._check_workspace(workspace)
            keywords = {**keywords, "workspace": tuple(workspace)}
        for records in _RECORDERS:
            records.append(LaunchRecord(self.spec.id))
        self.spec.launch(*inputs, *outputs, **keywords)

    def allocate_workspace(self, device: str | torch.device = "cpu") -> list[torch.Tensor] | None:
        """New scratch buffers of the `workspace` types (None where the kernel allocates its own)."""
        return None if self.workspace is None else empty_outputs(self.workspace, device=device)

    def _check_workspace(self, workspace: Sequence[torch.Tensor]) -> None:
        if self.workspace is None or not self.spec.workspace:
            raise ValueError(f"kernel {self.spec.id} declares no workspace at these params; pass none")
        got = [(tuple(t.shape), t.dtype) for t in workspace]
        want = [(t.shape, t.torch_dtype) for t in self.workspace]
        if got != want:
            raise ValueError(f"kernel {self.spec.id}: workspace {got} given, it needs {want}")

    def flat(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """`inputs` then new buffers for the outputs that are not aliases: the argument list of
        `launch_flat`, which a timer can copy and rotate as it likes (an alias follows its input)."""
        return [*inputs, *(b for i, b in enumerate(self.allocate(inputs)) if i not in self.aliases)]

    def launch_flat(self, *tensors: torch.Tensor) -> None:
        """Launch over `flat`'s argument list."""
        inputs, rest = tensors[:len(self.inputs)], iter(tensors[len(self.inputs):])
        self.launch(inputs, [inputs[self.aliases[i]] if i in self.aliases else next(rest)
                             for i in range(len(self.outputs))])

    def __call__(self, *inputs: torch.Tensor, out: Sequence[torch.Tensor] | None = None,
                 workspace: Sequence[torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
        """Launch over `inputs` into `out` (default: new buffers from `allocate`); returns the outputs."""
        outputs = list(out) if out is not None else self.allocate(inputs)
        self.launch(inputs, outputs, workspace)
        return tuple(outputs)


def bind_spec(spec: KernelSpec, types: Sequence[TensorType], attrs: dict, params: dict | None = None,
              *, pdl: bool = False) -> BoundKernel:
    """`spec` bound at input `types` with the pattern's `attrs` and `params` (completed with defaults);
    refuses types or attrs its constraints reject. pdl: launch with programmatic dependent launch where the
    spec supports it (the caller knows the arch has it: `spec.supports_pdl`)."""
    reason = spec.rejects(list(types), attrs)
    if reason is not None:
        raise ValueError(f"kernel {spec.id} does not apply to ({', '.join(map(str, types))}) {attrs}: {reason}")
    full = spec.check_params(params or {})
    outputs = spec.output_types(list(types), attrs)
    on = bool(pdl and spec.pdl)
    keywords = {**attrs, **full, **({"pdl": True} if on else {})}
    return BoundKernel(spec, tuple(types), tuple(outputs), keywords, dict(spec.aliases),
                       workspace=spec.workspace_types(types, attrs, full),
                       launches=spec.launch_count(types, attrs, full), pdl=on)


def bind(node, *, arch: str | None = None, kernels=None, pdl: bool = False) -> BoundKernel:
    """The implementation of a `kernel` node (or a `KernelImpl` with its input types, `(impl, types)`).

    arch: the GPU arch it will run on ("sm_90"); a spec that does not build for it is unavailable.
    kernels: where to look the id up (a mapping id -> spec, or `hoid.kernels.get` by default).
    pdl: launch it with programmatic dependent launch if its spec supports it; refused for an arch
    without it (`supports_pdl`)."""
    if isinstance(node, tuple):
        impl, types = node
    else:
        impl, types = KernelImpl.from_node(node), [v.type for v in node.inputs]
    spec = _lookup(impl.kernel, kernels)
    if impl.version and spec.version != impl.version:
        raise KernelUnavailable(f"kernel {spec.id} is at version {spec.version}; this node was made with "
                                f"{impl.version} (its source changed since): re-run the search or re-verify it")
    if arch is not None and arch != "cpu" and spec.backend != "torch" and arch not in spec.archs:
        raise KernelUnavailable(f"kernel {spec.id} builds for {', '.join(spec.archs)}, not {arch}")
    if spec.backend == "cute":
        _require_cute_runs(spec, arch)
    if pdl and not supports_pdl(arch):
        raise ValueError(f"programmatic dependent launch needs a GPU of sm_{PDL_MIN_ARCH} or later, not "
                         f"{arch or 'an unknown device'}: bind with pdl=False")
    return bind_spec(spec, types, impl.attrs, impl.params, pdl=pdl)


def _require_cute_runs(spec: KernelSpec, arch: str | None) -> None:
    """CuTe kernels have no CPU path (no interpreter, unlike Triton's) and need CuTe DSL installed: where
    either fails the node is unavailable, and the runtime runs its body."""
    from .library._cute_compile import INSTALL, have_cute

    if arch == "cpu" or (arch is None and not torch.cuda.is_available()):  # None: here, wherever that is
        raise KernelUnavailable(f"kernel {spec.id} is a CuTe DSL kernel: it runs on a CUDA GPU only")
    if not have_cute():
        raise KernelUnavailable(f"kernel {spec.id} needs CUTLASS's CuTe DSL, which is not installed: {INSTALL}")
    from .library._cute_compile import MissingCuteError, cute_modules

    try:  # found is not loadable: a broken install must fall back to the body, not crash the first call
        cute_modules()
    except MissingCuteError as e:
        raise KernelUnavailable(f"kernel {spec.id}: {e}") from None


def _lookup(kernel_id: str, kernels) -> KernelSpec:
    if kernels is not None:
        if kernel_id not in kernels:
            raise KernelUnavailable(f"kernel {kernel_id!r} is not in the kernel set given")
        return kernels[kernel_id]
    from .registry import get

    try:
        return get(kernel_id)
    except KeyError as e:
        raise KernelUnavailable(str(e.args[0])) from None

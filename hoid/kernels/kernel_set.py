"""`KernelSet`: exactly the kernels a search may inject, handed to it explicitly.

Two kinds of member:

- **library** kernels (the built-in library, and kernels a user adds on purpose with `with_library`):
  trusted code, injected wherever their declared constraints hold;
- **accepted** kernels (an agent's or a person's, verified by `hoid.verify` at one input-type signature
  and pattern attrs): injected only at a signature they were verified at, never elsewhere, since a check
  at one shape says nothing of another.

Nothing registered in the process reaches a search unless it is in the set it is given: registering a
kernel (`hoid.kernels.register`) makes it known by id, not used. `KernelSet.default()` is the built-in
library alone. Sets are immutable: `accept` and `with_library` return new ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ..ir import TensorType
from ..ir.graph import attr_key
from .spec import KernelSpec


@dataclass(frozen=True)
class Accepted:
    """`spec`, verified at input `types` with the pattern's `attrs`; `params`: those it was tuned to (the
    node's); `evidence`: "measured" (timed on the device) or "modelled" (priced only: provisional)."""

    spec: KernelSpec
    types: tuple[TensorType, ...]
    attrs: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    evidence: str = "measured"

    def signature(self) -> tuple:
        return signature(self.spec.id, self.types, self.attrs)


def signature(kernel_id: str, types, attrs) -> tuple:
    """What a kernel is accepted at: (its id, the input types, the attrs' key), as the loop's extraction
    reads a kernel e-node."""
    return kernel_id, tuple(types), attr_key(attrs)


class KernelSet:
    """The library specs and the accepted kernels a search may use (see the module doc)."""

    def __init__(self, library: Iterable[KernelSpec] = (), accepted: Iterable[Accepted] = ()):
        self._library: dict[str, KernelSpec] = {}
        for spec in library:
            self._library[spec.id] = spec
        self._accepted: dict[tuple, Accepted] = {}
        for a in accepted:
            self._add(a)

    def _add(self, accepted: Accepted) -> None:
        other = self._library.get(accepted.spec.id) or next(
            (a.spec for a in self._accepted.values() if a.spec.id == accepted.spec.id), None)
        if other is not None and other is not accepted.spec and other.version != accepted.spec.version:
            raise ValueError(f"kernel {accepted.spec.id}: a set holds one version of a kernel; it has "
                             f"{other.version}, this is {accepted.spec.version}")
        self._accepted[accepted.signature()] = accepted

    # --- building -------------------------------------------------------------------------------
    @classmethod
    def default(cls) -> KernelSet:
        """The built-in library, as it shipped (a user's `register(..., replace=True)` does not change it)."""
        from .registry import library_kernels

        return cls(library_kernels().values())

    @classmethod
    def empty(cls) -> KernelSet:
        return cls()

    def with_library(self, *specs: KernelSpec) -> KernelSet:
        """A copy that also injects `specs` wherever their constraints hold (trusted code: your own)."""
        return KernelSet([*self._library.values(), *specs], self._accepted.values())

    def accept(self, spec: KernelSpec, types: Sequence[TensorType], attrs: dict | None = None,
               params: dict | None = None, *, evidence: str = "measured") -> KernelSet:
        """A copy with `spec` accepted at `types` and `attrs` (as it was verified)."""
        accepted = Accepted(spec, tuple(types), dict(attrs or {}), dict(params or {}), evidence)
        return KernelSet(self._library.values(), [*self._accepted.values(), accepted])

    def runnable_here(self) -> KernelSet:
        """A copy without the kernels this process cannot launch (CuTe DSL kernels where CuTe DSL is not
        installed or there is no CUDA GPU: they have no CPU path): what to search with when the result is
        compiled here rather than planned for elsewhere (a node of a kernel that cannot launch runs its body,
        correct but slow)."""
        import torch

        from .library._cute_compile import have_cute

        cute = have_cute() and torch.cuda.is_available()
        drop = {s.id for s in self.specs() if s.backend == "cute" and not cute}
        return KernelSet([s for s in self._library.values() if s.id not in drop],
                         [a for a in self._accepted.values() if a.spec.id not in drop])

    def without(self, kernel_id: str) -> KernelSet:
        return KernelSet([s for s in self._library.values() if s.id != kernel_id],
                         [a for a in self._accepted.values() if a.spec.id != kernel_id])

    # --- reading --------------------------------------------------------------------------------
    @property
    def library(self) -> tuple[KernelSpec, ...]:
        return tuple(self._library.values())

    @property
    def accepted(self) -> tuple[Accepted, ...]:
        return tuple(self._accepted.values())

    def allows(self, spec: KernelSpec, types: Sequence[TensorType], attrs: dict) -> str | None:
        """None when the set lets `spec` replace a region of these input types and attrs, else why not."""
        if self._library.get(spec.id) is spec:
            return spec.rejects(list(types), attrs)
        if (spec.id, tuple(types), attr_key(attrs)) in self._accepted:
            return None
        if any(a.spec.id == spec.id for a in self._accepted.values()):
            return f"kernel {spec.id} was verified at other input types or attrs, not at these"
        return f"kernel {spec.id} is not in this kernel set"

    def specs(self) -> list[KernelSpec]:
        """Every distinct spec of the set, library first."""
        seen = dict(self._library)
        for a in self._accepted.values():
            seen.setdefault(a.spec.id, a.spec)
        return list(seen.values())

    def __contains__(self, kernel_id: str) -> bool:
        return any(s.id == kernel_id for s in self.specs())

    def __getitem__(self, kernel_id: str) -> KernelSpec:
        """The spec of that id (so a set is what `hoid.kernels.launch.bind(kernels=...)` looks ids up in)."""
        for spec in self.specs():
            if spec.id == kernel_id:
                return spec
        raise KeyError(f"kernel {kernel_id!r} is not in this kernel set")

    def __iter__(self) -> Iterator[KernelSpec]:
        return iter(self.specs())

    def __len__(self) -> int:
        return len(self.specs())

    def __repr__(self) -> str:
        return f"KernelSet({len(self._library)} library, {len(self._accepted)} accepted at their signatures)"

"""Shared by the torch vendor kernels (`torch_*.py`): specs whose launch is a torch call.

Every pattern the library implements has one of these, so extraction always has a correct, measurable
fallback: cuBLAS through `torch.matmul`, torch's attention backends through SDPA, and for the fused ops
(RMSNorm, RoPE, SiLU gating, softmax) the op's own torch reference, the very code that defines the op's
semantics. They run wherever torch does, the CPU included.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Sequence

from ...ir.registry import check_attrs, get_op
from ..pattern import Pattern
from ..spec import Constraint, Example, KernelSpec


def reference_launch(op_name: str) -> Callable[..., None]:
    """A destination-passing launch that runs the op's torch reference: `out <- reference(*inputs, **attrs)`.
    The copy into `out` costs one extra write of the output: the price of a reference with no `out=`."""
    reference = get_op(op_name).reference

    def launch(*tensors, **attrs) -> None:
        *inputs, out = tensors
        out.copy_(reference(*inputs, **attrs))

    launch.__qualname__ = f"reference_launch[{op_name}]"
    return launch


def source_of(*objects) -> str:
    """The text a vendor kernel's version hash covers: its module and the torch code it calls into."""
    texts = []
    for obj in objects:
        try:
            texts.append(inspect.getsource(obj))
        except (OSError, TypeError):  # a builtin (torch.matmul): its name is all the text there is
            texts.append(getattr(obj, "__qualname__", repr(obj)))
    return "\n".join(texts)


def sampled_examples(op_name: str, arity: int, constraints: Sequence[Constraint]
                     ) -> Callable[[random.Random], Example]:
    """Examples for the checker: the op's own sampler, redrawn until a call with `arity` operands that
    meets every constraint comes up; its attrs completed with the op's defaults, as a launch receives them."""
    op = get_op(op_name)

    def draw(rng: random.Random) -> Example:
        for _ in range(1000):
            types, attrs = op.sample(rng)
            attrs = check_attrs(op, attrs)
            if len(types) == arity and all(c.holds(types, attrs) for c in constraints):
                return types, attrs
        raise RuntimeError(f"the sampler of {op_name} drew no call meeting the constraints of its torch "
                           f"kernel in 1000 tries: {[c.description for c in constraints]}")

    return draw


def vendor_spec(kernel_id: str, pattern: Pattern, launch: Callable[..., None], *, source: str | None = None,
                constraints: Sequence[Constraint] = (), deterministic: bool, doc: str,
                examples: Callable[[random.Random], Example] | None = None) -> KernelSpec:
    """A torch-backed KernelSpec: no params to tune, built for any arch torch runs on. For a single-op
    pattern, `examples` defaults to the op's own sampler (`sampled_examples`). `source` defaults to the
    launch's module (KernelSpec's default); pass `source_of(...)` when the kernel's code spans more."""
    if examples is None:
        examples = sampled_examples(pattern.name, len(pattern.operands), constraints)
    return KernelSpec(id=kernel_id, pattern=pattern, backend="torch", launch=launch,
                      constraints=tuple(constraints), deterministic=deterministic, examples=examples,
                      source=source, doc=doc)


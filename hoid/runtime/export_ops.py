"""The code of each step of an exported package: torch ops traced from the registry, kernels as torch ops.

One owner per op: an op node's code is its registry reference (`OpDef.reference`, the op's only torch
implementation), traced by `make_fx(pre_dispatch=True)` at the node's own types and attrs on meta tensors,
so the package calls the ATen ops the reference calls (`aten.scaled_dot_product_attention` stays one call)
and nothing about an op is written twice. A factory call inside a reference is traced with the meta
device: it is rewritten to the device of the node's first tensor operand.

A kernel node becomes a `torch.library` op of the package's namespace, taking the node's inputs and
returning its outputs (destination-passing inside: the op allocates them, then launches). Outputs the
spec declares in place (`aliases`) are not returned: their inputs are declared mutated (`mutates_args`),
as torch requires of an op that writes an argument, and the model uses the input as the value. Each op
has a fake implementation (empty outputs of the node's static types), which `torch.compile` and
`torch.export` run instead of the kernel.
"""

from __future__ import annotations

import math
import re

import torch

from ..errors import ExportError
from ..ir.registry import get_op

_META_DEVICE = "device(type='meta')"


def _meta(t) -> torch.Tensor:
    if t.strides is None:
        return torch.empty(t.shape, dtype=t.torch_dtype, device="meta")
    return torch.empty_strided(t.shape, t.strides, dtype=t.torch_dtype, device="meta")


def traced_function(fn, types, name: str, what: str) -> str:
    """`fn(*tensors)` traced at `types` into the source of `def name(a0, a1, ...)` calling ATen ops."""
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        gm = make_fx(fn, pre_dispatch=True)(*[_meta(t) for t in types])
    except Exception as e:
        raise ExportError(f"export: {what} cannot be traced into torch ops at "
                          f"({', '.join(map(str, types))}): {type(e).__name__}: {e}") from None
    if any(n.op == "get_attr" for n in gm.graph.nodes):
        raise ExportError(f"export: {what} holds a tensor constant, which an exported op cannot carry")
    code = gm.code.strip()
    params = [f"a{i}" for i in range(len(types))]
    header, body = code.split("\n", 1)
    args = re.match(r"def forward\(self,? ?(.*)\):", header).group(1)
    placeholders = [a.strip() for a in args.split(",") if a.strip()]
    lines = [f"def {name}({', '.join(params)}):"]
    lines += [f"    {p} = {a}" for p, a in zip(placeholders, params, strict=True)]
    if _META_DEVICE in body:
        if not types:
            raise ExportError(f"export: {what} creates tensors from no operand; its device is unknown")
        lines.append("    _device = a0.device")
        body = body.replace(_META_DEVICE, "_device")
    lines += [line for line in body.splitlines() if line.strip()]
    return "\n".join(lines) + "\n"


def op_function(node, name: str) -> str:
    """The source of `def name(...)`: the node's op reference at its types and attrs."""
    op = get_op(node.op)
    attrs = dict(node.attrs)
    return traced_function(lambda *ts: op.reference(*ts, **attrs), [v.type for v in node.inputs], name,
                           f"op {node.op} (node {node.name})")


def literal(value) -> str:
    """`repr(value)`, refused where it would not read back as the same value in the package."""
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, (tuple, list)):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{inner}]"
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    raise ExportError(f"export: a kernel keyword {value!r} cannot be written as Python source")


def _empty(t, device: str) -> str:
    return f"torch.empty({literal(t.shape)}, dtype={t.torch_dtype}, device={device})"


def kernel_op(name: str, bound, call: str | None, body_fn: str | None, traceable: bool) -> str:
    """The source of the torch op `name` for one bound kernel.

    call: the launch expression for a kernel launched from the package's copy of its code (`mod.launch`),
    given the inputs then the outputs (destination-passing); body_fn: instead, the name of a traced torch
    function returning every output (a torch-backend kernel). traceable: a Triton kernel whose launches go
    through `torch.library.wrap_triton` (a `triton_op` on a GPU)."""
    n_in = len(bound.inputs)
    ins = [f"a{i}" for i in range(n_in)]
    aliased = dict(bound.aliases)
    returned = [k for k in range(len(bound.outputs)) if k not in aliased]
    mutated = sorted({f"a{i}" for i in aliased.values()})
    if not ins:
        raise ExportError(f"export: kernel {bound.spec.id} has no tensor inputs to take a device from")
    rtype = ("None" if not returned else "torch.Tensor" if len(returned) == 1
             else f"tuple[{', '.join(['torch.Tensor'] * len(returned))}]")
    sig = ", ".join(f"{a}: torch.Tensor" for a in ins)
    lines = [f"@_op({name!r}, mutates_args={tuple(mutated)!r}, traceable={traceable})",
             f"def {name}({sig}) -> {rtype}:"]
    outs = []
    if body_fn is not None:
        lines.append(f"    outs = {body_fn}({', '.join(ins)})")
        result = [f"outs[{k}]" for k in returned]
        for k, i in aliased.items():  # the traced body returns a new tensor: write it where the kernel does
            lines.append(f"    a{i}.copy_(outs[{k}])")
    else:
        for k, t in enumerate(bound.outputs):
            if k in aliased:
                outs.append(ins[aliased[k]])
            else:
                outs.append(f"o{k}")
                lines.append(f"    o{k} = {_empty(t, 'a0.device')}")
        kw = ", ".join(f"{k}={literal(v)}" for k, v in bound.keywords.items())
        lines.append(f"    {call}({', '.join(ins + outs)}{', ' if kw else ''}{kw})")
        result = [f"o{k}" for k in returned]
    if returned:
        lines.append(f"    return {', '.join(result)}{',' if len(result) > 1 else ''}")
    fake = [f"@{name}.register_fake", f"def _{name}_fake({', '.join(ins)}):"]
    fakes = [_empty(bound.outputs[k], "a0.device") for k in returned]
    fake.append(f"    return {', '.join(fakes)}{',' if len(fakes) > 1 else ''}" if fakes else "    return None")
    return "\n".join(lines + [""] + fake) + "\n"

"""Documents carry their kernels: `hoid.save` / `hoid.load` with the source of every non-library kernel.

    hoid.save(graph, "step.hoid")   # step.hoid, step.safetensors, and kernels/<id>@<version>.py
    graph = hoid.load("step.hoid")  # each kernel file found, re-hashed against its node's version, registered

`hoid.ir.io` owns the document and its weights but may not import `hoid.kernels`; it takes the kernel
files as text (`save(..., kernel_sources=)`) and hands back what `kernels/` holds (`kernel_files`). This
module, allowed both, is the one owner of which kernels are written and how a file is checked: its
`KernelSource` hash must equal the node's version. A missing or altered file warns (`KernelFileWarning`:
the node then runs its body, as the runtime does for any kernel it cannot find) or, with `strict=True`,
raises `KernelFileError`.

A file that checks out, of a kernel this process has not registered, is registered (`register=True`, the
default), so the loaded document compiles with its kernels, not their bodies: a spec built from the file
(`KernelSource.to_spec`, launched from exactly the hashed text on first call), whose pattern is the
node's body and which holds only at the signatures the document uses it at (where its author verified
it). `hoid.verify`'s static pass runs over the file first; a refused construct is a problem like an
altered file. Pass `register=False` for a document whose author you do not trust: its kernel nodes then
run their bodies (verify them with `hoid.verify` first).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch

from ..errors import HoidError
from ..ir import Graph
from ..ir import io as ir_io
from ..ir.ops.kernel import KernelImpl
from . import registry
from .loader import KernelSource
from .pattern import Pattern, graph_pattern
from .registry import all_kernels, library_kernels
from .spec import Constraint, KernelSpec


class KernelFileError(HoidError, ValueError):
    """A document's kernel file is missing or does not hash to its node's version."""


class KernelFileWarning(UserWarning):
    """A document's kernel file is missing or altered: that node runs its body."""


def file_name(kernel_id: str, version: str) -> str:
    return f"{kernel_id}@{version}.py"


def _kernel_nodes(graph: Graph):
    for node in graph.nodes:
        if node.op == "kernel":
            yield node
            yield from _kernel_nodes(node.attrs["body"])


def kernel_sources(graph: Graph) -> dict[str, str]:
    """file name -> source text of every kernel node not in the library whose spec was built from source."""
    library, known = library_kernels(), all_kernels()
    out = {}
    for node in _kernel_nodes(graph):
        kid, version = node.attrs["kernel"], node.attrs["version"]
        if kid in library or kid not in known:
            continue
        source = getattr(known[kid].launch, "source", None)
        if isinstance(source, KernelSource) and source.version == version:
            out[file_name(kid, version)] = source.text
    return out


def save(graph: Graph, path: str | os.PathLike) -> None:
    """`hoid.ir.io.save`, with the kernel files beside the document."""
    from ..ir.graph import expect_graph

    graph = expect_graph(graph, "hoid.save")  # before reading its kernel nodes: a Module gets the way to a Graph
    ir_io.save(graph, path, kernel_sources=kernel_sources(graph))


def load(path: str | os.PathLike, *, device: str | torch.device = "cpu", strict: bool = False,
         register: bool = True) -> Graph:
    """`hoid.ir.io.load`, then every non-library kernel node's file found in `kernels/`, re-checked and, for a
    kernel this process lacks, registered (see the module doc)."""
    graph = ir_io.load(path, device=device)
    files = ir_io.kernel_files(path)
    library, known = library_kernels(), all_kernels()
    to_register: dict[str, tuple[KernelSource, list]] = {}
    for node in _kernel_nodes(graph):
        kid, version = node.attrs["kernel"], node.attrs["version"]
        # no file is owed for the library, a node without a version, or a kernel registered from Python code
        # (it lives in its author's module); one built from source, or unknown here, must have its file
        if kid in library or not version or (
                kid in known and not isinstance(getattr(known[kid].launch, "source", None), KernelSource)):
            continue
        name = file_name(kid, version)
        where = Path(path).parent / ir_io.KERNELS_DIR / name
        problem, source = None, None
        if name not in files:
            problem = f"its source {ir_io.KERNELS_DIR}/{name} is missing beside {path}"
        else:
            try:
                source = KernelSource(files[name], path=str(where))
                found = source.version
            except HoidError as e:
                found = f"unreadable ({e})"
            if found != version:
                problem = f"{ir_io.KERNELS_DIR}/{name} hashes to {found}, not the node's version {version}: altered"
        if problem is None and register and kid not in known:
            problem = _refused(source)
            if problem is None:
                entry = to_register.setdefault(kid, (source, []))
                if entry[0].version != version:  # one id, one spec: a second version cannot register beside it
                    problem = f"{ir_io.KERNELS_DIR}/{name}: another node holds {kid} at {entry[0].version}"
                else:
                    entry[1].append(node)
        if problem is not None:
            _report(f"kernel node {node.name} ({kid}): {problem}", strict)
    for kid, (source, nodes) in to_register.items():
        registry.register(_spec_of(kid, source, nodes))
    return graph


def _report(message: str, strict: bool) -> None:
    if strict:
        raise KernelFileError(message + "; restore the file, or load with strict=False to run its body")
    warnings.warn(message + "; the node runs its body", KernelFileWarning, stacklevel=3)


def _refused(source: KernelSource) -> str | None:
    """What `hoid.verify`'s static pass refuses in a kernel file, or None."""
    from ..verify.static import scan

    findings = scan(source.text)
    if not findings:
        return None
    return f"{source.path} is refused by hoid.verify's static pass: " + "; ".join(map(str, findings[:3]))


def _signature(types) -> tuple:
    return tuple((t.shape, t.dtype) for t in types)


def _spec_of(kernel_id: str, source: KernelSource, nodes: list) -> KernelSpec:
    """The spec of a kernel file: the nodes' bodies as its pattern (each at its own input types), valid
    only at the signatures (input types and attrs) those nodes hold."""
    bodies, signatures = {}, set()
    for node in nodes:
        impl = KernelImpl.from_node(node)
        bodies.setdefault(_signature(v.type for v in node.inputs), impl.body)
        signatures.add((_signature(v.type for v in node.inputs), repr(sorted(impl.attrs.items()))))
    first = next(iter(bodies.values()))

    def build(b, ins, attrs):
        body = bodies.get(_signature(v.type for v in ins), first)
        return graph_pattern(body, kernel_id).build(b, ins, attrs)

    pattern = Pattern(kernel_id, graph_pattern(first, kernel_id).operands, build,
                      doc=f"the body of {kernel_id}'s nodes in the document it was loaded with")
    held = ", ".join(f"({', '.join(f'{d}{list(s)}' for s, d in sig)})" for sig, _ in sorted(signatures)[:3])
    constraint = Constraint(f"at the signatures its document holds it at: {held}",
                            lambda types, attrs: (_signature(types), repr(sorted(attrs.items()))) in signatures)
    return source.to_spec(kernel_id, pattern, constraints=(constraint,),
                          doc=f"loaded from {source.path} with its document")

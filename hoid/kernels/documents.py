"""Documents carry their kernels: `hoid.save` / `hoid.load` with the source of every non-library kernel.

    hoid.save(graph, "step.hoid")   # step.hoid, step.safetensors, and kernels/<id>@<version>.py
    graph = hoid.load("step.hoid")  # each kernel file found and re-hashed against its node's version

`hoid.ir.io` owns the document and its weights but may not import `hoid.kernels`; it takes the kernel
files as text (`save(..., kernel_sources=)`) and hands back what `kernels/` holds (`kernel_files`). This
module, allowed both, is the one owner of which kernels are written and how a file is checked: its
`KernelSource` hash must equal the node's version. A missing or altered file warns (`KernelFileWarning`:
the node then runs its body, as the runtime does for any kernel it cannot find) or, with `strict=True`,
raises `KernelFileError`.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch

from ..errors import HoidError
from ..ir import Graph
from ..ir import io as ir_io
from .loader import KernelSource
from .registry import all_kernels, library_kernels


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


def load(path: str | os.PathLike, *, device: str | torch.device = "cpu", strict: bool = False) -> Graph:
    """`hoid.ir.io.load`, then every non-library kernel node's file found in `kernels/` and re-checked."""
    graph = ir_io.load(path, device=device)
    files = ir_io.kernel_files(path)
    library, known = library_kernels(), all_kernels()
    for node in _kernel_nodes(graph):
        kid, version = node.attrs["kernel"], node.attrs["version"]
        # no file is owed for the library, a node without a version, or a kernel registered from Python code
        # (it lives in its author's module); one built from source, or unknown here, must have its file
        if kid in library or not version or (
                kid in known and not isinstance(getattr(known[kid].launch, "source", None), KernelSource)):
            continue
        name = file_name(kid, version)
        problem = None
        if name not in files:
            problem = f"its source {ir_io.KERNELS_DIR}/{name} is missing beside {path}"
        else:
            try:
                found = KernelSource(files[name], path=str(Path(path).parent / ir_io.KERNELS_DIR / name)).version
            except HoidError as e:
                found = f"unreadable ({e})"
            if found != version:
                problem = f"{ir_io.KERNELS_DIR}/{name} hashes to {found}, not the node's version {version}: altered"
        if problem is None:
            continue
        message = f"kernel node {node.name} ({kid}): {problem}"
        if strict:
            raise KernelFileError(message + "; restore the file, or load with strict=False to run its body")
        warnings.warn(message + "; the node runs its body", KernelFileWarning, stacklevel=2)
    return graph

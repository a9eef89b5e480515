"""`hoid.export(graph, directory)`: an optimized graph as a plain PyTorch package, no compiler at run time.

    hoid.export(opt.graph, "out/qwen_step")
    import qwen_step; model = qwen_step.load("cuda")   # a torch.nn.Module; imports torch and triton only
    logits, *cache = model(ids, position, *cache)      # the graph's inputs and outputs, in its order

The package:

    __init__.py        load(device=None) -> Model; the arch check; META (what it was exported for)
    model.py           class Model(nn.Module): forward is the graph, one line a node, in graph order
    ops.py             each kernel node as a torch.library op (triton_op / custom_op) with a fake; each op
                       node's torch code, traced from the registry's reference (`export_ops`)
    _kernels/          pruned copies of the hoid modules the kernels launch from (`export_source`), and
                       the files of kernels built from source, as they were verified
    weights.safetensors the weights and bind-time values forward reads (frozen: merged Q/K/V included)
    meta.json          graph name, the arch the kernels were chosen for, the archs they build for

Lowering (`lower`: kernel nodes bound for the arch, unavailable ones inlined as their bodies) and the
bind-time folding (`compiled._bind_values`) are the runtime's own; the package gets its own straight-line
torch code because it may not import hoid. A CuTe DSL kernel is a `custom_op` (opaque to torch.compile and
torch.export, which see its fake) over the package's copy of its launch and of `_cute_compile`: it builds
at its first call per shape, as in hoid, and needs NVIDIA's CuTe DSL where it runs (`load` says so where it
is missing; a package exported with `kernels=` a set without CuTe runs their bodies instead).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import shutil
import warnings
from pathlib import Path

import torch

from ..errors import ExportError
from ..ir import Graph, expect_graph
from ..ir.analysis import deaths, last_reads, made_contiguous
from .codegen import _Names
from .compiled import _bind_values
from .export_ops import kernel_op, literal, op_function, traced_function
from .export_source import SourceSet
from .lower import lower

TRITON_HELPERS = "hoid.kernels.library._triton_compile"
CUTE_HELPERS = "hoid.kernels.library._cute_compile"
# A package needs CuTe DSL itself, not hoid's extra: its copy of the install hint names the library.
_HOID_CUTE_INSTALL = "pip install 'hoid[cute]'  (CUTLASS CuTe DSL"
_PACKAGE_CUTE_INSTALL = "pip install nvidia-cutlass-dsl  (CUTLASS CuTe DSL"
# Inside the package, a Triton launch goes through wrap_triton: torch.compile and torch.export then see the
# kernel (a triton_op's body is traced) instead of failing on a raw launch over fake tensors.
_RAW_LAUNCH = "return impl[grid](*args, **kwargs)"
_TRACED_LAUNCH = "return torch.library.wrap_triton(impl)[grid](*args, **kwargs)"


class _Values:
    """What `_bind_values` needs of a program: the values it reads, by name."""

    def __init__(self, names):
        self.tensors = {n: ("value", n) for n in names}


def export(graph: Graph, directory: str | os.PathLike, *, arch: str | None = None, kernels=None,
           trace_triton: bool = True) -> Path:
    """Write `graph` as a standalone package in `directory` (replaced if it holds a previous export).

    arch: the GPU arch the kernels are chosen for ("sm_90"; default: this machine's GPU, else sm_90, the
    H200 the search prices for). kernels: where kernel ids are looked up, a `KernelSet` or a mapping of id ->
    spec (default: the registry); a kernel node it lacks runs its body (with a warning). trace_triton: each
    Triton kernel a `triton_op` that torch.compile and torch.export trace into (True), or an opaque
    `custom_op` (False): tracing runs torch's mutation analysis at every call site, each lowered to TTIR,
    and a whole model's step and prefill (about 450 call sites for Qwen3-1.7B) passed 164 s of
    `torch.compile` warm-up on the H200 (12-03); opaque, the launches run as they were checked."""
    graph = expect_graph(graph, "hoid.export").validate()
    directory = Path(directory)
    if not directory.name.isidentifier():
        raise ExportError(f"hoid.export: {directory.name!r} is not a Python identifier; name the package "
                          "directory so it can be imported (e.g. out/qwen_step)")
    if arch is None:
        arch = _this_arch() or "sm_90"
    from ..kernels.registry import all_kernels

    specs = kernels if kernels is not None else all_kernels()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = lower(graph, arch=arch, kernels=specs)
    for w in caught:
        warnings.warn(f"hoid.export: {w.message}", w.category, stacklevel=2)
    flat = lowered.graph
    runtime = [n for n in flat.nodes if n.outputs[0].name not in lowered.static]
    frozen_names = sorted(({v.name for n in runtime for v in n.inputs} | {v.name for v in flat.outputs})
                          & (lowered.static | {v.name for v in flat.weight_inputs}))
    frozen, _ = _bind_values(lowered, _Values(frozen_names), "cpu")
    namespace = "hoid_" + re.sub(r"\W", "_", graph.name)[:24] + "_" + _digest(graph)
    sources = SourceSet()
    sources.patch(TRITON_HELPERS, _RAW_LAUNCH, _TRACED_LAUNCH)
    sources.patch(CUTE_HELPERS, _HOID_CUTE_INSTALL, _PACKAGE_CUTE_INSTALL)
    ops, kernel_files, archs = _ops(runtime, lowered, sources, trace_triton)
    cute = sorted({lowered.kernels[n.outputs[0].name].spec.id for n in runtime if n.op == "kernel"
                   and lowered.kernels[n.outputs[0].name].spec.backend == "cute"})
    if cute:  # `load` asks the package's copy whether CuTe DSL is there
        sources.need(CUTE_HELPERS, "have_cute")
    model = _model(lowered, runtime, frozen_names, namespace)
    meta = {"graph": graph.name, "namespace": namespace, "arch": arch, "archs": sorted(archs) if archs else None,
            "device": _device_name(), "torch": torch.__version__, "kernels": sorted(
                {n.attrs["kernel"] for n in runtime if n.op == "kernel"}), "fallbacks": lowered.fallbacks,
            "cute": cute, "cute_dsl": _cute_dsl_version(), "trace_triton": trace_triton}
    tmp = directory.with_name(f".{directory.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "_kernels").mkdir(parents=True)
    from . import export_template

    (tmp / "__init__.py").write_text(export_template.INIT)
    (tmp / "model.py").write_text(model)
    (tmp / "ops.py").write_text(export_template.OPS_HEADER.format(namespace=namespace) + ops)
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    (tmp / "_kernels" / "__init__.py").write_text('"""The kernels\' code, copied from hoid (see hoid.export)."""\n')
    for name, text in {**sources.files(), **kernel_files}.items():
        (tmp / "_kernels" / name).write_text(text)
    from safetensors.torch import save_file

    from ..ir.io import _separate_storage

    save_file(_separate_storage({f"t{i}": frozen[n] for i, n in enumerate(frozen_names)}),
              str(tmp / "weights.safetensors"))
    if directory.exists():
        shutil.rmtree(directory)
    os.replace(tmp, directory)
    return directory


def _ops(runtime, lowered, sources: SourceSet, trace_triton: bool) -> tuple[str, dict[str, str], set[str] | None]:
    """ops.py's body (kernel ops, then op functions), the files of source-built kernels, and the archs every
    exported Triton kernel builds for (None without one)."""
    chunks, files, archs = [], {}, None
    for i, node in enumerate(runtime):
        if node.op != "kernel":
            chunks.append(op_function(node, f"f{i}"))
            continue
        bound = lowered.kernels[node.outputs[0].name]
        spec = bound.spec
        name = f"k{i}"
        if spec.backend == "torch":
            chunks.append(traced_function(lambda *ts, b=bound: b(*ts), list(bound.inputs), f"_{name}_body",
                                          f"kernel {spec.id} (node {node.name})"))
            chunks.append(kernel_op(name, bound, None, f"_{name}_body", traceable=False))
            continue
        archs = set(spec.archs) if archs is None else archs & set(spec.archs)
        source = getattr(spec.launch, "source", None)
        if source is not None and hasattr(source, "entry"):  # built from source (an agent's): its file as is
            module = f"src_{source.version}"
            files[f"{module}.py"] = source.text
            call, traceable = f"{module}.{source.entry}", False
        else:
            mod, fn = spec.launch.__module__, spec.launch.__name__
            if getattr(importlib.import_module(mod), fn, None) is not spec.launch:
                raise ExportError(f"export: kernel {spec.id}'s launch is not the top-level {mod}.{fn}")
            sources.need(mod, fn)
            # torch.compile traces into a Triton launch (wrap_triton); a CuTe launch stays opaque
            call, traceable = f"{sources.local(mod)}.{fn}", trace_triton and spec.backend == "triton"
        chunks.append(kernel_op(name, bound, call, None, traceable=traceable))
    imports = [f"from ._kernels import {m}" for m in sorted({sources.local(m) for m in sources.modules} | {
        f[:-3] for f in files})]
    return "\n".join(imports) + "\n\n\n" + "\n\n".join(chunks), files, archs


def _model(lowered, runtime, frozen_names, namespace) -> str:
    flat = lowered.graph
    names = _Names()
    names.taken |= {"torch", "self", "ops", "Model"}
    ident = {}
    params = []
    for v in flat.runtime_inputs:
        ident[v.name] = names.new(v.name)
        params.append(ident[v.name])
    for i, n in enumerate(frozen_names):
        ident[n] = f"self.t{i}"
    last = last_reads(runtime)
    for v in flat.outputs:
        last[v.name] = len(runtime)
    states = {v.name for v in flat.inputs_of_kind("state")}
    dead = deaths(runtime, {v.name for v in flat.outputs})  # run as plain PyTorch, forward frees as it goes
    contiguous = made_contiguous(runtime, {v.name for v in flat.outputs})  # as the runtime's codegen
    body = []
    for k, node in enumerate(runtime):
        outs = ", ".join(f"%{v.name}: {v.type}" for v in node.outputs)
        what = f"kernel {node.attrs['kernel']}" if node.op == "kernel" else node.op
        body.append(f"        # {outs} = {what}({', '.join('%' + v.name for v in node.inputs)})")
        args = [ident[v.name] for v in node.inputs]
        for v in node.outputs:
            ident[v.name] = names.new(v.name)
        targets = ", ".join(ident[v.name] for v in node.outputs) + ("," if len(node.outputs) > 1 else "")
        if node.op != "kernel":
            body.append(f"        {targets} = ops.f{k}({', '.join(args)})")
            # as the runtime's codegen: torch keeps a strided operand's layout, the IR declares it contiguous
            body += [f"        {ident[v.name]} = {ident[v.name]}.contiguous()" for v in node.outputs
                     if v.name in contiguous]
            body += _del_lines([ident[name] for name in dead.get(k, ())])
            continue
        aliases = lowered.kernels[node.outputs[0].name].aliases
        copies = []  # deleted after the call: the output written into each holds it
        for i in aliases.values():
            v = node.inputs[i]
            if v.name not in states or last.get(v.name, -1) > k:  # the old value is still read: write a copy
                copy = names.new(v.name + "_copy")
                body.append(f"        {copy} = {args[i]}.clone()  # written in place; the old value is read later")
                args[i] = copy
                copies.append(copy)
        call = f"torch.ops.{namespace}.k{k}({', '.join(args)})"
        returned = [v for o, v in enumerate(node.outputs) if o not in aliases]
        if returned:
            lhs = ", ".join(ident[v.name] for v in returned) + ("," if len(returned) > 1 else "")
            body.append(f"        {lhs} = {call}")
        else:
            body.append(f"        {call}")
        for o, i in aliases.items():
            body.append(f"        {ident[node.outputs[o].name]} = {args[i]}  # written in place by the kernel")
        body += _del_lines(copies + [ident[name] for name in dead.get(k, ())])
    outs = [ident[v.name] for v in flat.outputs]
    body.append(f"        return ({', '.join(outs)},)")
    from . import export_template

    return export_template.MODEL.format(count=len(frozen_names), names=literal(tuple(frozen_names)),
                                        params=", ".join(["self", *params]), body="\n".join(body))


def _del_lines(locals_: list[str]) -> list[str]:
    return [f"        del {', '.join(locals_)}"] if locals_ else []


def _digest(graph: Graph) -> str:
    from ..ir.text import dumps

    return hashlib.sha256(dumps(graph).encode()).hexdigest()[:8]


def _cute_dsl_version() -> str | None:
    """The CuTe DSL installed here (what the package's CuTe kernels were checked with), if any."""
    import importlib.metadata

    try:
        return importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        return None


def _this_arch() -> str | None:
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def _device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"

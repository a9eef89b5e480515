"""Inductor's side of `benchmarks/codegen.py`: a region as plain torch ops, compiled by Inductor with dynamo's
counters showing that it compiled (never an eager figure under Inductor's name), and timed calls that may
not recompile."""

from __future__ import annotations

import torch


def region_fn(body):
    """The region's torch ops (each op's registered reference), as one Python function for torch.compile."""
    from hoid.ir.registry import get_op

    nodes = [(get_op(n.op).reference, [v.name for v in n.inputs], dict(n.attrs), [v.name for v in n.outputs])
             for n in body.nodes]
    names = [gi.value.name for gi in body.inputs]
    outs = [v.name for v in body.outputs]

    def fn(*tensors):
        env = dict(zip(names, tensors, strict=True))
        for ref, ins, attrs, produced in nodes:
            made = ref(*(env[i] for i in ins), **attrs)
            made = made if isinstance(made, tuple) else (made,)
            env.update(zip(produced, made, strict=True))
        return tuple(env[o] for o in outs)

    return fn


def compiled_by_inductor(fn, example, mode: str, *, kernels: bool = False, **options):
    """`torch.compile(fn)` after `torch._dynamo.reset()`, called once on `example`, with dynamo's counters
    showing that it compiled a graph: every region's function shares one code object, and without the reset
    dynamo recompiled it per region until its recompile limit, then ran the rest eager (the 2026-12-01 run's
    invalid Whisper and BGE-M3 figures). Returns (the compiled fn, its output, what dynamo counted, and with
    `kernels` the Triton kernels Inductor made: `triton_kernels`)."""
    from torch._dynamo.utils import counters
    from torch._inductor.codecache import PyCodeCache

    torch._dynamo.reset()
    counters.clear()
    loaded = len(PyCodeCache.modules)
    compiled = torch.compile(fn, mode=mode, dynamic=False, **options)
    with torch.no_grad():
        out = compiled(*example)
    found = {}
    if kernels:
        try:
            found["triton_kernels"] = triton_kernels(PyCodeCache.modules[loaded:])
        except Exception as e:  # noqa: BLE001  a diagnostic of Inductor's internals: its failure is recorded
            found["triton_kernels_error"] = f"{type(e).__name__}: {e}"
    graphs, breaks = counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())
    if graphs < 1:
        raise RuntimeError(f"torch.compile compiled no graph of {getattr(fn, '__name__', type(fn).__name__)} "
                           f"(dynamo's counters: {dict(counters['stats'])}): its times would be eager PyTorch's, "
                           "not Inductor's")
    return compiled, out, {"graphs": graphs, "graph_breaks": breaks, **found}


def triton_kernels(modules) -> list[dict]:
    """The Triton kernels (Inductor's `CachingAutotuner`s) of the modules Inductor loaded, each with the
    launch configs it kept (one once its autotuning ran: the first call) and its source: where Inductor's
    kernel is the faster, what it does differently (12-04: BGE-M3's five regions at 0.88-0.98x, whose
    default tiles are ours). Inductor on the CPU makes none."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    seen, out = set(), []
    for module in modules:
        for name, obj in vars(module).items():
            if isinstance(obj, CachingAutotuner) and id(obj) not in seen:
                seen.add(id(obj))
                configs = [launcher.config for launcher in obj.launchers] or list(obj.configs)
                out.append({"name": name, "configs": [{**c.kwargs, "num_warps": c.num_warps,
                                                        "num_stages": c.num_stages} for c in configs],
                            "source": getattr(obj.fn, "src", None)})
    return out


def no_recompile(compiled):
    """`compiled` with recompiles made errors: a timed call that recompiled would time another kernel, or
    eager PyTorch past the recompile limit."""

    def fn(*args):
        with torch._dynamo.config.patch(error_on_recompile=True), torch.no_grad():
            return compiled(*args)

    return fn

"""`torch.compile(model, backend="hoid")`: hoid from inside an otherwise unmodified PyTorch program.

    model = torch.compile(model, backend="hoid")   # no `import hoid` needed once hoid is installed

torch finds `backend` through the `torch_dynamo_backends` entry point (pyproject.toml), which
`torch._dynamo.backends.registry.lookup_backend` loads the first time the name "hoid" is asked for.

Dynamo gives the backend one FX `GraphModule` per captured subgraph and its example inputs; the backend
returns `HoidCallable`, which compiles on the first call of each input signature (shapes, dtypes,
devices, the Python values of int arguments, which weights are bound) and caches it:
  1. import: `hoid.from_torch(gm, args)` (through torch.export; the module's parameters and buffers,
     which dynamo lifts as inputs, become bound weights, or state where the graph mutates them);
  2. rewrite: `hoid.search.rewrite` with the rule sets and the kernels accepted with measured evidence
     for this device (`hoid.kernels.AcceptedStore`, `HOID_KERNELS`), under short saturation limits:
     a compile does no kernel search of its own, and this module never imports `hoid.agent`;
  3. compile: `hoid.compile` for the inputs' device, its state buffers being the model's own buffers.
Shapes: every hoid graph is static, so a new shape is a new compile (as `dynamic=False` does), up to
`MAX_SIGNATURES` per subgraph; after that, and whenever import, rewrite or compile fails (an ATen op
hoid lacks, a data-dependent shape...), that subgraph runs its own forward (the stock eager path), with
the reason logged once on the "hoid.backend" logger. Graph breaks need nothing here: dynamo runs the
code between subgraphs itself.

Weights are read when a signature compiles: merged weights (Q/K/V) are computed then, so change a
parameter in place and the compiled call will not see it (inference only; replacing a parameter by
another tensor is a new signature and compiles again).
"""

from __future__ import annotations

import logging
import os

import torch
from torch.utils import _pytree as pytree

logger = logging.getLogger("hoid.backend")

MAX_SIGNATURES = 8  # per subgraph; beyond this, a shape-polymorphic caller is better served by eager
_SECONDS = float(os.environ.get("HOID_BACKEND_SECONDS", "10"))  # saturation time limit per compile
_logged: set[str] = set()


def _log_once(message: str) -> None:
    if message not in _logged:
        _logged.add(message)
        logger.warning(message)


def _signature(args, lifted: frozenset) -> tuple:
    """What a compiled graph is specialised to: tensor types and devices, Python values, and the storage
    of each bound weight (a parameter swapped for another tensor must not run with the old one)."""
    key = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            key.append((tuple(a.shape), a.dtype, a.device, a.data_ptr() if i in lifted else None))
        else:
            key.append(("value", a if isinstance(a, (int, float, bool, str, type(None))) else type(a)))
    return tuple(key)


class _Compiled:
    """One signature's compiled graph and how a call's arguments feed it."""

    def __init__(self, gm: torch.fx.GraphModule, args: tuple, lifted: frozenset[int]):
        from .ir.from_torch import from_torch
        from .ir.from_torch.fx import bind_graph_module

        binding = bind_graph_module(gm, args, lifted)
        graph = from_torch(binding.module, binding.args, name="dynamo_subgraph")
        tensors = [p for p in binding.free if isinstance(args[p], torch.Tensor)]
        states = graph.inputs_of_kind("state")
        by_name = {name: p for p, name in binding.lifted.items()}
        runtime = graph.runtime_inputs
        # from_torch declares the arguments' tensors first, in order, then the buffers the graph mutates
        # (by their names here, the placeholders'): so position k of the call feeds runtime input k.
        self.feed = tensors + [by_name[v.name] for v in runtime[len(tensors):]]
        if len(self.feed) != len(runtime):
            raise RuntimeError(f"{len(runtime)} runtime inputs for {len(self.feed)} tensors (a bug in hoid.backend)")
        self.state_positions = [self.feed[[v.name for v in runtime].index(s.name)] for s in states]
        device = next((args[p].device for p in self.feed), None) or torch.device("cpu")
        graph = _rewrite(graph, device)
        given = [args[p] for p in self.state_positions]
        own = all(t.is_contiguous() and t.device == device for t in given)
        from .runtime import compile as hoid_compile

        # The model's buffers are the compiled graph's state: a KV cache updated in place stays the model's.
        self.fn = hoid_compile(graph, device=device, state=given if own else None)
        self.graph = graph
        output = next(n for n in gm.graph.nodes if n.op == "output")
        self.out_spec = pytree.tree_flatten(output.args[0])[1]

    def __call__(self, args):
        outs = self.fn(*(args[p] for p in self.feed))
        n_user = len(outs) - len(self.state_positions)
        for p, update in zip(self.state_positions, outs[n_user:]):
            if update.data_ptr() != args[p].data_ptr():  # a copy the plan made: the caller's tensor is the truth
                args[p].copy_(update)
        # The runtime's outputs are planned buffers, overwritten by the next call: the caller owns these.
        return pytree.tree_unflatten([o.clone() for o in outs[:n_user]], self.out_spec)


def _target(device: torch.device):
    """The `hoid.measure` device the graph is made for: this GPU, or this CPU (measured) on a machine without one."""
    from .measure.devices import get_device
    from .measure.local import local_device

    return local_device() if device.type == "cuda" or not torch.cuda.is_available() else get_device("cpu")


def _kernels(device):
    """The built-in library that runs here, plus every kernel accepted with measured evidence on `device`."""
    from .kernels import AcceptedStore, KernelSet

    base = KernelSet.default().runnable_here()
    try:
        with AcceptedStore() as store:
            found = store.load(device.name)
    except Exception as e:  # an unreadable store costs the accepted kernels, not the compile
        _log_once(f"hoid.backend: the accepted-kernel store could not be read ({type(e).__name__}: {e}); "
                  "using the built-in library alone")
        return base
    for kernel_id, why in found.stale:
        _log_once(f"hoid.backend: accepted kernel {kernel_id} is not used: {why}")
    return found.kernel_set(base)


def _rewrite(graph, device: torch.device):
    from .search import rewrite
    from .search.limits import Limits

    target = _target(device)
    try:
        return rewrite(graph, device=target, kernels=_kernels(target), limits=Limits(seconds=_SECONDS))
    except Exception as e:  # e.g. egglog missing: the imported graph still compiles, unrewritten
        _log_once(f"hoid.backend: the rewrite failed ({type(e).__name__}: {e}); compiling the graph unrewritten")
        return graph


class HoidCallable:
    """What the backend returns for one subgraph: compiled graphs by signature, or `gm`'s own forward."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs):
        from .ir.from_torch.fx import lifted_positions

        self.gm = gm
        self.lifted = lifted_positions(gm, example_inputs)  # now: dynamo drops what says so after we return
        self.compiled: dict[tuple, _Compiled | None] = {}  # None: this signature falls back
        self.reasons: dict[tuple, str] = {}

    def __call__(self, *args):
        # hoid compiles inference: where autograd records (grad enabled, a tensor needs grad), torch runs it
        grad = torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        key = (grad, *_signature(args, self.lifted))
        entry = self.compiled.get(key, ...)
        if entry is ...:
            entry = self._compile(key, args, grad)
        if entry is None:
            return self.gm(*args)
        return entry(args)

    def _compile(self, key, args, grad: bool):
        built = sum(1 for c in self.compiled.values() if c is not None)
        if grad:
            entry, reason = None, ("autograd is recording (grad enabled and an input requires grad); hoid "
                                   "compiles inference: call the model under torch.no_grad()")
        elif built >= MAX_SIGNATURES:
            entry, reason = None, f"more than {MAX_SIGNATURES} input signatures"
        else:
            try:
                entry, reason = _Compiled(self.gm, args, self.lifted), None
            except Exception as e:  # anything hoid cannot import or compile runs as torch would
                entry, reason = None, f"{type(e).__name__}: {e}"
        self.compiled[key] = entry
        if reason is not None:
            self.reasons[key] = reason
            _log_once(f"hoid.backend: a subgraph runs eagerly (torch's own forward): {reason}")
        return entry


def backend(gm: torch.fx.GraphModule, example_inputs, **options):
    """The `torch.compile` backend (`backend="hoid"`): see the module doc. `options` (torch.compile's
    `options=`) are not used yet and are ignored."""
    if options:
        _log_once(f"hoid.backend: options {sorted(options)} are ignored")
    return HoidCallable(gm, example_inputs)

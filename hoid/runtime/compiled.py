"""`hoid.compile(graph) -> CompiledGraph`: a graph made into a callable over torch tensors.

    step = hoid.compile(graph)              # on the GPU when there is one, CUDA graph captured
    logits, *cache = step(ids, position, *step.state)
    print(step.source)                      # the Python that runs, one line per node

Binding happens once, here: weights go to the device, bind-time values (merged weights, constants) are
computed and the originals they replace are dropped, kernel outputs and workspaces get planned buffers,
and the state buffers (`state`) are allocated. On a GPU of sm_90 or later, kernels whose spec supports
programmatic dependent launch are launched with it (`pdl`); `launches` says what one call launches.

A call stages its inputs (a state tensor that *is* one of `state`, recognised by its pointer, is not
copied; any other is copied in and counted in `stats`), runs the generated function (or replays its CUDA
graph) and returns the outputs: planned buffers and the state buffers themselves, valid until the next
call, as with any CUDA-graph runner.
"""

from __future__ import annotations

import builtins
import linecache
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..errors import InputError
from ..ir import Graph, expect_graph
from ..ir.interpreter import run_node
from ..kernels.spec import PDL_MIN_ARCH, supports_pdl
from . import folded
from .codegen import FUNCTION, Program, generate
from .graphs import capture
from .launches import LaunchPlan, launch_plan
from .lower import Lowered, lower
from .memory import Plan, plan


@dataclass
class Stats:
    """calls; state_copies: state tensors copied in because the caller passed tensors other than `state`;
    input_copies: activation inputs copied into the CUDA graph's static buffers."""

    calls: int = 0
    state_copies: int = 0
    input_copies: int = 0


@dataclass
class Memory:
    """Bytes on the device after binding: bound weights and bind-time values, planned buffers, state, and
    the peak the allocator saw while binding (CUDA only; None on the CPU). `shared`: the part of `weights`
    already bound by another executable from the same weights (`folded.py`: held once, counted in both)."""

    weights: int = 0
    shared: int = 0
    buffers: int = 0
    state: int = 0
    peak: int | None = None


@dataclass
class CompiledGraph:
    graph: Graph
    device: torch.device
    lowered: Lowered
    plan: Plan
    program: Program
    state: list[torch.Tensor]
    namespace: dict
    memory: Memory
    use_cuda_graph: bool
    cuda_graph_reason: str | None = None  # why no CUDA graph runs (None while one does or will)
    pdl: bool = False  # PDL-capable kernels launch with programmatic dependent launch
    stats: Stats = field(default_factory=Stats)
    _fn: object = None
    _graph: object = None
    _static_inputs: list | None = None
    _static_outputs: tuple | None = None

    @property
    def source(self) -> str:
        return self.program.source

    @property
    def copies(self) -> list[str]:
        """Every state copy the plan could not avoid, in words (empty for a decode step over kernels
        that append in place, or ops updated in place)."""
        return list(self.plan.copies)

    @property
    def fallbacks(self) -> dict[str, str]:
        """Kernel nodes that run their body instead, with the reason."""
        return dict(self.lowered.fallbacks)

    @property
    def launches(self) -> LaunchPlan:
        """What one call launches, step by step, from the kernels' specs; and where PDL's chain breaks."""
        return launch_plan(self.plan.steps, self.lowered.kernels, self.pdl)

    @property
    def input_buffers(self) -> list[torch.Tensor] | None:
        """The buffers the CUDA graph reads its runtime inputs from (state: `state` itself), once captured;
        a caller that passes them back, or writes into them, skips the copy in (a large input that stays
        the same across calls, such as cross-attention K/V, is then never copied again). None before."""
        return list(self._static_inputs) if self._static_inputs is not None else None

    @property
    def captured(self) -> bool:
        return self._graph is not None

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        args = self._stage(inputs)
        self.stats.calls += 1
        if self._graph is not None:
            self._graph.replay()
            return self._static_outputs
        outputs = self._fn(*args)
        if self.use_cuda_graph and self.cuda_graph_reason is None:
            # the first call ran eagerly: Triton compiled, cuBLAS and the split-K counters set up; now
            # the same function is recorded, over input buffers of its own: a replay reads what it was
            # recorded over, and the caller's tensors of this call (a view of its token sequence, a
            # position made for the call) are the caller's to overwrite or free (the H200 showed both:
            # later tokens written into the prompt, and a first decode that read freed memory)
            static = self._own_inputs(args)
            self._graph, self._static_outputs, self.cuda_graph_reason = capture(self._fn, static)
            if self._graph is not None:
                self._static_inputs = static
        return outputs

    def _own_inputs(self, args: list[torch.Tensor]) -> list[torch.Tensor]:
        """`args` with every activation input copied into a buffer of this graph (state is its own)."""
        kinds = [self.graph.kind_of(v.name) for v in self.graph.runtime_inputs]
        return [a if kind == "state" else a.clone() for kind, a in zip(kinds, args, strict=True)]

    def run_eager(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """One call through the generated function, never the CUDA graph (to compare the two)."""
        return self._fn(*self._stage(inputs))

    def _stage(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        runtime = self.graph.runtime_inputs
        if len(inputs) != len(runtime):
            names = ", ".join(f"%{v.name}: {v.type}" for v in runtime)
            raise InputError(f"compiled {self.graph.name!r} takes {len(runtime)} inputs ({names}), got {len(inputs)}")
        states = iter(self.state)
        out = []
        for k, (value, tensor) in enumerate(zip(runtime, inputs)):
            if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != value.type.shape:
                got = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
                raise InputError(f"input %{value.name}: declared {value.type}, got {got}")
            if self.graph.kind_of(value.name) == "state":
                own = next(states)
                if tensor.data_ptr() != own.data_ptr():  # not ours: copy it in (a loop passes ours back)
                    own.copy_(tensor)
                    self.stats.state_copies += 1
                out.append(own)
            elif self._static_inputs is not None:
                static = self._static_inputs[k]
                if tensor.data_ptr() != static.data_ptr():
                    static.copy_(tensor)
                    self.stats.input_copies += 1
                out.append(static)
            else:
                out.append(tensor if tensor.device == self.device else tensor.to(self.device))
        return out

    def reset_state(self) -> None:
        """Zero the state buffers (a new sequence), keeping their addresses (and the CUDA graph)."""
        for t in self.state:
            t.zero_()


def compile(graph: Graph, *, device: str | torch.device | None = None, cuda_graph: bool | None = None,
            sample=None, kernels=None, state: Sequence[torch.Tensor] | None = None,
            pdl: bool | None = None, pdl_early: bool = False) -> CompiledGraph:
    """Compile `graph` for `device` (default: the GPU when there is one, else the CPU).

    cuda_graph: capture a CUDA graph on the first call (default: on a GPU); what cannot be captured runs
    eagerly and says why in `cuda_graph_reason`. sample: a `hoid.runtime.sampling` sampler (`Greedy()`,
    `Sample(...)`) applied to the first output (logits) inside the step: the call then returns the next
    token i64[B, 1] in its place. kernels: where kernel ids are looked up (default: the registry).
    state: tensors to use as the state buffers (another compiled graph's `state`, so a prefill and a
    decode step share one cache); default: new zero tensors. pdl: launch the kernels whose spec supports it
    with programmatic dependent launch (default: where a CUDA graph is used on a GPU of sm_90 or later).
    pdl_early: with PDL, let the kernels that declare it read their weights before their wait (a GEMV's
    first weight tile; only ever bind-time values). Off by default: on the H200 it made the Qwen3-1.7B step
    slower (0.93x of no PDL, against 1.026x waiting first; benchmarks/results/pdl_h200.json), and Triton's
    early GEMV build can differ from the plain one by an ulp."""
    graph = expect_graph(graph, "hoid.compile")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    arch = None
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        arch = f"sm_{major}{minor}"
        torch.cuda.reset_peak_memory_stats(device)
    if cuda_graph and device.type != "cuda":
        raise ValueError(f"cuda_graph=True needs a CUDA device; compiling for {device}")
    use = device.type == "cuda" if cuda_graph is None else bool(cuda_graph)
    reason = None if use else ("the device is not a GPU" if device.type != "cuda" else "cuda_graph=False")
    if use and sample is not None and getattr(sample, "graph_safe", True) is False:
        use, reason = False, f"the sampler cannot run inside a CUDA graph: {sample.why_not_graph_safe}"
    if pdl and not supports_pdl(arch):
        raise ValueError(f"pdl=True needs a CUDA GPU of sm_{PDL_MIN_ARCH} or later; compiling for {device}"
                         + (f" ({arch})" if arch else ""))
    pdl = use and supports_pdl(arch) if pdl is None else bool(pdl)
    lowered = lower(graph, arch=arch, kernels=kernels, pdl=pdl, pdl_early=pdl_early)
    planned = plan(lowered)
    program = generate(lowered, planned, sample=sample)
    memory = Memory()
    values, shared = _bind_values(lowered, program, device)
    memory.weights = sum(t.numel() * t.element_size() for t in values.values())
    memory.shared = sum(t.numel() * t.element_size() for name, t in values.items() if name in shared)
    slots = [torch.empty(n, dtype=_dtype(d), device=device) for n, d in planned.slots]
    memory.buffers = planned.slot_bytes()
    own_state = _state(graph, device, state)
    memory.state = sum(t.numel() * t.element_size() for t in own_state)
    namespace = dict(program.objects)
    types = lowered.graph.values()
    for name, (kind, value) in program.tensors.items():
        if kind == "buffer":
            namespace[name] = slots[planned.buffers[value]].view(types[value].type.shape)
        else:
            namespace[name] = values[value]
    for key, names in program.workspaces.items():
        for name, slot, t in zip(names, planned.workspaces[key], lowered.kernels[key].workspace, strict=True):
            namespace[name] = slots[slot].view(t.shape)
    if device.type == "cuda":
        memory.peak = torch.cuda.max_memory_allocated(device)
    filename = f"<hoid.compile {graph.name}>"
    linecache.cache[filename] = (len(program.source), None, program.source.splitlines(True), filename)
    exec(builtins.compile(program.source, filename, "exec"), namespace)
    compiled = CompiledGraph(graph, device, lowered, planned, program, own_state, namespace, memory, use, reason,
                             pdl=pdl)
    compiled._fn = namespace[FUNCTION]
    for copy in planned.copies:
        warnings.warn(f"hoid.compile({graph.name!r}): {copy}", stacklevel=2)
    return compiled


def _dtype(name: str) -> torch.dtype:
    from ..ir.dtypes import to_torch

    return to_torch(name)


def _state(graph: Graph, device, given) -> list[torch.Tensor]:
    states = graph.inputs_of_kind("state")
    if given is None:
        return [torch.zeros(v.type.shape, dtype=v.type.torch_dtype, device=device) for v in states]
    given = list(given)
    if len(given) != len(states):
        raise InputError(f"compile({graph.name!r}, state=...): {len(given)} tensors for {len(states)} state inputs")
    for v, t in zip(states, given):
        if (tuple(t.shape) != v.type.shape or t.dtype != v.type.torch_dtype or t.device != device
                or not t.is_contiguous()):
            raise InputError(f"state %{v.name}: declared {v.type} on {device}, given {tuple(t.shape)} {t.dtype} "
                             f"on {t.device}")
    return given


def _bind_values(lowered: Lowered, program: Program, device) -> tuple[dict[str, torch.Tensor], set[str]]:
    """(the weights and bind-time values the program reads, on `device`; the names of those another
    executable had already bound). Bind-time nodes run here, in graph order, unless `folded` holds their
    result from the same weights (a step and its prefill share their merged weights); a weight or
    intermediate no later node and no call reads is dropped as soon as it is used up, so a merged weight
    does not keep its parts (memory does not double)."""
    graph = lowered.graph
    needed = {value for kind, value in program.tensors.values() if kind == "value"}
    nodes = [n for n in graph.nodes if n.outputs[0].name in lowered.static]
    last = {}
    for i, node in enumerate(nodes):
        for v in node.inputs:
            last[v.name] = i
    weights = graph.weights
    env: dict[str, torch.Tensor] = {}
    keys: dict[str, tuple] = {}  # value -> its `folded` key
    sources: dict[str, tuple[torch.Tensor, ...]] = {}  # value -> the weight tensors it is computed from
    shared: set[str] = set()

    def get(name: str) -> torch.Tensor:
        if name not in env:
            if name not in weights:
                raise InputError(f"graph {graph.name!r}: no tensor bound for weight %{name}")
            source = weights[name]
            keys[name], sources[name] = folded.weight_key(source, device), (source,)
            moved = folded.lookup(keys[name])
            if moved is None:
                moved = source.to(device)
                folded.remember(keys[name], moved, (source,))
            elif moved is not source:
                shared.add(name)
            env[name] = moved
        return env[name]

    for i, node in enumerate(nodes):
        args = [get(v.name) for v in node.inputs]
        inputs = [keys[v.name] for v in node.inputs]
        came_from = tuple({id(t): t for v in node.inputs for t in sources[v.name]}.values())
        out_keys = [folded.node_key(node, inputs, k, device) for k in range(len(node.outputs))]
        found = [folded.lookup(key) for key in out_keys]
        if all(t is not None for t in found):
            outs = found
            shared.update(v.name for v in node.outputs)
        else:
            bound = lowered.kernels.get(node.outputs[0].name) if node.op == "kernel" else None
            outs = bound(*args) if bound is not None else run_node(node, args)
        for v, t, key in zip(node.outputs, outs, out_keys):
            if v.name not in shared:
                t = t.to(device)
                if v.type.strides is None and not t.is_contiguous():
                    t = t.contiguous()  # as the interpreter does: kernels may rely on the declared layout
                folded.remember(key, t, came_from)
            env[v.name], keys[v.name], sources[v.name] = t, key, came_from
        for v in node.inputs:
            if last.get(v.name) == i and v.name not in needed:
                env.pop(v.name, None)  # used up: freed now, not after the whole bind
    missing = [n for n in needed if n not in env and n not in weights]
    if missing:
        raise InputError(f"graph {graph.name!r}: no tensor bound for weight(s) {', '.join(sorted(missing)[:5])}")
    values = {name: get(name) for name in needed}
    return values, shared & set(values)

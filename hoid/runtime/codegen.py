"""Code generation: a lowered, planned graph -> the readable Python source of one call.

Each step is one line: a torch op through its registry reference (`op_<name>`, the op's only torch
implementation), a kernel through its launcher (`k_<value>.launch((inputs), (outputs)[, (workspace)])`,
planned buffers `b_<value>` as destinations, planned scratch `ws_<value>`), the in-place reference where
a state is updated in place, and the copies the plan could not avoid, written out so a reader sees them.
Weights and bind-time values are globals named `w_<value>`. A torch op's output is a local, deleted (`del`)
after the last step that reads it: Python frees a function's locals only at its return, so without the
`del` every intermediate of the call stayed allocated until its end (BGE-M3 at 32 x 512 tokens held 44.8 GB
on the H100, 12-05, where eager torch peaks at 1.5 GB), and under CUDA-graph capture the graph's private
pool kept them all. The source is what runs: it is compiled with
`compile()` and executed in a namespace holding exactly the names it uses.
"""

from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass, field

from ..ir import Graph
from ..ir.analysis import deaths, made_contiguous
from ..ir.registry import get_op
from .lower import Lowered
from .memory import Plan

FUNCTION = "step"


@dataclass
class Program:
    """source: the text of `def step(...)`; objects: the non-tensor globals it uses (op references,
    launchers, attrs); tensors: global name -> ("value", value name) for a bound weight or bind-time
    value, or ("buffer", value name) for a planned buffer; workspaces: kernel node (its first output) ->
    the global names of its planned scratch buffers, in the order of its spec's `workspace`."""

    source: str
    objects: dict = field(default_factory=dict)
    tensors: dict[str, tuple[str, str]] = field(default_factory=dict)
    workspaces: dict[str, list[str]] = field(default_factory=dict)


class _Names:
    """Python identifiers for value names, unique and recognisable (`model.layers.0.k` -> `model_layers_0_k`)."""

    def __init__(self):
        self.taken: set[str] = set()
        self.of: dict[str, str] = {}

    def new(self, base: str) -> str:
        ident = re.sub(r"\W", "_", base)
        if not ident or ident[0].isdigit() or keyword.iskeyword(ident):
            ident = "v_" + ident
        name, n = ident, 1
        while name in self.taken:
            n += 1
            name = f"{ident}_{n}"
        self.taken.add(name)
        return name


def generate(lowered: Lowered, plan: Plan, *, sample=None) -> Program:
    graph = lowered.graph
    names = _Names()
    for reserved in ("torch", FUNCTION, "sample"):
        names.taken.add(reserved)
    prog = Program("")
    ident: dict[str, str] = {}
    params = []
    for v in graph.runtime_inputs:
        ident[v.name] = names.new(v.name)
        params.append(ident[v.name])
    # only what a call reads is bound: a weight merged into another, or a partial merge, is not kept
    used = {v.name for n in plan.steps for v in n.inputs} | {v.name for v in graph.outputs}
    for name in sorted((set(v.name for v in graph.weight_inputs) | lowered.static) & used):
        ident[name] = names.new("w_" + name)
        prog.tensors[ident[name]] = ("value", name)
    for name in plan.buffers:
        ident[name] = names.new("b_" + name)
        prog.tensors[ident[name]] = ("buffer", name)

    lines = [f"def {FUNCTION}({', '.join(params)}):"]
    # what the return and the state copies read (an output that updates a state returns the state's buffer)
    outlive = {v.name for v in graph.outputs if not _state_of(graph, v.name)} | {u for _, u in plan.stores}
    dead = deaths(plan.steps, outlive)  # `del`ed there: Python frees a function's locals only at its return
    contiguous = made_contiguous(plan.steps, outlive)
    for i, node in enumerate(plan.steps):
        lines.append(f"    # {_describe(node)}")
        if node.op == "kernel":
            lines += _kernel_lines(node, lowered, plan, ident, names, prog)
        else:
            lines += _op_lines(node, plan, ident, names, prog, contiguous)
        # every value a step makes is a local but a planned buffer's (a global, never deleted)
        if gone := [ident[name] for name in dead.get(i, ()) if name not in plan.buffers]:
            lines.append(f"    del {', '.join(gone)}")
    for state, update in plan.stores:
        lines.append(f"    {ident[state]}.copy_({ident[update]})  # state copy (see CompiledGraph.copies)")
    outs = [ident[state_of] if (state_of := _state_of(graph, v.name)) else ident[v.name] for v in graph.outputs]
    if sample is not None:
        prog.objects["sample"] = sample
        token = names.new("next_token")
        lines.append(f"    {token} = sample({outs[0]})  # the next token, sampled in the step")
        outs[0] = token
    lines.append(f"    return ({', '.join(outs)},)")
    prog.source = "\n".join(lines) + "\n"
    return prog


def _state_of(graph: Graph, value: str) -> str | None:
    """The state a graph output updates: the caller gets the state's own buffer back."""
    for state, update in graph.state_updates.items():
        if update == value:
            return state
    return None


def _describe(node) -> str:
    outs = ", ".join(f"%{v.name}: {v.type}" for v in node.outputs)
    what = f"kernel {node.attrs['kernel']}" if node.op == "kernel" else node.op
    return f"{outs} = {what}({', '.join('%' + v.name for v in node.inputs)})"


def _kernel_lines(node, lowered, plan, ident, names, prog) -> list[str]:
    key = node.outputs[0].name
    bound = lowered.kernels[key]
    launcher = names.new("k_" + key)
    prog.objects[launcher] = bound
    args = [ident[v.name] for v in node.inputs]
    before, after, outs = [], [], []
    if key in plan.clones:  # the old state is still read later: the kernel appends into a copy of it
        for o, i in bound.aliases.items():
            buf = ident[node.outputs[o].name]
            before.append(f"    {buf}.copy_({args[i]})  # state copy: the old value is read after this node")
            args[i] = buf
    for o, v in enumerate(node.outputs):
        if v.name in plan.buffers:
            outs.append(ident[v.name])
        else:  # written into its aliased input's buffer: the value is that tensor
            outs.append(args[bound.aliases[o]])
            ident[v.name] = names.new(v.name)
            after.append(f"    {ident[v.name]} = {outs[-1]}  # written in place by the kernel")
    call = f"{launcher}.launch(({_tuple(args)}), ({_tuple(outs)})"
    if key in plan.workspaces:
        scratch = prog.workspaces[key] = [names.new(f"ws_{key}_{j}") for j in range(len(plan.workspaces[key]))]
        call += f", ({_tuple(scratch)})"
    pdl = "  # programmatic dependent launch" + (", weights read before its wait" if bound.pdl_early else "")
    call += ")" + (pdl if bound.pdl else "")
    return [*before, f"    {call}", *after]


def _op_lines(node, plan, ident, names, prog, contiguous: set[str]) -> list[str]:
    op = get_op(node.op)
    inplace = node.outputs[0].name in plan.inplace
    fn = names.new(f"op_{node.op}_" if inplace else f"op_{node.op}")
    fn = _shared(prog, fn, op.inplace if inplace else op.reference, names)
    kwargs = _kwargs(node, names, prog)
    call = f"{fn}({', '.join([ident[v.name] for v in node.inputs] + kwargs)})"
    for v in node.outputs:
        ident[v.name] = names.new(v.name)
    targets = ", ".join(ident[v.name] for v in node.outputs) + ("," if len(node.outputs) > 1 else "")
    if inplace:
        call += "  # state updated in place"
    lines = [f"    {targets} = {call}"]
    # torch keeps a strided operand's layout through most ops; the IR declares this output contiguous and
    # kernels fed by it may rely on that (`hoid.ir.analysis.made_contiguous` says where it is made so)
    for v in node.outputs:
        if v.name in contiguous:
            note = "# a copy only if torch kept a strided operand's layout"
            lines.append(f"    {ident[v.name]} = {ident[v.name]}.contiguous()  {note}")
    return lines


def _shared(prog, fn: str, obj, names) -> str:
    """One global per distinct callable (every `add` calls the same `op_add`)."""
    for name, existing in prog.objects.items():
        if existing is obj:
            names.taken.discard(fn)
            return name
    prog.objects[fn] = obj
    return fn


def _kwargs(node, names, prog) -> list[str]:
    if all(_literal(v) for v in node.attrs.values()):
        return [f"{k}={v!r}" for k, v in node.attrs.items()]
    held = names.new("a_" + node.outputs[0].name)
    prog.objects[held] = dict(node.attrs)
    return [f"**{held}"]


def _literal(value) -> bool:
    """Whether `repr(value)` reads back as the same value."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (tuple, list)):
        return all(_literal(v) for v in value)
    return value is None or isinstance(value, (bool, int, str))


def _tuple(items: list[str]) -> str:
    return ", ".join(items) + ("," if len(items) == 1 else "")

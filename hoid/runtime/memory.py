"""Memory planning: where each value of a compiled call lives, and how state is updated.

Buffers. Kernel outputs (kernels are destination-passing) get planned buffers: slots allocated once at
bind time, reused by liveness. A value may share storage with the values it was computed from (a view,
or a torch op that returns its input as is), so every value carries the set of storages ("roots") it may
use, and a slot is free again only after the last step that reads any value rooted in it. An output of
the graph keeps its slot for ever (the caller reads it after the call). A kernel's workspace (the
scratch buffers its spec declares: split-K partials, attention partials) gets slots live during its own
step only, so one set of slots serves every layer. Torch-op outputs are allocated by torch; under
CUDA-graph replay they come from the graph's private pool, so a replay allocates nothing.

State. A state input is updated in place when the node producing its update writes into the state's own
buffer (a kernel output that aliases the state operand, `KernelSpec.aliases`; or an op with an in-place
reference, `OpDef.inplace`, whose first operand is the state) and no step scheduled after that node reads
the old value (the state, or a value computed from it before the update). Otherwise the update is computed
out of place (a kernel then writes into a clone of the state) and copied into the state buffer at the end
of the call; each such copy is reported in `Plan.copies`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import TensorType
from ..ir.registry import get_op
from .lower import Lowered


@dataclass
class Plan:
    steps: list  # the nodes that run per call, in order (bind-time ones excluded)
    inplace: set[str] = field(default_factory=set)  # node (first output) run with its op's in-place reference
    clones: dict[str, str] = field(default_factory=dict)  # kernel node -> state it writes into a clone of
    stores: list[tuple[str, str]] = field(default_factory=list)  # (state, update): copied at the call's end
    buffers: dict[str, int] = field(default_factory=dict)  # kernel output value -> slot
    workspaces: dict[str, list[int]] = field(default_factory=dict)  # kernel node (first output) -> its slots
    slots: list[tuple[int, str]] = field(default_factory=list)  # slot -> (elements, dtype)
    copies: list[str] = field(default_factory=list)  # each state copy, in words

    def slot_bytes(self) -> int:
        return sum(TensorType((n,), d).nbytes for n, d in self.slots)


def plan(lowered: Lowered) -> Plan:
    graph = lowered.graph
    steps = [n for n in graph.nodes if n.outputs[0].name not in lowered.static]
    p = Plan(steps)
    _plan_state(graph, steps, lowered, p)
    _plan_buffers(graph, steps, lowered, p)
    return p


def _roots(graph, steps, lowered, clones) -> dict[str, frozenset[str]]:
    """Storages each value may use: its own for inputs, bound values and planned kernel outputs; those of
    the aliased operand for an aliased kernel output; its own and all its operands' for a torch op."""
    roots = {v.name: frozenset([v.name]) for v in graph.inputs_of_kind("input", "state", "weight")}
    roots.update((s, frozenset([s])) for s in lowered.static)
    for node in steps:
        key = node.outputs[0].name
        bound = lowered.kernels.get(key) if node.op == "kernel" else None
        for i, v in enumerate(node.outputs):
            if bound is not None:
                src = bound.aliases.get(i)
                if src is None:
                    roots[v.name] = frozenset([v.name])
                elif key in clones:  # writes into a clone made just before it
                    roots[v.name] = frozenset([v.name])
                else:
                    roots[v.name] = roots[node.inputs[src].name]
            else:
                roots[v.name] = frozenset([v.name]).union(*(roots[u.name] for u in node.inputs))
    return roots


def _plan_state(graph, steps, lowered, p: Plan) -> None:
    producer = {v.name: (i, n) for i, n in enumerate(steps) for v in n.outputs}
    for state, update in graph.state_updates.items():
        where = producer.get(update)
        writer = _writes_state(where[1], update, state, lowered) if where else None
        if writer is None:
            p.stores.append((state, update))
            p.copies.append(f"state %{state}: its update %{update} is not written into the state's buffer "
                            "by any node; copied into it at the end of each call")
            continue
        at, node = where
        old = _old_values(graph, steps, lowered, state, at)
        late = [n.name for n in steps[at + 1:] if any(v.name in old for v in n.inputs)]
        late += [f"output %{v.name}" for v in graph.outputs if v.name in old and v.name != state]
        if not late:
            if writer == "inplace":
                p.inplace.add(node.outputs[0].name)
            continue
        if writer == "kernel":
            p.clones[node.outputs[0].name] = state
        p.stores.append((state, update))
        p.copies.append(f"state %{state}: {late[0]} reads its old value after {node.name} updates it; the "
                        "update is made out of place and copied into the state's buffer at the end of each call")


def _writes_state(node, update: str, state: str, lowered) -> str | None:
    """"kernel" or "inplace" where `node` can write `update` into the buffer of `state`, else None."""
    index = [v.name for v in node.outputs].index(update)
    if node.op == "kernel":
        src = lowered.kernels[node.outputs[0].name].aliases.get(index)
        return "kernel" if src is not None and node.inputs[src].name == state else None
    if get_op(node.op).inplace is not None and node.inputs and node.inputs[0].name == state:
        return "inplace"
    return None


def _old_values(graph, steps, lowered, state: str, at: int) -> set[str]:
    """The state and every value computed from it by the steps before `at` (they may share its buffer)."""
    roots = _roots(graph, steps[:at], lowered, {})
    return {name for name, r in roots.items() if state in r}


def _plan_buffers(graph, steps, lowered, p: Plan) -> None:
    roots = _roots(graph, steps, lowered, p.clones)
    last: dict[str, int] = {}
    for i, node in enumerate(steps):
        for v in node.inputs:
            for r in roots[v.name]:
                last[r] = i
    forever = len(steps)
    for v in graph.outputs:
        for r in roots[v.name]:
            last[r] = forever
    for _, update in p.stores:
        for r in roots[update]:
            last[r] = forever
    free: dict[tuple[int, str], list[int]] = {}
    release: dict[int, list[int]] = {}  # step index -> slots free after it
    for i, node in enumerate(steps):
        bound = lowered.kernels.get(node.outputs[0].name) if node.op == "kernel" else None
        if bound is not None:
            cloned = node.outputs[0].name in p.clones
            for o, v in enumerate(node.outputs):
                if o in bound.aliases and not cloned:
                    continue
                key = (v.type.numel, v.type.dtype)
                slot = free[key].pop() if free.get(key) else _new_slot(p, key)
                p.buffers[v.name] = slot
                # a value nothing reads is dead after the step that writes it
                release.setdefault(last.get(v.name, i), []).append(slot)
            for t in bound.workspace or ():  # None: params the device resolves; the kernel allocates its own
                key = (t.numel, t.dtype)
                slot = free[key].pop() if free.get(key) else _new_slot(p, key)
                p.workspaces.setdefault(node.outputs[0].name, []).append(slot)
                release.setdefault(i, []).append(slot)  # scratch: free again once its step is done
        for slot in release.pop(i, []):
            free.setdefault(p.slots[slot], []).append(slot)


def _new_slot(p: Plan, key: tuple[int, str]) -> int:
    p.slots.append(key)
    return len(p.slots) - 1

"""Cost models for extraction: seconds per e-node at its real input and output types.

A cost model is a `CostModel`: any callable `cost(call: OpCall) -> float` (seconds). Two ship here:

- `AnalyticCost`: the roofline of `hoid.measure` (the device table's bandwidth and peak flops, plus a
  per-launch cost), each kernel's time divided by its measured efficiency where one is known. This is
  the default and needs no GPU.
- `MeasuredCost`: seconds looked up per (op or kernel, types, attrs), e.g. from `hoid.measure`'s cache
  filled on the GPU; an e-node without a measurement is priced by a fallback model and listed in
  `unmeasured`, or refused when there is no fallback.

`node_costs` prices every e-node of a snapshot. Two rules apply whatever the model: projections
(`Out`), inputs and absent operands are free, and so is an e-node computed from weights alone (a
merged Q/K/V weight, a transposed weight): it is folded once when weights are bound, not run per step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ..errors import GraphError
from ..ir import TensorType
from ..ir.graph import attr_key
from ..ir.ops.kernel import KernelImpl
from ..ir.ops.spatial import TO_NCHW, TO_NHWC
from ..ir.registry import get_op
from ..measure.devices import H200, Device
from ..measure.roofline import op_floor, op_time
from .snapshot import ABSENT, INPUT, KERNEL, OUT, ENode, Snapshot


@dataclass(frozen=True)
class OpCall:
    """One e-node as a cost model sees it. For kernels, `op` is "kernel" and `attrs` holds body, kernel,
    version, attrs and params, as on a `kernel` node (its measurements are keyed by the attrs)."""

    op: str
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]
    attrs: dict

    @property
    def name(self) -> str:
        """The kernel id for kernels, the op name otherwise."""
        return self.attrs["kernel"] if self.op == "kernel" else self.op

    def key(self) -> tuple:
        """A hashable identity: what it runs, on which types, with which attrs (a body by its structure)."""
        return (self.op, self.inputs, attr_key(self.attrs))


class CostModel(Protocol):
    """Prices one e-node: seconds for `call` on the device the model stands for."""

    def __call__(self, call: OpCall) -> float: ...


def measured_as(call: OpCall) -> tuple[str, str, dict] | None:
    """(kernel id, version, params) under which `hoid.measure` keys this call's measurements: a kernel's
    own; for a plain op, the library's torch kernel of that op and arity (`torch.matmul` runs the same
    torch call), or None where the library has none."""
    if call.op == "kernel":
        return call.attrs["kernel"], call.attrs["version"], call.attrs["params"]
    spec = torch_kernel_for(call.op, len(call.inputs))
    return (spec.id, spec.version, spec.default_params()) if spec is not None else None


def torch_kernel_for(op: str, arity: int):
    """The library's torch kernel of `op` called with `arity` operands: what prices and lays out a plain op."""
    from ..kernels import kernels_for

    return next((k for k in kernels_for(op) if k.backend == "torch" and len(k.pattern.operands) == arity), None)


class AnalyticCost:
    """Roofline seconds on `device`, divided by the kernel's (or op's) measured efficiency.

    efficiency: a mapping from kernel id (or op name) to efficiency in (0, 1], or an object with
    `efficiency(device_name, kernel, version) -> float | None` such as `hoid.measure.cache.MeasureCache`,
    asked for each kernel id and version once (a plain op as its torch kernel: see `measured_as`).
    Unknown efficiencies are 1 (the roofline itself). bound: (seconds, efficiencies) for the calls whose
    floor is at least that long, in place of `efficiency` (`Prices.efficiencies`: a ratio measured where
    launches and fixed costs dominate says nothing of a call that the floor bounds). overhead: with `bound`,
    the fixed seconds of a call below it, per kernel id or op name (`Prices.overheads`): such a call costs
    its floor, a launch and that, not its floor divided by a small row's ratio.
    """

    def __init__(self, device: Device = H200, *, efficiency=None, in_graph: bool = True,
                 bound: tuple[float, Mapping[str, float]] | None = None,
                 overhead: Mapping[str, float] | None = None):
        self.device, self.in_graph = device, in_graph
        self._efficiency = efficiency if efficiency is not None else {}
        self._bound = bound
        self._overhead = overhead or {}
        self._known: dict[tuple[str, str], float] = {}

    def efficiency(self, call: OpCall) -> float:
        source = self._efficiency
        if isinstance(source, Mapping):
            return float(source.get(call.name, 1.0))
        measured = measured_as(call)
        if measured is None:
            return 1.0
        kernel, version = measured[0], measured[1] or None
        if (kernel, version) not in self._known:
            found = source.efficiency(self.device.name, kernel, version)
            self._known[(kernel, version)] = float(found) if found else 1.0
        return self._known[(kernel, version)]

    def __call__(self, call: OpCall) -> float:
        if self._bound is not None and call.name in self._overhead:
            floor = max(op_floor(call.op, call.inputs, call.outputs, call.attrs, self.device))
            if floor < self._bound[0]:  # too small for the floor to bound it: floor, launch, fixed cost
                time = op_time(call.op, call.inputs, call.outputs, call.attrs, self.device, in_graph=self.in_graph)
                return time + self._overhead[call.name] if time > 0 else 0.0
        return op_time(call.op, call.inputs, call.outputs, call.attrs, self.device,
                       efficiency=self._efficiency_of(call), in_graph=self.in_graph)

    def _efficiency_of(self, call: OpCall) -> float:
        """`bound`'s efficiency for a call whose floor is at least its seconds, else `efficiency(call)`."""
        if self._bound is not None:
            above, bound = self._bound
            if max(op_floor(call.op, call.inputs, call.outputs, call.attrs, self.device)) >= above:
                return bound.get(call.name, 1.0)
        return self.efficiency(call)


class MeasuredCost:
    """Seconds from measurements: `lookup(call) -> seconds | None`. Calls with no measurement are priced
    by `fallback` and recorded in `unmeasured` (keys), so a caller can see what was estimated; with no
    fallback they raise KeyError naming the call. `stale`: for the keys whose measurement exists under
    other kernel, Triton or torch versions (and so was not used), the cache's words for it."""

    def __init__(self, lookup: Callable[[OpCall], float | None], *, fallback: CostModel | None = None):
        self.lookup, self.fallback = lookup, fallback
        self.unmeasured: set[tuple] = set()
        self.stale: dict[tuple, str] = {}

    @classmethod
    def from_table(cls, table: Mapping[tuple, float], **kw) -> MeasuredCost:
        """From a dict keyed by `OpCall.key()`."""
        return cls(lambda call: table.get(call.key()), **kw)

    @classmethod
    def from_cache(cls, cache, device: str, **kw) -> MeasuredCost:
        """From a `hoid.measure` cache: kernels as `measure_kernel` keys them (id, version, params, input
        types, pattern attrs); plain ops as the library's torch kernel of the op (`measured_as`), with
        their attrs."""
        from ..measure.cache import MeasureKey

        def lookup(call: OpCall) -> float | None:
            measured = measured_as(call)
            if measured is None:
                return None
            attrs = call.attrs["attrs"] if call.op == "kernel" else call.attrs
            key = MeasureKey.of(device, *measured, call.inputs, attrs)
            entry = cache.get(key)
            if entry is None and (why := cache.explain_miss(key)):
                cost.stale[call.key()] = why
            return entry.median if entry else None

        cost = cls(lookup, **kw)
        return cost

    def __call__(self, call: OpCall) -> float:
        seconds = self.lookup(call)
        if seconds is not None:
            return float(seconds)
        if self.fallback is None:
            types = ", ".join(map(str, call.inputs))
            stale = f" ({self.stale[call.key()]})" if call.key() in self.stale else ""
            raise KeyError(f"no measurement for {call.name} on {types}{stale}; measure it or give MeasuredCost "
                           "a fallback model")
        self.unmeasured.add(call.key())
        return self.fallback(call)


# --- pricing a snapshot ------------------------------------------------------------------------------

def weight_only_classes(snapshot: Snapshot, weights: set[str]) -> set[str]:
    """Classes computable from weights alone: `hoid.ir.analysis.weight_only_values`'s rule (`folds`: at least
    one operand, all of them weight-only) over e-classes, to its fixpoint. An e-graph has no topological
    order, so each e-node counts its operand classes not yet known weight-only, and a class joins when one
    of its e-nodes reaches zero (a weight input's class at once)."""
    users: dict[str, list[str]] = {}
    missing: dict[str, int] = {}
    ready: list[str] = []
    for nid, node in snapshot.nodes.items():
        if node.op == INPUT:
            if node.attrs["name"] in weights:
                ready.append(node.eclass)
            continue
        operands = set(snapshot.operands(node))  # an absent optional operand does not make it per step
        if node.op == ABSENT or not operands:  # `folds`: a node without operands is not weight-only
            continue
        missing[nid] = len(operands)
        for cls in operands:
            users.setdefault(cls, []).append(nid)
    done: set[str] = set()
    while ready:
        cls = ready.pop()
        if cls in done:
            continue
        done.add(cls)
        for nid in users.get(cls, ()):
            missing[nid] -= 1
            if missing[nid] == 0:
                ready.append(snapshot.nodes[nid].eclass)
    return done


def op_call(snapshot: Snapshot, node: ENode, kernels: Mapping[str, KernelImpl]) -> OpCall:
    """The call an e-node makes, with the types of its classes (a reshape's operand with its layout where
    that is known: `operand_type`)."""
    operands = snapshot.operands(node)
    results = ([snapshot.outputs_of[node.eclass][i] for i in sorted(snapshot.outputs_of[node.eclass])]
               if node.eclass in snapshot.outputs_of else [node.eclass])
    untyped = [c for c in operands + results if c not in snapshot.types]
    if untyped:
        raise GraphError(f"an e-node {node.op} uses or computes e-class {untyped[0]}, which has no shape or dtype "
                         "fact: a rule created a term without setting them (see rules/layout.py for how)")
    inputs = tuple(operand_type(snapshot, node, c) for c in operands)
    outputs = tuple(snapshot.types[c] for c in results)
    if node.op == KERNEL:
        return OpCall("kernel", inputs, outputs, kernels[node.attrs["key"]].node_attrs())
    return OpCall(node.op, inputs, outputs, dict(node.attrs))


# Added to every kernel e-node: on an exact tie (the analytic model prices a one-op kernel like the op
# itself) the plain op wins, since a kernel has to be faster to be worth depending on.
KERNEL_TIEBREAK = 1e-10


def node_costs(snapshot: Snapshot, kernels: Mapping[str, KernelImpl], cost: CostModel,
               weight_only: set[str]) -> dict[str, float]:
    """Seconds for every e-node (see the module doc for what is free; `weight_only`: the classes
    `weight_only_classes` finds). The model is asked once per distinct
    call (op or kernel key, operand and result types, attrs): the 28 layers of a model make the same calls,
    and a cost model prices a call, not an e-node."""
    costs: dict[str, float] = {}
    priced: dict[tuple, float] = {}
    for nid, node in snapshot.nodes.items():
        if node.op in (INPUT, ABSENT, OUT) or all(c in weight_only for c in snapshot.operands(node)):
            costs[nid] = 0.0
            continue
        key = _call_key(snapshot, node)
        if key not in priced:
            tiebreak = KERNEL_TIEBREAK if node.op == KERNEL else 0.0
            call = op_call(snapshot, node, kernels)
            priced[key] = float(cost(_as_copy(call) if _moves_channels(call) else call)) + tiebreak
        costs[nid] = priced[key]
    return costs


def _call_key(snapshot: Snapshot, node: ENode) -> tuple:
    """What `op_call` would build for the node, as a key: equal keys give equal calls (a kernel by its key
    in the encoding's table, which holds one key per implementation)."""
    types = snapshot.types
    results = (tuple(snapshot.outputs_of[node.eclass][i] for i in sorted(snapshot.outputs_of[node.eclass]))
               if node.eclass in snapshot.outputs_of else (node.eclass,))
    return (node.op, tuple(operand_type(snapshot, node, c) for c in snapshot.operands(node)),
            tuple(types.get(c) for c in results), attr_key(node.attrs))


# NCHW <-> NHWC (`rules/channels_last.py`): the permutes at the ends of a channels-last chain.
_CHANNEL_PERMUTES = (TO_NCHW, TO_NHWC)


def _moves_channels(call: OpCall) -> bool:
    return call.op == "permute" and tuple(call.attrs["dims"]) in _CHANNEL_PERMUTES  # 4 dims: a rank-4 operand


def _as_copy(call: OpCall) -> OpCall:
    """A permute between NCHW and NHWC as what it costs where it is read: the copy its reader makes (a kernel
    that wants contiguous operands, or a torch op, whose result the IR declares contiguous). Priced as the
    view it is, extraction would cross layouts for nothing at every op; priced as a copy, a channels-last
    chain is chosen where its convolutions' gain pays for the copies at its ends."""
    strided = get_op("permute").infer(list(call.inputs), call.attrs)
    return OpCall("contiguous", (strided,), call.outputs, {})


# Views that change a layout: after them a reshape may find no view and copy.
_PERMUTING = ("transpose", "permute")


def operand_type(snapshot: Snapshot, node: ENode, cls: str) -> TensorType | None:
    """`cls`'s type as `node` reads it. The e-graph's types carry no layout, so a reshape would always be
    priced as a view; where every e-node of its operand's class permutes a class (taken as contiguous) into
    one same layout, the reshape is priced with it: a copy where no view can express the result, as torch's
    reshape does. That copy is what a kernel writing the reshaped layout itself saves (the attention's heads
    merged after a prefill: one copy a layer, `triton.prefill_attention_merged`), and priced free the kernel
    could only tie."""
    base = snapshot.types.get(cls)
    if node.op != "reshape" or base is None:
        return base
    layouts = set()
    for producer in snapshot.enodes(cls):
        inner = snapshot.operands(producer)
        if cls in inner:  # `contiguous(x) = x` makes one of these: never extracted (`Problem.reachable`)
            continue
        if producer.op not in _PERMUTING or len(inner) != 1 or snapshot.types.get(inner[0]) is None:
            return base
        if producer.op == "permute" and tuple(producer.attrs["dims"]) in _CHANNEL_PERMUTES:
            return base  # that permute is priced as its copy already (`_as_copy`): the reshape reads the copy
        layouts.add(get_op(producer.op).infer([snapshot.types[inner[0]]], dict(producer.attrs)).strides)
    return TensorType(base.shape, base.dtype, layouts.pop()) if len(layouts) == 1 else base


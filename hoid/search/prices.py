"""Prices for extraction from measurements of both sides of each choice, or from the model for both.

A kernel is worth choosing when it is faster than the plain torch calls it replaces. Pricing the kernel
from a measurement and the ops from the roofline compares a real time with an ideal one: a measured
1.5 us `triton.rmsnorm` loses to an analytic `rmsnorm` near its floor. So `PricedCost` prices a *choice*
(a kernel and the plain ops of the region it replaces) from measurements only where both sides were
measured by the same timer at the same shapes, and otherwise prices both sides analytically (the
roofline scaled by the measured efficiency of each kernel and op): such a choice is *modelled*.

Measurements come as `Prices`: rows keyed as `hoid.measure.cache.MeasureKey`s (device, kernel id and
version, params, input types, attrs): a kernel by its own id and version; a plain op by the library's torch
kernel of the op where there is one (`cost.measured_as`), else as `op.<name>` (the op's torch reference).
The project ships the H200's rows (`SHIPPED`, written by `benchmarks/decode_prices.py` on the H200); on a
GPU, the local measurement cache adds its rows for that device. A row of an older kernel version has
another key, so it never prices today's kernel, except where `price_carryover.json` beside the shipped file
says that the edit between the two left the kernel's built code unchanged (the same PTX in every plain
build, which a test rebuilds and compares: `benchmarks/price_carryover.py`).

Rows are matched on what was measured (device, kernel and version, params, types, attrs), not on the
software of the machine that reads them: the shipped H200 rows were measured under the H200 machine's
torch and Triton (recorded in the file, and in `Prices.source`), and price a plan for the H200 on any
machine as measurements of that configuration. The local cache adds only rows measured under the
installed torch and Triton (`MeasureCache`'s own rule), which win over shipped ones.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Mapping
from pathlib import Path

from ..ir import Graph
from ..ir.ops.kernel import KernelImpl
from ..measure.cache import MeasureKey
from ..measure.devices import Device
from .cost import AnalyticCost, OpCall, measured_as

SHIPPED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "decode_prices.json"
CARRYOVER_NAME = "price_carryover.json"  # beside the shipped rows: `benchmarks/price_carryover.py`
CARRYOVER = SHIPPED.with_name(CARRYOVER_NAME)
# A call whose floor is at least this many launches is bound by it: priced by the efficiencies of such rows
BOUND_BY_FLOOR = 4


def carryovers(path: Path = CARRYOVER) -> list[dict]:
    """The entries of a carry-over file (kernel, from, to, fingerprint, why); none where it is absent."""
    return json.loads(path.read_text())["carryovers"] if path.is_file() else []


def _carried(rows: dict, path: Path) -> dict:
    """The rows of each carried-over kernel's priced version, keyed at its current one."""
    moves = {(e["kernel"], e["from"]): e["to"] for e in carryovers(path)}
    return {(device, kernel, moves[(kernel, version)], *rest): row
            for (device, kernel, version, *rest), row in rows.items() if (kernel, version) in moves}


def price_key(device: str, call: OpCall) -> MeasureKey:
    """The key a measurement of `call` on `device` is stored under (see the module doc)."""
    measured = measured_as(call)
    if measured is None:
        measured = (f"op.{call.op}", "", {})
    attrs = call.attrs["attrs"] if call.op == "kernel" else call.attrs
    return MeasureKey.of(device, *measured, call.inputs, attrs)


def _measured(key: MeasureKey) -> tuple:
    """What a row measured: its key without the software it was measured under (see the module doc)."""
    return (key.device, key.kernel, key.version, key.params, key.types, key.attrs)


class Prices:
    """Measured seconds (median) and analytic floors per measured call (`_measured` of its `MeasureKey`),
    for one device."""

    def __init__(self, device: str, rows: Mapping[tuple, tuple[float, float | None]] | None = None,
                 source: str = ""):
        self.device, self.source = device, source
        self.rows = {(_measured(k) if isinstance(k, MeasureKey) else k): v for k, v in (rows or {}).items()}
        self._index: dict[tuple, list[tuple[str, float]]] | None = None  # built by `_by_call` on first use

    @classmethod
    def shipped(cls, device: str, path: str | os.PathLike | None = None) -> Prices:
        """The project's rows for `device` (`HOID_PRICES` or `SHIPPED`); none where the file is absent."""
        path = Path(path or os.environ.get("HOID_PRICES") or SHIPPED)
        if not path.is_file():
            return cls(device, source=f"{path} (absent)")
        data = json.loads(path.read_text())
        software = data.get("versions", {})
        rows = {(r["device"], r["kernel"], r["version"], r["params"], r["types"], r["attrs"]):
                (r["median"], r.get("floor")) for r in data["rows"] if r["device"] == device}
        rows.update(_carried(rows, path.with_name(CARRYOVER_NAME)))
        measured_under = ", ".join(f"{k} {software[k]}" for k in ("torch", "triton") if k in software)
        return cls(device, rows, f"{path} (measured under {measured_under or 'unrecorded versions'})")

    def with_cache(self, cache) -> Prices:
        """These rows and a `hoid.measure.cache.MeasureCache`'s for the same device (the cache's win)."""
        from ..measure.cache import installed_versions

        triton, torch = installed_versions()
        rows = dict(self.rows)
        rows.update({_measured(e.key): (e.median, e.floor)
                     for e in cache.entries(device=self.device, triton=triton, torch=torch)})
        return Prices(self.device, rows, f"{self.source} + {cache.path}")

    def seconds(self, call: OpCall) -> float | None:
        row = self.rows.get(_measured(price_key(self.device, call)))
        return row[0] if row else None

    def fastest(self, kernel_ids, call: OpCall) -> float | None:
        """The lowest measured median among `kernel_ids` at `call`'s input types and attrs (any params)."""
        if not kernel_ids:
            return None
        key = price_key(self.device, call)
        found = [median for kernel, median in self._by_call().get((key.types, key.attrs), ()) if kernel in kernel_ids]
        return min(found) if found else None

    def _by_call(self) -> dict[tuple, list[tuple[str, float]]]:
        """(types, attrs) -> [(kernel id, median)] over every row: `fastest` looks up, never scans."""
        if self._index is None:
            self._index = {}
            for (_, kernel, _, _, types, attrs), (median, _) in self.rows.items():
                self._index.setdefault((types, attrs), []).append((kernel, median))
        return self._index

    def efficiencies(self, bound_from: float | None = None, launch: float = 0.0) -> dict[str, float]:
        """Per kernel id or op name (as `OpCall.name`): the median of floor / measured over its rows. With
        `bound_from` (seconds), over the rows whose floor is at least that, less the `launch` the model adds
        back (`roofline.op_time`): the efficiency of calls the floor bounds. The shipped decode rows are
        mostly small (a decode-size add: 0.001 of its floor, the rest launch and ramp-up), and their ratio
        priced an encoder's 32 MiB add at a thousand times its floor."""
        ratios: dict[str, list[float]] = {}
        for key, (median, floor) in self.rows.items():
            if bound_from is not None:
                if not floor or floor < bound_from:
                    continue
                median = max(median - launch, floor)
            if floor and median > 0:
                ratios.setdefault(_row_name(key), []).append(min(1.0, floor / median))
        return {name: statistics.median(r) for name, r in ratios.items()}

    def overheads(self, below: float, launch: float) -> dict[str, float]:
        """Per kernel id or op name: the median, over its rows whose floor is under `below` seconds, of what
        a call took beyond its floor and the `launch` the model adds: the fixed cost (ramp-up, a reduction's
        tail, host-side work in a graph) of a call too small for its floor to bound it. A small call costs
        its floor plus this; dividing its floor by a small row's ratio instead priced a prefill's 1 MB
        rmsnorm (128 rows) at 129 us, a thousand times the 1.45 us the decode-size row measured."""
        extra: dict[str, list[float]] = {}
        for key, (median, floor) in self.rows.items():
            if floor is None or floor >= below:
                continue
            extra.setdefault(_row_name(key), []).append(max(0.0, median - floor - launch))
        return {name: statistics.median(e) for name, e in extra.items()}


def _row_name(key: tuple) -> str:
    """A row's kernel id, or its op's name (`op.add` -> `add`): what `OpCall.name` calls it."""
    kernel = key[1]
    return kernel[3:] if kernel.startswith("op.") else kernel


def body_calls(body: Graph) -> list[OpCall]:
    """The plain calls of a kernel's body as the e-graph prices them (types without layouts)."""
    return [OpCall(n.op, tuple(v.type.contiguous() for v in n.inputs), tuple(v.type.contiguous() for v in n.outputs),
                   dict(n.attrs)) for n in body.nodes]


class PricedCost:
    """A `CostModel`: measured seconds for calls whose choices are measured on both sides, the efficiency-
    scaled roofline for the rest. `kernels`: the kernel implementations the e-graph holds (their bodies
    are the plain sides); call `prepare(kernels)` again when they change. `status(call)` says how a call
    was priced: "measured", "modelled", or "free" (a view, which launches nothing)."""

    def __init__(self, device: Device, prices: Prices | None = None,
                 kernels: Mapping[str, KernelImpl] | None = None):
        self.device = device
        self.prices = prices if prices is not None else Prices(device.name)
        self._measured_efficiency = self.prices.efficiencies()
        self.prepare(kernels or {})

    def prepare(self, kernels: Mapping[str, KernelImpl]) -> None:
        """Decide, for each kernel, whether its choice is measured on both sides; a plain call on the side
        of a modelled choice is modelled too, wherever it appears."""
        self._rivals = rival_kernels(kernels)
        # rows of kernel calls that raised when timed (`measure_unpriced`): looked up per call only if any
        self._unrunnable = any(row[0] == UNRUNNABLE_SECONDS for row in self.prices.rows.values())
        launch = self.device.graph_launch_overhead
        bound = self.prices.efficiencies(BOUND_BY_FLOOR * launch, launch)
        small = self.prices.overheads(BOUND_BY_FLOOR * launch, launch)
        self.analytic = AnalyticCost(self.device, efficiency=unmeasured_efficiencies(self._measured_efficiency,
                                                                                    self._rivals),
                                     bound=(BOUND_BY_FLOOR * launch, unmeasured_efficiencies(bound, self._rivals)),
                                     overhead=unmeasured_overheads(small, self._rivals))
        self._both: dict[tuple, bool] = {}
        self._tainted: set[tuple] = set()
        for impl in kernels.values():
            plain = [c for c in body_calls(impl.body) if self.analytic(c) > 0]
            both = all(self.prices.seconds(c) is not None for c in plain)
            self._both[impl.identity()] = both
            if not both:
                self._tainted.update(c.key() for c in plain)

    def status(self, call: OpCall) -> str:
        if call.op != "kernel" and self.analytic(call) == 0:
            return "free"
        if self.prices.seconds(call) is None:
            return "modelled"
        if call.op == "kernel":
            impl = KernelImpl.from_node(call.attrs)
            both = self._both.get(impl.identity())
            if both is None:  # a kernel outside the prepared set: look at its body now
                both = all(self.prices.seconds(c) is not None for c in body_calls(impl.body) if self.analytic(c) > 0)
            return "measured" if both else "modelled"
        return "modelled" if call.key() in self._tainted else "measured"

    def __call__(self, call: OpCall) -> float:
        if not self.prices.rows:  # nothing measured: every price is the model's (no lookups per e-node)
            return self.analytic(call)
        if self._unrunnable and call.op == "kernel" and self.prices.seconds(call) == UNRUNNABLE_SECONDS:
            return UNRUNNABLE_SECONDS  # it raised when timed here, whatever its plain side's rows say
        if self.status(call) == "measured":
            return float(self.prices.seconds(call))
        if call.op == "kernel" and self.prices.seconds(call) is None:
            rival = self.prices.fastest(self._rivals.get(call.attrs["kernel"], ()), call)
            if rival is not None:  # modelled all the same, but never cheaper than what was measured here
                return max(self.analytic(call), rival * UNMEASURED_PENALTY)
        return self.analytic(call)


class LivePricedCost(PricedCost):
    """`PricedCost` over shipped rows and a measurement cache that fills while it is used (the optimization
    loop's: kernels and the plain ops beside them are measured as proposals arrive). Each extraction calls
    `prepare` with the e-graph's kernels, which reads the cache again, so every choice is priced from the
    measurements made so far, on both sides or on neither."""

    def __init__(self, device: Device, cache, shipped: Prices | None = None):
        self.cache = cache
        self.shipped = shipped if shipped is not None else Prices.shipped(device.name)
        super().__init__(device, self.shipped.with_cache(cache))

    def prepare(self, kernels: Mapping[str, KernelImpl]) -> None:
        self.prices = self.shipped.with_cache(self.cache)
        self._measured_efficiency = self.prices.efficiencies()
        super().prepare(kernels)


def measure_call(call: OpCall, device: Device, *, cache=None, repeat: int | None = None, fresh: list | None = None):
    """(median, spread, floor, method) of one call timed on `device` (this machine's), by the same timer
    as every price: a kernel by `measure_kernel`; a plain op by the library's torch kernel of the op where
    there is one (as `cost.measured_as` keys it), else by the op's torch reference. With `cache`, read from
    and stored under the call's `price_key` (a suspect time, below its floor, is never stored). `fresh`
    receives (key, timing, floor) of what was timed now (not a cache hit, not suspect): a worker's answer
    carries them to a run whose cache is elsewhere."""
    from ..ir.registry import get_op
    from ..kernels import get
    from ..measure.inputs import random_inputs
    from ..measure.kernel_bench import measure_kernel
    from ..measure.local import tensor_device, time_on
    from ..measure.roofline import op_floor

    options = {} if repeat is None else {"repeat": repeat}
    if call.op == "kernel":
        impl = KernelImpl.from_node(call.attrs)
        m = measure_kernel(get(impl.kernel), call.inputs, impl.attrs, impl.params, device=device, cache=cache,
                           **options)
        _keep_fresh(fresh, m)
        return m.median, m.spread, m.floor, "suspect" if m.suspect else "kernel"
    measured = measured_as(call)
    if measured is not None:
        m = measure_kernel(get(measured[0]), call.inputs, call.attrs, measured[2], device=device, cache=cache,
                           **options)
        _keep_fresh(fresh, m)
        return m.median, m.spread, m.floor, "suspect" if m.suspect else "torch kernel"
    key = price_key(device.name, call)
    if cache is not None and (hit := cache.get(key)) is not None:
        return hit.median, hit.spread, hit.floor, "torch reference (cache)"
    op = get_op(call.op)
    bounds = op.index_bounds(list(call.inputs), call.attrs) if op.index_bounds else {}
    inputs = random_inputs(call.inputs, device=tensor_device(device), index_bounds=bounds)
    timing = time_on(device, lambda *xs: op.reference(*xs, **call.attrs), inputs, **options)
    floor = max(op_floor(call.op, call.inputs, call.outputs, call.attrs, device))
    if cache is not None:
        cache.put(key, timing, floor=floor)
    if fresh is not None:
        fresh.append((key, timing, floor))
    return timing.median, timing.spread, floor, "torch reference"


def _keep_fresh(fresh: list | None, m) -> None:
    if fresh is not None and m.timing is not None and not m.suspect:
        fresh.append((m.key, m.timing, m.floor))


# An unmeasured kernel is priced as the fastest measured kernel of its pattern at the same call, this much
# slower: on the roofline alone (efficiency 1) it would always beat a measured rival (a CuTe GEMV never
# timed displaced the Triton GEMV measured at that shape), so it must be measured to win.
UNMEASURED_PENALTY = 1.05
# The price of a kernel call that raised when timed (`measure_unpriced`): a second, more than any graph takes,
# and finite, so that extraction's sums stay numbers
UNRUNNABLE_SECONDS = 1.0


def rival_kernels(kernels: Mapping[str, KernelImpl]) -> dict[str, set[str]]:
    """kernel id -> the other kernel ids of the same pattern (rivals for the same regions)."""
    from ..kernels import all_kernels

    specs = all_kernels()
    by_pattern: dict[str, set[str]] = {}
    for kernel_id in {impl.kernel for impl in kernels.values()}:
        if kernel_id in specs:
            by_pattern.setdefault(specs[kernel_id].pattern.name, set()).add(kernel_id)
    for name, ids in list(by_pattern.items()):  # rivals outside the e-graph's set still price a newcomer
        ids.update(k for k, spec in specs.items() if spec.pattern.name == name)
    return {k: ids - {k} for ids in by_pattern.values() for k in ids}


def unmeasured_efficiencies(measured: Mapping[str, float], rivals: Mapping[str, set[str]]) -> dict[str, float]:
    """`measured` (kernel id or op name -> efficiency), plus, for a kernel with none of its own, the lowest
    measured efficiency of its rivals over `UNMEASURED_PENALTY`: where no rival was measured at a call
    either, the model still does not let a never-timed kernel beat a timed one on the roofline."""
    out = dict(measured)
    for kernel_id, ids in rivals.items():
        known = [measured[k] for k in ids if k in measured]
        if kernel_id not in out and known:
            out[kernel_id] = min(known) / UNMEASURED_PENALTY
    return out


def unmeasured_overheads(measured: Mapping[str, float], rivals: Mapping[str, set[str]]) -> dict[str, float]:
    """`measured` (kernel id or op name -> a small call's fixed seconds), plus, for a kernel with none of its
    own, the least of its rivals' times `UNMEASURED_PENALTY`: never cheaper than a measured rival."""
    out = dict(measured)
    for kernel_id, ids in rivals.items():
        known = [measured[k] for k in ids if k in measured]
        if kernel_id not in out and known:
            out[kernel_id] = min(known) * UNMEASURED_PENALTY
    return out


def priced_calls(graph: Graph, device: Device, kernels=None) -> list[OpCall]:
    """Every call a search of `graph` for `device` asks prices of: each e-node after the rule sets and the
    library (kernels with their resolved params), except what is free whatever the prices (inputs,
    projections, weight-only terms, views), each once by its `price_key`. What the shipped rows must hold."""
    from .library import apply_library
    from .rules import default_rulesets
    from .space import SearchSpace

    space = SearchSpace(graph, target=device.target())
    space.saturate(default_rulesets())
    apply_library(space, kernels)
    return space_calls(space, graph, device)


def space_calls(space, graph: Graph, device: Device) -> list[OpCall]:
    """`priced_calls` of a `SearchSpace` already saturated and holding its kernels."""
    from .cost import op_call, weight_only_classes
    from .snapshot import ABSENT, INPUT, OUT

    snapshot = space.snapshot()
    folded = weight_only_classes(snapshot, {v.name for v in graph.weight_inputs})
    analytic, calls = AnalyticCost(device), {}
    for node in snapshot.nodes.values():
        if node.op in (INPUT, ABSENT, OUT) or all(c in folded for c in snapshot.operands(node)):
            continue
        call = op_call(snapshot, node, space.encoding.kernels)
        if call.op == "kernel" or analytic(call) > 0:
            calls.setdefault(price_key(device.name, call), call)
    return list(calls.values())


def measure_unpriced(calls: list[OpCall], device: Device, prices: Prices, cache) -> tuple[Prices, list[str]]:
    """Time, on this machine (which must be `device`), each of `calls` that `prices` holds no row for, into
    `cache`; returns the prices with the cache's rows, and what could not be timed, each with why.

    A choice the model prices can be far off where no row of the kernel's regime exists (2026-12-04, H200:
    the CuTe GEMM, never timed at a prompt's shapes, was priced from the GEMVs' decode rows and chosen for
    Llama-3.2-1B's prefill at 57 us a down projection, 4x cuBLAS's time): measured, both sides of every
    choice are. A kernel call that raises is priced at `UNRUNNABLE_SECONDS` (never chosen), not modelled."""
    from ..measure.local import local_device

    here = local_device()
    if here.name != device.name:
        raise ValueError(f"measuring prices for {device.name} needs that device, and this machine's is "
                         f"{here.name}: search without `measure` (the shipped rows and the model price it)")
    failed, unrunnable = [], {}
    for call in calls:
        if prices.seconds(call) is not None:
            continue
        try:
            _, _, _, method = measure_call(call, device, cache=cache)
        except Exception as e:  # one kernel that cannot run must not stop the others' timing
            failed.append(f"{call.name}({', '.join(map(str, call.inputs))}): {type(e).__name__}: {e}")
            if call.op == "kernel":
                unrunnable[_measured(price_key(device.name, call))] = (UNRUNNABLE_SECONDS, None)
            continue
        if method == "suspect":
            failed.append(f"{call.name}({', '.join(map(str, call.inputs))}): faster than its floor (not kept)")
    measured = prices.with_cache(cache)
    if unrunnable:
        measured = Prices(device.name, {**measured.rows, **unrunnable},
                          f"{measured.source} ({len(unrunnable)} kernel calls that raised, never chosen)")
    return measured, failed

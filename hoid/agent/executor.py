"""The executor: where candidates are checked and things are measured, behind one small interface, so
that checks and measurements can later fan out across GPUs and machines (one local worker today).

Every figure it returns is `Evidence` labelled **measured** (timed on the device the run optimizes for,
now or earlier through `hoid.measure`'s cache) or **modelled** (priced by the search's cost models:
the analytic roofline scaled by measured kernel efficiencies, and measured prices where the cache holds
them). Which one depends on where the run is:

- on the target device (its GPU, or `device="cpu"` on the CPU): kernels are timed at their real shapes
  over their param sweep (`hoid.measure.measure_kernel`, cached); the whole graph through
  `hoid.runtime.compile` with CUDA-graph replay on a GPU (per-node timing summed where the runtime is
  absent), and per node with the CPU's wall clock on the CPU, where the interpreter would run kernel
  bodies rather than kernels;
- elsewhere (a plan for the H200 or the B200 on a machine without one): a kernel is measured only where
  the cache holds the target's own measurement of it (the shipped H200 measurements merged in), else
  modelled; the whole graph is always modelled.

Checks: a trusted kernel (library or registered Python) is checked at the region's real shapes against
the region (`hoid.verify.check`), except on the CPU where the region is too large for Triton's
interpreter, where `hoid.verify.check_kernel` checks it over its declared shape space; kernel source
(`KernelSource.to_spec`) is untrusted and always checked in a separate process (`check_kernel`).

The loop asks for a candidate's check and kernel measurement together (`submit`, an `Evaluation` to
wait for), and for its finalists' whole-graph times together (`measure_graphs`): `LocalExecutor` does
each at once, in this process; `hoid.agent.pool.WorkerPool` (a worker process per local GPU) and
`hoid.agent.ray_executor.RayPool` (a Ray cluster) fan them out, `parallel` at a time.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from ..ir.ops.kernel import KernelImpl
from ..kernels.launch import bind_spec, resolve_params
from ..kernels.loader import KernelSource
from ..measure.cache import MeasureCache, MeasureKey
from ..measure.devices import Device
from ..measure.local import has_cuda, local_device, tensor_device
from .journal import Journal, graph_hash

# where the project keeps the H200's measurements of its library kernels (a source checkout)
SHIPPED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "kernels_measure.sqlite"
CPU_CHECK_ELEMENTS = 1 << 21  # above this many input elements a region is checked over the kernel's shape space


@dataclass(frozen=True)
class Evidence:
    """seconds; evidence: "measured" or "modelled"; method: how, in words; samples: the timings behind
    a measured figure (what the noise model needs); fresh: timed now (False: read back)."""

    seconds: float
    evidence: str
    method: str
    samples: tuple[float, ...] = ()
    fresh: bool = True


@dataclass(frozen=True)
class Evaluation:
    """A candidate's check and kernel measurement. verdict: the check's (None: it could not be checked);
    params, kernel: the chosen params and the kernel's time (None: failed the check, or could not be
    measured); error: why it could not be checked or measured, in words; retried: why its first worker
    was lost, where it was evaluated a second time."""

    verdict: object | None = None
    params: dict | None = None
    kernel: Evidence | None = None
    error: str = ""
    retried: str = ""
    check_s: float | None = None  # wall seconds the check and the measurement took, where it ran here
    measure_s: float | None = None


class WorkerLost(RuntimeError):
    """A task whose worker died or hung, twice (on two workers): the candidate is recorded as failed."""


class NoWorkers(RuntimeError):
    """Every worker is lost: the run stops (resumable) with this as its reason."""


class Executor(Protocol):
    """What the loop asks of a worker (see the module doc). `submit` and `measure_graphs` are optional:
    the loop calls `check`, `measure_kernel` and `measure_graph` one by one where they are missing.
    `time_interleaved(graphs, rounds=)` is optional too: without it a close call stays refused, and says so
    (`finalists.faster_in_turn`)."""

    device: Device

    def check(self, spec, region, params: dict): ...

    def measure_kernel(self, spec, region, sweep) -> tuple[dict, Evidence]: ...

    def measure_graph(self, graph, *, modelled: float | None = None) -> Evidence: ...

    def cost_model(self): ...


def check_candidate(executor, spec, region, params: dict) -> Evaluation:
    """The check half of `evaluate`: the verdict, or why there is none, and its seconds (`check_s`)."""
    start = time.perf_counter()
    try:
        verdict = executor.check(spec, region, params)
    except Exception as e:  # noqa: BLE001  a candidate that cannot even be checked is rejected, not fatal
        return Evaluation(error=f"could not be checked: {type(e).__name__}: {e}", check_s=time.perf_counter() - start)
    return Evaluation(verdict, check_s=time.perf_counter() - start)


def evaluate(executor, spec, region, params: dict, sweep, checked=None) -> Evaluation:
    """Check, then (passed) measure, in this process: what a candidate's evaluation is, wherever it runs.
    `checked`: the passing verdict of an earlier evaluation of the same kernel at the same region (a sweep's
    tail measured after its first params, `together.py`; a check run ahead, `evaluations.py`): not checked
    again."""
    if checked is not None:
        check = Evaluation(checked, check_s=0.0)
    else:
        check = check_candidate(executor, spec, region, params)
    if check.error or not check.verdict.ok:
        return check
    start = time.perf_counter()
    try:
        params, kernel = executor.measure_kernel(spec, region, sweep)
    except Exception as e:  # noqa: BLE001
        return replace(check, error=f"could not be measured: {type(e).__name__}: {e}")
    return replace(check, params=params, kernel=kernel, measure_s=time.perf_counter() - start)


def done(value) -> Future:
    """A future that already holds `value`."""
    future = Future()
    future.set_result(value)
    return future


class LocalExecutor:
    """This process and this machine. `device`: the target (a `Device`); `cache`: the measurement cache
    (default `HOID_CACHE`), into which the shipped measurements are merged once; `trials`: numerical
    check trials (None: `hoid.verify`'s default); `journal`, `run`: where measurements are recorded."""

    parallel = 1  # candidates evaluated at once: the loop reads proposals ahead only where this is above 1

    def __init__(self, device: Device, *, cache: MeasureCache | None = None, trials: int | None = None,
                 journal: Journal | None = None, run: int | None = None, shipped: bool = True):
        if not has_cuda():
            # Triton picks interpreter or compiler when first imported: on a CPU only the interpreter runs
            os.environ.setdefault("TRITON_INTERPRET", "1")
        self.device, self.trials, self.journal, self.run = device, trials, journal, run
        self.local = local_device()
        self.cache = cache if cache is not None else MeasureCache()
        if shipped and SHIPPED.is_file() and self.cache.path.resolve() != SHIPPED:
            self.cache.merge(SHIPPED)
        self.on_device = self.device.name == self.local.name
        self.profiles_here = self.on_device  # regions are profiled in this process: measured only on the target
        self._shipped = None  # the shipped prices of the target, read when the plain side is first timed

    def submit(self, spec, region, params: dict, sweep, checked=None) -> Future:
        """The candidate's `Evaluation` (here: computed now); `checked` as `evaluate`'s."""
        return done(evaluate(self, spec, region, params, sweep, checked))

    def measure_graphs(self, graphs) -> list[Evidence]:
        """`measure_graph` of each (graph, modelled price) pair (a pool times them at once)."""
        return [self.measure_graph(g, modelled=modelled) for g, modelled in graphs]

    def close(self) -> None:
        """Nothing to release here (a pool stops its workers)."""

    # --- checks ----------------------------------------------------------------------------------
    def check(self, spec, region, params: dict):
        from ..verify import check, check_kernel
        from ..verify.check import region_inputs

        untrusted = from_source(spec)
        elements = sum(math.prod(t.shape) for t in region.types)
        if untrusted or (self.local.arch == "cpu" and elements > CPU_CHECK_ELEMENTS):
            if spec.examples is None:
                from ..verify import Verdict

                return Verdict(False, f"kernel {spec.id} declares no examples(rng) and its region is too large to "
                               "check here", kind="setup")
            return check_kernel(spec, examples=2, trials=self.trials, isolate=True if untrusted else None, seed=0)
        bound = bind_spec(spec, region.types, region.attrs, params)
        return check(_destination_passing(bound), region.body, region_inputs(region.body), trials=self.trials,
                     destination_passing=True, aliases=spec.aliases, deterministic=spec.deterministic, seed=0)

    # --- kernel measurements ---------------------------------------------------------------------

    def measure_kernel(self, spec, region, sweep) -> tuple[dict, Evidence]:
        """The fastest params of the sweep and the kernel's time with them."""
        register_checked(spec)  # only a kernel that passed its check is measured
        candidates = self.candidates(spec, region, sweep)
        if self.on_device:
            chosen = self.choose(spec, candidates, [self.time_kernel(spec, region, p) for p in candidates])
            self.time_plain_side(region)
            return chosen
        return self.modelled_kernel(spec, region, candidates)

    def time_plain_side(self, region, fresh: list | None = None) -> None:
        """The region's plain ops, each timed here into the cache where it holds none and the shipped rows
        have none: the other side of the kernel's choice, so the extraction prices both from measurements.
        `fresh` receives what was timed now (`measure_call`'s): a worker sends it back to the run."""
        from ..search.cost import AnalyticCost
        from ..search.prices import Prices, body_calls, measure_call

        if self._shipped is None:  # the shipped file, parsed once per run
            self._shipped = Prices.shipped(self.device.name)
        analytic = AnalyticCost(self.device)
        for call in body_calls(region.body):
            if analytic(call) > 0 and self._shipped.seconds(call) is None:  # a view launches nothing
                measure_call(call, self.local, cache=self.cache, fresh=fresh)

    def candidates(self, spec, region, sweep) -> list[dict]:
        """The sweep's params resolved for the target ("auto"s filled in), each once."""
        target = self.device.target()
        candidates = [resolve_params(spec, region.types, region.attrs, p, target) for p in (sweep or [{}])]
        return list({repr(sorted(c.items())): c for c in candidates}.values())  # resolved "auto"s may meet

    def time_kernel(self, spec, region, params):
        """One param set timed on this machine (`hoid.measure.measure_kernel`, through the cache)."""
        from ..measure.kernel_bench import measure_kernel

        return measure_kernel(spec, region.types, region.attrs, params, device=self.local, cache=self.cache)

    def choose(self, spec, candidates, measurements, where: str = "") -> tuple[dict, Evidence]:
        """The fastest of `measurements` (one per candidate, suspect ones left out), each recorded."""
        best = None
        for params, m in zip(candidates, measurements, strict=True):
            method = (m.timing.method if m.timing else "cache") + where
            self._record("kernel", _kernel_key(m.key), m.median, m.timing.samples if m.timing else (),
                         "measured", method, fresh=not m.cached)
            if m.suspect:
                continue
            if best is None or m.median < best[1].median:
                best = (params, m)
        if best is None:
            raise RuntimeError(f"kernel {spec.id}: every candidate's time is below the roofline floor (suspect)")
        params, m = best
        method = f"timed at its real shapes, fastest of {len(candidates)} param sets{where}"
        return params, Evidence(m.median, "measured", method, m.timing.samples if m.timing else (), not m.cached)

    def modelled_kernel(self, spec, region, candidates) -> tuple[dict, Evidence]:
        """Off the target: the target's own measurement where the cache holds one, else the model."""
        found = []
        for params in candidates:
            key = MeasureKey.of(self.device.name, spec.id, spec.version, params, region.types, region.attrs)
            entry = self.cache.get(key)
            if entry is not None:
                found.append((entry.median, params, key))
        if found:
            seconds, params, key = min(found, key=lambda f: f[0])
            self._record("kernel", _kernel_key(key), seconds, (), "measured", "cache", fresh=False)
            return params, Evidence(seconds, "measured", f"measured on {self.device.name} earlier (cache)", (), False)
        params = candidates[0]
        seconds = self._price_kernel(spec, region, params)
        return params, Evidence(seconds, "modelled", f"roofline on {self.device.name}, measured efficiency where known")

    def _price_kernel(self, spec, region, params) -> float:
        from ..search.cost import AnalyticCost, OpCall

        impl = KernelImpl(spec.id, spec.version, params, region.body, dict(region.attrs))
        call = OpCall("kernel", tuple(region.types), tuple(spec.output_types(list(region.types), region.attrs)),
                      impl.node_attrs())
        return AnalyticCost(self.device, efficiency=self.cache)(call)

    # --- whole graphs ----------------------------------------------------------------------------
    def measure_graph(self, graph, *, modelled: float | None = None, repeats: int = 3) -> Evidence:
        """The whole graph's time on the target; `modelled`: its price under `cost_model()` if known (what
        is returned off the device, computed here when not given)."""
        if not self.on_device:
            return self.modelled_graph(graph, modelled)
        return self.known_graph(graph) or self.timed_graph(graph, *self.time_graph(graph, repeats))

    def modelled_graph(self, graph, modelled: float | None) -> Evidence:
        seconds = modelled if modelled is not None else self._price_graph(graph)
        return Evidence(seconds, "modelled", f"cost model of the search on {self.device.name}")

    def graph_key(self, graph) -> str:
        return f"{self.device.name}|{graph_hash(graph)}"

    def known_graph(self, graph) -> Evidence | None:
        """A measurement of `graph` on the target the journal already holds (resume repeats none)."""
        key = self.graph_key(graph)
        if self.journal is None or (found := self.journal.graph_measurement(key)) is None:
            return None
        seconds, samples, evidence, method = found
        self._record("graph", key, seconds, samples, evidence, method, fresh=False)
        return Evidence(seconds, evidence, method, tuple(samples), fresh=False)

    def timed_graph(self, graph, samples, method: str, kind: str = "graph") -> Evidence:
        """`samples` of `graph` just timed on the target, recorded as `kind`."""
        seconds = sorted(samples)[len(samples) // 2]
        self._record(kind, self.graph_key(graph), seconds, samples, "measured", method, fresh=True)
        return Evidence(seconds, "measured", method, tuple(samples))

    def time_interleaved(self, graphs, *, rounds: int) -> list[Evidence]:
        """`graphs` timed again on the target in turn, `rounds` timings each (A B A B ...): what a close call
        between two graphs is decided on (`noise.compare_rounds`). Recorded as their own kind, "graph in
        turn": never read back for a later measurement (`known_graph` keeps the first), and no repeat of a
        finished one (a resumed run times a close call afresh, as it must: drift is what it guards against)."""
        if not self.on_device:
            raise RuntimeError(f"timing graphs in turn needs the target, {self.device.name}: this is "
                               f"{self.local.name} (its prices are modelled: no close call to decide)")
        samples, method = self.time_graphs(graphs, rounds)
        return [self.timed_graph(g, s, method, kind="graph in turn") for g, s in zip(graphs, samples, strict=True)]

    def time_graph(self, graph, repeats: int) -> tuple[list[float], str]:
        samples, method = self.time_graphs([graph], repeats)
        return samples[0], method

    def time_graphs(self, graphs, rounds: int) -> tuple[list[list[float]], str]:
        """Each graph's `rounds` timings, taken in turn (each graph compiled once, then one timing of each a
        round), and how they were taken."""
        timers = [self._graph_timer(g) for g in graphs]
        samples: list[list[float]] = [[] for _ in graphs]
        for _ in range(rounds):
            for (once, _), taken in zip(timers, samples, strict=True):
                taken.append(once())
        method = timers[0][1] + (f", {len(graphs)} graphs timed in turn" if len(graphs) > 1 else "")
        return samples, method

    def _graph_timer(self, graph):
        """(a function that times `graph` once, in seconds; how)."""
        from ..measure.inputs import random_inputs
        from ..measure.profile import profile_graph
        from ..verify.region import index_bounds

        where = tensor_device(self.local)
        inputs = random_inputs([v.type for v in graph.runtime_inputs], device=where,
                               index_bounds=index_bounds(graph))
        if self.local.arch != "cpu":  # the runtime owns compiling; this times its CUDA-graph replays
            from ..measure.cuda import time_cuda
            from ..runtime import compile as compile_graph

            fn = compile_graph(graph, device="cuda")
            # graph=False: each call already replays the compiled graph's own CUDA graph (one cannot be
            # captured inside another)
            return (lambda: time_cuda(fn, inputs, rotate=False, graph=False).median), "hoid.compile, CUDA-graph replay"
        # each node timed alone, kernels launched (the interpreter would run their bodies), summed
        return ((lambda: profile_graph(graph, mode="measured", device=self.local, inputs=inputs).total),
                f"per-node {'wall clock' if self.local.arch == 'cpu' else 'CUDA timing'}, summed")

    def _price_graph(self, graph) -> float:
        from ..search.space import SearchSpace

        return SearchSpace(graph, target=self.device.target()).extract(self.cost_model()).cost

    def cost_model(self):
        """Prices for extraction. On the target, as `hoid.search.rewrite` prices: a kernel and the plain ops
        it replaces from measurements where both sides are measured there (the shipped rows, and the cache as
        it fills during the run: `time_plain_side`), else both from the roofline scaled by measured
        efficiencies. A measured kernel against modelled ops compares a real time with an ideal one: on the
        H200 a 1-minute run passed over the down projection's linear_add (9.6 us measured) for a matmul the
        model put near its 5.9 us floor (11 us measured). Off the target every kernel is modelled
        (`modelled_kernel`), and so is every op: the cache's rows of the target where it has them, else the
        roofline scaled by the kernels' measured efficiencies."""
        from ..search.cost import AnalyticCost, MeasuredCost
        from ..search.prices import LivePricedCost

        if self.on_device:
            return LivePricedCost(self.device, self.cache)
        return MeasuredCost.from_cache(self.cache, self.device.name,
                                       fallback=AnalyticCost(self.device, efficiency=self.cache))

    def _record(self, kind, key, seconds, samples, evidence, method, *, fresh: bool) -> None:
        if self.journal is not None and self.run is not None:
            self.journal.record_measurement(self.run, kind, key, seconds, samples, evidence, method, fresh=fresh)


def _kernel_key(key: MeasureKey) -> str:
    return "|".join(key.row())


def from_source(spec) -> bool:
    """Is `spec` built from kernel source (an agent's, a directory's or a generated kernel)? Such a kernel is
    untrusted: checked in a child process of its own (`check_kernel(isolate=True)`)."""
    return isinstance(getattr(spec.launch, "source", None), KernelSource)


def register_checked(spec) -> None:
    """Kernel source that passed its check is registered: from here on its nodes may be bound (the kernel
    measurement, the whole-graph timing and the runtime launch kernel nodes by id, through the registry)."""
    from ..kernels.registry import register

    if from_source(spec):
        register(spec, replace=True)


def _destination_passing(bound):
    """The bound kernel as `hoid.verify` calls a destination-passing candidate: inputs, then outputs."""
    n = len(bound.inputs)

    def launch(*tensors):
        bound.launch(tensors[:n], tensors[n:])

    return launch


def start_executor(executor, device: Device, *, cache, trials, journal: Journal, run: int, progress):
    """The executor a run uses, and whether the run owns it (closes it when done): `LocalExecutor` for
    None; a pool (an object with `start`) started for this run's device, journal and progress; any other
    executor as it is."""
    if executor is None:
        return LocalExecutor(device, cache=cache, trials=trials, journal=journal, run=run), True
    if hasattr(executor, "start"):
        executor.start(device, cache=cache, trials=trials, journal=journal, run=run, progress=progress)
        return executor, True
    return executor, False

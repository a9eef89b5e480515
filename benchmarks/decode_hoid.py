"""hoid's rows of `benchmarks/decode.py`: one optimization per shape, then three ways to run its graph.

`prepare` imports the decode step (`decode_step_graph`), runs `hoid.optimize` with the offline proposers
twice: cold (a new measurement cache, into which hoid.optimize merges the H200 measurements a source
checkout ships, `benchmarks/results/kernels_measure.sqlite`, as any user's first run there; an empty journal)
and warm (the cold run's measurement cache, an empty
journal and an empty store of accepted kernels, so nothing is replayed or reused but measurements; left
out with `Context.warm` False, so that a time-limited GPU call reaches the rows); the rows run the faster
run's graph (`rows_run` in the JSON says which), and rewrites the prompt's
graph (`prefill_graph`) with the rules and the library kernels that run here, when a row first needs it
(the backend row does not: a slice of it alone saves the import). Each phase and each of hoid.optimize's
events is a `decode_loop.progress` line. Rows:

- `hoid-compile`: `hoid.compile(opt.graph, sample=Greedy())` (CUDA graph on a GPU, argmax inside the step),
  the prefill compiled over the same cache; the in-context profile (`hoid.runtime.profile`) after timing;
- `hoid-export`: `hoid.export` packages of both graphs, imported as plain PyTorch, the step under
  `torch.compile` reduce-overhead (the caches as module buffers, so CUDA graphs are kept), the prefill too;
  the kernels opaque to it (`trace_triton=False`): traced, its warm-up passed 164 s on the H200 (12-03 night,
  about 450 Triton call sites, each lowered to TTIR by torch's mutation analysis) and the row went unmeasured;
- `hoid-backend`: the plain fast model under `torch.compile(backend=hoid.backend.backend)`, reading the
  kernels that run accepted (`HOID_KERNELS` pointed at its store).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from decode_fast import FastModel
from decode_loop import Decoder, OptimizeLog, Shape, greedy, last_logits, logits_and_token, paired, phase, progress


@dataclass
class Context:
    device: torch.device
    budget: object = None  # a hoid.Budget for each optimize run (None: until the proposers run dry)
    profile: bool = True
    agent: list | None = None  # hoid.optimize's proposers (None: its default)
    warm: bool = True  # run the warm optimize too (its time is issue 21's 5-minute must)


@dataclass
class Plan:
    """What the hoid rows of one shape share: the optimized step, the rewritten prefill (`prefill_graph()`),
    and where the accepted kernels of the run whose graph the rows use were stored."""

    graph: object
    prefill: object  # None: made by `prefill_graph()` from lm, shape and target when a row first needs it
    optimize: dict
    store: Path
    folder: tempfile.TemporaryDirectory
    key: str
    lm: object = None
    shape: Shape | None = None
    target: object = None  # the hoid Device the step was optimized for
    prefill_error: Exception | None = None  # raised again for every later row: one import that fails is enough

    def prefill_graph(self):
        """The prompt's graph rewritten with the rules and the library kernels that run here (imported and
        rewritten on the first call: minutes for a full model); its time and kernels go into `optimize`."""
        if self.prefill_error is not None:
            raise RuntimeError(f"the prefill's import or rewrite failed earlier: {self.prefill_error}")
        if self.prefill is None:
            import hoid
            import hoid.measure
            from hoid.kernels import KernelSet
            from hoid.models import prefill_graph

            begin = time.perf_counter()
            shape = self.shape
            try:
                with phase("hoid: import and rewrite the prefill"):
                    graph = prefill_graph(self.lm, shape.prompt, shape.cache_len, batch=shape.batch)
                    # on the GPU every choice is timed, into the run's cache (archived with the optimizes');
                    # the tests' tiny CPU runs price it modelled, as ever
                    measured = self.target.arch != "cpu"
                    with (hoid.measure.MeasureCache(Path(self.folder.name) / "measure.sqlite") if measured
                          else contextlib.nullcontext()) as cache:
                        result = hoid.search.search(graph, device=self.target,
                                                    kernels=KernelSet.default().runnable_here(), measure=cache)
                    self.prefill = result.graph
            except Exception as e:
                self.prefill_error = e
                raise
            self.optimize["prefill_rewrite_s"] = time.perf_counter() - begin
            self.optimize["prefill_kernels"] = sorted({n.attrs["kernel"] for n in self.prefill.nodes
                                                       if n.op == "kernel"})
            self.optimize["prefill_search"] = str(result.report)
        return self.prefill

    def archive(self, path: Path) -> Path:
        """The two runs' journals, stores and measurement cache as one tar.gz at `path` (the GPU machine keeps
        nothing: its measurements come back to be shipped, `benchmarks/ship_measurements.py`)."""
        return archive_databases(Path(self.folder.name), path)

    def save_archive(self, path: Path) -> None:
        """`archive`, saying where it went; a failure to write is said and not raised: it costs the next run's
        time (its measurements), not this run's rows."""
        try:
            print(f"wrote {self.archive(path)} (journals and measurements: benchmarks/ship_measurements.py)",
                  flush=True)
        except OSError as e:
            print(f"could not write {path}: {type(e).__name__}: {e}; the rows run without it", flush=True)

    def close(self) -> None:
        self.folder.cleanup()


def archive_databases(folder: Path, path: Path) -> Path:
    """Every SQLite database in `folder` as one tar.gz at `path`, each read through SQLite's backup: a database
    still open in write-ahead mode holds rows in its -wal file that a copy of the file alone lacks (the
    archives of 12-03's H200 runs brought back empty journals)."""
    import sqlite3
    import tarfile
    from contextlib import closing

    with tarfile.open(path, "w:gz") as tar, tempfile.TemporaryDirectory() as snapshots:
        for file in sorted(folder.glob("*.sqlite")):
            snapshot = Path(snapshots) / file.name
            with closing(sqlite3.connect(file)) as source, closing(sqlite3.connect(snapshot)) as copy:
                source.backup(copy)
            tar.add(snapshot, arcname=file.name)
    return path


def _optimize(graph, device, folder: Path, name: str, cache, budget, agent=None):
    import hoid
    from hoid.agent.agents import DEFAULT_AGENTS
    from hoid.kernels import AcceptedStore

    begin = time.perf_counter()
    log = OptimizeLog(name)
    with phase(f"optimize {name} (budget: {budget or 'none'})"), \
            AcceptedStore(folder / f"{name}_kernels.sqlite") as store:
        opt = hoid.optimize(graph, agent=agent or DEFAULT_AGENTS, device=device, cache=cache, store=store,
                            journal=folder / f"{name}_journal.sqlite", budget=budget, progress=log)
    log.summary(opt.report)
    seconds = time.perf_counter() - begin
    report = opt.report
    return opt, {"seconds": seconds, "stop_reason": str(report.stop_reason), "measured": report.measured,
                 "speedup": opt.speedup, "modelled_gain": opt.modelled_gain, "baseline_s": opt.baseline_s,
                 "best_s": opt.best_s, "attempts": len(report.attempts),
                 "kept": sum(1 for a in report.attempts if a.get("kept"))}


def prepare(lm, shape: Shape, ctx: Context) -> Plan:
    import hoid.measure
    from hoid.agent.agents import DEFAULT_AGENTS
    from hoid.agent.loop import resolve_device
    from hoid.ir.text import dumps
    from hoid.models import decode_step_graph

    folder = tempfile.TemporaryDirectory(prefix="hoid_decode_")
    root = Path(folder.name)
    target = resolve_device(None if ctx.device.type == "cuda" else "cpu")
    begin = time.perf_counter()
    with phase("hoid: import the decode step"):
        step = decode_step_graph(lm, shape.cache_len, batch=shape.batch)
    import_s = time.perf_counter() - begin
    warm_opt, warm = None, None
    with hoid.measure.MeasureCache(root / "measure.sqlite") as cache:
        opt, cold = _optimize(step, target, root, "cold", cache, ctx.budget, ctx.agent)
        if ctx.warm:
            warm_opt, warm = _optimize(step, target, root, "warm", cache, ctx.budget, ctx.agent)
    # the rows run the faster of the two runs' graphs (as a user who optimized twice would): within one
    # time budget the warm run, its measurements cached, reaches kernels the cold run had no time for
    chosen, name = (warm_opt, "warm") if warm_opt is not None and warm_opt.best_s < opt.best_s else (opt, "cold")
    kernels = sorted({n.attrs["kernel"] for n in chosen.graph.nodes if n.op == "kernel"})
    info = {"device": target.name, "agents": list(ctx.agent or DEFAULT_AGENTS), "import_s": import_s, "cold": cold,
            "warm": warm, "warm_skipped": not ctx.warm,
            "same_graph": None if warm_opt is None else dumps(opt.graph) == dumps(warm_opt.graph), "kernels": kernels,
            "rows_run": name, "report": str(chosen.report), "prefill_rewrite_s": None, "prefill_kernels": None}
    return Plan(chosen.graph, None, info, root / f"{name}_kernels.sqlite", folder, shape.key.replace("-", "_"), lm,
                shape, target)


def _profile(compiled) -> dict:
    from hoid.runtime.profile import example_inputs, profile

    prof = profile(compiled, example_inputs(compiled))
    print(prof.table(limit=25))
    by: dict[str, list] = {}  # kernel (or op) -> [nodes, seconds, floor seconds]: where a long graph's time goes
    for r in prof.rows:
        acc = by.setdefault(r.kernel or r.op, [0, 0.0, 0.0])
        acc[0], acc[1], acc[2] = acc[0] + 1, acc[1] + r.seconds, acc[2] + (r.floor or 0.0)
    return {"step_s": prof.step, "kernels_s": prof.kernels,
            "gap_s": prof.step - prof.kernels if prof.kernels is not None and prof.step is not None else None,
            "rows": [dict(node=r.node, op=r.op, kernel=r.kernel, seconds=r.seconds, share=r.share, floor=r.floor)
                     for r in prof.rows[:40]],
            "by_kernel": [dict(name=k, nodes=n, seconds=t, floor=f)
                          for k, (n, t, f) in sorted(by.items(), key=lambda kv: -kv[1][1])]}


def hoid_compile(lm, shape: Shape, ctx: Context, plan: Plan) -> Decoder:
    import hoid
    from hoid.runtime.sampling import Greedy

    device = ctx.device
    with phase("hoid-compile: compile the step"):
        step = hoid.compile(plan.graph, device=device, sample=Greedy())
    with phase("hoid-compile: compile the prefill"):
        prefill = hoid.compile(plan.prefill_graph(), device=device, state=step.state)
    state = step.state
    held = {}

    def logits_step():  # for the gate only: the same graph without the sampler, over the same cache
        if "logits" not in held:
            held["logits"] = hoid.compile(plan.graph, device=device, state=state)
        return held["logits"]

    def describe():
        out = {"captured": step.captured, "cuda_graph_reason": step.cuda_graph_reason,
               "prefill_captured": prefill.captured, "prefill_cuda_graph_reason": prefill.cuda_graph_reason,
               "nodes": len(step.plan.steps), "kernel_nodes": sum(n.op == "kernel" for n in step.plan.steps),
               "fallbacks": step.fallbacks, "state_copies": step.copies + prefill.copies,
               "compiled_memory": vars(step.memory), "optimize": plan.optimize}
        if ctx.profile:
            out["profile"] = _profile(step)
            # the time to first token lags best stock's (issue 21's must): where the prefill's time goes
            out["prefill_profile"] = _profile(prefill)
        return out

    return Decoder(prefill=lambda ids, pos: greedy(prefill(ids, pos, *state)[0]),
                   step=lambda tok, pos: step(tok, pos, *state)[0],
                   prefill_logits=lambda ids, pos: last_logits(prefill(ids, pos, *state)[0]),
                   step_logits=lambda tok, pos: last_logits(logits_step()(tok, pos, *state)[0]),
                   describe=describe)


class Stateful(torch.nn.Module):
    """An exported package's model with the caches as module buffers: torch.compile's CUDA graphs keep a
    module that mutates its own buffers (not one that mutates its arguments). Returns (last logits, next
    token). A state output that is not its input (an op the package runs functionally) is copied back.
    `fixed`: inputs between the position and the state that stay the same for the whole decode (Whisper's
    cross-attention K/V), held as buffers too."""

    def __init__(self, model, state, tokens: int, fixed=()):
        super().__init__()
        self.model = model
        for i, t in enumerate(fixed):
            self.register_buffer(f"f{i}", t, persistent=False)
        for i, t in enumerate(state):
            self.register_buffer(f"s{i}", t, persistent=False)
        self.fixed, self.count = len(fixed), len(state)
        batch = state[0].shape[0]
        probe = torch.zeros((batch, tokens), dtype=torch.long, device=state[0].device)
        outs = model(probe, torch.zeros((1,), dtype=torch.long, device=state[0].device), *fixed, *state)
        self.copy_back = [i for i, (t, new) in enumerate(zip(state, outs[1:])) if new.data_ptr() != t.data_ptr()]

    def forward(self, ids, pos):
        fixed = [getattr(self, f"f{i}") for i in range(self.fixed)]
        state = [getattr(self, f"s{i}") for i in range(self.count)]
        logits, *new = self.model(ids, pos, *fixed, *state)
        for i in self.copy_back:
            state[i].copy_(new[i])
        return logits_and_token(logits)


def forget_package(name: str) -> None:
    """Drop an imported package's modules (`import_package`), so that a later one of the same name loads anew."""
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


def import_package(graph, folder: Path, name: str, device):
    import hoid

    hoid.export(graph, folder / name, trace_triton=False)  # the module doc says why
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name).load(device)
    finally:
        sys.path.remove(str(folder))


def hoid_export(lm, shape: Shape, ctx: Context, plan: Plan) -> Decoder:
    from hoid.models import empty_cache

    device = ctx.device
    root = Path(plan.folder.name)
    begin = time.perf_counter()
    with phase("hoid-export: export and import the step's package"):
        step_model = import_package(plan.graph, root, f"hoid_step_{plan.key}", device)
    with phase("hoid-export: export and import the prefill's package"):
        prefill_model = import_package(plan.prefill_graph(), root, f"hoid_prefill_{plan.key}", device)
    export_s = time.perf_counter() - begin
    state = empty_cache(plan.graph, device)
    step, prefill = Stateful(step_model, state, 1), Stateful(prefill_model, state, shape.prompt)
    info = {"export_s": export_s, "copied_back_states": len(step.copy_back), "optimize": plan.optimize,
            "kernels": "opaque custom_ops (hoid.export trace_triton=False)"}
    restore = _count_mutation_analysis(info)
    if device.type == "cuda":  # both as the stock rows compile theirs (the prefill eager gave a 47 ms TTFT)
        run, first = (torch.compile(m, mode="reduce-overhead", fullgraph=True, dynamic=False) for m in (step, prefill))
        info["compiled"] = "torch.compile reduce-overhead (step and prefill)"
    else:
        run, first = step, prefill
        info["compiled"] = "eager (CPU: reduce-overhead's CUDA graphs need CUDA)"

    def close():
        restore()
        for name in (f"hoid_step_{plan.key}", f"hoid_prefill_{plan.key}"):
            forget_package(name)

    return paired(first, run, info=info, close=close)


def _count_mutation_analysis(info: dict):
    """Count torch.compile's Triton mutation analysis (`generate_ttir`: the kernel lowered to TTIR, once per
    call site, uncached) into `info["mutation_analysis"]`, with a progress line every 50 calls, so that a
    call cut at its limit still says where its warm-up went (12-03 night: the export's passed 164 s; about
    450 call sites in the two packages); returns what undoes it."""
    try:
        import torch._higher_order_ops.triton_kernel_wrap as wrap

        original = wrap.generate_ttir
    except (ImportError, AttributeError) as e:  # another torch: the figure is missing, the row is not
        info["mutation_analysis"] = f"not counted: {type(e).__name__}: {e}"
        return lambda: None
    seen = info["mutation_analysis"] = {"calls": 0, "seconds": 0.0}

    def counted(*args, **kwargs):
        begin = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            seen["calls"] += 1
            seen["seconds"] += time.perf_counter() - begin
            if seen["calls"] % 50 == 0:
                progress(f"hoid-export: torch's Triton mutation analysis: {seen['calls']} calls, "
                         f"{seen['seconds']:.1f} s")

    wrap.generate_ttir = counted
    return lambda: setattr(wrap, "generate_ttir", original)


def hoid_backend(lm, shape: Shape, ctx: Context, plan: Plan) -> Decoder:
    from hoid.backend import backend  # what backend="hoid" resolves to once hoid is pip-installed

    saved = os.environ.get("HOID_KERNELS")
    os.environ["HOID_KERNELS"] = str(plan.store)  # the kernels the rows' optimize run accepted
    model = FastModel(lm, shape.cache_len, shape.batch).eval()

    def forward(ids, pos):
        return logits_and_token(model(ids, pos))

    fn = torch.compile(forward, backend=backend, fullgraph=True, dynamic=False)

    def close():
        if saved is None:
            os.environ.pop("HOID_KERNELS", None)
        else:
            os.environ["HOID_KERNELS"] = saved

    return paired(fn, fn, info={"store": f"the {plan.optimize['rows_run']} optimize run's accepted kernels",
                                "optimize": plan.optimize}, close=close)


ROWS = {
    "hoid-compile": ("hoid.optimize + hoid.compile (CUDA graph), prefill through hoid", hoid_compile),
    "hoid-export": ("hoid.export package as plain PyTorch, torch.compile reduce-overhead", hoid_export),
    "hoid-backend": ("torch.compile(backend='hoid') over the plain fast model", hoid_backend),
}

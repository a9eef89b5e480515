"""The one forward-workload row (one call per sample: an embedding batch, a UNet step, a VAE decode, an
encoder pass), timed and gated the same way by every workload script.

A row's builder returns `(fn, info)` or `(fn, info, close)`: `fn(*inputs)` gives the output tensor. `forward_row`
runs it inside `decode_loop.record_row` (the one row wrapper: peak memory, skips and errors recorded): the first
call warms (compiles, captures) and is the output the gate judges, then `time_call` times it. The gate
(`hoid.testing.gate`): per sample (the output's first dim), the relative L2 against a float32 reference, and
`judge_row` passes a row when its median and p99 are at most 1.5x eager bfloat16's (`add_row` keeps eager's
as the baseline and judges the rest). `summarize` names the best
stock row and each row's speedup over it. `hoid_plan` makes the graph every workload's hoid rows run
(`SharedPlan`: once a run), `export_row` the `hoid-export` row over it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from decode_loop import OptimizeLog, built, peak_bytes, phase, record_row, sync

from hoid.testing.gate import StepErrors, judge

NO_BASELINE = "no eager bf16 baseline"


def time_call(fn: Callable, inputs, device: torch.device, repeat: int) -> dict:
    """Median, min and p90 seconds of `fn(*inputs)` after warm-up (compiles, captures). The GPU timer runs
    without weight rotation or CUDA-graph replay: each row runs as its users run it (its own CUDA graphs or
    none), and every full-size workload reads far more than the L2 per call."""
    from hoid.measure.cpu import time_cpu
    from hoid.measure.cuda import time_cuda

    if device.type == "cuda":
        timing = time_cuda(fn, inputs, rotate=False, graph=False, warmup=3, repeat=repeat)
    else:
        timing = time_cpu(fn, inputs, warmup=2, min_runs=min(repeat, 5))
    return {"latency_s": timing.median, "latency_min_s": timing.min, "latency_p90_s": timing.quantile(0.9),
            "timer": timing.method, "runs": timing.runs}


def hoid_plan(graph, device: torch.device, budget: str | None, *, target: str | None = None,
              search_seconds: float | None = None, journal=None) -> tuple:
    """(graph, info): the plan a workload's hoid rows run. With `budget` ("2m", "90s": `hoid.Budget.parse`),
    `hoid.optimize` with the offline proposers (the library's kernels, then codegen's generated ones for the
    regions no library kernel covers), each candidate checked and, on a GPU, measured: issue 25's hoid row.
    Without one, `hoid.search` alone, for the GPU at hand (else `target`, default this CPU): the rule sets
    and the library priced, nothing proposed or measured. `info` says which, its time and the kernels it runs.
    journal: the optimize run's journal file (put it under the results folder: a GPU call brings it back, and a
    run cut off by the call's limit resumes from it when the next call carries it in). Its progress goes to the
    log line by line (BGE-M3's optimize under a budget of 2 minutes was cut at 5 with nothing in the log to say
    where, H100 12-05), ending with what the budget left untried."""
    import hoid

    begin = time.perf_counter()
    if budget:
        log = OptimizeLog(graph.name)
        with phase(f"optimize (budget {budget})"):
            opt = hoid.optimize(graph, device=None if device.type == "cuda" else "cpu",
                                budget=hoid.Budget.parse(budget), journal=journal, progress=log)
        log.summary(opt.report)
        planned, info = opt.graph, {"plan": f"hoid.optimize ({opt.report.stop_reason})", "search": str(opt.report),
                                    "optimize_speedup": opt.speedup, "kept": opt.report.kept}
    else:
        from hoid.search import Limits

        if device.type == "cuda":  # the GPU at hand: an H100 lent in the H200's place plans with its own row
            from hoid.measure.local import local_device

            target = local_device().name
        target = target or "cpu"
        limits = Limits(seconds=search_seconds) if search_seconds else None
        result = hoid.search.search(graph, device=target, limits=limits)
        planned, info = result.graph, {"plan": f"hoid.search ({target})", "search": str(result.report)}
    kernels = [n.attrs["kernel"] for n in planned.nodes if n.op == "kernel"]
    info.update(plan_s=time.perf_counter() - begin, nodes=len(graph.nodes), nodes_rewritten=len(planned.nodes),
                kernels={k: kernels.count(k) for k in sorted(set(kernels))})
    return planned, info


# A forward workload's hoid rows, key -> what it runs (each script's stock rows come before them)
HOID_ROWS = {"hoid": "hoid.search, or hoid.optimize with --optimize-budget (its plan) + hoid.compile",
             "hoid-export": "hoid.export package as plain PyTorch (the hoid row's plan)"}


class SharedPlan:
    """The plan a workload's hoid rows share: made once (`hoid_plan` over `make_graph()`) by the first row that
    asks, so that `hoid` compiles and `hoid-export` exports the same graph after one optimize, not two."""

    def __init__(self, make_graph: Callable, device: torch.device, budget: str | None, **plan_args):
        self.make_graph, self.device, self.budget, self.plan_args = make_graph, device, budget, plan_args
        self.made: tuple | None = None
        self.failed: Exception | None = None

    def get(self) -> tuple:
        """(graph, info): the planned graph and `hoid_plan`'s info, with the import's time and op counts. A plan
        that raised is not made again by the next row (a full-size optimize takes minutes of a GPU call): that
        row fails at once, naming the first failure."""
        if self.failed is not None:
            raise RuntimeError(f"no plan: making it failed in an earlier row ({type(self.failed).__name__}: "
                               f"{self.failed}); that row's error has the traceback") from self.failed
        if self.made is None:
            begin = time.perf_counter()
            try:
                graph = self.make_graph()
                imported = time.perf_counter()
                planned, info = hoid_plan(graph, self.device, self.budget, **self.plan_args)
            except Exception as e:
                self.failed = e
                raise
            info.update(import_s=imported - begin, ops=graph.op_counts())
            self.made = (planned, info)
        return self.made[0], dict(self.made[1])


def export_row(graph, kernels: dict, name: str, device: torch.device) -> tuple:
    """(fn, info, close) of a `hoid-export` row: `graph` exported as a `hoid.export` package (its kernels opaque
    ops: `decode_hoid.import_package`), imported as plain PyTorch and, on a GPU, under torch.compile
    reduce-overhead, so that its CUDA graphs are what a user shipping the package runs. `fn` gives the first
    output; `close` forgets the package's modules and deletes its folder."""
    import tempfile
    from pathlib import Path

    from decode_hoid import forget_package, import_package
    from decode_stock import compile_stock

    folder = tempfile.TemporaryDirectory(prefix=f"{name}_")
    begin = time.perf_counter()
    with phase(f"{name}: export and import the package"):
        model = import_package(graph, Path(folder.name), name, device)
    info = {"export_s": time.perf_counter() - begin, "kernels": kernels}

    def forward(*inputs):
        out = model(*inputs)
        return out[0] if isinstance(out, (tuple, list)) else out

    def close():
        forget_package(name)
        folder.cleanup()

    if device.type != "cuda":
        return forward, dict(info, compiled="eager (CPU: reduce-overhead's CUDA graphs need CUDA)"), close
    fn, compiled_info, restore = compile_stock(forward, "reduce-overhead", device, fullgraph=True)
    return fn, dict(info, compiled=compiled_info), lambda: (restore(), close())


def profile_of(compiled, inputs) -> dict:
    """hoid's in-context profile of a compiled graph (`hoid.runtime.profile`), printed and as JSON rows."""
    from hoid.runtime.profile import profile

    prof = profile(compiled, list(inputs))
    print(prof.table(limit=25))
    return {"step_s": prof.step, "kernels_s": prof.kernels,
            "by_op": [dict(op=name, nodes=n, seconds=seconds) for name, n, seconds in prof.by_op()],
            "rows": [dict(node=r.node, op=r.op, kernel=r.kernel, seconds=r.seconds, share=r.share, floor=r.floor)
                     for r in prof.rows[:40]]}


def per_sample_errors(output: torch.Tensor, reference: torch.Tensor):
    """`Stats` of the relative L2 of each sample (row of the first dim) of `output` against `reference`."""
    errors = StepErrors()
    errors.add(output.float().flatten(1), reference.float().flatten(1))
    return errors.stats()


def forward_row(key: str, name: str, group: str, build: Callable, inputs, device: torch.device, *, repeat: int,
                reference: torch.Tensor | None = None) -> tuple[dict, object]:
    """One row: build, warm, time, and the per-sample errors against `reference` (when given). Returns (row,
    the error `Stats` or None)."""
    held = {}

    def work(row: dict, closers: list) -> None:
        begin = time.perf_counter()
        with phase(f"{key}: build and warm"):
            fn, info, *close = build()
            closers.extend(close)
            output = fn(*inputs)  # warm: compiles, captures (and the output the gate judges)
            sync(device)
        row["build_s"] = time.perf_counter() - begin
        built(row, device)  # the warm call's memory stays counted: a compiled step holds its buffers
        row.update(info)
        output = output.clone()  # a compiled graph's output buffer is rewritten by its next call
        with phase(f"{key}: time"):
            row.update(time_call(fn, inputs, device, repeat))
        row["peak_bytes"] = peak_bytes(device)
        if device.type == "cuda":  # what one call launches, by name: where a row's time differs from another's
            from hoid.runtime.profile import step_kernels

            row["launched"] = [dict(kernel=name, launches=n, seconds=seconds)
                               for name, n, seconds in step_kernels(fn, inputs)[:40]]
        if reference is not None:
            held["stats"] = per_sample_errors(output, reference)
            row["errors"] = held["stats"].to_json()

    row = record_row(key, name, group, device, work)
    return row, held.get("stats")


def judge_row(row: dict, stats, baseline) -> None:
    """The gate's verdict on `row` (not eager's own): `gate` and `failed`. There is no argmax token to agree
    on in an embedding, a noise prediction or an image, so top-1 agreement is left out."""
    if stats is None:
        return
    if baseline is None:
        row["gate"], row["failed"] = {"passed": False, "error": NO_BASELINE}, True
        return
    verdict = judge(stats, baseline, top1_slack=1.0)
    row["gate"], row["failed"] = verdict.to_json(), not verdict.passed


def gate_word(row: dict) -> str:
    """The gate's verdict as a row's line says it: ok, FAILED, or not judged (no eager row ran beside it: the
    row is recorded as failed, never as passing, but a hoid-only run did not fail its gate)."""
    if "gate" not in row:
        return ""
    if row["gate"].get("error") == NO_BASELINE:
        return "  gate not judged (no eager row beside it)"
    return "  gate FAILED" if row.get("failed") else "  gate ok"


def add_row(result: dict, row: dict, stats, baseline):
    """Append `row` to `result["rows"]`, gated: eager's errors become the baseline (returned, and recorded as
    `result["gate_baseline"]`), any other row is judged against `baseline`. Returns the baseline from now on."""
    if row["key"] == "eager" and stats is not None:
        baseline = stats
        result["gate_baseline"] = stats.to_json()
    elif row["key"] != "eager":
        judge_row(row, stats, baseline)
    result["rows"].append(row)
    return baseline


def summarize(rows: list[dict]) -> dict | None:
    """The best stock row ({key, latency_s}, None when none ran) and, on each row that ran, its
    `speedup_vs_best_stock`."""
    ok = [r for r in rows if r["group"] == "stock" and r["status"] == "ok"]
    if not ok:
        return None
    best = min(ok, key=lambda r: r["latency_s"])
    for row in rows:
        if row["status"] == "ok":
            row["speedup_vs_best_stock"] = best["latency_s"] / row["latency_s"]
    return {"key": best["key"], "latency_s": best["latency_s"]}


def launched_lines(rows: list[dict], best: dict | None, limit: int = 8) -> list[str]:
    """The best stock row's and hoid's kernels of one call, the slowest `limit` of each, one block per row
    (what `forward_row` records on a GPU): where hoid's time goes that the stock row's does not."""
    lines = []
    for key in ([best["key"]] if best else []) + ["hoid"]:
        row = next((r for r in rows if r["key"] == key and r.get("launched")), None)
        if row is None:
            continue
        launched = row["launched"]
        lines.append(f"{key}: {sum(k['launches'] for k in launched)} launches, "
                     f"{sum(k['seconds'] for k in launched) * 1e3:.2f} ms of kernels (its {len(launched)} slowest "
                     "kinds); the slowest:")
        lines += [f"  x{k['launches']:<4d} {k['seconds'] * 1e3:8.3f} ms  {k['kernel'][:100]}" for k in launched[:limit]]
    return lines

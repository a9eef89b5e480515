"""Search time and e-graph size against depth: the Qwen3-1.7B decode step with 1 to 28 layers.

For each layer count the decode-step graph is imported (weights on the meta device: the search never
reads them; the import is not timed, and its garbage is collected before the clock starts: torch.export
leaves cyclic garbage whose full collection, 0.3-0.6 s, would otherwise fall in whichever stage triggers
it), then timed stage by stage: encoding into egglog, saturation of the default rule sets, the library
kernels, and ILP extraction under the H200 prices (`hoid.search.prices`: shipped measurements where both
sides of a choice have them, else the model; the split is recorded). The time the collector still spends
inside the stages is recorded (`gc_seconds`).

    python benchmarks/search_scaling.py [--layers 1 2 4 8 16 28] [--out benchmarks/results/search_scaling.json]

Targets: 28 layers in under 3 s on the 2-core CPU machine (issue 11; 5 s before), linear in layers, under
1 GB of memory.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import resource
import time
from datetime import UTC, datetime
from pathlib import Path

import torch


def decode_graph(layers: int):
    from transformers import AutoModelForCausalLM

    from hoid.models.configs import config
    from hoid.models.llm import decode_step_graph

    cfg = config("qwen3-1.7b")
    cfg.num_hidden_layers = layers
    with torch.device("meta"):
        lm = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    return decode_step_graph(lm, 4096)


class _Collector:
    """CPU seconds the garbage collector spends while `on`."""

    def __init__(self):
        self.on, self.seconds, self._start = False, 0.0, 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict) -> None:
        if self.on and phase == "start":
            self._start = time.process_time()
        elif self.on:
            self.seconds += time.process_time() - self._start


_COLLECTOR = _Collector()


def _stage(fn):
    """(result, wall seconds, CPU seconds of this process): on a shared machine the wall time includes
    waiting for a core, the CPU time does not (HiGHS may add a helper thread's time)."""
    wall, cpu = time.perf_counter(), time.process_time()
    _COLLECTOR.on = True
    try:
        result = fn()
    finally:
        _COLLECTOR.on = False
    return result, time.perf_counter() - wall, time.process_time() - cpu


def measure(layers: int) -> dict:
    from hoid.measure.devices import H200
    from hoid.search.library import apply_library
    from hoid.search.prices import PricedCost
    from hoid.search.rewriting import SearchReport, _split, default_prices
    from hoid.search.rules import default_rulesets
    from hoid.search.space import SearchSpace

    graph = decode_graph(layers)
    gc.collect()  # the import's garbage is not the search's (see the module doc)
    _COLLECTOR.seconds = 0.0
    space, *encode = _stage(lambda: SearchSpace(graph))
    report, *saturate = _stage(lambda: space.saturate(default_rulesets()))
    library, *lib = _stage(lambda: apply_library(space))
    prices = default_prices(H200)  # shipped H200 rows where both sides of a choice have them
    extracted, *extract = _stage(lambda: space.extract(PricedCost(H200, prices, space.encoding.kernels)))
    plain = SearchSpace(graph)
    before = plain.extract(PricedCost(H200, prices)).cost  # the imported graph under the same prices
    split = SearchReport(report, space.size(), library, extracted.best.method, extracted.cost)
    _split(extracted.graph, PricedCost(H200, prices, space.encoding.kernels), split)
    stages = {"encode": encode, "saturate": saturate, "library": lib, "extract": extract}
    return {
        "layers": layers, "input_nodes": len(graph.nodes), "enodes": report.enodes,
        "enodes_with_kernels": space.size(), "stop_reason": report.stop_reason,
        "iterations": report.iterations, "output_nodes": len(extracted.graph.nodes),
        "extraction": extracted.best.method, "kernels_injected": sum(library.injected.values()),
        "ops_after": extracted.graph.op_counts(),
        "seconds": {name: round(wall, 3) for name, (wall, _) in stages.items()}
        | {"total": round(sum(wall for wall, _ in stages.values()), 3)},
        "cpu_seconds": {name: round(cpu, 3) for name, (_, cpu) in stages.items()}
        | {"total": round(sum(cpu for _, cpu in stages.values()), 3)},
        "cost_us": {"before": round(before * 1e6, 2), "after": round(extracted.cost * 1e6, 2),
                    "after_measured": round(split.measured_seconds * 1e6, 2),
                    "after_modelled": round(split.modelled_seconds * 1e6, 2)},
        "gc_seconds": round(_COLLECTOR.seconds, 3),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2, 4, 8, 16, 28])
    parser.add_argument("--out", default="benchmarks/results/search_scaling.json")
    args = parser.parse_args()
    import scipy

    measure(1)  # warm-up: imports (scipy, the kernel library, triton) are not search time
    rows = []
    for layers in args.layers:
        row = measure(layers)
        rows.append(row)
        s = row["seconds"]
        print(f"{layers:3d} layers: {row['input_nodes']:5d} nodes -> {row['enodes']:6d} e-nodes, "
              f"total {s['total']:.2f} s, CPU {row['cpu_seconds']['total']:.2f} s (encode {s['encode']:.2f}, "
              f"saturate {s['saturate']:.2f}, library {s['library']:.2f}, extract {s['extract']:.2f}), "
              f"gc {row['gc_seconds']:.2f} s, rss {row['max_rss_mb']} MB, load {row['load_average']:.1f}", flush=True)
    result = {
        "benchmark": "search_scaling", "model": "qwen3-1.7b decode step (cache 4096, batch 1, bf16)",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpus": len(os.sched_getaffinity(0))},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "egglog": importlib.metadata.version("egglog"), "scipy": scipy.__version__},
        "note": ("seconds are wall time, cpu_seconds this process's CPU time (the machine is shared: "
                 "load_average says how busy it was); max_rss_mb is the process peak, the import of the "
                 "model (meta weights) included; a 1-layer warm-up run imports scipy and the kernel library "
                 "first; the import's garbage is collected before each timed search, gc_seconds is the "
                 "collector's CPU time inside the stages"),
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

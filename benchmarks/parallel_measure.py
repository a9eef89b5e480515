"""Candidates checked and measured per minute on 1 and on N GPUs: the Qwen3-1.7B decode-step loop
(library proposer, the same budget of attempts, so the same candidates), once with a one-worker pool and
once with a worker per GPU (`hoid.agent.WorkerPool`), each with a fresh journal and measurement cache.
Reports the throughput of each, the speedup (target: at least 1.8x on 2 GPUs), and every decision that
differs between the two runs, with the noise verdicts behind it (issue 24).

    python benchmarks/parallel_measure.py --out benchmarks/results              # every GPU of this machine
    python benchmarks/parallel_measure.py --out /tmp/pm --model qwen3-1.7b-tiny --workers 2 --attempts 6
                                                                                # the CPU smoke run

Without a GPU the workers are CPU processes and `--device` defaults to the CPU (measured there).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

import torch

import hoid
from hoid.agent import Budget, WorkerPool
from hoid.measure import MeasureCache
from hoid.models import build_model, decode_step_graph


class Fixed:
    """A proposer's proposals in a fixed order: the first run records the order it proposed in, the second
    proposes in that order (regions are ranked by their measured time, which may order two close ones
    differently from one run to the next: this keeps the candidates the same)."""

    independent = True

    def __init__(self, inner):
        self.inner, self.name, self.order = inner, inner.name, None
        self.seen: list[tuple[str, str]] = []

    def propose(self, context):
        if self.order is None:
            for p in self.inner.propose(context):
                self.seen.append((p.region, p.kernel.id))
                yield p
            return
        found = {(p.region, p.kernel.id): p for p in self.inner.propose(context)}
        yield from (found[k] for k in self.order if k in found)


def one_run(step, workers: int, args, folder: Path, proposers) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.sqlite*"):  # a fresh journal and cache: nothing is read back from an earlier run
        old.unlink()
    events: list[tuple[float, dict]] = []
    start = time.perf_counter()
    opt = hoid.optimize(step, agent=proposers, device=args.device, budget=Budget(attempts=args.attempts),
                        journal=folder / "journal.sqlite", cache=MeasureCache(folder / "measure.sqlite"), store=False,
                        executor=WorkerPool(workers), progress=lambda e: events.append((time.perf_counter(), e)))
    end = time.perf_counter()
    ready = next(t for t, e in events if e["kind"] == "workers")  # every worker answered: the loop starts
    attempts = [a for a in opt.report.attempts if a["region"] != "-"]
    minutes = (end - ready) / 60
    return {"workers": workers, "wall_s": end - start, "startup_s": ready - start, "loop_s": end - ready,
            "attempts": len(attempts), "per_minute": len(attempts) / minutes if minutes > 0 else None,
            "measured_kernels": sum(1 for a in attempts if a["kernel_evidence"] == "measured"),
            "workers_lost": sum(1 for _, e in events if e["kind"] == "worker lost"),
            "kept": opt.report.kept, "baseline_s": opt.baseline_s, "best_s": opt.best_s,
            "evidence": opt.report.best_evidence, "stop_reason": opt.report.stop_reason,
            "decisions": [{"kernel": a["kernel"], "region": a["region"], "verdict": a["verdict"],
                           "kept": bool(a["kept"]), "why": a["why"]} for a in attempts]}


def differences(one: dict, many: dict) -> list[dict]:
    """The attempts decided differently (by position: the same candidates in the same order)."""
    out = []
    for a, b in zip(one["decisions"], many["decisions"], strict=False):
        if (a["kernel"], a["region"]) != (b["kernel"], b["region"]):
            out.append({"position": len(out), "one": a, "many": b, "note": "different candidates at this position"})
        elif (a["verdict"], a["kept"]) != (b["verdict"], b["kept"]):
            out.append({"kernel": a["kernel"], "region": a["region"], "one_gpu": a["why"], "n_gpus": b["why"]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for parallel_measure.json and the runs' files")
    ap.add_argument("--model", default="qwen3-1.7b", help="a hoid.models zoo name (qwen3-1.7b-tiny for a smoke run)")
    ap.add_argument("--cache-len", type=int, default=4096)
    ap.add_argument("--workers", type=int, default=None, help="N (default: every GPU of this machine)")
    ap.add_argument("--attempts", type=int, default=24, help="candidates per run (the same ones in both)")
    ap.add_argument("--agent", default="library")
    ap.add_argument("--device", default=None, help="the run's target (default: this GPU, else this CPU)")
    ap.add_argument("--trials", type=int, default=None)
    args = ap.parse_args()
    gpu = torch.cuda.is_available()
    args.device = args.device or (None if gpu else "cpu")
    n = args.workers or (torch.cuda.device_count() if gpu else 2)
    dtype = torch.bfloat16 if gpu else torch.float32
    step = decode_step_graph(build_model(args.model, dtype=dtype, device="cuda" if gpu else "cpu"), args.cache_len)
    from hoid.agent.agents import proposers_for

    proposers = [Fixed(p) for p in proposers_for(args.agent.split(","))]
    runs = [one_run(step, 1, args, args.out / "parallel_1", proposers)]
    for p in proposers:
        p.order = p.seen
    runs.append(one_run(step, n, args, args.out / f"parallel_{n}", proposers))
    one, many = runs
    speedup = many["per_minute"] / one["per_minute"] if one["per_minute"] and many["per_minute"] else None
    diff = differences(one, many)
    print(f"{'workers':>8} {'attempts':>9} {'loop s':>9} {'per min':>9} {'startup s':>10}  kept")
    for r in runs:
        print(f"{r['workers']:>8} {r['attempts']:>9} {r['loop_s']:>9.1f} {r['per_minute'] or 0:>9.2f} "
              f"{r['startup_s']:>10.1f}  {len(r['kept'])}")
    target = 1.8 if n == 2 else 0.9 * n
    verdict = "met" if speedup and speedup >= target else "NOT met"
    print(f"speedup {speedup:.2f}x on {n} workers (target {target:.1f}x): {verdict}" if speedup else "speedup: none")
    print(f"kept the same kernels: {one['kept'] == many['kept']}; decisions that differ: {len(diff)}")
    for d in diff:
        print(f"  {d}")
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    result = {"benchmark": "parallel_measure", "model": args.model, "cache_len": args.cache_len, "agent": args.agent,
              "device": torch.cuda.get_device_name() if gpu else platform.processor() or "cpu",
              "gpus": torch.cuda.device_count() if gpu else 0, "target_device": args.device,
              "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "versions": {"torch": torch.__version__, "triton": triton_version, "python": platform.python_version()},
              "runs": runs, "speedup": speedup, "target": target, "same_kept": one["kept"] == many["kept"],
              "differences": diff}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "parallel_measure.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out / 'parallel_measure.json'}")


if __name__ == "__main__":
    main()

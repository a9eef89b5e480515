"""`hoid.optimize` on the Qwen3-1.7B decode step (bf16, cache 4096) on the present GPU, with the library
proposer, within a time budget: the report, the journal and the measured whole-graph speedup over the
unoptimized compiled graph (issue 15's H200 run).

    python benchmarks/optimize_h200.py --out benchmarks/results --minutes 3
"""

from __future__ import annotations

import argparse
import json
import platform
from datetime import UTC, datetime
from pathlib import Path

import torch

import hoid
from hoid.models import build_model, decode_step_graph


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--agent", default="library")
    ap.add_argument("--cache-len", type=int, default=4096)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    step = decode_step_graph(build_model("qwen3-1.7b", dtype=torch.bfloat16, device="cuda"), args.cache_len)
    journal, cache = args.out / "optimize_qwen3.sqlite", args.out / "optimize_measure.sqlite"
    opt = hoid.optimize(step, agent=args.agent.split(","), device="h200", journal=journal,
                        cache=hoid.measure.MeasureCache(cache), store=False,
                        budget=hoid.Budget(minutes=args.minutes))
    print(opt.report)
    import triton

    result = {"benchmark": "optimize_h200", "device": torch.cuda.get_device_name(), "model": "qwen3-1.7b",
              "cache_len": args.cache_len, "agent": args.agent, "budget_minutes": args.minutes,
              "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "versions": {"torch": torch.__version__, "triton": triton.__version__,
                           "python": platform.python_version()},
              "baseline_s": opt.baseline_s, "best_s": opt.best_s, "speedup": opt.speedup,
              "measured": opt.report.measured, "report": str(opt.report)}
    (args.out / "optimize_h200.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

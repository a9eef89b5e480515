"""How long a check of a typical small kernel takes: RMSNorm 64x256 float32, isolated and in-process.

The isolated check runs the default sweep (20 trials of two runs each), 30 timing runs and 3 re-checks
in one child process. Cold: the child starts with the check (importing torch dominates). Warm: the check
takes the child started ahead by the previous check, given `--pause` seconds to import torch first, as
in an optimizer loop where proposing a kernel takes longer than that. Each figure is the median of
`--repeat` whole checks, from the call to the verdict.

    python benchmarks/verify_speed.py [--repeat 3] [--out benchmarks/results/verify_speed.json]

Target (issue "Verification"): an isolated RMSNorm 64x256 check in under 10 s on the 2-core CPU machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import hypothesis
import torch

from hoid.verify import check
from hoid.verify.isolate import release_spare

CANDIDATE = '''
import torch


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
'''
INPUTS = [((64, 256), "f32"), ((256,), "f32")]


def reference(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def in_process(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def timed(candidate, repeat: int, *, cold: bool = False, pause: float = 0.0) -> dict:
    seconds = []
    for i in range(repeat):
        if cold:
            release_spare()
        time.sleep(pause)
        start = time.perf_counter()
        verdict = check(candidate, reference, INPUTS, seed=i)
        seconds.append(time.perf_counter() - start)
        if not verdict.ok:
            raise SystemExit(f"the benchmark's honest candidate was rejected: {verdict}")
    return {"median_s": statistics.median(seconds), "runs_s": seconds, "trials": verdict.trials}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pause", type=float, default=5.0)
    parser.add_argument("--out", default="benchmarks/results/verify_speed.json")
    args = parser.parse_args()
    result = {
        "benchmark": "verify_speed",
        "kernel": "rmsnorm f32 [64, 256] x [256], default trials",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "load_average_1min": os.getloadavg()[0], "cuda": torch.cuda.is_available()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "hypothesis": hypothesis.__version__},
        "target_s": 10.0,
        "isolated_cold": timed((CANDIDATE, "rmsnorm"), args.repeat, cold=True),
        "isolated_warm": timed((CANDIDATE, "rmsnorm"), args.repeat, pause=args.pause),
        "in_process": timed(in_process, args.repeat),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    figures = ", ".join(f"{k} {result[k]['median_s']:.2f} s" for k in ("isolated_cold", "isolated_warm", "in_process"))
    print(f"{figures} (load {result['machine']['load_average_1min']:.1f}) -> {args.out}")


if __name__ == "__main__":
    main()

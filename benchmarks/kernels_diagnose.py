"""Follow-up to `benchmarks/kernel_table.py`: the cases whose misses its run left unexplained, each timed
several ways in one run, so a difference between timers or between two runs of the same timer shows.

- token embedding at the three decode shapes (hoid was 2-3x slower than torch at two of them, not at the
  third), with torch eager and torch.compile beside it;
- the lm head at the three decode shapes and the Qwen3-1.7B down projection + residual (6144->2048, the
  75% GEMV target), hoid with its "auto" defaults (set after that run from its tuning trials, never timed)
  and with the tuned params that run recorded, against torch eager (cuBLAS).

Each is timed by CUDA-graph replay twice and by CUDA events once, inputs rotated past 4x the L2.

    PYTHONPATH=. python3 benchmarks/kernels_diagnose.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import torch

import hoid.kernels
from hoid.measure import time_cuda

sys.path.insert(0, str(Path(__file__).parent))
from kernel_cases import build_cases  # noqa: E402
from kernel_table import copy_bandwidth, outputs_for  # noqa: E402

WANTED = [("triton.embedding", "token embedding"), ("triton.linear", "lm head"),
          ("triton.linear_add", "down projection + residual")]
TUNED = {  # the params benchmarks/kernel_table.py's tuning chose in its run of 2026-11-30 (kernels.json)
    "lm head": {"block_n": 8, "block_k": 512, "split_k": 1, "num_warps": "auto", "num_stages": 2},
    "down projection + residual": {"block_n": 32, "block_k": 256, "split_k": "auto", "num_warps": 8,
                                   "num_stages": 2},
}


def timings(fn, args) -> dict:
    return {"graph_1": time_cuda(fn, args, graph=True, repeat=20).median,
            "graph_2": time_cuda(fn, args, graph=True, repeat=20).median,
            "events": time_cuda(fn, args, graph=False, repeat=50).median}


def diagnose(case) -> dict:
    spec = hoid.kernels.get(case.kernel)
    inputs, attrs = case.inputs()
    outs = outputs_for(spec, inputs, attrs, case.aliased)
    variants = {"hoid (auto)": spec.default_params()}
    if case.what in TUNED:
        variants["hoid (tuned)"] = spec.check_params(TUNED[case.what])
    row = {"kernel": case.kernel, "model": case.model, "what": case.what, "moved_bytes": case.moved, "seconds": {}}
    for name, params in variants.items():
        row["seconds"][name] = timings(lambda *a, p=params: spec.launch(*a, **attrs, **p), inputs + outs)
    row["seconds"]["eager"] = timings(lambda *a: case.eager(*a, **attrs), inputs)
    if case.kernel == "triton.embedding":
        compiled = torch.compile(case.eager, dynamic=False)
        row["seconds"]["compile"] = timings(lambda *a: compiled(*a, **attrs), inputs)
    for name, t in row["seconds"].items():
        print(f"{case.model:13} {case.what:28} {name:13} "
              + "  ".join(f"{k} {v * 1e6:7.2f} us" for k, v in t.items()), flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    bandwidth = copy_bandwidth("cuda")
    cases = [c for c in build_cases("cuda", torch.bfloat16, scale=1)
             if (c.kernel, c.what) in WANTED and c.model != "large"]
    rows = [diagnose(case) for case in cases]
    result = {"benchmark": "kernels_diagnose", "device": torch.cuda.get_device_name(),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "versions": {"torch": torch.__version__, "python": platform.python_version(),
                           "triton": __import__("triton").__version__},
              "copy_bandwidth": bandwidth, "cases": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "kernels_diagnose.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

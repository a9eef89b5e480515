"""Second follow-up to `benchmarks/kernel_table.py`: the targets its runs missed without a measured reason,
each kernel timed over a set of params beside torch and beside a plain copy of the same bytes, in one run.

- decode attention over a full 32k cache (53% of the bandwidth, slower than torch's SDPA): the split's
  tile loop had a branch that kept Triton from issuing K and V loads ahead (0 asynchronous loads in the
  sm_90 build); now predicated instead. Timed with its auto split and the other splits and tiles.
- GEMV at M = 1 (6144->2048 + residual: 61%, target 75%) and M = 16 (4096->14336: 84%): the K loop was
  a plain `range`, which Triton does not pipeline when no `tl.dot` is fed; now `tl.range(num_stages)`.
  Timed at 1 stage (the old loop) and 2 to 4; the lm head too, so a regression on wide GEMVs shows.
- embedding gather of 16384 rows and RoPE on 1x32x8192x128 (81%, 82%): their params, and a torch copy
  of as many bytes (read + write), which says what a kernel moving them in one pass can reach here.
- the Llama-3.1-8B sampling softmax against torch.compile (never timed), last: compiling takes longest.

Every variant's output is checked against torch on float32-upcast inputs before it is timed (CUDA-graph
replay, inputs rotated past 4x the L2). The JSON is rewritten after each case, so a run cut short keeps
what it measured.

    PYTHONPATH=. python3 benchmarks/kernels_misses.py --out benchmarks/results
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
from kernel_cases import ATTENTION_CANDIDATES, EMBEDDING_CANDIDATES, build_cases  # noqa: E402
from kernel_table import BOUND, copy_bandwidth, copy_seconds, outputs_for, relative_error  # noqa: E402

GEMV_STAGES = [{"num_stages": s} for s in (1, 2, 3, 4)]
ROPE_CANDIDATES = [{"rows_per_program": r, "num_warps": w} for r, w in ((64, 8), (16, 4), (16, 2), (4, 1))]
# (kernel, model, what starts with, variants beside the defaults, time torch.compile too)
WANTED = [
    ("triton.decode_attention", "large", "32k cache", ATTENTION_CANDIDATES + [{"num_stages": 3}], False),
    ("triton.linear_add", "Qwen3-1.7B", "down projection", GEMV_STAGES, False),
    ("triton.embedding", "large", "", EMBEDDING_CANDIDATES, False),
    ("triton.rope", "large", "1x32x", ROPE_CANDIDATES, False),
    ("triton.linear", "large", "M=16", GEMV_STAGES[:3], False),
    ("triton.linear", "Qwen3-1.7B", "lm head", GEMV_STAGES[:2], False),
    ("triton.linear_swiglu_merged", "Qwen3-1.7B", "gate/up", GEMV_STAGES[:3], False),
    ("triton.decode_attention", "Qwen3-1.7B", "attention", [], True),
    ("triton.softmax", "Llama-3.1-8B", "sampling softmax", [], True),
]


def measure(case, variants: list[dict], compile_torch: bool, bandwidth: float) -> dict:
    spec = hoid.kernels.get(case.kernel)
    inputs, attrs = case.inputs()
    outs = outputs_for(spec, inputs, attrs, case.aliased)
    bound = BOUND[inputs[0].dtype if inputs[0].is_floating_point() else torch.float32]
    row = {"kernel": case.kernel, "model": case.model, "what": case.what, "moved_bytes": case.moved, "hoid": []}
    for given in [{}] + variants:
        params = spec.check_params(given)
        entry = {"params": params, "rel_error": relative_error(case, spec, inputs, attrs, params)}
        if entry["rel_error"] <= bound:
            entry["seconds"] = time_cuda(lambda *a, p=params: spec.launch(*a, **attrs, **p), inputs + outs,
                                         graph=True, repeat=20).median
            entry["bandwidth_fraction"] = case.moved / entry["seconds"] / bandwidth
        row["hoid"].append(entry)
        print(f"  {case.what[:30]:30} {json.dumps(given):60} err {entry['rel_error']:.1e}  "
              f"{entry.get('seconds', float('nan')) * 1e6:8.2f} us  "
              f"{entry.get('bandwidth_fraction', float('nan')):5.0%}", flush=True)
    row["eager"] = time_cuda(lambda *a: case.eager(*a, **attrs), inputs, graph=True, repeat=20).median
    row["copy_same_bytes"] = copy_seconds(max(case.moved // 4, 1))  # moved bytes, read plus written
    if compile_torch:
        compiled = torch.compile(case.eager, dynamic=False)
        row["compile"] = time_cuda(lambda *a: compiled(*a, **attrs), inputs, graph=True, repeat=20).median
    print(f"  {case.what[:30]:30} eager {row['eager'] * 1e6:.2f} us, copy of the same bytes "
          f"{row['copy_same_bytes'] * 1e6:.2f} us ({case.moved / row['copy_same_bytes'] / bandwidth:.0%})"
          + (f", torch.compile {row['compile'] * 1e6:.2f} us" if "compile" in row else ""), flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bandwidth = copy_bandwidth("cuda")
    print(f"copy bandwidth {bandwidth / 1e12:.2f} TB/s", flush=True)
    cases = build_cases("cuda", torch.bfloat16, scale=1)
    result = {"benchmark": "kernels_misses", "device": torch.cuda.get_device_name(),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "versions": {"torch": torch.__version__, "python": platform.python_version(),
                           "triton": __import__("triton").__version__},
              "copy_bandwidth": bandwidth, "cases": []}
    for kernel, model, what, variants, compile_torch in WANTED:
        case = next(c for c in cases if c.kernel == kernel and c.model == model and c.what.startswith(what))
        print(f"{model} {kernel} {case.what}", flush=True)
        try:
            result["cases"].append(measure(case, variants, compile_torch, bandwidth))
        except Exception as e:  # one case's failure is recorded; the others still run
            result["cases"].append({"kernel": kernel, "model": model, "what": case.what, "error": repr(e)})
            print(f"  failed: {e!r}", flush=True)
        (out / "kernels_misses.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

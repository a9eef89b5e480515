"""`triton.prefill_attention`'s params on the GPU at hand, at the decode benchmark's prompt shapes, beside
torch's SDPA on the same call and torch's flash kernel on the prompt alone (causal, no cache: a floor
for what an attention over these tokens costs).

    PYTHONPATH=. python3 benchmarks/prefill_attention_sweep.py --out benchmarks/results

Why: the kernel's defaults (block 64 x 64, 4 warps, 2 stages) were not measured. At Qwen3-1.7B's prompt of
128 tokens they give 2 row blocks x 16 heads = 32 programs on a 132-SM H200, and the in-context profile
put each of the prefill's 28 attention calls at 23 us (torch's SDPA: 24.8 us), against a floor near 1 us.
Every combination of the kernel's params is timed by hoid's CUDA timer (CUDA-graph replay, inputs rotated
past the L2) on the prefill's own mask (causal over the prompt, the cache's empty slots masked out, which
the kernel skips tile by tile: a random mask would hide that); a combination that fails to build is
recorded with its error. The JSON keeps every trial, the table the best per shape.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
from pathlib import Path

import torch

from hoid.ir import TensorType
from hoid.kernels import all_kernels
from hoid.kernels.launch import bind_spec
from hoid.measure import time_cuda

# (model, prompt, cache length, query heads, KV heads, head dim): the decode benchmark's prompts of 128 and
# 1024 tokens with 256 new tokens, for the models whose head shapes differ
SHAPES = [("qwen3-1.7b", 128, 384, 16, 8, 128), ("qwen3-1.7b", 1024, 1280, 16, 8, 128),
          ("qwen3-4b", 128, 384, 32, 8, 128), ("llama-3.2-1b", 128, 384, 32, 8, 64)]


# Of the kernel's 72 combinations, those a device call can time in about two minutes: one stage leaves the
# K/V loads unpipelined; 128 query rows (16 programs for 132 SMs at a 128-token prompt) only with the
# narrower key tiles, for the 1024-token prompt, where 64 rows were the fastest tried on 2026-12-02
CANDIDATES = ([{"block_m": m, "block_n": n, "num_warps": w, "num_stages": st}
               for m in (16, 32, 64) for n in (32, 64, 128) for w in (4, 8) for st in (2, 3)]
              + [{"block_m": 128, "block_n": n, "num_warps": w, "num_stages": 2} for n in (32, 64) for w in (4, 8)])


def signature(p: int, s: int, hq: int, hkv: int, d: int):
    bf16 = "bf16"
    types = [TensorType((1, hq, p, d), bf16), TensorType((1, hkv, s, d), bf16), TensorType((1, hkv, s, d), bf16),
             TensorType((1, 1, p, s), "bool")]
    return types, {"is_causal": False, "scale": d ** -0.5, "enable_gqa": hq != hkv}


def inputs(p: int, s: int, hq: int, hkv: int, d: int) -> list[torch.Tensor]:
    """q, k, v and the prefill's mask: query i attends keys 0..i; slots past the prompt are empty."""
    q = torch.randn(1, hq, p, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, hkv, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    mask = (torch.arange(s, device="cuda")[None, :] <= torch.arange(p, device="cuda")[:, None])[None, None]
    return [q, k, v, mask]


def trial(spec, types, attrs, params: dict, args: list[torch.Tensor]) -> dict:
    try:
        call = bind_spec(spec, types, attrs, params)
        return {"params": params, "median": time_cuda(call.launch_flat, call.flat(args)).median}
    except Exception as e:  # a combination that does not build here (shared memory, registers): recorded
        return {"params": params, "median": None, "error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}


def torch_times(q, k, v, mask) -> dict:
    """torch's SDPA on the kernel's call (the cache with its mask) and flash on the prompt alone."""
    hq, hkv, p = q.shape[1], k.shape[1], q.shape[2]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    masked = time_cuda(lambda q, k, v, m: sdpa(q, k, v, attn_mask=m, enable_gqa=hq != hkv), [q, k, v, mask])
    kp, vp = k[:, :, :p].contiguous(), v[:, :, :p].contiguous()
    causal = time_cuda(lambda q, k, v: sdpa(q, k, v, is_causal=True, enable_gqa=hq != hkv), [q, kp, vp])
    return {"torch_sdpa_masked": masked.median, "torch_sdpa_causal_prompt_only": causal.median}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--models", default="qwen3-1.7b", help="comma-separated, of: " +
                    ", ".join(sorted({m for m, *_ in SHAPES})))
    args = ap.parse_args()
    spec = all_kernels()["triton.prefill_attention"]
    rows = []
    print(f"{'model':14} {'P':>5} {'S':>5} {'default us':>10} {'best us':>8}  best params"
          f"{'':28} {'sdpa us':>8} {'causal-only us':>14}")
    for model, p, s, hq, hkv, d in [x for x in SHAPES if x[0] in args.models.split(",")]:
        types, attrs = signature(p, s, hq, hkv, d)
        args_ = inputs(p, s, hq, hkv, d)
        trials = [trial(spec, types, attrs, params, args_) for params in CANDIDATES]
        default = trial(spec, types, attrs, spec.default_params(), args_)["median"]  # again, after the rest
        best = min((t for t in trials if t["median"] is not None), key=lambda t: t["median"])
        ref = torch_times(*args_)
        rows.append({"model": model, "prompt": p, "cache_len": s, "heads": hq, "kv_heads": hkv, "head_dim": d,
                     "version": spec.version, "default_median": default, "best": best, "trials": trials,
                     **ref})
        print(f"{model:14} {p:5} {s:5} {default * 1e6:10.2f} {best['median'] * 1e6:8.2f}  "
              f"{json.dumps(best['params']):40} {ref['torch_sdpa_masked'] * 1e6:8.2f} "
              f"{ref['torch_sdpa_causal_prompt_only'] * 1e6:14.2f}")
    out = Path(args.out) / "prefill_attention_sweep.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "prefill_attention_sweep", "device": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "versions": {"torch": torch.__version__, "triton": __import__("triton").__version__,
                     "python": platform.python_version()}, "rows": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

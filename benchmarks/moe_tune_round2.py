"""The MoE kernels' second tuning round at Qwen3-30B-A3B's shapes (CUDA): around the winners of the first.

    python benchmarks/moe_tune_round2.py --out DIR      # writes DIR/moe-tune-round2.json

`workload_qwen3_moe.py --tune` times each kernel's neighbours of its "auto" tiles, one param changed at a
time, at one token (12-07, H100: the experts' down launch at 2 warps and the router at 3 stages won, 20% and
69%). This round keeps each winner and varies every other param around it, one at a time, and times the
widths decode batches reach: the experts at 1 and 4 tokens, the router at 1, 4 and 16 (where its tiles
differ). `hoid.measure.tune` checks each candidate against the first (the defaults) and reports the fastest
beyond noise; the defaults of `triton_moe_experts.choose` and `triton_moe_router.choose` cite this file's
result (`results/workloads/h100/moe-tune-round2.json`, measured before those defaults changed: its "auto"
rows are the tiles of then). `--tune` descends by itself since (`hoid.measure.descend`, this by hand): this
script stays as the record of that JSON.
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
from hoid.measure.local import local_device
from hoid.measure.tune import tune

HIDDEN, INTER, EXPERTS, TOP_K = 2048, 768, 128, 8  # Qwen3-30B-A3B
EXPERTS_AUTO = dict(block_n_up="auto", block_k_up="auto", warps_up="auto", block_n_down="auto",
                    block_k_down="auto", warps_down="auto", num_stages="auto")
ROUTER_AUTO = dict(block_e="auto", block_k="auto", num_warps="auto", num_stages="auto")


def experts_candidates() -> list[dict]:
    """The defaults, the first round's winner (warps_down 2), then each other param varied around it."""
    base = dict(EXPERTS_AUTO, warps_down=2)
    varied = [("block_n_up", (8, 16, 32)), ("block_k_up", (128, 256, 512)), ("warps_up", (2, 4, 8)),
              ("block_n_down", (8, 16, 32, 64)), ("block_k_down", (128, 256, 512)), ("num_stages", (1, 2, 3))]
    return [dict(EXPERTS_AUTO), base] + [dict(base, **{name: v}) for name, values in varied for v in values]


def router_candidates(tokens: int) -> list[dict]:
    """The defaults, every stage count with the default warps and with 1 and 4, then the tiles at 3 stages
    (block_e 16 at least beyond one token: tensor cores)."""
    out = [dict(ROUTER_AUTO)]
    for stages in (1, 2, 3):
        out.append(dict(ROUTER_AUTO, num_stages=stages))
        out += [dict(ROUTER_AUTO, num_stages=stages, num_warps=w) for w in (1, 4)]
    if tokens == 1:
        out += [dict(ROUTER_AUTO, num_stages=3, block_e=e) for e in (8, 16)]
        out += [dict(ROUTER_AUTO, num_stages=3, block_k=k) for k in (256, 512)]
    else:
        out += [dict(ROUTER_AUTO, num_stages=3, block_e=32)]
        out += [dict(ROUTER_AUTO, num_stages=3, block_k=k) for k in (512, 128)]
    return out


def calls() -> list[tuple[str, list[TensorType], dict, list[dict]]]:
    """(kernel, input types, attrs, candidates) for every width timed (the widths `--tune` times)."""
    from moe_kernel_tables import tuned_calls

    return [(kernel, types, attrs, experts_candidates() if kernel == "triton.moe_experts"
             else router_candidates(types[0].shape[0]))
            for kernel, types, attrs in tuned_calls(HIDDEN, INTER, EXPERTS, TOP_K)
            if kernel in ("triton.moe_experts", "triton.moe_router")]  # the two kernels of that sweep


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "workloads")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("moe_tune_round2: needs a CUDA GPU (it times kernels)")
    target, rows = local_device(), []
    for kernel, types, attrs, candidates in calls():
        result = tune(all_kernels()[kernel], types, attrs, device=target, candidates=candidates)
        rows.append({"kernel": kernel, "types": [str(t) for t in types], **result.to_json()})
        print(kernel, types[0].shape, f"{result.median * 1e6:.1f} us", result.reason, flush=True)
    import triton

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "moe-tune-round2.json").write_text(json.dumps({
        "benchmark": "moe-tune-round2", "device": torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "versions": {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version()},
        "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

"""The grouped MoE kernel's arithmetic, emulated in torch on the CPU, through `check_kernel`'s own draws: which
rounding the check accepts, without a GPU (the Triton interpreter's bfloat16 is not faithful).

    python benchmarks/moe_grouped_emulation.py rounded-act 1100 1220 --out DIR
    python benchmarks/moe_grouped_emulation.py split 1100 1220 --out DIR

Forms (each of bfloat16 inputs; float16 and float32 keep float32 throughout):
- rounded-act: gate, up, SiLU and their product rounded to bf16 where the region rounds them (the 12-07 morning's
  activations), the down product and its weighting in float32, unrounded (the float32 partials);
- split: nothing rounded; each activation as two bf16 halves, as `_down_rows_split` takes it.
The products accumulate in float64 (another order than torch's, as the GPU's is). Writes
DIR/moe-grouped-emulation-FORM-FIRST-LAST.json: the seeds checked and each failure's reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hoid.kernels.library import triton_moe_experts_grouped as grouped  # noqa: E402
from hoid.verify import check_kernel  # noqa: E402


def emulated(form: str):
    def launch(x, ids, routing, gate_up, down, out, *, workspace=None, **params):
        bf16, inter = x.dtype == torch.bfloat16, down.shape[-1]
        for t in range(x.shape[0]):
            total = torch.zeros(x.shape[1], dtype=torch.float32)
            for j in range(ids.shape[-1]):
                e = int(ids[t, j])
                gu = (gate_up[e].double() @ x[t].double()).float()
                if form == "rounded-act" and bf16:
                    r = lambda v: v.to(torch.bfloat16).float()  # noqa: E731
                    g, u = r(gu[:inter]), r(gu[inter:])
                    h = r(r(g / (1 + torch.exp(-g))) * u)
                else:
                    g, u = gu[:inter], gu[inter:]
                    h = g / (1 + torch.exp(-g)) * u
                    if bf16:
                        high = h.to(torch.bfloat16)
                        h = high.float() + (h - high.float()).to(torch.bfloat16).float()
                total += (down[e].double() @ h.double()).float() * routing[t, j].float()
            out[t] = total.to(out.dtype)
    return launch


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("form", choices=("rounded-act", "split"))
    ap.add_argument("first", type=int)
    ap.add_argument("last", type=int, help="one past the last seed")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "workloads")
    args = ap.parse_args(argv)
    spec = dataclasses.replace(grouped.SPEC, launch=emulated(args.form), compile=None)
    failures = []
    for seed in range(args.first, args.last):
        verdict = check_kernel(spec, examples=2, seed=seed, device="cpu")
        if not verdict.ok:
            failures.append({"seed": seed, "reason": verdict.reason})
            print(f"seed {seed}: {verdict.reason[:200]}", flush=True)
    result = {"form": args.form, "seeds": [args.first, args.last], "failed": len(failures), "failures": failures,
              "date": datetime.datetime.now(datetime.UTC).isoformat(), "torch": torch.__version__}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"moe-grouped-emulation-{args.form}-{args.first}-{args.last}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{args.form}: {len(failures)} of {args.last - args.first} seeds failed; wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

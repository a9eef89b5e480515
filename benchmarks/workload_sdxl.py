"""SDXL (issue 25): one UNet denoising step and the VAE decode, hoid against the best stock PyTorch in one run.

    python benchmarks/workload_sdxl.py --out DIR                          # H200: both parts at 1024 x 1024
    python benchmarks/workload_sdxl.py --part unet --rows hoid --out DIR  # one slice (GPU call limits)
    python benchmarks/workload_sdxl.py --tiny --device cpu --out DIR      # CPU smoke (the tiny models)

bfloat16, random weights from the published configs (`hoid.models.diffusion`, nothing downloaded).

- unet: `UNet2DConditionModel` on 128 x 128 latents (a 1024 x 1024 image), batch 2 (classifier-free
  guidance), 77 text tokens of 2048, SDXL's added conditions (pooled text embedding, time ids);
- vae: `AutoencoderKL.decode` of one 128 x 128 x 4 latent into a 1024 x 1024 image.

Rows, each timed over the same inputs (`forward_loop`): `eager` (diffusers' module; SDPA attention),
torch.compile default, reduce-overhead, max-autotune, max-autotune with coordinate-descent tuning
(`decode_stock.compile_stock`, graph breaks allowed); `hoid`: the imported graph, `hoid.search.search` for
this device (or `hoid.optimize` with `--optimize-budget`), `hoid.compile` (CUDA graph on a GPU), with the
in-context profile; `hoid-export`: the same graph as a `hoid.export` package, imported as plain PyTorch (under
torch.compile reduce-overhead on a GPU). The convolutions stay torch's (cuDNN) calls; what the search does
around them is in each hoid row's `kernels`.

Gate (`forward_loop.judge_row`): per image of the batch, the relative L2 of the output (noise prediction,
image) against a float32 copy of the same bf16 weights on the upcast inputs; at most 1.5x eager bf16's.
On the CPU the rows that need CUDA are skipped with the reason. Writes DIR/workload-sdxl-PART[-tiny][-ROWS].json
per part; prints a table. Exits 1 when a row raised (it is recorded as an error; the run goes on).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

from decode import versions  # noqa: E402
from decode_loop import budget_arg, open_device, release, result_name, save_json, sync  # noqa: E402
from decode_stock import COMPILE_ROWS, compile_stock  # noqa: E402
from forward_loop import (  # noqa: E402
    HOID_ROWS,
    SharedPlan,
    add_row,
    export_row,
    forward_row,
    gate_word,
    launched_lines,
    profile_of,
    summarize,
)

ROWS = ("eager", *COMPILE_ROWS, *HOID_ROWS)
PARTS = ("unet", "vae")


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny UNet and VAE (tests' sizes)")
    ap.add_argument("--device", default=None, help="cuda (default when there is one) or cpu")
    ap.add_argument("--part", nargs="+", default=list(PARTS), choices=PARTS)
    ap.add_argument("--size", type=int, default=None, help="image pixels each way (default 1024; tiny: 128 / 64)")
    ap.add_argument("--batch", type=int, default=2, help="UNet batch (2: classifier-free guidance)")
    ap.add_argument("--tokens", type=int, default=None, help="text tokens (default 77; tiny: 8)")
    ap.add_argument("--rows", default="all", help="all, or row keys joined by commas: " + ", ".join(ROWS))
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per row")
    ap.add_argument("--search-seconds", type=float, default=None, help="saturation limit of hoid.search")
    ap.add_argument("--optimize-budget", default=None, type=budget_arg,
                    help="run hoid.optimize with this budget (e.g. '10 min')")
    ap.add_argument("--no-profile", action="store_true", help="skip hoid's in-context profile")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "workloads")
    args = ap.parse_args(argv)
    keys = list(ROWS) if args.rows == "all" else [k.strip() for k in args.rows.split(",")]
    unknown = [k for k in keys if k not in ROWS]
    if unknown:
        raise SystemExit(f"--rows: unknown {', '.join(unknown)}; choose from all, {', '.join(ROWS)}")
    args.keys = keys
    args.tokens = args.tokens or (8 if args.tiny else 77)
    return args


class Part:
    """One of the two workloads: its model, module, inputs, graph builder, and the plan its hoid rows share."""

    def __init__(self, part: str, args, device: torch.device):
        from hoid.models import build_model, diffusion

        self.part, tiny = part, "-tiny" if args.tiny else ""
        self.model_name = f"sdxl-unet{tiny}" if part == "unet" else f"sdxl-vae-decoder{tiny}"
        self.model = build_model(self.model_name, dtype=torch.bfloat16, device=device, seed=args.seed)
        self.size = args.size or ((128 if part == "unet" else 64) if args.tiny else 1024)
        self.batch = args.batch if part == "unet" else 1
        if part == "unet":
            self.module = diffusion.UNetStep(self.model).eval()
            shapes = diffusion.unet_step_shapes(self.model, self.batch, self.size, self.size, args.tokens)
            self.inputs = diffusion.unet_inputs(shapes, seed=args.seed, dtype=torch.bfloat16, device=device)
            self.make_graph = lambda: diffusion.unet_step_graph(self.model, self.batch, self.size, self.size,
                                                                args.tokens)
        else:
            self.module = diffusion.VAEDecode(self.model).eval()
            side = self.size // diffusion.LATENT_SCALE
            gen = torch.Generator().manual_seed(args.seed)
            latents = torch.randn((1, self.model.config.latent_channels, side, side), generator=gen)
            self.inputs = [latents.to(device, torch.bfloat16)]
            self.make_graph = lambda: diffusion.vae_decode_graph(self.model, 1, self.size, self.size)
        self.plan = SharedPlan(self.make_graph, device, args.optimize_budget, search_seconds=args.search_seconds,
                               journal=args.out / f"journal-sdxl-{part}.sqlite")

    def reference(self) -> torch.Tensor:
        """The float32 output: a float32 copy of the bf16 weights on the upcast inputs."""
        wrapper = copy.deepcopy(self.module).float()
        out = wrapper(*[t.float() for t in self.inputs]).float()
        del wrapper
        return out

    def shape(self) -> dict:
        return {"image": [self.size, self.size], "batch": self.batch,
                "inputs": {f"input_{i}": list(t.shape) for i, t in enumerate(self.inputs)}}


def stock_row(key: str, part: Part, device: torch.device):
    if key == "eager":
        return part.module, {}
    _, mode, cd = COMPILE_ROWS[key]
    return compile_stock(part.module, mode, device, fullgraph=False, cd=cd)


def hoid_row(part: Part, args, device: torch.device):
    import hoid

    graph, info = part.plan.get()
    compiled = hoid.compile(graph, device=device)
    info = dict(info, cuda_graph=compiled.use_cuda_graph, cuda_graph_reason=compiled.cuda_graph_reason,
                fallbacks=compiled.fallbacks)
    fn = lambda *a: compiled(*a)[0]  # noqa: E731
    if device.type == "cuda" and not args.no_profile:
        fn(*part.inputs)
        info["profile"] = profile_of(compiled, part.inputs)
    return fn, info


def hoid_export_row(part: Part, args, device: torch.device):
    graph, info = part.plan.get()
    return export_row(graph, info["kernels"], f"hoid_sdxl_{part.part}", device)


def _line(row: dict) -> str:
    if row.get("status") != "ok":
        return f"  {row['key']:<26} {row['status']}: {row.get('reason')}"
    speed = f"  {row['speedup_vs_best_stock']:5.2f}x best stock" if "speedup_vs_best_stock" in row else ""
    gate = gate_word(row)
    peak = f"  peak {row['peak_bytes'] / 2**30:6.2f} GiB" if row.get("peak_bytes") else ""
    err = row.get("errors", {})
    return (f"  {row['key']:<26} {row['latency_s'] * 1e3:10.3f} ms  err {err.get('median', 0):.2e}/"
            f"{err.get('p99', 0):.2e}{peak}{speed}{gate}")


def run_part(name: str, args, device: torch.device, device_name: str) -> dict:
    part = Part(name, args, device)
    with torch.no_grad():
        reference = part.reference()
    release(device)
    result = {"benchmark": "workload", "workload": f"sdxl-{name}", "model": part.model_name, "device": device_name,
              "dtype": "bf16", "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "versions": versions(), "argv": list(args.argv), "shape": part.shape(),
              "gate_rule": "relative L2 per image vs float32, median and p99 <= 1.5x eager bf16's",
              "rows": [], "best_stock": None, "gate_baseline": None, "complete": False}
    tiny = ["tiny"] if args.tiny else []
    sliced = [] if args.rows == "all" else ["_".join(args.keys)]
    path = args.out / result_name("workload", "sdxl", name, *tiny, *sliced)
    builders = {"hoid": hoid_row, "hoid-export": hoid_export_row}
    print(f"{part.model_name} on {device_name}: {part.size} x {part.size}, batch {part.batch}", flush=True)
    baseline = None
    with torch.no_grad():
        for key in args.keys:
            if key in builders:
                build, group, title = (lambda b=builders[key]: b(part, args, device)), "hoid", HOID_ROWS[key]
            else:
                build, group = (lambda k=key: stock_row(k, part, device)), "stock"
                title = "eager (diffusers)" if key == "eager" else COMPILE_ROWS[key][0]
            row, stats = forward_row(key, title, group, build, part.inputs, device, repeat=args.repeat,
                                     reference=reference)
            baseline = add_row(result, row, stats, baseline)
            save_json(path, result)
            print(_line(row), flush=True)
    result["best_stock"] = summarize(result["rows"])
    result["complete"] = True
    save_json(path, result)
    sync(device)
    for row in result["rows"]:
        print(_line(row))
    for line in launched_lines(result["rows"], result["best_stock"]):  # a GPU's rows only
        print(line)
    print(f"wrote {path}")
    return result


def main(argv=None) -> int:
    args = parse(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    device, device_name = open_device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    results = [run_part(name, args, device, device_name) for name in args.part]
    return 1 if any(r["status"] == "error" for res in results for r in res["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())

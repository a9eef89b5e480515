"""BGE-M3 dense embedding: hoid against the best stock PyTorch in one run (issue 25).

    python benchmarks/workload_bge_m3.py --out DIR                         # H200: batch 32 x 512 tokens
    python benchmarks/workload_bge_m3.py --tiny --device cpu --out DIR     # CPU smoke (bge-m3-tiny)

bfloat16, random weights from `hoid.models.encoders` (no download), one padded batch (`example_batch`:
lengths from a quarter of the tokens to all of them). Rows, each timed over the same inputs:

- `eager`: transformers' XLMRobertaModel (SDPA attention) + the normalized CLS (`DenseEmbedding`);
- `compile-default`, `compile-reduce-overhead`, `compile-max-autotune`, `compile-max-autotune-cd`
  (coordinate-descent tuning): `torch.compile` of that module, `fullgraph=True`, `dynamic=False`;
- `hoid`: the imported graph (`embedding_graph`), planned by `hoid.search` for this device or, with
  `--optimize-budget`, by `hoid.optimize` (`forward_loop.hoid_plan`: its `plan` says which), then
  `hoid.compile` (CUDA graph on a GPU); `build_s` is import + plan + compile, and the in-context profile follows;
- `hoid-export`: the same plan (`forward_loop.SharedPlan`: one optimize a run) as a `hoid.export` package,
  imported as plain PyTorch, under torch.compile reduce-overhead on a GPU (`forward_loop.export_row`).

Gate (`hoid.testing.gate`): per sequence, the relative L2 of the embedding against a float32 reference (the
same bfloat16 weights upcast); a row passes when its median and p99 are at most 1.5x eager bfloat16's.
Top-1 agreement (the argmax dimension) means nothing for an embedding, so the gate leaves it out.

On the CPU the rows that need CUDA are skipped with the reason, and `compile-default` runs through dynamo's
eager backend (inductor's C++ build takes minutes there). Writes DIR/workload-bge-m3[-tiny][-ROWS].json
(ROWS: the --rows slice, when not all); prints a table. Exits 1 when a row raised (it is recorded as an
error; the run goes on).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import platform
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

from decode import versions  # noqa: E402
from decode_loop import budget_arg, release, result_name, save_json, sync  # noqa: E402
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
STOCK = ROWS[:-len(HOID_ROWS)]


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="bge-m3-tiny (2 layers, hidden 64)")
    ap.add_argument("--device", default=None, help="cuda (default when there is one) or cpu")
    ap.add_argument("--batch", type=int, default=None, help="sequences (default 32; tiny: 4)")
    ap.add_argument("--tokens", type=int, default=None, help="tokens per sequence (default 512; tiny: 64)")
    ap.add_argument("--rows", default="all", help="all, or row keys joined by commas: " + ", ".join(ROWS))
    ap.add_argument("--repeat", type=int, default=30, help="timed runs per row")
    ap.add_argument("--optimize-budget", default=None, type=budget_arg,
                    help="hoid's plan by hoid.optimize with this budget (e.g. "
                    "'2m': issue 25's row) instead of hoid.search alone")
    ap.add_argument("--no-profile", action="store_true", help="skip hoid's in-context profile")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "workloads")
    args = ap.parse_args(argv)
    args.model = "bge-m3-tiny" if args.tiny else "bge-m3"
    args.batch = args.batch or (4 if args.tiny else 32)
    args.tokens = args.tokens or (64 if args.tiny else 512)
    keys = list(ROWS) if args.rows == "all" else [k.strip() for k in args.rows.split(",")]
    unknown = [k for k in keys if k not in ROWS]
    if unknown:
        raise SystemExit(f"--rows: unknown {', '.join(unknown)}; choose from all, {', '.join(ROWS)}")
    args.keys = keys
    return args


def stock_row(key: str, encoder, device: torch.device):
    """(function, info[, close]) of a stock row over the bf16 encoder."""
    from hoid.models import DenseEmbedding

    module = DenseEmbedding(encoder).eval()
    if key == "eager":
        return module, {}
    _, mode, cd = COMPILE_ROWS[key]
    return compile_stock(module, mode, device, fullgraph=True, cd=cd)


def hoid_row(plan: SharedPlan, args, device: torch.device, inputs):
    """(function, info): the plan (`forward_loop.SharedPlan`), compiled; the function returns the embedding."""
    import hoid

    planned, info = plan.get()
    begin = time.perf_counter()
    compiled = hoid.compile(planned, device=device)
    compiled(*inputs)  # the first call binds and, on a GPU, captures: part of the build, as for torch.compile
    sync(device)
    info.update(compile_s=time.perf_counter() - begin, cuda_graph=compiled.use_cuda_graph,
                cuda_graph_reason=compiled.cuda_graph_reason, fallbacks=compiled.fallbacks)
    info["profile"] = profile_of(compiled, inputs) if device.type == "cuda" and not args.no_profile else None
    return (lambda *a: compiled(*a)[0]), info


def hoid_export_row(plan: SharedPlan, device: torch.device):
    planned, info = plan.get()
    return export_row(planned, info["kernels"], "hoid_bge_m3", device)


def _line(row: dict, best: float | None) -> str:
    if row.get("status") != "ok":
        return f"  {row['key']:<26} {row['status']}: {row.get('reason')}"
    speed = f"  {best / row['latency_s']:5.2f}x best stock" if best else ""
    gate = gate_word(row)
    peak = f"  peak {row['peak_bytes'] / 2**30:6.2f} GiB" if row.get("peak_bytes") else ""
    return (f"  {row['key']:<26} {row['latency_s'] * 1e3:9.3f} ms  {row['tokens_per_s']:11.0f} tok/s  "
            f"err {row['errors']['median']:.2e}/{row['errors']['p99']:.2e}{peak}{speed}{gate}")


def main(argv=None) -> int:
    args = parse(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA GPU here (use --device cpu --tiny for the smoke run)")
    from hoid.models import DenseEmbedding, build_model, example_batch

    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})"
    encoder = build_model(args.model, dtype=torch.bfloat16, device=device, seed=args.seed)
    inputs = example_batch((args.batch, args.tokens), vocab_size=encoder.config.vocab_size, seed=args.seed,
                           device=device)
    with torch.no_grad():
        reference_model = copy.deepcopy(encoder).float()
        reference = DenseEmbedding(reference_model)(*inputs).float()
        del reference_model
    release(device)
    result = {"benchmark": "workload", "workload": "bge-m3", "model": args.model, "device": device_name,
              "dtype": "bf16", "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "versions": versions(), "argv": sys.argv[1:] if argv is None else list(argv),
              "shape": {"batch": args.batch, "tokens": args.tokens,
                        "real_tokens": int(inputs[1].sum()), "padded_tokens": int((inputs[1] == 0).sum())},
              "graph": "dense embedding (normalized CLS) of XLMRobertaModel, attention mask for padding",
              "gate_rule": "relative L2 per sequence vs float32, median and p99 <= 1.5x eager bf16's",
              "rows": [], "best_stock": None, "gate_baseline": None, "complete": False}
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [] if args.rows == "all" else ["_".join(args.keys)]  # a slice of the rows: a file of its own
    path = args.out / result_name("workload", args.model, *rows)

    def save():
        save_json(path, result)

    print(f"{args.model} on {device_name}: batch {args.batch} x {args.tokens} tokens "
          f"({result['shape']['real_tokens']} real)", flush=True)
    from hoid.models import embedding_graph

    plan = SharedPlan(lambda: embedding_graph(encoder, args.batch, args.tokens), device, args.optimize_budget,
                      journal=args.out / f"journal-{args.model}.sqlite")
    builders = {"hoid": lambda: hoid_row(plan, args, device, inputs),
                "hoid-export": lambda: hoid_export_row(plan, device)}
    baseline = None
    with torch.no_grad():
        for key in args.keys:
            build = builders.get(key, lambda k=key: stock_row(k, encoder, device))
            name = HOID_ROWS.get(key) or (COMPILE_ROWS[key][0] if key in COMPILE_ROWS else "eager PyTorch")
            row, stats = forward_row(key, name, "stock" if key in STOCK else "hoid", build, inputs, device,
                                     repeat=args.repeat, reference=reference)
            if row["status"] == "ok":
                row["sequences_per_s"] = args.batch / row["latency_s"]
                row["tokens_per_s"] = args.batch * args.tokens / row["latency_s"]
            baseline = add_row(result, row, stats, baseline)
            save()
    result["best_stock"] = summarize(result["rows"])
    best_s = result["best_stock"]["latency_s"] if result["best_stock"] else None
    result["complete"] = True
    save()
    for row in result["rows"]:
        print(_line(row, best_s))
    for line in launched_lines(result["rows"], result["best_stock"]):  # a GPU's rows only
        print(line)
    print(f"wrote {path}")
    return 1 if any(r["status"] == "error" for r in result["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())

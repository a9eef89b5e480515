"""benchmarks/decode.py's command line: its arguments, its groups of rows, and the name of the file a run
writes; `decode_parallel.py` reads them too, for the slices it starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import decode_hoid
import decode_stock
from decode_gate import add_gate_arguments
from decode_loop import budget_arg, result_name

HERE = Path(__file__).resolve().parent
DESCRIPTION = "Decode throughput: hoid against the best stock PyTorch, one model per run (issue 21)."
MODELS = ("qwen3-1.7b", "qwen3-4b", "llama-3.2-1b", "llama-3.1-8b")
HF = [k for k in decode_stock.ROWS if k.startswith("hf-")]
GROUPS = {"hf": HF, "fast": [k for k in decode_stock.ROWS if k not in HF], "stock": list(decode_stock.ROWS),
          "hoid": list(decode_hoid.ROWS)}


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="decode.py", description=DESCRIPTION)
    ap.add_argument("model", help=f"one of {', '.join(MODELS)} (or its -tiny variant)")
    ap.add_argument("--tiny", action="store_true", help="the model's -tiny variant (2 layers, hidden 64)")
    ap.add_argument("--device", default=None, help="cuda (default when there is one) or cpu")
    ap.add_argument("--prompt", type=int, nargs="+", default=[128, 1024])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--new", type=int, default=256, help="new tokens per sequence (the cache: prompt + new)")
    ap.add_argument("--rows", default="all",
                    help="all, stock (= hf + fast), hf, fast, hoid, or row keys joined by commas: "
                    + ", ".join(GROUPS["stock"] + GROUPS["hoid"]))
    ap.add_argument("--optimize-budget", default=None, type=budget_arg,
                    help="hoid.optimize's budget for each of the cold and warm runs, as `hoid optimize` reads it "
                         "(e.g. 4m, '0 attempts'); default: until the proposers run dry")
    ap.add_argument("--agent", default=None,
                    help="hoid.optimize's proposers, joined by commas as `hoid optimize --agent` takes them (e.g. "
                         "library,codegen,dir:examples/kernels for the fused kernels written outside hoid); "
                         "default: hoid.optimize's own")
    ap.add_argument("--no-warm", action="store_true",
                    help="skip the warm hoid.optimize run (its time is not measured; the rows use the cold run's "
                         "graph): a time-limited call reaches the export and backend rows")
    ap.add_argument("--warmup", type=int, default=8, help="decode steps of the warm-up generation")
    ap.add_argument("--eager-prefill", action="store_true", help="stock compiled rows prefill uncompiled")
    ap.add_argument("--cpu-inductor", action="store_true", help="on the CPU, compile with inductor (minutes)")
    ap.add_argument("--no-profile", action="store_true", help="skip hoid's in-context profile")
    ap.add_argument("--no-gate", action="store_true", help="skip the correctness gate")
    ap.add_argument("--gate-stock", action="store_true",
                    help="gate the stock rows too, for information (never `failed`): whether a stock model that a "
                         "hoid row is built from (the backend's fast model) passes the gate itself")
    ap.add_argument("--gate-stock-max-s", type=float, default=60.0,
                    help="skip a stock row's informational gate when its teacher forcing would take longer, "
                         "estimated from the row's own step rate (the row's gate says so): transformers' slow rows "
                         "took 125 and 143 s each on Qwen3-1.7B (2026-12-04), a slice's limit for a verdict that "
                         "is about no hoid row")
    add_gate_arguments(ap, samples=2048, samples_note="(decode_gate's doc: why 256 samples are too few for the "
                                                      "one-point top-1 slack)",
                       cache_note="; h200_session.sh's slices read benchmarks/results/decode/gate (committed)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "decode")
    ap.add_argument("--reference", type=Path, default=None,
                    help="the reference cells to check against (default: OUT/reference.json); the updated "
                         "reference is written to OUT/reference.json")
    ap.add_argument("--note", default=None, help="why best stock differs from the reference (measured)")
    ap.add_argument("--no-write-reference", action="store_true",
                    help="check against the reference but do not write it (decode_parallel's slices)")
    ap.add_argument("--gpus", type=int, default=1,
                    help="run the (shape, group) slices as processes over this many GPUs of this host "
                         "(decode_parallel.py); 1: every slice in this process, in turn")
    args = ap.parse_args(argv)
    if args.tiny and not args.model.endswith("-tiny"):
        args.model += "-tiny"
    return args


def output_name(args) -> str:
    """The run's file name (`result_name`): the model and what differs from a whole run, lists joined by '_'
    (row keys hold '-')."""
    parts = [args.model]
    if args.prompt != [128, 1024]:
        parts.append("p" + "_".join(map(str, args.prompt)))
    if args.batch != [1, 8]:
        parts.append("b" + "_".join(map(str, args.batch)))
    if args.new != 256:
        parts.append(f"n{args.new}")
    if args.rows != "all":
        parts.append("_".join(p.strip() for p in args.rows.split(",")))
    if getattr(args, "no_warm", False):
        parts.append("nowarm")
    return result_name("decode", *parts)

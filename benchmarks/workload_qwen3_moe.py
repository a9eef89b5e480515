"""Qwen3-30B-A3B decode (issue 25): hoid against the best stock PyTorch, batch 1, in one run.

    python benchmarks/workload_qwen3_moe.py --out DIR                           # prompts 128 and 1024, 256 new
    python benchmarks/workload_qwen3_moe.py --prompt 128 --rows stock --out DIR   # one slice (GPU call limits)
    python benchmarks/workload_qwen3_moe.py --tiny --device cpu --prompt 8 --new 8 --out DIR   # CPU smoke
    python benchmarks/workload_qwen3_moe.py --experts --prompt 128 --rows hoid --out DIR  # + experts, router alone
    python benchmarks/workload_qwen3_moe.py --tune --prompt 128 --rows hf-eager --gate-cache G --out DIR  # + tiles
    python benchmarks/workload_qwen3_moe.py report DIR/workload-qwen3-moe-*.json     # slices merged: one table

bfloat16, random weights from the published config (`hoid.models`, nothing downloaded). Rows, all timed by
the one decode loop (`decode_loop.run_row`: tokens/s, time to first token, peak memory):

- stock: transformers eager (dynamic cache; its default `grouped_mm` experts), eager over the static cache,
  the static-cache model under torch.compile reduce-overhead, max-autotune, max-autotune with
  coordinate-descent tuning, and reduce-overhead with transformers' gathered `batched_mm` experts in the
  step (the formulation hoid imports, so that best stock is also given the gathered form);
- hoid: the decode step imported (`decode_step_graph`: router, top-k and the selected experts' GEMVs as IR
  ops), `hoid.search.rewrite` with the library kernels that run here (or `hoid.optimize` with
  `--optimize-budget`), `hoid.compile` (CUDA graph, argmax inside the step), prefill rewritten and compiled
  over the same cache (`decode_hoid.hoid_compile`); `hoid-export` runs the exported package.

The gate is decode.py's (`decode_gate`: relative L2 of the logits against a float32 reference, teacher-forced
on eager transformers' tokens over --gate-samples steps, at most 1.5x eager bfloat16's; with --gate-cache a later
slice reads the teacher tokens and eager baseline an earlier one saved), with the float32 reference run one decoder
layer at a time: a float32 copy of all 30.5B parameters (122 GB) does not fit beside the bfloat16 model on
one H200. The roofline counts the weights a batch-1 step reads: all but the experts, and k of E experts.

Writes DIR/workload-qwen3-moe-MODEL[-slice].json; prints a table per shape. Exits 1 when a row raised.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import datetime
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

import decode_gate  # noqa: E402
import decode_hoid  # noqa: E402
import decode_report  # noqa: E402
import decode_stock  # noqa: E402
from decode import _line, copy_bandwidth, versions  # noqa: E402
from decode_loop import Decoder, Shape, budget_arg, greedy, open_device, release, result_name, run_row, save_json  # noqa: E402
from moe_kernel_tables import experts_table, router_table, tune_table  # noqa: E402

MODEL = "qwen3-30b-a3b"


# --- stock rows ------------------------------------------------------------------------------------
def _hf_bmm_reduce_overhead(lm, shape: Shape, ctx) -> Decoder:
    """The decode step with transformers' gathered `batched_mm` experts under torch.compile reduce-overhead;
    the prefill eager with the model's default experts (batched_mm on a 1024-token prompt would gather a
    weight copy per (token, expert) pair: 51 GB per layer)."""
    default = lm.config._experts_implementation
    module = decode_stock._static(lm, shape)
    decoder = decode_stock._compiled(module, "reduce-overhead", dataclasses.replace(ctx, compile_prefill=False),
                                     fullgraph=False)
    lm.set_experts_implementation("batched_mm")

    def prefill(ids, pos):
        lm.set_experts_implementation(default)
        try:
            return greedy(module(ids, pos))
        finally:
            lm.set_experts_implementation("batched_mm")

    inner = decoder.close

    def close():
        if inner is not None:
            inner()
        lm.set_experts_implementation(default)

    decoder.prefill, decoder.close = prefill, close
    decoder.info["experts_implementation"] = f"batched_mm in the step, {default} in the (eager) prefill"
    return decoder


def _hf_max_autotune_cd(lm, shape: Shape, ctx) -> Decoder:
    # decode_stock has coordinate descent only on its dense fast model, which has no experts
    return decode_stock._compiled(decode_stock._static(lm, shape), "max-autotune", ctx, fullgraph=False, cd=True)


STOCK = {
    "hf-eager": decode_stock.ROWS["hf-eager"],
    "hf-static": decode_stock.ROWS["hf-static"],
    "hf-compile-reduce-overhead": decode_stock.ROWS["hf-compile-reduce-overhead"],
    "hf-compile-max-autotune": decode_stock.ROWS["hf-compile-max-autotune"],
    "hf-compile-max-autotune-cd": ("transformers static cache, torch.compile max-autotune + coordinate descent",
                                   _hf_max_autotune_cd),
    "hf-bmm-reduce-overhead": ("transformers static cache, batched_mm experts, torch.compile reduce-overhead",
                               _hf_bmm_reduce_overhead),
}


# --- hoid rows -------------------------------------------------------------------------------------
def prepare(lm, shape: Shape, ctx: decode_hoid.Context) -> decode_hoid.Plan:
    """The decode step searched (no optimization loop), and the prefill as `decode_hoid.Plan` makes it, as a
    `decode_hoid.Plan`. On the GPU every call the shipped prices lack is timed first (`hoid.search`'s
    `measure`): a kernel never timed at a call is priced as its fastest timed rival there, 5% slower
    (`hoid.search.prices.UNMEASURED_PENALTY`: it must be measured to win), and the shipped prices hold none of
    this model's QKV or GQA attention shapes, so unmeasured the search kept the ops (on the CPU, 12-06: all 48
    merged QKV projections stayed matmuls and all 48 attentions torch's)."""
    import hoid
    import hoid.measure
    from hoid.agent.loop import resolve_device
    from hoid.kernels import KernelSet
    from hoid.models import decode_step_graph

    target = resolve_device(None if ctx.device.type == "cuda" else "cpu")
    folder = tempfile.TemporaryDirectory(prefix="hoid_moe_")
    begin = time.perf_counter()
    step = decode_step_graph(lm, shape.cache_len, batch=shape.batch)
    import_s = time.perf_counter() - begin
    begin = time.perf_counter()
    measured = target.arch != "cpu"
    with (hoid.measure.MeasureCache(Path(folder.name) / "measure.sqlite") if measured
          else contextlib.nullcontext()) as cache:
        result = hoid.search.search(step, device=target, kernels=KernelSet.default().runnable_here(),
                                    measure=cache)
    graph = result.graph
    info = {"device": target.name, "import_s": import_s, "rewrite_s": time.perf_counter() - begin,
            "how": "hoid.search (library kernels runnable here" + (", every unpriced call timed here first)"
                                                                   if measured else ", priced by the model)"),
            "search": str(result.report), "nodes": len(step.nodes), "rewritten_nodes": len(graph.nodes),
            "kernels": sorted({n.attrs["kernel"] for n in graph.nodes if n.op == "kernel"}),
            # the routed experts as one call per layer reading the stacked weights in place (no gathered copy),
            # and the router (GEMV, softmax, top-k, renormalization) as one launch per layer where it won
            **{f"{kernel}_calls": sum(1 for n in graph.nodes if n.op == "kernel"
                                      and n.attrs["kernel"] == f"triton.{kernel}")
               for kernel in ("moe_experts", "moe_router")},
            "ops_left": {op: c for op, c in graph.op_counts().items() if op != "kernel"},
            **experts_check(result.report.library, lm.config.num_hidden_layers)}
    # the prefill: imported, searched (measured on the GPU, into the same folder) when a row first needs it
    return decode_hoid.Plan(graph, None, info, Path(folder.name) / "no_store.sqlite", folder,
                            shape.key.replace("-", "_"), lm=lm, shape=shape, target=target)


def experts_check(library, layers: int) -> dict:
    """How many layers' experts `triton.moe_experts`'s pattern matched (chosen or not), from the search's
    `LibraryReport`, and why none where the kernel was skipped (a CPU target: it is not built for one). Fewer
    than every layer on a target it builds for is printed as a warning and kept in the plan: 12-06 on the H100
    the imported experts form had changed (transformers 5.17), none matched, and the run said nothing."""
    out = {"moe_experts_regions": library.injected.get("triton.moe_experts", 0)}
    if skipped := library.skipped.get("triton.moe_experts"):
        out["moe_experts_skipped"] = skipped
    elif out["moe_experts_regions"] < layers:  # the run goes on (stock is still measured), but says so loudly
        out["experts_warning"] = (
            f"triton.moe_experts's pattern matched the experts of {out['moe_experts_regions']} of {layers} layers: "
            f"the others can only gather copies of the selected experts' weights; check the imported step's "
            f"experts against the kernel's pattern")
        print(f"WARNING: {out['experts_warning']}", flush=True)
    return out


HOID = {k: decode_hoid.ROWS[k] for k in ("hoid-compile", "hoid-export")}
GROUPS = {"stock": list(STOCK), "hoid": list(HOID), "default": [*STOCK, "hoid-compile"], "all": [*STOCK, *HOID]}


# --- the gate's float32 reference, one layer at a time ---------------------------------------------
def reference_logits(lm, prompt: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """`decode_gate.reference_logits`, holding one decoder layer in float32 at a time: [N, B, V]."""
    if lm.config._attn_implementation != "sdpa":
        raise ValueError(f"the layer-wise reference relies on sdpa's causal masking (no mask passed); the model "
                         f"runs {lm.config._attn_implementation!r}")
    model = lm.model
    sequence = torch.cat([prompt, tokens[:, :-1]], dim=1)
    positions = torch.arange(sequence.shape[1], device=sequence.device).unsqueeze(0)
    hidden = model.embed_tokens(sequence).float()
    rotary = copy.deepcopy(model.rotary_emb).float()
    cos_sin = rotary(hidden, positions)
    for layer in model.layers:
        layer32 = copy.deepcopy(layer).float()
        hidden = layer32(hidden, attention_mask=None, position_ids=positions, position_embeddings=cos_sin)
        del layer32
    hidden = copy.deepcopy(model.norm).float()(hidden)[:, prompt.shape[1] - 1:]
    logits = torch.nn.functional.linear(hidden, lm.lm_head.weight.float())
    out = logits.transpose(0, 1).contiguous()
    del hidden, logits
    release(prompt.device)
    return out


class LayerwiseGate(decode_gate.Gate):
    def reference(self, prompt: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:  # one layer at a time
        return reference_logits(self.lm, prompt, tokens)


def active_weight_bytes(lm, batch: int = 1) -> int:
    """Bytes of weights a decode step reads: decode_report's count with only the routed experts' share of
    the expert weights (batch tokens x k experts, at most all E)."""
    cfg = lm.config
    experts = sum(p.numel() * p.element_size() for n, p in lm.named_parameters() if ".experts." in n)
    share = min(cfg.num_experts, batch * cfg.num_experts_per_tok) / cfg.num_experts
    return int(decode_report.streamed_weight_bytes(lm) - experts * (1 - share))


# --- the run ---------------------------------------------------------------------------------------
def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help=f"{MODEL}-tiny (2 layers, hidden 64, 16 experts)")
    ap.add_argument("--device", default=None, help="cuda (default when there is one) or cpu")
    ap.add_argument("--prompt", type=int, nargs="+", default=[128, 1024])
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--rows", default="default",
                    help=f"{', '.join(GROUPS)}, or row keys joined by commas: {', '.join([*STOCK, *HOID])}")
    ap.add_argument("--optimize-budget", default=None, type=budget_arg,
                    help="run hoid.optimize (decode_hoid.prepare, cold and warm) with this budget instead of the "
                         "plain rewrite, e.g. '4m'")
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--no-profile", action="store_true", help="skip hoid's in-context profile")
    ap.add_argument("--no-gate", action="store_true")
    decode_gate.add_gate_arguments(
        ap, samples=1024, cache_note=", so that eager and the gate's sequences can take a device call of their own",
        samples_note="(1024: 4 sequences of 256; one, 12-07 on an H100, failed a plan whose median and p99 errors "
                     "were below eager's on top-1 alone, 5 tokens of 256 short, 21 of its 29 disagreements near "
                     "ties; decode.py reads 2048, but here each sequence costs ~20 s of layer-wise float32 "
                     "reference and eager baseline)")
    ap.add_argument("--experts", action="store_true",
                    help="also time one layer's routed experts and router alone: triton.moe_experts against "
                         "batched_mm, triton.moe_router against transformers' router (CUDA)")
    ap.add_argument("--tune", action="store_true",
                    help="also tune triton.moe_experts and triton.moe_router at decode widths, and "
                         "triton.moe_experts_grouped and triton.moe_router_rows at 128 and 1024 tokens, by "
                         "coordinate descent over their "
                         "tiles (hoid.measure.descend; CUDA)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "workloads")
    args = ap.parse_args(argv)
    keys = []
    for part in args.rows.split(","):
        keys += GROUPS.get(part.strip(), [part.strip()])
    unknown = [k for k in keys if k not in STOCK and k not in HOID]
    if unknown:
        raise SystemExit(f"--rows: unknown {', '.join(unknown)}")
    args.keys = keys
    args.model = MODEL + ("-tiny" if args.tiny else "")
    return args


def run_shape(lm, shape: Shape, args, device, cell: dict, save) -> None:
    torch.manual_seed(args.seed)
    prompt = torch.randint(0, lm.config.vocab_size, (shape.batch, shape.prompt), device=device)
    # a hoid row is gated; an eager slice with --gate-cache makes the gate for a later slice's hoid rows
    gate_wanted = not args.no_gate and (any(k in HOID for k in args.keys) or args.gate_cache is not None)
    held: dict = {}
    ctx = decode_stock.Context(device)
    rows = cell["rows"]

    prompts = [prompt, *decode_gate.gate_prompts(args.gate_samples, shape, lm.config.vocab_size, args.seed, device)]
    gate_file = decode_gate.gate_file(args.gate_cache, args.model, shape, args.seed, len(prompts))

    def eager_after(decoder, row, tokens):  # hf-eager's tokens are the gate's teacher
        if gate_wanted:
            held["gate"] = gate = LayerwiseGate(lm, prompt, tokens)
            decode_gate.add_sequences(gate, decoder, prompts[1:], shape)
            row["gate_baseline"] = cell["gate_baseline"] = gate.set_baseline(decoder)
            cell["gate_sequences"] = len(gate.sequences)
            if gate_file is not None:
                decode_gate.save_gate(gate_file, lm, gate)

    def done(row):
        if row.get("tokens_per_s") is not None:
            row["roofline_fraction"] = row["tokens_per_s"] / cell["roofline_tokens_per_s"]
            row["step_latency_s"] = 1 / row["steps_per_s"]
        rows.append(row)
        cell["best_stock"] = decode_report.best_of(rows)
        print(_line(row), flush=True)
        save()

    if gate_wanted and "hf-eager" not in args.keys:  # a slice after the one that ran hf-eager: its gate
        if (loaded := decode_gate.reuse_gate(gate_file, lm, prompts, cell, LayerwiseGate)) is not None:
            held["gate"] = loaded
    for key in [k for k in STOCK if k in args.keys or (k == "hf-eager" and gate_wanted and "gate" not in held)]:
        name, build = STOCK[key]
        done(run_row(key, name, "stock", lambda b=build: b(lm, shape, ctx), prompt, shape.new, warmup=args.warmup,
                     after=eager_after if key == "hf-eager" else None))
    hoid_keys = [k for k in HOID if k in args.keys]
    if not hoid_keys:
        return
    hctx = decode_hoid.Context(device, profile=not args.no_profile)
    plan, failure = None, None
    try:
        if args.optimize_budget is not None:
            from hoid.agent import Budget

            hctx.budget = Budget.parse(args.optimize_budget)
            plan = decode_hoid.prepare(lm, shape, hctx)
        else:
            plan = prepare(lm, shape, hctx)
    except Exception as e:  # every hoid row of this shape reports it
        import traceback

        traceback.print_exc()
        failure = f"hoid import / rewrite failed: {type(e).__name__}: {e}"
    archive = args.out / f"hoid-run-{args.model}-{shape.key}.tar.gz"
    if plan is not None:
        plan.save_archive(archive)
    gate = held.get("gate")
    for key in hoid_keys:
        name, build = HOID[key]
        if plan is None:
            done({"key": key, "name": name, "group": "hoid", "status": "error", "reason": failure})
            continue
        after = (lambda d, r, t: gate.judge(d, r)) if gate is not None else None
        done(run_row(key, name, "hoid", lambda b=build: b(lm, shape, hctx, plan), prompt, shape.new,
                     warmup=args.warmup, after=after))
    if plan is not None:
        cell["hoid_plan"] = plan.optimize
        if plan.prefill is not None:  # again, with the prefill's measurements
            plan.save_archive(archive)
        plan.close()
    best, ours = cell["best_stock"].get("tokens_per_s"), decode_report.best_of(rows, "hoid").get("tokens_per_s")
    if best and ours:
        cell["hoid_over_best_stock"] = ours["value"] / best["value"]


def report(paths) -> str:
    """Runs of this benchmark merged (`decode_report.load`: cells by device, model and shape, rows by key, the
    later date winning) into decode's table over this workload's stock lattice, then each row and its file.
    Where one process cannot hold every row (at Qwen3-30B-A3B max-autotune's warm-up alone took 431 s of a
    call's 600, 12-07 on an H100), the rows run as slices on one machine and best stock is taken here."""
    cells = decode_report.load([Path(p) for p in paths], legacy=None)
    lines = [decode_report.markdown(cells, tuple(STOCK)), ""]
    for cell in cells:
        for r in cell["rows"]:
            tps = "-" if r.get("tokens_per_s") is None else f"{r['tokens_per_s']:.1f} tok/s"
            lines.append(f"- {cell['device']}, {cell['model']} {cell['shape']['key']}, {r['key']}: {tps}, "
                         f"{r.get('status')}, {r['date']} ({Path(r['source']).name})")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["report"]:
        if len(argv) < 2:
            print("usage: workload_qwen3_moe.py report RUN.json [RUN.json ...]", file=sys.stderr)
            return 2
        print(report(argv[1:]))
        return 0
    args = parse(argv)
    device, device_name = open_device(args.device)
    from hoid.models import build_model

    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    bandwidth, how = copy_bandwidth(device)
    begin = time.perf_counter()
    lm = build_model(args.model, dtype=torch.bfloat16, device=device, seed=args.seed)
    build_s = time.perf_counter() - begin
    weights, kv = active_weight_bytes(lm), decode_report.kv_bytes_per_position(lm.config)
    print(f"{args.model} on {device_name}: {weights / 2**30:.2f} GiB of weights read per step (batch 1), "
          f"{kv} KV bytes per position; copy bandwidth {bandwidth / 1e9:.0f} GB/s", flush=True)
    result = {"benchmark": "workload", "workload": "qwen3-moe", "format": 1, "model": args.model,
              "device": device_name, "dtype": "bf16", "date": date, "versions": versions(),
              "argv": argv, "bandwidth_bytes_per_s": bandwidth,
              "bandwidth_how": how, "active_weight_bytes": weights, "kv_bytes_per_position": kv,
              "model_build_s": build_s, "complete": False, "cells": []}
    args.out.mkdir(parents=True, exist_ok=True)
    slice_ = [] if (args.prompt, args.rows) == ([128, 1024], "default") else \
        ["p" + "_".join(map(str, args.prompt)), args.rows.replace(",", "_")]
    path = args.out / result_name("workload-qwen3-moe", args.model, *slice_)

    def save():
        save_json(path, result)

    with torch.no_grad():
        if args.experts and device.type == "cuda":
            result["experts"] = experts_table(lm, device, bandwidth)
            result["router"] = router_table(lm, device)
            save()
        if args.tune and device.type == "cuda":
            result["tuned"] = tune_table(lm)
            save()
        for prompt in args.prompt:
            shape = Shape(prompt, args.new, 1)
            roof = decode_report.roofline_tokens_per_s(weights, kv, prompt, args.new, 1, bandwidth)
            print(f"{args.model} {shape.key} (cache {shape.cache_len}): roofline {roof:.0f} tok/s", flush=True)
            cell = {"shape": {"prompt": prompt, "new": args.new, "batch": 1, "cache_len": shape.cache_len,
                              "key": shape.key}, "date": date, "roofline_tokens_per_s": roof, "rows": [],
                    "best_stock": {}, "gate_baseline": None}
            result["cells"].append(cell)
            run_shape(lm, shape, args, device, cell, save)
            if "hoid_over_best_stock" in cell:  # over this run's stock rows: say which, and which did not run
                best = cell["best_stock"]["tokens_per_s"]["key"]
                missing = decode_report.stock_not_run(cell, tuple(STOCK))
                print(f"  hoid / best stock of this run ({best}): {cell['hoid_over_best_stock']:.3f}x (target 1.3x)"
                      + (f"; not run: {', '.join(missing)} (`report` merges slices)" if missing else ""), flush=True)
            save()
    result["complete"] = True
    save()
    print(f"wrote {path}")
    errors = [f"{c['shape']['key']} {r['key']}" for c in result["cells"] for r in c["rows"]
              if r.get("status") == "error"]
    if errors:
        print(f"rows that raised: {', '.join(errors)}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

"""Decode throughput: hoid against the best stock PyTorch, one model per run (issue 21).

    python benchmarks/decode.py qwen3-1.7b --out DIR                  # every shape, every row
    python benchmarks/decode.py qwen3-1.7b --prompt 128 --batch 1 --rows stock --out DIR   # one slice
    python benchmarks/decode.py qwen3-1.7b --tiny --device cpu --prompt 8 --new 8 --out DIR  # CPU smoke

bfloat16, random weights from `hoid.models.configs` (no download). For each (prompt, batch): the stock
lattice (`decode_stock.ROWS`), then hoid (`decode_hoid`: optimize cold and warm, compile, export, backend),
all timed by the one loop (`decode_loop`); hoid's rows are gated against a float32 reference teacher-forced
on eager transformers' tokens (`decode_gate`), over enough sequences for --gate-samples (2048: 8 sequences at
batch 1 and 256 new tokens; the first is the timed prompt). The copy bandwidth is measured first, for the roofline.

Writes DIR/decode-MODEL[-slice].json (format 2: `decode_report` reads and merges them) and
DIR/reference.json (the reference rule: the first run's stock cells, read from --reference); prints a
table per shape. Exits 1 when a row raised (the row is recorded as an error, the run goes on).

Nothing finished is lost to a time limit: the JSON is rewritten (through a temporary file and a rename)
after every row, and names the row in flight (`running`); SIGTERM, Ctrl-C or a SystemExit inside a row
records `stopped` before the run ends. Every phase prints a line stamped with the seconds since the start,
flushed. File names use only [A-Za-z0-9._-] (what a GPU call brings back).

Slices (`benchmarks/h200_session.sh decode SLICE`: one 10-minute device call each) for Qwen3-1.7B p128 b1,
estimated from what the H200 measured: hf-eager 11 tok/s (256 tokens ~25 s, its teacher-forced baseline as
long a sequence: the gate's 8 took 143 s, made once and committed); torch.compile 74 s (reduce-overhead) and
62 s (max-autotune) per specialisation, twice here (the prefill is its own; results/decode.json); hoid's
rewrite of the step 20 s (same); hoid.optimize's journal (results/optimize): saturation and baseline 8 s, then
247 s in the region profile, which then timed every one of 2529 nodes (now its 86 signatures). From this CPU
(one free core): importing the 28-layer step takes 24 s, the prefill as long, its rewrite 16 s. Assumed: the
attempt in flight when the budget runs out ends within 70 s (a sweep's Triton compiles, k = 3 whole-graph
compiles), about 25 s to start and build the model, and ~130 s (export) and ~200 s (backend: two
specialisations, each traced, imported, rewritten, compiled) for the rows themselves.
"""

from __future__ import annotations

import datetime
import json
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

import decode_hoid  # noqa: E402
import decode_report  # noqa: E402
import decode_stock  # noqa: E402
from decode_args import GROUPS, output_name, parse  # noqa: E402
from decode_gate import Gate, add_sequences, gate_file, gate_prompts, reuse_gate, save_gate  # noqa: E402
from decode_loop import (  # noqa: E402
    Shape,
    elapsed,
    open_device,
    phase,
    progress,
    run_row,
    save_json,
    tokens_per_second,
)

__all__ = ["main", "tokens_per_second"]  # kernels_cute.py times its whole-model rows with the shared loop

def selected(text: str) -> list[str]:
    if text == "all":
        return GROUPS["stock"] + GROUPS["hoid"]
    keys = []
    for part in text.split(","):
        part = part.strip()
        keys += GROUPS.get(part, [part])
    unknown = [k for k in keys if k not in decode_stock.ROWS and k not in decode_hoid.ROWS]
    if unknown:
        raise SystemExit(f"--rows: unknown {', '.join(unknown)}; choose from all, {', '.join(GROUPS)}, "
                         + ", ".join(GROUPS["stock"] + GROUPS["hoid"]))
    return keys


def copy_bandwidth(device: torch.device) -> tuple[float, str]:
    """Read + write bytes per second of a large device-to-device copy, measured now."""
    if device.type == "cuda":
        from kernel_table import copy_bandwidth as measure  # benchmarks/kernel_table.py: the one copy-bandwidth probe

        return measure("cuda"), "2 GiB bf16 device-to-device copy (benchmarks/kernel_table.py copy_bandwidth)"
    from hoid.measure.cpu import calibrate_cpu

    return calibrate_cpu().copy_bandwidth, "64 MiB CPU copy (hoid.measure.cpu.calibrate_cpu)"


def versions() -> dict:
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    try:
        out["hoid_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                                            text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        out["hoid_commit"] = None
    out["hoid_source"] = source_hash()
    return out


def source_hash() -> str:
    """A hash of the code that ran (hoid/ and benchmarks/, every .py file, by path and text). The commit
    above is what the machine's .git says, and the GPU machine runs a copy of a working tree: its .git said
    a70b1b1 on 2026-12-03 for a tree at 717b9c8 with an edit. Compute this for a checkout to match a run."""
    import hashlib

    digest = hashlib.sha256()
    root = HERE.parent
    for path in sorted([*root.joinpath("hoid").rglob("*.py"), *HERE.glob("*.py")]):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def run_shape(lm, shape: Shape, keys: list[str], args, device, cell: dict, save) -> None:
    """Every selected row of one shape into `cell["rows"]`, `save()`d after each (a slice cut off by a time
    limit keeps the rows it finished)."""
    torch.manual_seed(args.seed)
    prompt = torch.randint(0, lm.config.vocab_size, (shape.batch, shape.prompt), device=device)
    gate_wanted = not args.no_gate and (args.gate_stock or any(k in decode_hoid.ROWS for k in keys))
    held: dict = {}
    stock_ctx = decode_stock.Context(device, compile_prefill=not args.eager_prefill, cpu_inductor=args.cpu_inductor)
    rows = cell["rows"]

    prompts = [prompt, *gate_prompts(args.gate_samples, shape, lm.config.vocab_size, args.seed, device)]
    cached = gate_file(args.gate_cache, args.model, shape, args.seed, len(prompts))

    def eager_after(decoder, row, tokens):  # hf-eager's tokens are the gate's teacher
        if gate_wanted:
            with phase("gate: float32 reference logits (once per shape)"):
                gate = Gate(lm, prompt, tokens)
            if len(prompts) > 1:  # one batched eager generation gives the other sequences' teacher tokens
                with phase(f"gate: eager teacher tokens and references for {len(prompts) - 1} more sequence(s)"):
                    add_sequences(gate, decoder, prompts[1:], shape)
            held["gate"] = gate
            with phase(f"gate: eager bfloat16 baseline, teacher-forced over {len(prompts)} sequence(s)"):
                row["gate_baseline"] = cell["gate_baseline"] = gate.set_baseline(decoder)
            cell["gate_sequences"] = len(prompts)
            if cached is not None:
                save_gate(cached, lm, gate)

    def stock_after(decoder, row, tokens):
        if "gate" not in held:
            return
        steps = len(held["gate"].sequences) * shape.new
        estimate = steps / row["steps_per_s"]
        if estimate > args.gate_stock_max_s:
            row["gate"] = {"informational": True, "skipped": f"{steps} teacher-forced steps at this row's "
                           f"{row['steps_per_s']:.0f} steps/s: ~{estimate:.0f} s, over --gate-stock-max-s "
                           f"{args.gate_stock_max_s:g}"}
            return
        held["gate"].judge(decoder, row, informational=True)

    def done(row):
        row["date"] = cell["date"]
        if row.get("tokens_per_s") is not None:
            row["roofline_fraction"] = row["tokens_per_s"] / cell["roofline_tokens_per_s"]
        rows.append(row)
        cell.pop("running", None)
        cell["best_stock"] = decode_report.best_of(rows)
        print(_line(row), flush=True)
        save()

    def starting(key):  # on disk before the row runs: a run killed inside it says which row it was
        cell["running"] = {"key": key, "since_s": round(elapsed(), 1)}
        save()

    if gate_wanted and "hf-eager" not in keys and cached is not None and cached.is_file():
        with phase(f"gate: teacher tokens and eager baseline from {cached} (hf-eager not run again)"):
            if (loaded := reuse_gate(cached, lm, prompts, cell)) is not None:
                held["gate"] = loaded
    # hf-eager runs first, and always where the gate needs it: its tokens are what every gated row is fed
    for key in [k for k in decode_stock.ROWS
                if k in keys or (k == "hf-eager" and gate_wanted and "gate" not in held)]:
        name, build = decode_stock.ROWS[key]
        starting(key)
        after = eager_after if key == "hf-eager" else stock_after if args.gate_stock and not args.no_gate else None
        done(run_row(key, name, "stock", lambda b=build: b(lm, shape, stock_ctx), prompt, shape.new,
                     warmup=args.warmup, after=after))
    hoid_keys = [k for k in decode_hoid.ROWS if k in keys]
    if not hoid_keys:
        return
    budget = None
    if args.optimize_budget is not None:
        from hoid.agent import Budget

        budget = Budget.parse(args.optimize_budget)
    agent = args.agent.split(",") if args.agent else None
    ctx = decode_hoid.Context(device, budget=budget, profile=not args.no_profile, agent=agent, warm=not args.no_warm)
    plan, failure = None, None
    starting("hoid.optimize")
    try:
        plan = decode_hoid.prepare(lm, shape, ctx)
    except Exception as e:  # every hoid row of this shape reports it
        import traceback

        traceback.print_exc()
        failure = f"hoid.optimize failed: {type(e).__name__}: {e}"
    if plan is not None:
        archive = args.out / f"hoid-run-{args.model}-{shape.key}.tar.gz"
        plan.save_archive(archive)
    gate = held.get("gate")
    for key in hoid_keys:
        name, build = decode_hoid.ROWS[key]
        if plan is None:
            done({"key": key, "name": name, "group": "hoid", "status": "error", "reason": failure})
            continue
        after = (lambda d, r, t: gate.judge(d, r)) if gate is not None else None
        starting(key)
        done(run_row(key, name, "hoid", lambda b=build: b(lm, shape, ctx, plan), prompt, shape.new,
                     warmup=args.warmup, after=after))
    if plan is not None:
        if plan.prefill is not None:  # again, with the prefill's measurements (a row cut off loses only those)
            plan.save_archive(archive)
        plan.close()


def _line(row: dict) -> str:
    if row.get("status") != "ok":
        return f"  {row['key']:<28} {row['status']}: {row.get('reason')}"
    gate = row.get("gate")
    if gate is None:
        gate = ""
    elif gate.get("informational"):  # never `failed`: say what the verdict was, or that there was none
        gate = "  gate (info) " + ("skipped" if "skipped" in gate else "error" if "error" in gate
                                   else "ok" if gate["passed"] else "failed")
    else:
        gate = "  gate FAILED" if row.get("failed") else "  gate ok"
    return (f"  {row['key']:<28} {row['tokens_per_s']:9.1f} tok/s  TTFT {row['ttft_s'] * 1e3:8.2f} ms  "
            f"roofline {row.get('roofline_fraction', 0):5.1%}{gate}")


class Stopped(SystemExit):
    """SIGTERM (what `timeout` sends) as an exception, so the run records where it stopped before it ends."""


def _on_sigterm(signum, frame):
    raise Stopped(128 + signum)



def main(argv=None) -> int:
    args = parse(argv)
    keys = selected(args.rows)
    if args.gpus > 1:
        import decode_parallel

        return decode_parallel.run(args, keys, argv if argv is not None else sys.argv[1:])
    device, device_name = open_device(args.device)
    from hoid.models import build_model

    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    with phase("copy bandwidth"):
        bandwidth, how = copy_bandwidth(device)
    begin = time.perf_counter()
    with phase(f"build {args.model}"):
        lm = build_model(args.model, dtype=torch.bfloat16, device=device, seed=args.seed)
    build_s = time.perf_counter() - begin
    weights = decode_report.streamed_weight_bytes(lm)
    kv = decode_report.kv_bytes_per_position(lm.config)
    print(f"{args.model} on {device_name}: {weights / 2**30:.2f} GiB of weights per step, {kv} KV bytes per "
          f"position; copy bandwidth {bandwidth / 1e9:.0f} GB/s", flush=True)
    reference_path = args.reference or args.out / "reference.json"
    reference = json.loads(reference_path.read_text()) if reference_path.is_file() else {"cells": {}}
    result = {"benchmark": "decode", "format": 2, "model": args.model, "device": device_name, "dtype": "bf16",
              "date": date, "versions": versions(), "argv": sys.argv[1:] if argv is None else list(argv),
              "bandwidth_bytes_per_s": bandwidth, "bandwidth_how": how, "weight_bytes": weights,
              "kv_bytes_per_position": kv, "model_build_s": build_s, "note": args.note,
              "warm_optimize": not args.no_warm, "complete": False, "cells": []}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / output_name(args)

    def save():
        save_json(path, result)

    def write_reference():
        if not args.no_write_reference:
            (args.out / "reference.json").write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _run_cells(args, keys, lm, device, device_name, weights, kv, bandwidth, reference, result, save)
    except BaseException as e:  # SIGTERM, Ctrl-C, a SystemExit inside a row: say so in the file, then end
        running = [c["running"] for c in result["cells"] if c.get("running")]
        result["stopped"] = {"by": f"{type(e).__name__}: {e}", "at_s": round(elapsed(), 1),
                             "running": running[-1] if running else None}
        # the rows that finished are first runs as much as a whole slice's (2026-12-04: a cut Qwen3-1.7B
        # slice brought back hf-static and hf-compile-default but no reference cells for them)
        for cell in result["cells"]:
            if "reference_check" not in cell:
                _check_reference(reference, device_name, args, cell)
        save()
        write_reference()
        progress(f"stopped by {type(e).__name__}; {path} holds every finished row")
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    result["complete"] = True
    save()
    write_reference()
    cells = decode_report.load(path, legacy=None)
    print(decode_report.markdown(cells))
    print(f"wrote {path}" + ("" if args.no_write_reference else f" and {args.out / 'reference.json'}"))
    try:
        print(f"wrote {decode_report.plot(cells, path.with_suffix('.png'))}")
    except ImportError as e:  # matplotlib is the `report` extra; the JSON and the table are the results
        print(f"no plot: {e} (pip install matplotlib; then benchmarks/decode_report.py --plot)", file=sys.stderr)
    errors = [f"{c['shape']['key']} {r['key']}" for c in result["cells"] for r in c["rows"]
              if r.get("status") == "error"]
    if errors:
        print(f"rows that raised: {', '.join(errors)}", file=sys.stderr)
    return 1 if errors else 0


def _run_cells(args, keys, lm, device, device_name, weights, kv, bandwidth, reference, result, save) -> None:
    with torch.no_grad():
        for prompt in args.prompt:
            for batch in args.batch:
                shape = Shape(prompt, args.new, batch)
                roof = decode_report.roofline_tokens_per_s(weights, kv, prompt, args.new, batch, bandwidth)
                print(f"{args.model} {shape.key} (cache {shape.cache_len}): roofline {roof:.0f} tok/s", flush=True)
                cell = {"shape": {"prompt": prompt, "new": args.new, "batch": batch, "cache_len": shape.cache_len,
                                  "key": shape.key}, "date": result["date"], "roofline_tokens_per_s": roof, "rows": [],
                        "best_stock": {}, "gate_baseline": None}
                result["cells"].append(cell)
                run_shape(lm, shape, keys, args, device, cell, save)
                _check_reference(reference, device_name, args, cell)
                save()


def _check_reference(reference: dict, device_name: str, args, cell: dict) -> None:
    """The cell's stock rows against the reference (`decode_report.check_reference`), which takes any it lacks."""
    cell["reference_check"], _ = decode_report.check_reference(
        reference, decode_report.cell_id(device_name, args.model, cell["shape"]["key"]), cell["rows"], args.note)


if __name__ == "__main__":
    sys.exit(main())

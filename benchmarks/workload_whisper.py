"""Whisper-large-v3 (issue 25): the encoder on 30 s of audio and the decoder's decode step, hoid against stock.

    python benchmarks/workload_whisper.py --out DIR                          # H200: both parts, every row
    python benchmarks/workload_whisper.py --tiny --device cpu --new 4 --out DIR   # CPU smoke

bfloat16, random weights from `hoid.models.whisper` (no download). Each part runs, in one process: eager
PyTorch; torch.compile reduce-overhead; max-autotune; max-autotune with coordinate-descent tuning; and hoid
(`hoid.search` for the H200, or `hoid.optimize` with `--optimize-budget`: `forward_loop.hoid_plan`; then
`hoid.compile`, with CUDA graphs on a GPU); and hoid-export: the same plan (one optimize a part) as a
`hoid.export` package run as plain PyTorch (the encoder's: `forward_loop.export_row`; the decode step's:
`exported_step`, its cache and cross K/V as buffers). Rows that need CUDA say so on the CPU.

- encoder: input_features [1, 128, 3000] -> states [1, 1500, 1280]; latency is the median of `--repeats`
  calls (`forward_loop.time_call`). Gate: the states' relative L2 against a float32 copy of the weights (the
  bf16 values, upcast) on the same features, at most 1.5x eager bf16's.
- decode: batch 1, greedy from the start token for `--new` tokens over a static self-attention cache of
  `--cache-len` slots, reading cross-attention K/V computed once from the encoder's states (inputs of the
  step, as in `hoid.models.whisper`); timed and gated by `decode_loop` / `hoid.testing.gate`: logits
  teacher-forced on eager's tokens against a float32 step over the same (upcast) cross K/V.

Every weight set is far above the H200's L2 (1.3 GB encoder, 1.8 GB step in bf16), so nothing is rotated.
Writes DIR/workload-MODEL[-PARTS][-ROWS].json (`output_name`) and prints a table. Exits 1 when a row raised.
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

from decode_gate import Gate  # noqa: E402
from decode_loop import (  # noqa: E402
    Decoder,
    budget_arg,
    built,
    greedy,
    last_logits,
    paired,
    peak_bytes,
    phase,
    record_row,
    release,
    result_name,
    run_row,
    save_json,
)
from decode_stock import COMPILE_ROWS, compile_stock  # noqa: E402
from forward_loop import HOID_ROWS, NO_BASELINE, SharedPlan, export_row, gate_word, time_call  # noqa: E402

from hoid.testing.gate import ERROR_FACTOR  # noqa: E402

STOCK = {  # key -> (name, torch.compile mode or None for eager, coordinate-descent tuning)
    "eager": ("eager PyTorch", None, False),
    **{k: COMPILE_ROWS[k] for k in ("compile-reduce-overhead", "compile-max-autotune", "compile-max-autotune-cd")},
}
# its plan is made for the H200 where there is no GPU (hoid_plan_of), which the row's name says
HOID = {**HOID_ROWS, "hoid": "hoid.search (the GPU at hand; on a CPU the H200), or hoid.optimize with "
                             "--optimize-budget (its plan) + hoid.compile"}


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="whisper-large-v3-tiny (2 + 2 layers, d_model 64)")
    ap.add_argument("--device", default=None, help="cuda (default when there is one) or cpu")
    ap.add_argument("--parts", nargs="+", default=["encoder", "decode"], choices=["encoder", "decode"])
    ap.add_argument("--rows", default="all", help="all, or keys joined by commas: " + ", ".join([*STOCK, *HOID]))
    ap.add_argument("--new", type=int, default=128, help="decode: new tokens after the start token")
    ap.add_argument("--cache-len", type=int, default=None, help="decode: self-attention cache slots "
                    "(default: the decoder's max_target_positions, 448)")
    ap.add_argument("--repeats", type=int, default=20, help="encoder: timed calls (the median is reported)")
    ap.add_argument("--warmup", type=int, default=3, help="decode: warm-up steps before the timed ones")
    ap.add_argument("--optimize-budget", default=None, type=budget_arg,
                    help="hoid's plan by hoid.optimize with this budget (e.g. "
                    "'2m': issue 25's row) instead of hoid.search alone")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "workloads")
    args = ap.parse_args(argv)
    keys = [*STOCK, *HOID] if args.rows == "all" else [k.strip() for k in args.rows.split(",")]
    unknown = [k for k in keys if k not in STOCK and k not in HOID]
    if unknown:
        raise SystemExit(f"--rows: unknown {', '.join(unknown)}; choose from all, " + ", ".join([*STOCK, *HOID]))
    args.keys = keys
    return args


# --- stock rows ------------------------------------------------------------------------------------
def stock_fn(fn, key: str, device: torch.device):
    """`fn` as the stock row `key` runs it (`decode_stock.compile_stock`, graph breaks allowed). Returns
    (callable, close)."""
    _, mode, cd = STOCK[key]
    if mode is None:
        return fn, None
    compiled, _, close = compile_stock(fn, mode, device, fullgraph=False, cd=cd)
    return compiled, close


def hoid_plan_of(make_graph, args, device: torch.device, journal) -> SharedPlan:
    """The part's plan (`forward_loop.SharedPlan`: `hoid.optimize` with `--optimize-budget`, else `hoid.search`
    for the GPU at hand, on a CPU for the H200), made once for its hoid rows."""
    return SharedPlan(make_graph, device, args.optimize_budget, target="h200", journal=journal)


def hoid_compiled(plan: SharedPlan, device: torch.device):
    """(compiled callable, info): the plan compiled for `device`."""
    import hoid

    planned, info = plan.get()
    begin = time.perf_counter()
    compiled = hoid.compile(planned, device=device)
    info["compile_s"] = time.perf_counter() - begin
    return compiled, info


# --- encoder ---------------------------------------------------------------------------------------
def relative_l2(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


def encoder_part(model, args, device, saved=lambda rows: None) -> list[dict]:
    from hoid.models import whisper

    torch.manual_seed(args.seed)
    cfg = model.config
    features = torch.randn((1, cfg.num_mel_bins, whisper.mel_frames(model)), device=device).to(model.dtype)
    module = whisper.EncoderForward(model).eval()
    reference = whisper.EncoderForward(copy.deepcopy(model).float()).eval()(features.float())
    release(device)
    plan = hoid_plan_of(lambda: whisper.encoder_graph(model), args, device, args.out / "journal-whisper-encoder.sqlite")
    rows, held = [], {"eager": None}
    for key in [k for k in [*STOCK, *HOID] if k in args.keys or k == "eager"]:
        name = STOCK[key][0] if key in STOCK else HOID[key]

        def work(row: dict, closers: list, key=key) -> None:
            begin = time.perf_counter()
            with phase(f"{key}: build"):  # a call cut off at its limit says in its log where the time went
                if key in STOCK:
                    fn, close = stock_fn(module, key, device)
                    closers.extend([close] if close else [])
                elif key == "hoid-export":
                    planned, info = plan.get()
                    fn, info, close = export_row(planned, info["kernels"], "hoid_whisper_encoder", device)
                    closers.append(close)
                    row.update(info)
                else:
                    compiled, info = hoid_compiled(plan, device)
                    row.update(info)
                    fn = lambda x, c=compiled: c(x)[0]  # noqa: E731
            row["build_s"] = time.perf_counter() - begin
            built(row, device)
            with phase(f"{key}: time (the first calls compile and capture)"):
                row.update(time_call(fn, (features,), device, args.repeats))
            row["peak_bytes"] = peak_bytes(device)
            error = relative_l2(fn(features).float(), reference)
            if key == "eager":
                held["eager"] = error
            eager = held["eager"]
            bound = None if eager is None else ERROR_FACTOR * eager
            row["gate"] = {"relative_l2": error, "eager_relative_l2": eager, "bound": bound,
                           "passed": bound is not None and error <= bound}
            if bound is None:  # no eager row ran before this one: not judged (`forward_loop.gate_word`)
                row["gate"]["error"] = NO_BASELINE
            row["failed"] = not row["gate"]["passed"]

        row = record_row(key, name, "stock" if key in STOCK else "hoid", device, work)
        rows.append(row)
        saved(rows)  # each row on disk as it finishes: a call cut at its limit keeps those that ran
        print(_line(row, "latency_s"), flush=True)
    return rows


# --- decode ----------------------------------------------------------------------------------------
def cross_kv(model, features) -> list[torch.Tensor]:
    from hoid.models import whisper

    states = whisper.EncoderForward(model).eval()(features)
    return list(whisper.CrossKV(model).eval()(states))


def decode_part(model, args, device, saved=lambda rows: None) -> list[dict]:
    from hoid.models import whisper

    cfg = model.config
    cache_len = args.cache_len or cfg.max_target_positions
    if args.new + 1 > cache_len:
        raise SystemExit(f"--new {args.new} needs {args.new + 1} cache slots; --cache-len is {cache_len}")
    torch.manual_seed(args.seed)
    features = torch.randn((1, cfg.num_mel_bins, whisper.mel_frames(model)), device=device).to(model.dtype)
    cross = cross_kv(model, features)
    start = torch.full((1, 1), cfg.decoder_start_token_id, dtype=torch.long, device=device)
    held = {}

    def stock(key):
        module = whisper.WhisperDecodeStep(model, cache_len).eval()
        logits = lambda ids, pos: module(ids, pos, *cross)  # noqa: E731
        fn, close = stock_fn(lambda ids, pos: greedy(logits(ids, pos)), key, device)
        gated = {"prefill_logits": lambda i, p: last_logits(logits(i, p)),
                 "step_logits": lambda i, p: last_logits(logits(i, p))} if key == "eager" else {}
        return Decoder(prefill=fn, step=fn, close=close, **gated)

    plan = hoid_plan_of(lambda: whisper.decode_step_graph(model, cache_len), args, device,
                        args.out / "journal-whisper-decode.sqlite")

    def ours():
        compiled, info = hoid_compiled(plan, device)
        inputs = {"cross": cross}

        def logits(ids, pos):
            out = compiled(ids, pos, *inputs["cross"], *compiled.state)[0]
            if compiled.captured and inputs["cross"] is cross:
                # the CUDA graph was recorded over copies of its inputs: hand it those from now on, as a
                # loop hands back its state, rather than copying 64 cross K/V tensors in at every step
                inputs["cross"] = compiled.input_buffers[2:2 + len(cross)]
            return out

        step = lambda ids, pos: greedy(logits(ids, pos))  # noqa: E731
        describe = lambda: {"captured": compiled.captured, "cuda_graph_reason": compiled.cuda_graph_reason,  # noqa: E731
                            "input_copies": compiled.stats.input_copies, "state_copies": compiled.stats.state_copies}
        return Decoder(prefill=step, step=step, prefill_logits=lambda i, p: last_logits(logits(i, p)),
                       step_logits=lambda i, p: last_logits(logits(i, p)), info=info, describe=describe)

    def exported():
        planned, info = plan.get()
        return exported_step(planned, info["kernels"], cross, device)

    def eager_after(decoder, row, tokens):
        held["gate"] = DecodeGate(model, cache_len, cross, start, tokens)
        row["gate_baseline"] = held["gate"].set_baseline(decoder)

    rows = []
    for key in [k for k in [*STOCK, *HOID] if k in args.keys or k == "eager"]:
        if key in STOCK:
            after = eager_after if key == "eager" else None
            row = run_row(key, STOCK[key][0], "stock", lambda k=key: stock(k), start, args.new,
                          warmup=args.warmup, after=after)
        else:
            gate = held.get("gate")
            build = ours if key == "hoid" else exported
            row = run_row(key, HOID[key], "hoid", build, start, args.new, warmup=args.warmup,
                          after=(lambda d, r, t, g=gate: g.judge(d, r)) if gate else None)
        if row.get("steps_per_s"):
            row["latency_s"] = 1 / row["steps_per_s"]
        rows.append(row)
        saved(rows)  # each row on disk as it finishes: a call cut at its limit keeps those that ran
        print(_line(row, "latency_s"), flush=True)
    return rows


def exported_step(planned, kernels: dict, cross, device: torch.device) -> Decoder:
    """The decode step's `hoid.export` package, plain PyTorch: the cross K/V and the self-attention cache as
    the module's buffers (`decode_hoid.Stateful`), under torch.compile reduce-overhead on a GPU, as the LLM
    decoders' hoid-export row runs theirs."""
    import tempfile

    from decode_hoid import Stateful, forget_package, import_package

    from hoid.models import empty_cache

    folder, name = tempfile.TemporaryDirectory(prefix="hoid_whisper_step_"), "hoid_whisper_step"
    begin = time.perf_counter()
    model = import_package(planned, Path(folder.name), name, device)
    info = {"export_s": time.perf_counter() - begin, "kernels": kernels}
    step = Stateful(model, empty_cache(planned, device), 1, fixed=cross)
    info["copied_back_states"] = len(step.copy_back)
    if device.type == "cuda":
        step = torch.compile(step, mode="reduce-overhead", fullgraph=True, dynamic=False)
        info["compiled"] = "torch.compile reduce-overhead"
    else:
        info["compiled"] = "eager (CPU: reduce-overhead's CUDA graphs need CUDA)"

    def close():
        forget_package(name)
        folder.cleanup()

    return paired(step, step, info=info, close=close)


class DecodeGate(Gate):
    """decode_gate.Gate's rule for the Whisper step: a float32 step (the bf16 weights and cross K/V,
    upcast) run once over start + tokens gives the reference logits of every teacher-forced step."""

    def __init__(self, model, cache_len: int, cross, start: torch.Tensor, tokens: torch.Tensor):
        self.cache_len, self.cross = cache_len, cross
        super().__init__(model, start, tokens)

    def reference(self, start: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        from hoid.models import whisper

        reference = whisper.WhisperDecodeStep(copy.deepcopy(self.lm).float(), self.cache_len).eval()
        sequence = torch.cat([start, tokens[:, :-1]], dim=1)
        position = torch.zeros((1,), dtype=torch.long, device=start.device)
        logits = reference(sequence, position, *[c.float() for c in self.cross])  # [1, N, V]
        del reference
        release(start.device)
        return logits.float().transpose(0, 1).contiguous()  # [N, 1, V]


# --- report ----------------------------------------------------------------------------------------
def summary(rows: list[dict]) -> dict:
    """Best stock (lowest latency among rows that ran), hoid's latency and its speedup over it."""
    ran = [r for r in rows if r.get("status") == "ok" and r.get("latency_s")]
    stock = [r for r in ran if r["group"] == "stock"]
    best = min(stock, key=lambda r: r["latency_s"]) if stock else None
    ours = next((r for r in ran if r["key"] == "hoid"), None)
    out = {"best_stock": None if best is None else {"key": best["key"], "latency_s": best["latency_s"]}}
    if best is not None and ours is not None:
        out["hoid_speedup"] = best["latency_s"] / ours["latency_s"]
        out["hoid_gate_passed"] = not ours.get("failed", True)
    return out


def _line(row: dict, metric: str) -> str:
    if row.get("status") != "ok":
        return f"  {row['key']:<26} {row['status']}: {row.get('reason')}"
    gate = gate_word(row)
    peak = row.get("peak_bytes")
    mem = f"  peak {peak / 2**30:6.2f} GiB" if peak else ""
    return f"  {row['key']:<26} {row[metric] * 1e3:10.3f} ms{mem}{gate}"


def main(argv=None) -> int:
    args = parse(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA GPU here (use --device cpu --tiny for the smoke run)")
    from decode import versions

    from hoid.models import whisper

    name = "whisper-large-v3-tiny" if args.tiny else "whisper-large-v3"
    begin = time.perf_counter()
    model = whisper.build_model(name, dtype=torch.bfloat16, device=device, seed=args.seed)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})"
    result = {"benchmark": "workload-whisper", "model": name, "device": device_name, "dtype": "bf16",
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "versions": versions(),
              "argv": sys.argv[1:] if argv is None else list(argv), "model_build_s": time.perf_counter() - begin,
              "parts": {}, "complete": False}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / output_name(name, args)
    parts = {"encoder": encoder_part, "decode": decode_part}

    def saved(part: str, rows: list[dict]) -> None:  # each part's rows so far, written as each row finishes
        result["parts"][part] = {"rows": rows, **summary(rows)}
        save_json(path, result)

    with torch.no_grad():
        for part in args.parts:
            print(f"{name} {part} on {device_name}:", flush=True)
            parts[part](model, args, device, lambda rows, part=part: saved(part, rows))
    result["complete"] = True
    save_json(path, result)
    print(table(result))
    print(f"wrote {path}")
    errors = [f"{p} {r['key']}" for p, v in result["parts"].items() for r in v["rows"] if r.get("status") == "error"]
    if errors:
        print(f"rows that raised: {', '.join(errors)}", file=sys.stderr)
    return 1 if errors else 0


def output_name(model: str, args) -> str:
    """workload-MODEL[-PARTS][-ROWS].json: slices of one run (one part, some rows) do not overwrite each other."""
    parts = [f"workload-{model}"]
    if args.parts != ["encoder", "decode"]:
        parts.append("_".join(args.parts))
    if args.rows != "all":
        parts.append(args.rows.replace(",", "_"))
    return result_name(*parts)


def table(result: dict) -> str:
    lines = ["| part | row | latency ms | peak GiB | gate |", "|---|---|---:|---:|---|"]
    for part, value in result["parts"].items():
        for r in value["rows"]:
            if r.get("status") != "ok":
                lines.append(f"| {part} | {r['key']} | {r['status']} | | |")
                continue
            peak = f"{r['peak_bytes'] / 2**30:.2f}" if r.get("peak_bytes") else ""
            gate = "" if "gate" not in r else ("failed" if r.get("failed") else "ok")
            lines.append(f"| {part} | {r['key']} | {r['latency_s'] * 1e3:.3f} | {peak} | {gate} |")
        if "hoid_speedup" in value:
            lines.append(f"| {part} | hoid vs best stock ({value['best_stock']['key']}) | "
                         f"{value['hoid_speedup']:.2f}x | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

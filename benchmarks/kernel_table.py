"""The Triton kernel library on the GPU at hand: checked, tuned and timed against torch eager and
`torch.compile`, at the decode shapes of Qwen3-1.7B, Qwen3-4B and Llama-3.1-8B and at large shapes.

    PYTHONPATH=. python3 benchmarks/kernel_table.py --out benchmarks/results
    PYTHONPATH=. TRITON_INTERPRET=1 python3 benchmarks/kernel_table.py --smoke   # the code paths, on the CPU

Every figure comes from hoid's CUDA timer: CUDA-graph replay of back-to-back calls, inputs rotated
through copies totalling 4x the L2, so weights come from memory, not L2. For each case: the relative L2
error of hoid's output against torch on float32-upcast inputs, the three times, hoid's achieved GB/s
over the fewest bytes the work must move, and that as a fraction of the copy bandwidth measured at the
start. GEMV params are tuned first (`hoid.measure.tune`, cached in `kernels_measure.sqlite` beside the JSON).
Writes `kernels.json` and `kernels.md` (the README's table) under --out.

Not named `kernels.py`: a script's folder comes first on `sys.path`, and transformers (5.25) imports the
Hugging Face package `kernels` when it is installed, so a sibling of that name broke every benchmark that
imports transformers (`tests/benchmarks/test_script_names.py`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

import hoid.kernels
from hoid.ir import TensorType
from hoid.measure import MeasureCache, time_cuda, tune

sys.path.insert(0, str(Path(__file__).parent))
from kernel_cases import Case, build_cases, gb_per_s  # noqa: E402

BOUND = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3, torch.float32: 1e-5}


def copy_seconds(elements: int, device: str = "cuda", rotate: bool = True, graph: bool | None = True) -> float:
    """Seconds for torch to copy `elements` bf16 values (2 bytes read and 2 written each)."""
    src = torch.randn(elements, device=device, dtype=torch.bfloat16)
    return time_cuda(lambda s, d: d.copy_(s), [src, torch.empty_like(src)], rotate=rotate, graph=graph,
                     repeat=20).median


def copy_bandwidth(device: str) -> float:
    """Bytes read plus written per second by a 2 GiB device-to-device copy."""
    return 2 * 2**30 * 2 / copy_seconds(2**30, device, rotate=False, graph=None)


def outputs_for(spec, inputs: list[torch.Tensor], attrs: dict, aliased: dict[int, int]) -> list[torch.Tensor]:
    types = spec.output_types([TensorType.of(x) for x in inputs], attrs)
    return [inputs[aliased[i]] if i in aliased else torch.empty(t.shape, dtype=t.torch_dtype,
                                                                  device=inputs[0].device)
            for i, t in enumerate(types)]


def relative_error(case: Case, spec, inputs, attrs, params) -> float:
    """The worst relative L2 error of hoid's outputs against torch eager on float32-upcast inputs."""
    mine = [x.clone() for x in inputs]
    outs = outputs_for(spec, mine, attrs, case.aliased)
    spec.launch(*mine, *outs, **attrs, **params)
    wide = [x.float() if x.is_floating_point() else x.clone() for x in inputs]
    ref = case.eager(*wide, **attrs)
    ref = list(ref) if isinstance(ref, tuple) else [ref]
    ref += [wide[case.aliased[i]] for i in sorted(case.aliased)]
    errors = [((o.float() - r.float()).norm() / r.float().norm().clamp_min(1e-30)).item()
              for o, r in zip(outs, ref, strict=True)]
    return max(errors) if all(math.isfinite(e) for e in errors) else float("inf")


def tuned_params(case: Case, spec, inputs, attrs, cache, smoke: bool) -> tuple[dict, str]:
    if not case.candidates:
        return spec.default_params(), "defaults"
    types = [TensorType.of(x) for x in inputs]
    candidates = case.candidates[:2] if smoke else case.candidates
    try:
        result = tune(spec, types, attrs, cache=cache, candidates=candidates, **({} if smoke else {"repeat": 15}))
    except RuntimeError as e:  # e.g. a default timing the roofline gate calls suspect: said in the results
        return spec.default_params(), f"not tuned: {str(e).splitlines()[0]}"
    return result.params, result.reason


def time_case(case: Case, spec, inputs, attrs, params, compile_torch: bool) -> dict:
    outs = outputs_for(spec, inputs, attrs, case.aliased)
    seconds = {"hoid": time_cuda(lambda *a: spec.launch(*a, **attrs, **params), inputs + outs, graph=True,
                                 repeat=20).median,
               "eager": time_cuda(lambda *a: case.eager(*a, **attrs), inputs, graph=True, repeat=20).median}
    if compile_torch:
        compiled = torch.compile(case.eager, dynamic=False)
        seconds["compile"] = time_cuda(lambda *a: compiled(*a, **attrs), inputs, graph=True, repeat=20).median
    return seconds


def run_case(case: Case, cache, bandwidth: float, smoke: bool, compile_torch: bool) -> dict:
    spec = hoid.kernels.get(case.kernel)
    inputs, attrs = case.inputs()
    row = {"kernel": case.kernel, "model": case.model, "what": case.what, "moved_bytes": case.moved,
           "shapes": [str(TensorType.of(x)) for x in inputs]}
    unmet = spec.rejects([TensorType.of(x) for x in inputs], attrs)
    if unmet:
        return {**row, "error": f"rejected: {unmet}"}
    params, why = tuned_params(case, spec, inputs, attrs, cache, smoke)
    row.update(params=params, tuning=why, rel_error=relative_error(case, spec, inputs, attrs, params))
    row["correct"] = row["rel_error"] <= BOUND[inputs[0].dtype if inputs[0].is_floating_point() else torch.float32]
    if smoke:
        return row
    seconds = time_case(case, spec, inputs, attrs, params, compile_torch)
    best_torch = min(v for k, v in seconds.items() if k != "hoid")
    row.update(seconds=seconds, gbps=gb_per_s(case.moved, seconds["hoid"]),
               bandwidth_fraction=case.moved / seconds["hoid"] / bandwidth, speedup_vs_best_torch=best_torch /
               seconds["hoid"])
    if "compile" in seconds:
        row["within_compile_target"] = seconds["hoid"] <= seconds["compile"] + max(0.05 * seconds["compile"], 0.5e-6)
    return row


def merged(old: list[dict], new: list[dict]) -> list[dict]:
    """`old` rows with those of the same case replaced by `new` ones, in `old`'s order; a torch.compile time
    the new run left out is kept from the old row, marked as such (`compile_from`). A new row that failed
    (an error, or past the deadline) never replaces measured figures: the old row stays, with the error
    noted under `rerun_error`."""
    fresh = {(r["kernel"], r["model"], r["what"]): r for r in new}
    rows = []
    for r in old:
        n = fresh.pop((r["kernel"], r["model"], r["what"]), r)
        if "error" in n and "error" not in r:
            n = {**r, "rerun_error": n["error"]}
        earlier = r.get("seconds", {}).get("compile")
        if n is not r and earlier is not None and "seconds" in n and "compile" not in n["seconds"]:
            n["seconds"]["compile"], n["compile_from"] = earlier, r.get("date", "the earlier run")
            n["speedup_vs_best_torch"] = min(n["seconds"]["eager"], earlier) / n["seconds"]["hoid"]
            n["within_compile_target"] = n["seconds"]["hoid"] <= earlier + max(0.05 * earlier, 0.5e-6)
        rows.append(n)
    return rows + list(fresh.values())


def table(rows: list[dict]) -> str:
    head = ("| kernel | model | case | hoid us | eager us | compile us | hoid GB/s | of BW | vs best torch | err |\n"
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kernel']} | {r['model']} | {r['what']} | {r['error']} |||||||")
            continue
        us = {k: f"{r.get('seconds', {})[k] * 1e6:.2f}" if k in r.get("seconds", {}) else "-"
              for k in ("hoid", "eager", "compile")}
        frac = f"{r['bandwidth_fraction']:.0%}" if "bandwidth_fraction" in r else "-"
        gbps = f"{r['gbps']:.0f}" if "gbps" in r else "-"
        speed = f"{r['speedup_vs_best_torch']:.2f}x" if "speedup_vs_best_torch" in r else "-"
        lines.append(f"| {r['kernel'].removeprefix('triton.')} | {r['model']} | {r['what']} | {us['hoid']} | "
                     f"{us['eager']} | {us['compile']} | {gbps} | {frac} | {speed} | {r['rel_error']:.1e} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU, no timing (interpreter)")
    ap.add_argument("--only", default="", help="comma-separated: run the cases whose kernel id or model "
                    "contains one of these")
    ap.add_argument("--merge", action="store_true", help="replace these cases' rows in an existing kernels.json")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--budget", type=float, default=480, help="seconds; torch.compile is left out past it")
    ap.add_argument("--deadline", type=float, default=1e9, help="seconds; the cases left are not run past it")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.smoke else "cuda"
    cases = build_cases(device, torch.float16 if args.smoke else torch.bfloat16, scale=64 if args.smoke else 1)
    wanted = args.only.split(",")
    cases = [c for c in cases if any(w in c.kernel or w in c.model for w in wanted)]
    bandwidth = float("nan") if args.smoke else copy_bandwidth(device)
    print(f"copy bandwidth {bandwidth / 1e12:.2f} TB/s; {len(cases)} cases", flush=True)
    cache = MeasureCache(out / "kernels_measure.sqlite")
    start, rows = time.time(), []
    log = (out / "kernels.jsonl").open("w")  # row by row, so a run stopped midway keeps what it measured
    for case in cases:
        compile_torch = not args.no_compile and not args.smoke and time.time() - start < args.budget
        if time.time() - start > args.deadline:
            rows.append({"kernel": case.kernel, "model": case.model, "what": case.what,
                         "error": f"not run: past the {args.deadline:.0f} s deadline"})
            continue
        try:
            rows.append(run_case(case, cache, bandwidth, args.smoke, compile_torch))
        except Exception as e:  # one broken case must not lose the others' figures; it is reported
            rows.append({"kernel": case.kernel, "model": case.model, "what": case.what,
                         "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"})
        print(json.dumps(rows[-1], default=str), file=log, flush=True)
        print(f"{time.time() - start:6.1f}s {case.kernel} {case.model} {case.what}: "
              f"{rows[-1].get('error') or rows[-1].get('seconds')}", flush=True)
    if args.merge and (out / "kernels.json").exists():
        rows = merged(json.loads((out / "kernels.json").read_text())["cases"], rows)
    result = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu (smoke)",
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "torch": torch.__version__, "python": platform.python_version(),
              "copy_bandwidth": bandwidth, "timer": "hoid.measure.time_cuda: CUDA-graph replay, rotation past 4x L2",
              "cases": rows}
    (out / "kernels.json").write_text(json.dumps(result, indent=1, default=str))
    (out / "kernels.md").write_text(table(rows) + "\n")
    print(table(rows))
    return 0 if all(r.get("correct") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

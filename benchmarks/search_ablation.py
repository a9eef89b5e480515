"""Hybrid search, measured: rules only, proposers only, both, on one decode step under one budget (issue 21).

    python benchmarks/search_ablation.py --out DIR                       # Qwen3-1.7B on this GPU, 2 min each
    python benchmarks/search_ablation.py --tiny --device cpu --budget "0 attempts" --out DIR   # CPU smoke

On the H200, where one call runs under 10 minutes, in slices (each a call; `--variants` writes
`search_ablation[-MODEL]-VARIANTS.json` after every variant, so a call cut off keeps what finished), then
merged here into `search_ablation[-MODEL].json` with its summary:

    python benchmarks/search_ablation.py --variants none,rules,proposers --out $OUT   # ~5 min, estimated
    python benchmarks/search_ablation.py --variants both --out $OUT                   # ~3.5 min, estimated
    python benchmarks/search_ablation.py --merge DIR --out benchmarks/results         # here

Slices merge only where they agree on model, cache, batch, budget and device (else the merge says which
differs).

- none: the graph as imported (the floor every variant starts from);
- rules: the rule sets and the library through the search (`hoid.search.search`: saturate, inject the
  library's kernels, extract by price), saturation limited to the budget's minutes;
- proposers: `hoid.optimize(rules=False)`: the offline proposers on the graph as imported, kernels only
  where a region matches as it stands;
- both: `hoid.optimize` as it runs by default.

Each variant starts cold (its own empty measurement cache and journal, `HOID_CACHE` pointed at a fresh
file so no run sees another's measurements). Whole-graph tokens/s is the compiled step (CUDA graph, argmax
inside) timed by `decode_loop.measure` over `--steps` tokens; the JSON lists each variant's kernels and
which kernels only the rules made reachable and which only a proposer supplied.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

from decode import copy_bandwidth, versions  # noqa: E402
from decode_loop import release, save_json, tokens_per_second  # noqa: E402


def _kernels(graph) -> list[str]:
    return sorted({n.attrs["kernel"] for n in graph.nodes if n.op == "kernel"})


def variant(name: str, graph, target, budget, folder: Path):
    """(graph, seconds, details) of one variant, from a cold start."""
    import hoid
    import hoid.measure

    os.environ["HOID_CACHE"] = str(folder / f"{name}_measure.sqlite")
    begin = time.perf_counter()
    if name == "none":
        return graph, 0.0, {}
    if name == "rules":
        from hoid.search.limits import Limits

        seconds = budget.minutes * 60 if budget.minutes is not None else None
        result = hoid.search.search(graph, device=target, limits=Limits(seconds=seconds) if seconds else None)
        return result.graph, time.perf_counter() - begin, {"search": str(result.report)}
    with hoid.measure.MeasureCache(folder / f"{name}_measure.sqlite") as cache:
        opt = hoid.optimize(graph, device=target, rules=name == "both", budget=budget, cache=cache, store=False,
                            journal=folder / f"{name}_journal.sqlite")
    return opt.graph, time.perf_counter() - begin, {
        "stop_reason": str(opt.report.stop_reason), "measured": opt.report.measured, "speedup": opt.speedup,
        "modelled_gain": opt.modelled_gain, "attempts": len(opt.report.attempts),
        "kept": sum(1 for a in opt.report.attempts if a.get("kept"))}


def whole_graph(graph, device, steps: int, warmup: int) -> dict:
    import hoid
    from hoid.runtime.sampling import Greedy

    step = hoid.compile(graph, device=device, sample=Greedy())
    rate = tokens_per_second(lambda tok, pos: step(tok, pos, *step.state)[0], steps, warmup=warmup,
                             batch=graph.runtime_inputs[0].type.shape[0], device=device)
    return {"tokens_per_s": rate, "captured": step.captured, "cuda_graph_reason": step.cuda_graph_reason,
            "nodes": len(step.plan.steps)}


VARIANTS = ("none", "rules", "proposers", "both")
# what a merge requires the slices to share: one graph, one budget, one machine
SAME = ("benchmark", "model", "cache_len", "batch", "steps", "budget", "target", "device")


def _variant_names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        raise SystemExit(f"--variants {text!r}: expected some of {', '.join(VARIANTS)}")
    return tuple(n for n in VARIANTS if n in names)  # in the order the summary reads them


def _stem(model: str) -> str:
    return f"search_ablation{'-' + model if model != 'qwen3-1.7b' else ''}"


def summarize(rows: dict) -> dict | None:
    """What each side contributes, once rules, proposers and both are all measured (None before)."""
    if not {"rules", "proposers", "both"} <= set(rows):
        return None
    rules, proposers = set(rows["rules"]["kernels"]), set(rows["proposers"]["kernels"])
    best_alone = max(rows["rules"]["tokens_per_s"], rows["proposers"]["tokens_per_s"])
    return {"only_rules_reach": sorted(rules - proposers), "only_proposers_supply": sorted(proposers - rules),
            "both_over_best_alone": rows["both"]["tokens_per_s"] / best_alone,
            "both_at_least_as_fast": rows["both"]["tokens_per_s"] >= best_alone}


def merge(folder: Path, out: Path) -> list[Path]:
    """Each model's slice files in `folder` merged into `out`/search_ablation[-MODEL].json (a variant measured
    in two slices: the later one's); returns the files written. Slices that differ in `SAME` are refused."""
    by_model: dict[str, list[dict]] = {}
    for file in sorted(folder.glob("search_ablation*-*.json")):
        data = json.loads(file.read_text())
        if data.get("benchmark") == "search_ablation" and "slices" not in data:  # a merged file is no slice
            by_model.setdefault(data["model"], []).append({**data, "file": file.name})
    written = []
    for model, slices in by_model.items():
        slices.sort(key=lambda d: d["date"])
        for key in SAME:
            if len({json.dumps(d[key]) for d in slices}) > 1:
                raise SystemExit(f"--merge: the {model} slices differ in {key}: "
                                 + ", ".join(f"{d['file']} {d[key]}" for d in slices)
                                 + "; run the missing variants again under the same settings")
        rows = {name: row for d in slices for name, row in d["variants"].items()}
        rows = {name: rows[name] for name in VARIANTS if name in rows}
        merged = {**slices[-1], "variants": rows, "summary": summarize(rows),
                  "slices": [{"file": d["file"], "date": d["date"], "variants": list(d["variants"])} for d in slices]}
        merged.pop("file")
        out.mkdir(parents=True, exist_ok=True)
        save_json(out / f"{_stem(model)}.json", merged)
        written.append(out / f"{_stem(model)}.json")
    if not written:
        raise SystemExit(f"--merge: no slice file (search_ablation*-VARIANTS.json) in {folder}")
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3-1.7b")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--device", default=None)
    ap.add_argument("--budget", default="2m", help="each variant's budget, as `hoid optimize` reads it (2m: what "
                    "decode.py's hoid rows get)")
    ap.add_argument("--variants", default=None, help=f"a slice: some of {','.join(VARIANTS)} (default all)")
    ap.add_argument("--merge", type=Path, default=None, help="merge the slice files in this folder into --out")
    ap.add_argument("--cache-len", type=int, default=384, help="the step's cache (decode.py's prompt 128 + 256)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    if args.merge is not None:
        for path in merge(args.merge, args.out):
            print(f"wrote {path}")
        return 0
    model = args.model + ("-tiny" if args.tiny and not args.model.endswith("-tiny") else "")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    from hoid.agent import Budget
    from hoid.agent.loop import resolve_device
    from hoid.models import build_model, decode_step_graph

    budget = Budget.parse(args.budget)
    target = resolve_device(None if device.type == "cuda" else "cpu")
    lm = build_model(model, dtype=torch.bfloat16, device=device)
    graph = decode_step_graph(lm, args.cache_len, batch=args.batch)
    names = VARIANTS if args.variants is None else _variant_names(args.variants)
    header = {"benchmark": "search_ablation", "model": model, "cache_len": args.cache_len, "batch": args.batch,
              "steps": args.steps, "budget": str(budget), "target": target.name,
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "versions": versions()}
    header["bandwidth_bytes_per_s"], header["bandwidth_how"] = copy_bandwidth(device)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{_stem(model)}{'' if names == VARIANTS else '-' + '_'.join(names)}.json"
    saved = os.environ.get("HOID_CACHE")
    rows = {}
    try:
        with tempfile.TemporaryDirectory(prefix="hoid_ablation_") as folder, torch.no_grad():
            for name in names:
                chosen, seconds, details = variant(name, graph, target, budget, Path(folder))
                rows[name] = {"optimize_s": seconds, "kernels": _kernels(chosen), **details,
                              **whole_graph(chosen, device, args.steps, args.warmup)}
                release(device)
                print(f"{name:<10} {rows[name]['tokens_per_s']:9.1f} tok/s  optimize {seconds:7.1f} s  "
                      f"kernels {', '.join(rows[name]['kernels']) or '-'}", flush=True)
                save_json(path, {**header, "variants": rows, "summary": summarize(rows)})  # a cut call keeps these
    finally:
        if saved is None:
            os.environ.pop("HOID_CACHE", None)
        else:
            os.environ["HOID_CACHE"] = saved
    summary = summarize(rows)
    print(json.dumps(summary, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The H200's prices for the search: every call a search of the zoo's decode steps prices, measured.

For each decode model (Qwen3-1.7B, Qwen3-4B, Llama-3.2-1B, Llama-3.1-8B) at cache lengths 384, 1280 and
4096, a 2-layer full-width decode step (layers repeat: 2 give every shape the full model has) is searched
the way `hoid.search.rewrite` does (`hoid.search.prices.priced_calls`): every library kernel injected, at
its resolved params, and every plain op of the e-graph (both sides of each choice). Each is timed by the
same timer (`hoid.search.prices.measure_call`: CUDA events or CUDA-graph replay, inputs rotated past the
L2): a kernel by `measure_kernel`; a plain op by the library's torch kernel of the op where there is one
(as `cost.measured_as` keys it), else by the op's torch reference. Rows go to
`benchmarks/results/decode_prices.json`, which `hoid.search` reads on any machine.

`--graphs prefill` prices the prompts' graphs instead (prompts of 128 and 1024 tokens, the cache 256 longer:
`benchmarks/decode.py`'s shapes): the prefill `decode.py` rewrites is priced by these rows, and until a
prefill call has one, its kernels are modelled, never below a measured rival (the masked prefill attention,
`triton.prefill_attention`, cannot replace torch's SDPA there before it is measured). Either run merges
its rows into the file: a row measured again replaces the old one, the other kind's rows stay, and a row of
a kernel version that is no longer the library's is dropped, unless `price_carryover.json` carries it to
today's version.

    python benchmarks/decode_prices.py                 # on the H200: < 6 minutes
    python benchmarks/decode_prices.py --graphs prefill --only triton.prefill_attention,torch.sdpa_masked
    python benchmarks/decode_prices.py --awaiting      # the kernels tests/search/awaiting.py names (their edit)
    python benchmarks/decode_prices.py --dry-run       # anywhere: the calls it would measure, no timing
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import torch

MODELS = ("qwen3-1.7b", "qwen3-4b", "llama-3.2-1b", "llama-3.1-8b")
CACHE_LENGTHS = (384, 1280, 4096)  # the decode benchmark's prompt + new tokens, and the kernel table's
PROMPTS = (128, 1024)  # the decode benchmark's prompts, each over a cache of prompt + 256 new tokens


def _meta_lm(name: str, layers: int):
    """The model at full width with `layers` layers, on meta weights (never run, only searched)."""
    from transformers import AutoModelForCausalLM

    from hoid.models.configs import config

    cfg = config(name)
    cfg.num_hidden_layers = layers
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()


def decode_graph(name: str, cache_len: int, layers: int = 2):
    """The model's decode step at full width with `layers` layers (meta weights: never run, only searched)."""
    from hoid.models.llm import decode_step_graph

    return decode_step_graph(_meta_lm(name, layers), cache_len)


def prefill_graph(name: str, prompt: int, layers: int = 2):
    """The graph of a `prompt`-token prompt over a cache of prompt + 256 slots, as `decode_graph`."""
    from hoid.models.llm import prefill_graph as build

    return build(_meta_lm(name, layers), prompt, prompt + 256)


def graphs(which: str):
    """(graph, label) of every model: decode steps at each cache length, or prefills at each prompt."""
    for name in MODELS:
        if which == "decode":
            for cache_len in CACHE_LENGTHS:
                yield decode_graph(name, cache_len), f"{name}@{cache_len}"
        else:
            for prompt in PROMPTS:
                yield prefill_graph(name, prompt), f"{name}@prefill{prompt}"


def all_calls(device, which: str = "decode") -> dict:
    """price key -> (call, models it appears in), over every model and cache length (or prompt)."""
    from hoid.search.prices import price_key, priced_calls

    calls: dict = {}
    for graph, label in graphs(which):
        for call in priced_calls(graph, device):
            entry = calls.setdefault(price_key(device.name, call), (call, set()))
            entry[1].add(label)
    return calls


def _row_key(row: dict) -> tuple:
    return tuple(json.dumps(row[k], sort_keys=True) for k in ("device", "kernel", "version", "params", "types",
                                                              "attrs"))


def merged(old: dict, result: dict, versions: dict[str, str], carried: frozenset = frozenset()) -> dict:
    """`result` with the rows of `old` (the file as it was) that it did not measure again, except those of a
    kernel whose version is no longer `versions`' (kernel id -> the library's version today) and is not in
    `carried` ((kernel, version) pairs `price_carryover.json` keys today's version at: they price it)."""
    fresh = {_row_key(r) for r in result["rows"]}
    kept = [r for r in old.get("rows", []) if _row_key(r) not in fresh
            and (versions.get(r["kernel"], r["version"]) == r["version"] or (r["kernel"], r["version"]) in carried)]
    return {**result, "rows": kept + result["rows"], "merged_with": old.get("date"),
            "models": sorted(set(old.get("models", [])) | set(result["models"]))}


def write_merged(out: Path, result: dict, carryover: Path | None = None) -> None:
    """Write `result` to `out`, merged into the rows already there. The carry-overs that keep a stale
    version's rows are the committed ones (`hoid.search.prices.CARRYOVER`), wherever `out` is: on the
    H200 it is a copy under $OUT, beside which there is no carry-over file (read there, 2026-12-04's
    run dropped every carried row: 130 of them)."""
    if out.is_file():
        from hoid.kernels import all_kernels
        from hoid.search.prices import CARRYOVER, carryovers

        versions = {spec.id: spec.version for spec in all_kernels().values()}
        carried = frozenset((e["kernel"], e["from"]) for e in carryovers(carryover or CARRYOVER)
                            if versions.get(e["kernel"]) == e["to"])
        result = merged(json.loads(out.read_text()), result, versions, carried)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/decode_prices.json")
    ap.add_argument("--dry-run", action="store_true", help="list the calls (no GPU needed)")
    ap.add_argument("--repeat", type=int, default=20, help="timer samples per call")
    ap.add_argument("--deadline", type=float, default=330, help="seconds; calls left are not measured past it")
    ap.add_argument("--graphs", choices=("decode", "prefill"), default="decode",
                    help="the decode steps' calls, or the prompts' graphs' (merged into the file either way)")
    ap.add_argument("--only", default=None,
                    help="measure only the calls of these kernels (names joined by commas; a plain op is named "
                         "by the torch kernel it is timed as): a prefill's 538 calls do not fit one device call")
    ap.add_argument("--awaiting", action="store_true",
                    help="measure only the calls of the kernels tests/search/awaiting.py names (those that occur in "
                         "these graphs: the others are named and left to the other --graphs)")
    args = ap.parse_args()
    from hoid.kernels import get
    from hoid.measure.devices import H200
    from hoid.measure.local import has_cuda, local_device
    from hoid.search.prices import measure_call

    start = time.perf_counter()
    device = local_device() if (has_cuda() and not args.dry_run) else H200
    calls = all_calls(device, args.graphs)
    if args.awaiting:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's tests/, run as a script
        from tests.search.awaiting import AWAITING_PRICES

        named = {call.name for call, _ in calls.values()}
        absent = sorted(set(AWAITING_PRICES) - named)
        if absent:
            print(f"awaiting, with no {args.graphs} call: {', '.join(absent)}", flush=True)
        calls = {k: v for k, v in calls.items() if v[0].name in AWAITING_PRICES}
    elif args.only:
        wanted = set(args.only.split(","))
        named = {call.name for call, _ in calls.values()}
        if wanted - named:  # a misspelt name would measure nothing and write a file that prices nothing
            raise SystemExit(f"--only: no {args.graphs} call of {', '.join(sorted(wanted - named))}; "
                             f"the calls are of {', '.join(sorted(named))}")
        calls = {k: v for k, v in calls.items() if v[0].name in wanted}
    kinds = Counter(call.name for call, _ in calls.values())
    print(f"{len(calls)} calls to measure on {device.name} ({time.perf_counter() - start:.1f} s to find them): "
          + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())), flush=True)
    if args.dry_run:
        return 0
    rows, failed, left = [], [], 0
    # kernels first: they are what the CI test checks and the costliest to compile
    for key, (call, models) in sorted(calls.items(), key=lambda kv: (kv[1][0].op != "kernel", kv[0].kernel)):
        if time.perf_counter() - start > args.deadline:
            left += 1
            continue
        try:
            median, spread, floor, method = measure_call(call, device, repeat=args.repeat)
        except Exception as e:  # one failing call must not lose the others' rows
            failed.append(f"{call.name}({', '.join(map(str, call.inputs))}): {type(e).__name__}: {e}")
            continue
        if method == "suspect":  # faster than the roofline allows: never a price
            failed.append(f"{call.name}({', '.join(map(str, call.inputs))}): suspect, {median * 1e6:.2f} us")
            continue
        rows.append({"device": key.device, "kernel": key.kernel, "version": key.version, "params": key.params,
                     "types": key.types, "attrs": key.attrs, "median": median, "spread": spread, "floor": floor,
                     "method": method, "name": call.name, "models": sorted(models)})
    versions = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    result = {"benchmark": "decode_prices", "device": device.name,
              "date": datetime.now(UTC).isoformat(timespec="seconds"), "versions": versions,
              "models": list(MODELS), "cache_lengths": list(CACHE_LENGTHS), "graphs": args.graphs,
              "seconds": round(time.perf_counter() - start, 1), "not_measured_past_deadline": left,
              "failed": failed, "rows": rows}
    if args.graphs == "prefill":
        result["prompts"] = list(PROMPTS)
    write_merged(Path(args.out), result)
    by_name: dict[str, list[float]] = {}
    for r in rows:
        by_name.setdefault(r["name"], []).append(r["median"])
    print(f"\n{'kernel or op':32s} {'rows':>5s} {'min us':>8s} {'max us':>8s}")
    for name, medians in sorted(by_name.items()):
        print(f"{name:32s} {len(medians):5d} {min(medians) * 1e6:8.2f} {max(medians) * 1e6:8.2f}")
    print(f"\n{len(rows)} rows, {len(failed)} failed, {left} left past the deadline, "
          f"{result['seconds']} s; wrote {args.out}")
    for line in failed[:20]:
        print("  failed:", line)
    _ = get  # imported up front so a broken library fails before the long part
    return 0 if not failed and not left else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The CuTe DSL kernels on the GPU at hand, in one run with what they compete against: the GEMVs at every
decode matrix of the zoo's four decode models (the split GEMV too, where its long-row constraint holds: the
"cute" figure is the better of the two) against `triton.*` (same pattern), cuBLAS through torch and a torch
copy of the same bytes; the Hopper GEMM at 4096^3 and Qwen3-1.7B's prefill (prompt 128 and
1024) against cuBLAS.

    PYTHONPATH=. python3 benchmarks/kernels_cute.py --parts decode,prefill     # 33 s on the H200 (2026-12-04)
    PYTHONPATH=. python3 benchmarks/kernels_cute.py --parts model              # ~4 min (estimate)
    PYTHONPATH=. python3 benchmarks/kernels_cute.py --parts decode --tune --m 1 --only Llama-3.2-1B --out $OUT
                                   # + the GEMV param grid, every candidate's time kept (rows "tried"): 25 builds
                                   # and timings per matrix (and 16 of the split GEMV's where it applies):
                                   # Llama-3.2-1B's five matrices took 21 s on 2026-12-04
    PYTHONPATH=. python3 benchmarks/kernels_cute.py --parts prefill --tune --out $OUT
                                   # + the GEMM's tiles, stages and clusters per prefill shape (rows "tried"),
                                   # and the persistent GEMM's tiles and stores; `--grid new`: only the plain
                                   # tiles the table at --out has not tried, and its best, beside the persistent
    PYTHONPATH=. python3 benchmarks/kernels_cute.py --parts decode --m 16 --gemm --out $OUT
                                   # + the Hopper GEMM at M = 16 (64 x 64 tiles, K split), for the projections
                                   # without SiLU: the CuTe backend's tensor-core route at 16 rows (a run of its
                                   # own: until `pytest -m gpu` has passed its M = 16 case there, a fault in it
                                   # would take the process's CUDA context, and the table, with it)

The part `model`: Qwen3-1.7B's decode tokens/s through `hoid.compile` with the CuTe GEMVs, and the same
rewrite with the Triton GEMVs. On the H200 without network, `benchmarks/cute_h200.sh` wraps these.

Every time is hoid's CUDA timer (`hoid.measure.time_cuda`): CUDA-graph replay of back-to-back calls over
input copies totalling 4x the L2, so weights come from memory. "of copy" is the time of a torch copy
moving the same bytes (read + written) over the kernel's time: the practical ceiling at that size;
"of BW" is the kernel's bytes per second over a 2 GiB copy's. The issue's targets are checked per row:
GEMV >= 90% of the copy, >= 80% of the bandwidth from 50 MB up, faster than triton; GEMM within 10% of
cuBLAS. Writes kernels_cute.json and kernels_cute.md under --out, rewritten after every row (a call cut at its
time limit keeps what finished; `complete` is true once every part has run); a case that fails is reported, not
fatal.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from hoid.ir import TensorType
from hoid.ir.io import replace_atomically
from hoid.kernels import Target, all_kernels
from hoid.kernels.launch import bind_spec, resolve_params
from hoid.kernels.library.cute_gemm import MIN_ROWS, TILES
from hoid.measure import time_cuda

sys.path.insert(0, str(Path(__file__).parent))
from decode_loop import save_json  # noqa: E402
from kernel_table import copy_bandwidth, copy_seconds  # noqa: E402

# hidden, intermediate, q heads, kv heads, head dim, vocabulary (hoid/models/configs.py)
MODELS = {"Qwen3-1.7B": (2048, 6144, 16, 8, 128, 151936), "Qwen3-4B": (2560, 9728, 32, 8, 128, 151936),
          "Llama-3.2-1B": (2048, 8192, 32, 8, 64, 128256), "Llama-3.1-8B": (4096, 14336, 32, 8, 128, 128256)}
EAGER = {"linear": lambda x, w: F.linear(x, w), "linear_add": lambda x, w, r: F.linear(x, w) + r,
         "linear_swiglu_merged": lambda x, w: _swiglu(F.linear(x, w))}
# rows 2 and 4 reuse each step's x across rows: at K = 8192 (Llama-3.2-1B's down projection) one row a warp
# reads x once per weight row, as many bytes as the weight (through L2), and ran at 61% of its floor on the
# H200 (12-04) with the library sweep never trying more rows
TUNE_GRID = [dict(rows=r, unroll=u, warps=w) for r, u, w in itertools.product((1, 2, 4), (2, 4, 8, 16), (4, 8))]
# the split GEMV (cute_gemv_split) where its long-row constraint holds: one row a warp (rows > 1 lost at long K)
SPLIT_GRID = [dict(rows=1, split=sp, unroll=u, warps=w)
              for sp, u, w in itertools.product((2, 4), (2, 4, 8, 16), (4, 8))]
# the GEMM's tiles, each with as many stages as fit and with 3: what its `choose` is set from; and each in a
# cluster of two M tiles sharing the weight tile (cute_gemm's `cluster_m`, unmeasured when added, 12-05)
GEMM_GRID = [dict(tile_m=tm, tile_n=tn, stages=st) for (tm, tn), st in itertools.product(TILES, ("auto", 3))]
GEMM_GRID += [dict(tile_m=tm, tile_n=tn, cluster_m=2) for tm, tn in TILES]
# 128 x 64 (outside `TILES`, taken where both are given): at a prompt of 128 one M tile, so each weight tile is
# read once where 64 x 64 reads it twice, and with 32 N tiles (o, down) "auto" splits K in four to fill a wave;
# the 12-05 tuning (0.60x cuBLAS at the o projection, p128) had not tried it
GEMM_GRID_ADDED = [dict(tile_m=128, tile_n=64, stages=st) for st in ("auto", 3)]
GEMM_GRID += GEMM_GRID_ADDED
# the persistent GEMM's tuning tiles (with each store): the plain GEMM's and 128 x 64, which its "auto" walks with
# where 128 x 128 tiles are no more than the multiprocessors (cute_gemm_persistent.WALK_TILES)
PERSISTENT_TILES = (*TILES, (128, 64))


def plain_grid(grid: str, before: dict | None) -> list[dict]:
    """The plain GEMM's candidates at one prefill shape: the whole `GEMM_GRID` ("full"), or ("new") the tiles
    the committed H200 table had not tried (`GEMM_GRID_ADDED`) and the best params of the table at --out (the
    committed one, which the `gemm` step of h200_session.sh copies there) for the shape (`before`, its row),
    timed again beside cuBLAS in this run. Why: the whole grid is 15 builds and
    timings a shape, ~2.5 s each; over the ten shapes and the persistent GEMM's grid a tuning run passed a
    device call's time before it reached the rows the persistent GEMM runs in."""
    if grid == "full":
        return list(GEMM_GRID)
    if grid != "new":
        raise ValueError(f"kernels_cute: grid {grid!r}: 'full' (every tile) or 'new' (the untried ones)")
    best = (before or {}).get("params")
    keys = ("tile_m", "tile_n", "stages", "split_k", "cluster_m")
    return list(GEMM_GRID_ADDED) + ([{k: best[k] for k in keys if k in best}] if best else [])


def _swiglu(y):
    gate, up = y.chunk(2, dim=-1)
    return F.silu(gate) * up


def decode_cases(m: int):
    """(model, what, pattern, weight rows, K) of every projection of a decode step."""
    for name, (hidden, inter, q, kv, hd, vocab) in MODELS.items():
        yield name, "qkv", "linear", (q + 2 * kv) * hd, hidden
        yield name, "o + residual", "linear_add", hidden, q * hd
        yield name, "gate/up + SiLU", "linear_swiglu_merged", 2 * inter, hidden
        yield name, "down + residual", "linear_add", hidden, inter
        yield name, "lm head", "linear", vocab, hidden


def prefill_cases():
    yield "square", "4096^3", "linear", 4096, 4096, 4096
    hidden, inter, q, kv, hd, _ = MODELS["Qwen3-1.7B"]
    for prompt in (128, 1024):
        yield "Qwen3-1.7B", f"qkv p{prompt}", "linear", prompt, (q + 2 * kv) * hd, hidden
        yield "Qwen3-1.7B", f"o + residual p{prompt}", "linear_add", prompt, hidden, q * hd
        yield "Qwen3-1.7B", f"gate/up p{prompt}", "linear", prompt, 2 * inter, hidden
        yield "Qwen3-1.7B", f"down + residual p{prompt}", "linear_add", prompt, hidden, inter
    # 4096 rows (a long prompt, or BGE-M3's batch of 8 x 512): the residual's projection with more tiles than
    # multiprocessors, where the persistent GEMM's residual form applies
    yield "Qwen3-1.7B", "down + residual p4096", "linear_add", 4096, hidden, inter


def make_inputs(pattern: str, m: int, rows: int, k: int) -> list[torch.Tensor]:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(rows, k, device="cuda") / k**0.5).to(torch.bfloat16)
    n_out = rows // 2 if pattern == "linear_swiglu_merged" else rows
    return [x, w] + ([torch.randn(m, n_out, device="cuda", dtype=torch.bfloat16)] if pattern == "linear_add" else [])


def hoid_seconds(kernel_id: str, inputs, params: dict | None = None, repeat: int = 20) -> tuple[float, dict, float]:
    """(seconds, the params it ran with, relative L2 error against torch in float32), through the launcher."""
    spec = all_kernels()[kernel_id]
    types = [TensorType.of(x) for x in inputs]
    params = resolve_params(spec, types, {}, params, Target.H200)
    call = bind_spec(spec, types, {}, params)
    out = call(*inputs)[0].float()
    ref = EAGER[spec.pattern.name](*[x.float() for x in inputs])
    err = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    seconds = time_cuda(call.launch_flat, call.flat(inputs), graph=True, repeat=repeat).median
    return seconds, params, err


def eager_seconds(pattern: str, inputs, repeat: int = 20) -> float:
    fn = EAGER[pattern]
    return time_cuda(lambda *a: fn(*a), inputs, graph=True, repeat=repeat).median


def moved_bytes(inputs, n_out: int) -> int:
    return sum(x.numel() * x.element_size() for x in inputs) + inputs[0].shape[0] * n_out * 2


def keep_row(row: dict, rows: list[dict], save) -> None:
    """A finished row: printed, added to `rows`, and the run's JSON rewritten (`save`), so that a call cut at
    its time limit keeps every row it finished (12-04 night: a tuning run cut after three matrices kept only
    its log)."""
    rows.append(row)
    print(json.dumps(row, default=str), flush=True)
    if save is not None:
        save()


def run_decode(m: int, bandwidth: float, tune: bool, only: str, gemm: bool = False, rows=None,
               save=None) -> list[dict]:
    rows = [] if rows is None else rows
    for model, what, pattern, w_rows, k in decode_cases(m):
        if only and only not in model:
            continue
        row = {"model": model, "what": what, "m": m, "shape": f"[{m},{k}] x [{w_rows},{k}]"}
        try:
            inputs = make_inputs(pattern, m, w_rows, k)
            n_out = w_rows // 2 if pattern == "linear_swiglu_merged" else w_rows
            moved = moved_bytes(inputs, n_out)
            cute_s, params, err = hoid_seconds(f"cute.{pattern}", inputs)
            if tune:  # every candidate's time kept: what `cute_gemv.choose` is to be set from
                row["tried"] = [{"params": params, "seconds": cute_s}]
                for cand in TUNE_GRID:
                    s, p, e = hoid_seconds(f"cute.{pattern}", inputs, cand)
                    row["tried"].append({"params": p, "seconds": s})
                    if s < cute_s:
                        cute_s, params, err = s, p, e
            split = _split_row(pattern, inputs, tune)
            if split is not None:  # the CuTe backend's best: the split build where it is faster
                row["split"] = split
                if split["seconds"] < cute_s:
                    cute_s, params, err = split["seconds"], split["params"], split["rel_error"]
            if gemm and m >= MIN_ROWS and pattern in ("linear", "linear_add"):  # the GEMM has no SiLU epilogue
                s, p, e = hoid_seconds(f"cute.gemm_{pattern}", inputs)
                row["gemm"] = {"seconds": s, "params": p, "rel_error": e}
                if s < cute_s:  # the CuTe backend's best, as the split GEMV's
                    cute_s, params, err = s, p, e
            triton_s, _, triton_err = hoid_seconds(f"triton.{pattern}", inputs)
            copy_s = copy_seconds(moved // 4)  # moved // 4 bf16 elements: moved bytes read + written
            row.update(moved_bytes=moved, params=params, rel_error=err, triton_rel_error=triton_err,
                       seconds={"cute": cute_s, "triton": triton_s, "cublas": eager_seconds(pattern, inputs),
                                "copy": copy_s},
                       of_copy=copy_s / cute_s, of_bandwidth=moved / cute_s / bandwidth,
                       vs_triton=triton_s / cute_s)
            row["targets_met"] = (row["of_copy"] >= 0.9 and row["vs_triton"] > 1.0
                                  and (moved < 50e6 or row["of_bandwidth"] >= 0.8))
        except Exception as e:  # one broken case must not lose the others' figures
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        keep_row(row, rows, save)
    return rows


def _split_row(pattern: str, inputs, tune: bool) -> dict | None:
    """The split GEMV at this matrix (its "auto" params, and with --tune every SPLIT_GRID set), where it applies."""
    spec = all_kernels().get(f"cute.{pattern}_split")
    if spec is None or spec.rejects([TensorType.of(x) for x in inputs], {}) is not None:
        return None
    seconds, params, err = hoid_seconds(spec.id, inputs)
    row = {"seconds": seconds, "params": params, "rel_error": err, "tried": [{"params": params, "seconds": seconds}]}
    for cand in SPLIT_GRID if tune else ():
        s, p, e = hoid_seconds(spec.id, inputs, cand)
        row["tried"].append({"params": p, "seconds": s})
        if s < row["seconds"]:
            row.update(seconds=s, params=p, rel_error=e)
    return row


def run_prefill(only: str, tune: bool = False, rows=None, save=None, grid: str = "full",
                before: list[dict] = ()) -> list[dict]:
    """One row per prefill shape; tuning, the plain GEMM's candidates are `plain_grid(grid, ...)` with the
    shape's row in `before` (an earlier table's prefill rows), whose tried candidates the row keeps as
    `tried_before` (another run's times: a record, never compared with this run's)."""
    rows = [] if rows is None else rows
    earlier = {r["what"]: r for r in before if "error" not in r}
    for model, what, pattern, m, n, k in prefill_cases():
        if only and only not in model:
            continue
        row = {"model": model, "what": what, "m": m, "shape": f"[{m},{k}] x [{n},{k}]"}
        if tune and grid == "new" and what in earlier:
            row["tried_before"] = earlier[what].get("tried", [])
        try:
            inputs = make_inputs(pattern, m, n, k)
            kernel = "cute.gemm_linear_add" if pattern == "linear_add" else "cute.gemm_linear"
            cute_s, params, err = hoid_seconds(kernel, inputs)
            if tune:  # every tile's time kept (rows "tried")
                row["tried"] = [{"params": params, "seconds": cute_s}]
                for cand in plain_grid(grid, earlier.get(what)):
                    try:
                        s, p, e = hoid_seconds(kernel, inputs, cand)
                    except ValueError as refused:  # a cluster over an odd count of M tiles: `choose` says so
                        row["tried"].append({"params": cand, "refused": str(refused)[:200]})
                        continue
                    row["tried"].append({"params": p, "seconds": s, "rel_error": e})
                    if s < cute_s:
                        cute_s, params, err = s, p, e
            # the persistent, warp-specialized schedule of the same GEMM (cute_gemm_persistent: only where the
            # tiles outnumber the multiprocessors), at its "auto" tile and, tuning, at each tile of the plain grid
            pers_s, pers_params, pers_err = float("inf"), None, None
            persistent = all_kernels()[kernel + "_persistent"]
            if not persistent.rejects([TensorType.of(t) for t in inputs], {}):
                pers_s, pers_params, pers_err = hoid_seconds(persistent.id, inputs)
                for cand in ([dict(tile_m=tm, tile_n=tn, store=st)
                              for (tm, tn), st in itertools.product(PERSISTENT_TILES, ("direct", "tma"))]
                             if tune else ()):
                    s, p, e = hoid_seconds(persistent.id, inputs, cand)
                    row.setdefault("tried_persistent", []).append({"params": p, "seconds": s, "rel_error": e})
                    if s < pers_s:
                        pers_s, pers_params, pers_err = s, p, e
            cublas_s = eager_seconds(pattern, inputs)
            best_s = min(cute_s, pers_s)
            row.update(params=params, rel_error=err, seconds={"cute": cute_s, "cublas": cublas_s},
                       tflops=2 * m * n * k / best_s / 1e12, vs_cublas=cublas_s / best_s,
                       plain_vs_cublas=cublas_s / cute_s)
            if pers_params is not None:
                row["seconds"]["cute_persistent"] = pers_s
                row.update(persistent={"params": pers_params, "rel_error": pers_err},
                           persistent_vs_cublas=cublas_s / pers_s)
            row["targets_met"] = best_s <= 1.1 * cublas_s
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        keep_row(row, rows, save)
    return rows


WHOLE_MODEL_GEMVS = {"cute": ("cute.linear", "cute.linear_add", "cute.linear_swiglu_merged"),
                     "triton": ("triton.linear", "triton.linear_add", "triton.linear_swiglu_merged")}


def whole_model_sets() -> dict:
    """The whole-model part's two kernel sets: the library without the Triton GEMVs, and without any CuTe kernel."""
    from hoid.kernels import KernelSet

    def without(ids):
        kernels = KernelSet.default()
        for kernel_id in ids:
            kernels = kernels.without(kernel_id)
        return kernels

    return {"cute": without(WHOLE_MODEL_GEMVS["triton"]),
            "triton": without([s.id for s in KernelSet.default() if s.backend == "cute"])}


def whole_model(model: str, cache_len: int, steps: int, rows=None, save=None) -> list[dict]:
    """Decode tokens/s of `model` through `hoid.compile`: the same rewrite with the CuTe GEMVs (the Triton GEMVs
    left out), then with no CuTe kernel at all (the rest of the library unchanged). Until 12-08 the second set
    lacked only the three plain CuTe GEMVs, and the rewrite still chose CuTe's split-K and norm-fused GEMVs
    there (the H100's 577.5 tok/s "triton" row in benchmarks/results/h100/kernels_cute.json ran with them)."""
    from decode import tokens_per_second  # benchmarks/ is on the path

    import hoid
    from hoid.models import build_model, decode_step_graph
    from hoid.runtime import compile as hoid_compile
    from hoid.runtime.sampling import Greedy

    lm = build_model(model, dtype=torch.bfloat16, device="cuda")
    graph = decode_step_graph(lm, cache_len)
    rows = [] if rows is None else rows
    for mine, kernels in whole_model_sets().items():
        row = {"model": model, "gemvs": mine, "cache_len": cache_len, "steps": steps}
        try:
            rewritten = hoid.search.rewrite(graph, device="h200", kernels=kernels)
            compiled = hoid_compile(rewritten, sample=Greedy())
            state = compiled.state
            row["tokens_per_s"] = tokens_per_second(lambda t, p, c=compiled, s=state: c(t, p, *s)[0], steps)
            used = [n.attrs["kernel"] for n in compiled.plan.steps if n.op == "kernel"]
            row.update(captured=compiled.captured, fallbacks=compiled.fallbacks,
                       gemv_nodes=sum(k in WHOLE_MODEL_GEMVS[mine] for k in used), kernels=sorted(set(used)))
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        keep_row(row, rows, save)
    return rows


def parts_kept(old: dict, device: str) -> dict:
    """The rows of an existing table that a run of some parts keeps: only those measured on this device, so that
    one file never holds one GPU's decode rows under another's name (12-08: an H100's prefill run copied the
    H200's table, and its header named the H100 over the H200's decode rows)."""
    if not old or old.get("device") == device:
        return old
    print(f"kernels_cute: the existing table is from {old.get('device')}, this run on {device}: "
          "the parts not run are left empty, not kept", flush=True)
    return {}


def table(decode: list[dict], prefill: list[dict], models: list[dict] = ()) -> str:
    us = lambda r, k: f"{r['seconds'][k] * 1e6:.2f}" if k in r.get("seconds", {}) else "-"  # noqa: E731
    split = lambda r: f"{r['split']['seconds'] * 1e6:.2f}" if "split" in r else "-"  # noqa: E731
    lines = ["| model | matrix | M | cute us (best) | split us | triton us | cuBLAS us | copy us | of copy | of BW "
             "| vs triton | err | ok |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in decode:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['what']} | {r['m']} | {r['error']} ||||||||||")
            continue
        lines.append(f"| {r['model']} | {r['what']} | {r['m']} | {us(r, 'cute')} | {split(r)} | {us(r, 'triton')} | "
                     f"{us(r, 'cublas')} | {us(r, 'copy')} | {r['of_copy']:.0%} | {r['of_bandwidth']:.0%} | "
                     f"{r['vs_triton']:.2f}x | {r['rel_error']:.1e} | {'yes' if r['targets_met'] else 'NO'} |")
    lines += ["", "| model | GEMM | cute us | persistent us | cuBLAS us | best TFLOP/s | best vs cuBLAS | err | ok |",
              "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in prefill:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['what']} | {r['error']} |||||||")
            continue
        lines.append(f"| {r['model']} | {r['what']} | {us(r, 'cute')} | {us(r, 'cute_persistent')} | "
                     f"{us(r, 'cublas')} | {r['tflops']:.0f} | {r['vs_cublas']:.2f}x | {r['rel_error']:.1e} | "
                     f"{'yes' if r['targets_met'] else 'NO'} |")
    if models:
        lines += ["", "| model | GEMVs | cache | steps | tokens/s | kernels |", "|---|---|---:|---:|---:|---|"]
        for r in models:
            tps = f"{r['tokens_per_s']:.1f}" if "tokens_per_s" in r else r.get("error", "-")
            lines.append(f"| {r['model']} | {r['gemvs']} | {r.get('cache_len', '-')} | {r.get('steps', '-')} | {tps} | "
                         f"{', '.join(r.get('kernels', []))} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--tune", action="store_true", help=f"also try {len(TUNE_GRID)} GEMV param sets per matrix "
                                                         f"and {len(GEMM_GRID)} GEMM tiles per prefill shape")
    ap.add_argument("--grid", default="full", choices=("full", "new"),
                    help="with --tune, the prefill GEMM's plain candidates: every tile (full), or only those the "
                         "committed table has not tried and its best per shape (new; the persistent GEMM's in full)")
    ap.add_argument("--m", default="1,16", help="comma-separated decode rows (batch x tokens)")
    ap.add_argument("--only", default="", help="run the cases of the models whose name contains this")
    ap.add_argument("--gemm", action="store_true", help=f"decode: also the Hopper GEMM from M = {MIN_ROWS}")
    ap.add_argument("--parts", default="decode,prefill,model",
                    help="what to run: decode (GEMVs), prefill (GEMM), model (whole-model decode tokens/s); "
                         "parts left out keep their rows from an existing kernels_cute.json")
    ap.add_argument("--model", default="qwen3-1.7b", help="the whole-model part's model")
    ap.add_argument("--steps", type=int, default=128, help="decode steps the whole-model part times")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    bandwidth = copy_bandwidth("cuda")
    print(f"copy bandwidth {bandwidth / 1e12:.2f} TB/s on {torch.cuda.get_device_name()}", flush=True)
    parts = set(args.parts.split(","))
    path = out / "kernels_cute.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    kept = parts_kept(old, torch.cuda.get_device_name())
    hopper = torch.cuda.get_device_capability()[0] == 9
    # the parts run start empty and fill row by row; the others keep their rows from the file (same device only)
    decode = [] if "decode" in parts else kept.get("decode", [])
    prefill = [] if "prefill" in parts and hopper else kept.get("prefill", [])
    models = [] if "model" in parts else kept.get("whole_model", [])
    import cutlass

    def save(complete: bool = False) -> None:
        """The JSON and its table as they stand, replaced whole (a kill leaves the last one intact)."""
        result = {"device": torch.cuda.get_device_name(),
                  "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                  "torch": torch.__version__, "cutlass_dsl": getattr(cutlass, "__version__", "?"),
                  "python": platform.python_version(), "copy_bandwidth": bandwidth, "tuned": args.tune,
                  "parts_run": sorted(parts), "complete": complete,
                  "timer": "hoid.measure.time_cuda: CUDA-graph replay, rotation past 4x L2",
                  "seconds_total": time.time() - start, "decode": decode, "prefill": prefill, "whole_model": models}
        save_json(out / "kernels_cute.json", result)
        text = table(decode, prefill, models) + "\n"
        replace_atomically(out / "kernels_cute.md", lambda tmp: tmp.write_text(text))

    if "decode" in parts:
        for m in map(int, args.m.split(",")):
            run_decode(m, bandwidth, args.tune, args.only, args.gemm, rows=decode, save=save)
    if "prefill" in parts and hopper:
        run_prefill(args.only, args.tune, rows=prefill, save=save, grid=args.grid, before=old.get("prefill", []))
    if "model" in parts:
        whole_model(args.model, 1024, args.steps, rows=models, save=save)
    save(complete=True)
    print(table(decode, prefill, models))
    print(f"{time.time() - start:.0f} s")
    return 0 if all(r.get("targets_met") for r in decode + prefill) and not any("error" in r for r in models) else 1


if __name__ == "__main__":
    raise SystemExit(main())

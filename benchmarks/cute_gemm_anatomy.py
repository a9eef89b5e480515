"""Where the CuTe GEMM's time goes at a prompt's small shapes: its fixed cost (the launch, the ring's first
loads, the epilogue, split-K's reduction) apart from its cost per K tile, read off timings of the same tile
over several K, with cuBLAS timed the same way in the same run.

Why: at Qwen3-1.7B's prompt of 128 the GEMM ran at 0.60-0.86x cuBLAS on the H200 (12-05,
`kernels_cute_prefill-12-05.log`: the o projection 14.4 us against 8.6), where each CTA walks only 8 to 48 K
tiles, and the whole table cannot say whether the gap is paid once a launch or on every K tile; each calls for
a different change (fewer, fuller launches and a cheaper reduction, or a deeper ring). A profiler is not at hand
on the lent GPU; a line through times at several K is.

    PYTHONPATH=. python3 benchmarks/cute_gemm_anatomy.py --out $OUT      # 40 s on an H100 (12-08)

What it found (H100, 12-08, benchmarks/results/h100/cute_gemm_anatomy.md): split-K's fixed cost is 6.3 us a
launch (11.4 against 5.1 at the o projection), so one split is faster below ~94 K tiles
(`cute_gemm.SPLIT_MIN_K_TILES`); the QKV's gap at a prompt of 1024 is all fixed cost (per K tile level with
cuBLAS), which the persistent GEMM hides; the 64 x 64 tiles at a prompt of 128 pay per K tile (208-283 ns
against cuBLAS's 124-188).

Each case times the GEMM at "auto" (the split `cute_gemm.choose` gives it) and with K unsplit, at K tiles per
split of 1, 4, 16 and the shape's own, and fits time = fixed + per_tile x (K tiles a split walks) by least
squares; cuBLAS (F.linear, + the residual) at the same K values, per tile of 64 K. Times are hoid's CUDA timer
(`time_cuda`: CUDA-graph replay, inputs rotated past 4x the L2, as in kernels_cute.py). Writes
cute_gemm_anatomy.json and .md under --out, rewritten after every case; a case that fails is a row with its
error.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from decode_loop import save_json  # noqa: E402
from kernels_cute import eager_seconds, hoid_seconds, keep_row, make_inputs  # noqa: E402

from hoid.ir.io import replace_atomically  # noqa: E402
from hoid.kernels.library.cute_gemm import TILE_K, choose  # noqa: E402

# (what, m, n, k, pattern): Qwen3-1.7B at a prompt of 128 (hidden 2048, intermediate 6144, QKV 4096), where the
# 12-05 table's gaps were widest, and its QKV at 1024 (one wave of 128 x 256 tiles, 32 K tiles each)
CASES = (("o + residual p128", 128, 2048, 2048, "linear_add"), ("qkv p128", 128, 4096, 2048, "linear"),
         ("down + residual p128", 128, 2048, 6144, "linear_add"), ("gate/up p128", 128, 12288, 2048, "linear"),
         ("qkv p1024", 1024, 4096, 2048, "linear"))
# K tiles a split walks, besides the shape's own: each K is a build of its own (the launch compiles per shape,
# ~1-2 s a GEMM build on a CPU core), so four points a line: ~40 builds over the five cases
WALKS = (1, 4, 16)


def fit_line(xs: list[float], ys: list[float]) -> dict:
    """Least squares y = fixed + per x (`statistics.linear_regression`); with the largest residual, so a bent
    curve shows."""
    per, fixed = statistics.linear_regression(xs, ys)
    worst = max(abs(y - (fixed + per * x)) for x, y in zip(xs, ys, strict=True))
    return {"fixed": fixed, "per": per, "worst_residual": worst}


def k_values(k: int, split: int) -> list[int]:
    """K for each walk length up to the shape's own (whole tiles, split evenly)."""
    own = k // (TILE_K * split)
    return [w * TILE_K * split for w in sorted({*[w for w in WALKS if w < own], own})]


def run_case(what: str, m: int, n: int, k: int, pattern: str) -> dict:
    kernel = "cute.gemm_linear_add" if pattern == "linear_add" else "cute.gemm_linear"
    epilogue = "add" if pattern == "linear_add" else "none"
    row = {"what": what, "m": m, "n": n, "k": k, "kernel": kernel, "fits": {}}
    for label, given in (("auto", {}), ("unsplit", {"split_k": 1})):
        cfg = choose(m, n, k, **given, epilogue=epilogue)
        if label == "unsplit" and row["fits"]["auto"]["params"]["split_k"] == 1:
            continue  # "auto" did not split: the same launches
        times = []
        for kk in k_values(k, cfg["split_k"]):
            inputs = make_inputs(pattern, m, n, kk)
            params = {key: cfg[key] for key in ("tile_m", "tile_n", "split_k")}
            seconds, _, _ = hoid_seconds(kernel, inputs, params)
            times.append({"k": kk, "k_tiles_per_split": kk // (TILE_K * cfg["split_k"]), "seconds": seconds})
        row["fits"][label] = {"params": cfg, "times": times, **fit_line(
            [t["k_tiles_per_split"] for t in times], [t["seconds"] for t in times])}
    times = []
    for kk in k_values(k, 1):
        seconds = eager_seconds(pattern, make_inputs(pattern, m, n, kk))
        times.append({"k": kk, "k_tiles": kk // TILE_K, "seconds": seconds})
    row["fits"]["cublas"] = {"times": times, **fit_line([t["k_tiles"] for t in times], [t["seconds"] for t in times])}
    return row


def table(rows: list[dict]) -> str:
    lines = ["| case | fit | params | fixed us | per K tile ns | worst residual us | at full K us |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['what']} | {r['error']} ||||||")
            continue
        for label, f in r["fits"].items():
            params = f.get("params", {})
            shown = f"{params['tile_m']}x{params['tile_n']} split {params['split_k']}" if params else "cuBLAS"
            lines.append(f"| {r['what']} | {label} | {shown} | {f['fixed'] * 1e6:.2f} | {f['per'] * 1e9:.0f} | "
                         f"{f['worst_residual'] * 1e6:.2f} | {f['times'][-1]['seconds'] * 1e6:.2f} |")
    return "\n".join(lines)


def run(rows: list[dict], save=lambda: None, only: str = "") -> list[dict]:
    for case in CASES:
        if only and only not in case[0]:
            continue
        try:
            row = run_case(*case)
        except Exception as e:  # reported, not fatal: the next case still runs
            row = {"what": case[0], "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
        keep_row(row, rows, save)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--only", default="", help="the cases whose name contains this")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start, rows = time.time(), []

    def save() -> None:
        result = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
                  "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                  "torch": torch.__version__, "python": platform.python_version(),
                  "timer": "hoid.measure.time_cuda: CUDA-graph replay, rotation past 4x L2",
                  "seconds_total": time.time() - start, "rows": rows}
        save_json(out / "cute_gemm_anatomy.json", result)
        text = table(rows) + "\n"
        replace_atomically(out / "cute_gemm_anatomy.md", lambda tmp: tmp.write_text(text))

    run(rows, save, args.only)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

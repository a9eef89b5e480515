"""Programmatic dependent launch on the H200: the Qwen3-1.7B decode step with and without it, side by side.

One rewritten decode-step graph (`hoid.search.rewrite`, as benchmarks/decode.py makes it) is compiled three
times, greedy argmax inside the step, CUDA graph captured: with `pdl=False`; with `pdl=True, pdl_early=False`
(the kernels whose spec supports it, the GEMVs and norms, launched with the attribute, each waiting before
any load); and with `pdl=True` (the GEMVs also read their first weight tile before the wait). All decode the same
tokens from the same zeroed caches (checked: PDL changes when kernels start, not what they compute), then
their tokens/s are measured in alternating rounds (A B A B ...), so drift hits both alike; the median of
the rounds is reported, with each one's launches (declared by the specs), how many launch boundaries PDL
can overlap, the steps that break the chain, and the sum of kernel durations (torch.profiler) against the
step time.

    python benchmarks/pdl_h200.py --out benchmarks/results          # writes pdl_h200.json there
    python benchmarks/pdl_h200.py --cache-len 4096 --steps 512 --rounds 7 --out /tmp/pdl
    python benchmarks/pdl_h200.py --backends triton,torch --out /tmp/pdl   # Triton's GEMVs, not CuTe's
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import time
from pathlib import Path

import torch


def tokens_per_second(compiled, steps: int, warmup: int = 8) -> float:
    """Greedy decode of `steps` tokens from position 0, the token each step returns fed back."""
    token = torch.zeros((1, 1), dtype=torch.long, device="cuda")
    pos = torch.zeros((1,), dtype=torch.long, device="cuda")
    state = compiled.state
    for i in range(warmup):
        pos.fill_(i)
        token = compiled(token, pos, *state)[0].clone()
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for i in range(steps):
        pos.fill_(i)
        token = compiled(token, pos, *state)[0].clone()
    torch.cuda.synchronize()
    return steps / (time.perf_counter() - begin)


def greedy_tokens(compiled, n: int) -> list[int]:
    compiled.reset_state()
    token = torch.zeros((1, 1), dtype=torch.long, device="cuda")
    pos = torch.zeros((1,), dtype=torch.long, device="cuda")
    out = []
    for i in range(n):
        pos.fill_(i)
        token = compiled(token, pos, *compiled.state)[0].clone()
        out.append(int(token.item()))
    return out


def describe(compiled) -> dict:
    from hoid.runtime.profile import kernel_seconds

    plan = compiled.launches
    overlapped, boundaries = plan.overlaps()
    args = [torch.zeros((1, 1), dtype=torch.long, device="cuda"), torch.zeros((1,), dtype=torch.long, device="cuda"),
            *compiled.state]
    compiled(*args)
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(50):
        compiled(*args)
    end.record()
    torch.cuda.synchronize()
    return {"pdl": compiled.pdl, "captured": compiled.captured, "cuda_graph_reason": compiled.cuda_graph_reason,
            "pdl_kernels": sum(1 for s in plan.kernels if s.pdl), "kernel_nodes": len(plan.kernels),
            "declared_launches": plan.declared, "undeclared_steps": len(plan.undeclared),
            "pdl_overlapped_boundaries": overlapped, "launch_boundaries": boundaries,
            "chain_breaks": sorted({s.what for s in plan.breaks()}), "chain_break_steps": len(plan.breaks()),
            "step_us_replay": begin.elapsed_time(end) / 50 * 1e3,
            "kernels_us": kernel_seconds(compiled, args) * 1e6, "summary": plan.summary()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3-1.7b")
    ap.add_argument("--cache-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=256, help="tokens per timed round")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per variant")
    ap.add_argument("--check-tokens", type=int, default=32, help="greedy tokens compared between the variants")
    ap.add_argument("--backends", default="all",
                    help="the kernel backends the rewrite may pick, joined by commas (e.g. triton,torch: the "
                         "Triton GEMVs where CuTe's would win); default: all runnable here")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks/pdl_h200.py needs a CUDA GPU (sm_90 or later for PDL)")
    import triton

    import hoid
    from hoid.kernels import KernelSet
    from hoid.kernels.spec import supports_pdl
    from hoid.models import build_model, decode_step_graph
    from hoid.runtime import compile
    from hoid.runtime.sampling import Greedy

    major, minor = torch.cuda.get_device_capability()
    if not supports_pdl(f"sm_{major}{minor}"):
        raise SystemExit(f"PDL needs sm_90 or later; this GPU is sm_{major}{minor}")
    lm = build_model(args.model, dtype=torch.bfloat16, device="cuda")
    begin = time.perf_counter()
    kernels = KernelSet.default().runnable_here()  # CuTe's only where CuTe DSL is installed
    if args.backends != "all":
        for spec in list(kernels):
            if spec.backend not in args.backends.split(","):
                kernels = kernels.without(spec.id)
    graph = hoid.search.rewrite(decode_step_graph(lm, args.cache_len), device="h200", kernels=kernels)
    rewrite_s = time.perf_counter() - begin
    # no PDL; PDL waiting first (it overlaps launches only); PDL with the GEMVs' weights read before the wait
    how = {"no PDL": dict(pdl=False), "PDL, wait first": dict(pdl=True),  # hoid.compile's default on sm_90+
           "PDL, weights early": dict(pdl=True, pdl_early=True)}
    variants = {name: compile(graph, sample=Greedy(), **kw) for name, kw in how.items()}
    tokens = {name: greedy_tokens(c, args.check_tokens) for name, c in variants.items()}
    # waiting first must change nothing; the early GEMV build may differ by an ulp (a k-tile of one under
    # split-K: tests/kernels/library/test_triton_pdl.py), which greedy decoding can turn into another token
    same = tokens["PDL, wait first"] == tokens["no PDL"]
    early_same = tokens["PDL, weights early"] == tokens["no PDL"]
    rates = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, c in variants.items():
            c.reset_state()
            rates[name].append(tokens_per_second(c, args.steps))
    rows = []
    for name, c in variants.items():
        row = {"variant": name, "tokens_per_s": statistics.median(rates[name]), "rounds": rates[name],
               "kernels_used": sorted({b.spec.id for b in c.lowered.kernels.values()}),
               "early_kernels": sum(b.pdl_early for b in c.lowered.kernels.values()), **describe(c)}
        rows.append(row)
    base, with_pdl, early = rows
    speedup = with_pdl["tokens_per_s"] / base["tokens_per_s"]
    print(f"{args.model} decode, cache {args.cache_len}, {args.steps} tokens x {args.rounds} rounds "
          f"(rewrite {rewrite_s:.0f} s); same {args.check_tokens} greedy tokens: waiting first {same}, "
          f"weights early {early_same}")
    print(f"{'variant':<18} {'tok/s':>8} {'step us':>8} {'kern. us':>8} {'PDL kern.':>9} {'overlap':>9} breaks")
    for r in rows:
        print(f"{r['variant']:<18} {r['tokens_per_s']:>8.1f} {r['step_us_replay']:>8.1f} {r['kernels_us']:>8.1f} "
              f"{r['pdl_kernels']:>9} {r['pdl_overlapped_boundaries']:>4}/{r['launch_boundaries']:<4} "
              f"{', '.join(r['chain_breaks'][:6])}")
    print(f"PDL / no PDL: {speedup:.3f}x (weights early: {early['tokens_per_s'] / base['tokens_per_s']:.3f}x)")
    print(with_pdl["summary"])
    result = {"benchmark": "pdl_h200", "model": args.model, "dtype": "bf16", "cache_len": args.cache_len,
              "steps": args.steps, "rounds": args.rounds, "same_tokens": same, "early_same_tokens": early_same,
              "tokens": tokens, "speedup": speedup,
              "speedup_weights_early": early["tokens_per_s"] / base["tokens_per_s"],
              "backends": args.backends, "rewrite_s": rewrite_s, "device": torch.cuda.get_device_name(),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
              "results": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "pdl_h200.json"
    path.write_text(json.dumps(result, indent=1, default=str))
    print(f"wrote {path}")
    if not same:
        raise SystemExit(f"PDL (waiting first) changed the greedy tokens: {tokens}")


if __name__ == "__main__":
    main()

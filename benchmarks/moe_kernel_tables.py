"""The MoE kernels of Qwen3-30B-A3B alone, at its shapes (`workload_qwen3_moe.py --experts` and `--tune`):
`triton.moe_experts` against transformers' gathered `batched_mm`, `triton.moe_router` against transformers'
router module, both CUDA-graph replayed; and the four MoE kernels' tiles tuned by coordinate descent at the
widths they run at. Each table is a list of JSON rows, printed as it goes."""

from __future__ import annotations

import torch


# --- the experts alone: triton.moe_experts against the gathered batched_mm it replaces ------------------
def experts_table(lm, device, bandwidth: float, tokens=(1, 4, 16), sets: int = 8) -> list[dict]:
    """One MoE layer's routed experts at Qwen3-30B-A3B's shapes, per call: hoid's kernel and transformers'
    `batched_mm` (gathers the selected experts' weights, then bmm), both CUDA-graph replayed. Each run
    takes the next of `sets` random routings, so that the 8 x 9 MiB of selected weights are not L2-resident."""
    return [_experts_row(lm, t, device, bandwidth, sets) for t in tokens]


def _experts_row(lm, t: int, device, bandwidth: float, sets: int) -> dict:
    from transformers.integrations.moe import batched_mm_experts_forward

    from hoid.kernels.library import triton_moe_experts as moe
    from hoid.measure.cuda import time_cuda

    experts, cfg = lm.model.layers[0].mlp.experts, lm.config
    k, hidden, inter = cfg.num_experts_per_tok, cfg.hidden_size, cfg.moe_intermediate_size
    g = torch.Generator(device="cpu").manual_seed(t)
    x = torch.randn(t, hidden, generator=g).to(device, torch.bfloat16)
    routings = [(torch.stack([torch.randperm(cfg.num_experts, generator=g)[:k] for _ in range(t)]).to(device),
                 torch.rand(t, k, generator=g).to(device, torch.bfloat16)) for _ in range(sets)]
    out = torch.empty(t, hidden, device=device, dtype=torch.bfloat16)
    turn = [0]

    def ours():
        ids, weights = routings[turn[0] % sets]
        turn[0] += 1
        moe.launch(x, ids, weights, experts.gate_up_proj, experts.down_proj, out)

    def gathered():
        ids, weights = routings[turn[0] % sets]
        turn[0] += 1
        return batched_mm_experts_forward(experts, x, ids, weights)

    ids, weights = routings[0]
    moe.launch(x, ids, weights, experts.gate_up_proj, experts.down_proj, out)
    want = batched_mm_experts_forward(experts, x, ids, weights).float()
    error = float((out.float() - want).norm() / want.norm())
    unique = sum(len(set(r[0].flatten().tolist())) for r in routings) / sets
    read = unique * (2 * inter * hidden + hidden * inter) * 2  # the distinct selected experts' weights
    row = {"tokens": t, "experts_read": unique, "weight_bytes": read, "rel_l2_vs_batched_mm": error}
    for name, fn in (("hoid_moe_experts", ours), ("batched_mm", gathered)):
        timing = time_cuda(fn, rotate=False, graph=True)
        row[name + "_s"] = timing.median
        row[name + "_bandwidth_fraction"] = read / timing.median / bandwidth
    row["speedup"] = row["batched_mm_s"] / row["hoid_moe_experts_s"]
    print(f"  experts, {t:>2} token(s): moe_experts {row['hoid_moe_experts_s'] * 1e6:7.1f} us "
          f"({row['hoid_moe_experts_bandwidth_fraction']:.0%} of copy bandwidth), batched_mm "
          f"{row['batched_mm_s'] * 1e6:7.1f} us: {row['speedup']:.2f}x; rel L2 {error:.1e}", flush=True)
    return row


def router_table(lm, device, tokens=(1, 4, 16)) -> list[dict]:
    """One MoE layer's router at Qwen3-30B-A3B's shapes, per call: `triton.moe_router` (one launch) and
    transformers' router module (linear, float32 softmax, topk, renormalization, cast), both CUDA-graph
    replayed; and how often their ids agree (they may differ only where two probabilities tie)."""
    return [_router_row(lm.model.layers[0].mlp.gate, lm.config, t, device) for t in tokens]


def _router_row(gate, cfg, t: int, device) -> dict:
    from hoid.kernels.library import triton_moe_router as router
    from hoid.measure.cuda import time_cuda

    k = cfg.num_experts_per_tok
    x = torch.randn(t, cfg.hidden_size, generator=torch.Generator().manual_seed(t)).to(device, torch.bfloat16)
    weights = torch.empty(t, k, device=device, dtype=torch.bfloat16)
    ids = torch.empty(t, k, device=device, dtype=torch.int64)

    def ours():
        router.launch(x, gate.weight, weights, ids, k=k)

    ours()
    _, want_weights, want_ids = gate(x)
    row = {"tokens": t, "ids_agree": float((ids == want_ids).float().mean()),
           "weights_rel_l2": float((weights.float() - want_weights.float()).norm() / want_weights.float().norm())}
    for name, fn in (("hoid_moe_router", ours), ("transformers_router", lambda: gate(x))):
        row[name + "_s"] = time_cuda(fn, rotate=False, graph=True).median
    row["speedup"] = row["transformers_router_s"] / row["hoid_moe_router_s"]
    print(f"  router, {t:>2} token(s): moe_router {row['hoid_moe_router_s'] * 1e6:6.1f} us, transformers' "
          f"{row['transformers_router_s'] * 1e6:6.1f} us: {row['speedup']:.2f}x; ids agree {row['ids_agree']:.0%}, "
          f"weights rel L2 {row['weights_rel_l2']:.1e}", flush=True)
    return row


def tuned_calls(hidden: int, inter: int, experts: int, k: int) -> list[tuple[str, list, dict]]:
    """(kernel, input types, attrs) of the MoE kernels at the widths their tiles are tuned at, bfloat16: the
    experts at 1 and 4 tokens, the router at 1, 4 and 16 (where its tiles differ), and the prompt's grouped
    experts and router at the two prompts, 128 and 1024 tokens."""
    from hoid.ir import TensorType

    def experts_at(t):
        return [TensorType((t, hidden), "bf16"), TensorType((t, k), "i64"), TensorType((t, k), "bf16"),
                TensorType((experts, 2 * inter, hidden), "bf16"), TensorType((experts, hidden, inter), "bf16")]

    calls = [("triton.moe_experts", experts_at(t), {}) for t in (1, 4)]
    def router_at(t):
        return [TensorType((t, hidden), "bf16"), TensorType((experts, hidden), "bf16")]

    calls += [("triton.moe_router", router_at(t), {"k": k}) for t in (1, 4, 16)]
    calls += [("triton.moe_experts_grouped", experts_at(t), {}) for t in (128, 1024)]
    return calls + [("triton.moe_router_rows", router_at(t), {"k": k}) for t in (128, 1024)]


def tune_table(lm, device=None, size: int = 16, rounds: int = 3) -> list[dict]:
    """`triton.moe_experts` (at 1 and 4 tokens), `triton.moe_router` (at 1, 4 and 16, where its tiles differ),
    `triton.moe_experts_grouped` and `triton.moe_router_rows` (prompts of 128 and 1024) at Qwen3-30B-A3B's
    shapes, tuned by coordinate descent (`hoid.measure.descend`: `size` param sets a round near the choice
    before, at most `rounds`). The first sweep of both (12-07, H100, one round
    then a second by hand, benchmarks/moe_tune_round2.py) gave their "auto" tiles; this says whether they
    still win, on this GPU. Each row: the choice, its time and the defaults', every trial; or, where tuning
    refused (a default below the roofline floor, 12-07), the reason, and the next kernel is tuned."""
    from hoid.kernels import all_kernels
    from hoid.measure.local import local_device
    from hoid.measure.tune import TuneRefused, descend

    cfg, target = lm.config, (device or local_device())
    rows = []
    for kernel, types, attrs in tuned_calls(cfg.hidden_size, cfg.moe_intermediate_size, cfg.num_experts,
                                            cfg.num_experts_per_tok):
        try:
            result = descend(all_kernels()[kernel], types, attrs, size=size, rounds=rounds, device=target)
        except TuneRefused as error:  # 12-07: one refusal ended the run, and the rows tuned before it with it
            rows.append({"kernel": kernel, "tokens": types[0].shape[0], "error": str(error)})
            print(f"  tuning {kernel} at {types[0].shape[0]} token(s) refused: {error}", flush=True)
            continue
        default = result.trials[0].median
        rows.append({"kernel": kernel, "tokens": types[0].shape[0], "default_s": default, **result.to_json()})
        print(f"  tuned {kernel} at {types[0].shape[0]} token(s): {result.median * 1e6:.1f} us against the "
              f"defaults' {default * 1e6:.1f} us over {len(result.trials)} candidates: {result.reason}", flush=True)
    return rows

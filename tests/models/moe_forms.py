"""transformers 5.17's `batched_mm` experts forward, in short: what the H100 imported a MoE decode step with on
12-06 (the ids flattened, then clamped for expert parallelism's sentinels), which `triton.moe_experts`'s
pattern does not match. The tests put it in place of hoid's own gathered form to show what that costs."""

import torch


def batched_mm_5_17(experts, hidden_states, top_k_index, top_k_weights):
    ids = top_k_index.reshape(-1).clamp(0, experts.num_experts - 1)
    repeated = hidden_states.repeat_interleave(top_k_index.shape[-1], dim=0)
    gate, up = torch.bmm(experts.gate_up_proj[ids], repeated.unsqueeze(-1)).squeeze(-1).chunk(2, dim=-1)
    y = torch.bmm(experts.down_proj[ids], (experts.act_fn(gate) * up).unsqueeze(-1)).squeeze(-1)
    weighted = y * top_k_weights.reshape(-1, 1)
    return weighted.view(hidden_states.shape[0], -1, hidden_states.shape[1]).sum(dim=1)

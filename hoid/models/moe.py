"""The mixture-of-experts decoder of the zoo, Qwen3-30B-A3B, and its decode-step graph.

Qwen3-30B-A3B is a Qwen3 decoder (48 layers, hidden 2048, 32 query heads over 4 KV heads of 128,
q/k RMSNorm, RoPE theta 1e6, untied embeddings) whose every MLP is a sparse MoE block: a router
linear [128 experts x 2048], a float32 softmax, the top 8, renormalized to sum to one
(`norm_topk_prob`), and 8 SwiGLU experts of width 768 run on the token, their outputs summed with
those weights. 30.5B parameters, 3.3B of them active per token.

transformers stores the experts as two 3-D weights (`experts.gate_up_proj` [E, 2I, H], `experts.down_proj`
[E, H, I]) and runs them in one of several "experts implementations". Its default, `grouped_mm`, sorts
tokens by expert into groups of data-dependent sizes, which torch.export cannot trace; `eager` loops over
the experts that were hit (data-dependent control flow). `batched_mm` is the traceable one and the fast
path of a decode step: it gathers the selected experts' weights by index (`gate_up_proj[ids]`: [k, 2I, H])
and multiplies each by its token (a batched GEMV over k experts, never all E). `hoid.models.prefill_graph`
and `decode_step_graph` import a MoE decoder with hoid's own copy of that computation
(`gathered_experts_forward`, through `traceable_experts`), so the IR holds the whole routing as ops the
search can reach, the same whatever transformers' version:

    matmul(x, router^T) -> softmax(f32) -> topk -> div(sum) -> cast        (the router)
    index(gate_up_proj, ids) -> matmul -> silu * up -> index(down_proj, ids) -> matmul   (k experts)
    mul(weights) -> sum over k                                             (the weighted combine)

A graph of many tokens (a prefill) would gather one weight copy per (token, expert) pair that way; it is
traced with every expert on every token instead (`dense_experts_forward`), each expert's weights read once;
the search replaces that form with `triton.moe_experts_grouped`, which runs each expert on its own pairs only.

The zoo entries are in `configs.SPECS` (family `qwen3_moe`): `qwen3-30b-a3b` with the numbers
of its published `config.json`, and `qwen3-30b-a3b-tiny` for tests (2 layers, hidden 64, 16 experts of
width 32, top 4, the GQA ratio, norms and RoPE kept).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

# the experts implementations the graphs are traced with (see the module docstring)
TRACEABLE_EXPERTS = "hoid_gathered"  # a few tokens: gather the selected experts' weights
DENSE_EXPERTS = "hoid_dense"  # many tokens: every expert on every token, weighted by a dense routing matrix


def gathered_experts_forward(experts, hidden_states, top_k_index, top_k_weights):
    """transformers' `batched_mm` experts forward for gated experts stored [E, 2I, H] and [E, H, I], owned here:
    the graph `triton.moe_experts`'s pattern matches must not change with transformers' version. 5.17's
    `batched_mm` clamps the ids (expert parallelism's sentinels) and 5.25's does not: the H100's 5.17 (12-06)
    imported a step whose gathers no kernel matched, and they ran as copies (2.7 ms of a 7.2 ms step)."""
    if getattr(experts, "is_transposed", False) or getattr(experts, "has_bias", False) \
            or not getattr(experts, "has_gate", True) or not getattr(experts, "is_concatenated", True) \
            or getattr(experts, "has_post_expert_norm", False):
        raise NotImplementedError(f"hoid's gathered experts take gated experts without bias or post-norm, "
                                  f"stored [E, 2I, H] (gate rows, then up) and [E, H, I]; {type(experts).__name__} "
                                  f"is another kind: import it with transformers' own `batched_mm` "
                                  f"(model.set_experts_implementation('batched_mm'))")
    tokens, hidden = hidden_states.shape
    top_k = top_k_index.shape[-1]
    repeated = hidden_states.repeat_interleave(top_k, dim=0)  # [S, H], S = tokens x top_k pairs
    ids, weights = top_k_index.reshape(-1), top_k_weights.reshape(-1)
    gate_up = torch.bmm(experts.gate_up_proj[ids], repeated.unsqueeze(-1)).squeeze(-1)  # [S, 2I]
    # the model's gating: transformers' experts decorator (which dispatches here) gives every class one
    act = experts._apply_gate(gate_up)
    out = torch.bmm(experts.down_proj[ids], act.unsqueeze(-1)).squeeze(-1)  # [S, H]
    return (out * weights.unsqueeze(-1)).view(tokens, top_k, hidden).sum(dim=1).to(hidden_states.dtype)


def dense_experts_forward(experts, hidden_states, top_k_index, top_k_weights):
    """transformers' experts forward, for graphs of many tokens: every expert on every token, then the sum
    weighted by the routing scattered over all E experts (zero where not selected).

    The gathered form gathers one weight copy per (token, expert) pair: a 1024-token prefill of Qwen3-30B-A3B
    would materialize 8192 x [1536, 2048] bfloat16 (51 GB) per layer. Here each expert's weights are read once,
    as one large matmul (compute-bound at prefill sizes), with the same result up to the order of the sum
    (the unselected experts add exact zeros)."""
    gate_up = torch.matmul(hidden_states, experts.gate_up_proj.transpose(1, 2))  # [E, T, 2I]
    out = torch.matmul(experts._apply_gate(gate_up), experts.down_proj.transpose(1, 2))  # [E, T, H]
    chosen = top_k_index.unsqueeze(-1) == torch.arange(experts.num_experts, device=top_k_index.device)
    routing = (chosen * top_k_weights.unsqueeze(-1)).sum(dim=1)  # [T, E]
    return (out * routing.transpose(0, 1).unsqueeze(-1).to(out.dtype)).sum(dim=0).to(hidden_states.dtype)


def experts_for(lm, tokens: int) -> str:
    """The traceable experts implementation for a graph of `tokens` tokens (batch x sequence): the gathered
    one while the (token, expert) pairs are fewer than the experts, else the dense one."""
    return TRACEABLE_EXPERTS if tokens * lm.config.num_experts_per_tok < lm.config.num_experts else DENSE_EXPERTS


def is_moe(lm) -> bool:
    """Whether a transformers causal LM has sparse MoE blocks (experts that an implementation runs)."""
    return getattr(lm.config, "num_experts", 0) > 0 and hasattr(lm, "set_experts_implementation")


@contextlib.contextmanager
def traceable_experts(lm, tokens: int = 1) -> Iterator[None]:
    """Run `lm`'s MoE blocks in a traceable form for `tokens` tokens (`experts_for`) inside the block, and
    put back the implementation it had on exit. A model without experts passes through unchanged."""
    if not is_moe(lm):
        yield
        return
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    ALL_EXPERTS_FUNCTIONS.register(TRACEABLE_EXPERTS, gathered_experts_forward)
    ALL_EXPERTS_FUNCTIONS.register(DENSE_EXPERTS, dense_experts_forward)
    before = lm.config._experts_implementation
    lm.set_experts_implementation(experts_for(lm, tokens))
    try:
        yield
    finally:
        lm.set_experts_implementation(before)

"""The cases `benchmarks/kernel_table.py` runs: each library Triton kernel at the decode shapes of Qwen3-1.7B,
Qwen3-4B and Llama-3.1-8B (batch 1, one token), at large shapes (>= 64 MB moved) and at SDXL's UNet shapes
(the group norms and GEGLUs of a 1024 x 1024 step with guidance), with the torch eager function it replaces
(also what `torch.compile` compiles: for SDXL's, the fusions Inductor makes in its UNet) and the bytes it
must move at least.

`scale` shrinks every size (for a smoke run on the CPU under the Triton interpreter).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

MODELS = {  # hidden, intermediate, q heads, kv heads, head dim, vocabulary
    "Qwen3-1.7B": (2048, 6144, 16, 8, 128, 151936),
    "Qwen3-4B": (2560, 9728, 32, 8, 128, 151936),
    "Llama-3.1-8B": (4096, 14336, 32, 8, 128, 128256),
}
CACHE_LEN, FILLED = 4096, 1000  # decode: a static cache of 4096 slots, 1000 of them filled


@dataclass
class Case:
    """kernel: spec id; model: a MODELS key or "large"; what: the layer it stands for; inputs(): fresh
    tensors and attrs; eager(*inputs): torch's way, returning the outputs (updating caches in place);
    moved: the fewest bytes the work must move; aliased: output index -> input index updated in place;
    candidates: the params tuning tries (none: the kernel's defaults)."""

    kernel: str
    model: str
    what: str
    inputs: Callable[[], tuple[list[torch.Tensor], dict]]
    eager: Callable[..., object]
    moved: int
    aliased: dict[int, int] = field(default_factory=dict)
    candidates: list[dict] | None = None


# --- torch eager references (what transformers does) ------------------------------------------------

def rmsnorm(x, w, eps=1e-6):
    x32 = x.float()
    return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def add_rmsnorm(x, residual, w, eps=1e-6):
    h = x + residual
    return h, rmsnorm(h, w, eps)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def prelude(q, k, v, *rest, norm: bool, eps=1e-6):
    """q/k norm (Qwen3), RoPE, k and v appended in place to the static caches, as transformers' StaticCache."""
    if norm:
        qw, kw, cos, sin, k_cache, v_cache, pos = rest
        q, k = rmsnorm(q, qw, eps), rmsnorm(k, kw, eps)
    else:
        cos, sin, k_cache, v_cache, pos = rest
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    q, k = rope(q.transpose(1, 2), cos, sin), rope(k.transpose(1, 2), cos, sin)
    k_cache.index_copy_(2, pos, k)
    v_cache.index_copy_(2, pos, v.transpose(1, 2))
    return q


def swiglu_merged(gate_up):
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def linear_swiglu(x, w):
    return swiglu_merged(F.linear(x, w))


# --- cases -------------------------------------------------------------------------------------------

def build_cases(device: str = "cuda", dtype=torch.bfloat16, scale: int = 1) -> list[Case]:
    """Every case; sizes divided by `scale` (head dims and a few small sizes kept)."""

    def t(*shape):
        return torch.randn(tuple(max(1, s) for s in shape), device=device, dtype=dtype)

    cases: list[Case] = []
    for model, (H, I, HQ, HKV, D, V) in MODELS.items():
        H, I, V = H // scale, I // scale, V // scale
        S, filled = CACHE_LEN // scale, max(1, FILLED // scale)
        cases += _decode_cases(model, H, I, HQ, HKV, D, V, S, filled, t, device)
    cases += _large_cases(scale, t, device)
    cases += _sdxl_cases(scale, t)
    return cases


def _decode_cases(model, H, I, HQ, HKV, D, V, S, filled, t, device) -> list[Case]:
    eps = {"eps": 1e-6}
    qkv_out = (HQ + 2 * HKV) * D
    norm = model.startswith("Qwen3")

    def prelude_inputs():
        q, k, v = t(1, 1, HQ, D), t(1, 1, HKV, D), t(1, 1, HKV, D)
        weights = [t(D), t(D)] if norm else []
        angles = torch.rand(1, 1, D, device=device) * 6
        cos, sin = angles.cos().to(q.dtype), angles.sin().to(q.dtype)
        pos = torch.tensor([filled - 1], device=device)
        return [q, k, v, *weights, cos, sin, t(1, HKV, S, D), t(1, HKV, S, D), pos], (eps if norm else {})

    def attention_inputs():
        mask = (torch.arange(S, device=device) < filled).reshape(1, 1, 1, S)
        return [t(1, HQ, 1, D), t(1, HKV, S, D), t(1, HKV, S, D), mask], {"enable_gqa": True, "scale": None,
                                                                          "is_causal": False}

    kv_moved = 2 * 2 * HKV * filled * D  # K and V, bf16, filled slots only
    k_cache_at = 7 if norm else 5  # position of the k cache among the prelude's inputs (v's is next)
    # q in and out, k and v in and their cache rows out, cos and sin, the norm weights: bf16 elements
    prelude_moved = 2 * (2 * HQ * D + 4 * HKV * D + 2 * D + (2 * D if norm else 0))
    return [
        Case("triton.embedding", model, "token embedding", lambda: ([t(V, H), torch.tensor([7], device=device)], {}),
             lambda w, i: F.embedding(i, w), 2 * 2 * H, candidates=EMBEDDING_CANDIDATES),
        Case("triton.rmsnorm", model, "input norm", lambda: ([t(1, H), t(H)], eps), rmsnorm, 3 * 2 * H),
        Case("triton.add_rmsnorm", model, "residual + norm", lambda: ([t(1, H), t(1, H), t(H)], eps), add_rmsnorm,
             5 * 2 * H),
        Case("triton.linear", model, "qkv projection", lambda: ([t(1, H), t(qkv_out, H)], {}), F.linear,
             2 * (H + qkv_out * H + qkv_out), candidates=gemv_candidates(1)),
        Case("triton.qk_norm_rope_cache" if norm else "triton.rope_cache", model, "attention prelude",
             prelude_inputs, lambda *a, **k: prelude(*a, norm=norm, **k), prelude_moved,
             aliased={1: k_cache_at, 2: k_cache_at + 1}),
        Case("triton.decode_attention", model, f"attention, {filled} of {S} cached",
             attention_inputs, lambda q, k, v, m, **a: F.scaled_dot_product_attention(q, k, v, attn_mask=m, **a),
             2 * 2 * HQ * D + kv_moved + S, candidates=ATTENTION_CANDIDATES),
        Case("triton.linear_add", model, "o projection + residual", lambda: ([t(1, HQ * D), t(H, HQ * D), t(1, H)], {}),
             lambda x, w, r: F.linear(x, w) + r, 2 * (HQ * D + H * HQ * D + 2 * H), candidates=gemv_candidates(1)),
        Case("triton.linear_swiglu_merged", model, "gate/up projection + SiLU gating",
             lambda: ([t(1, H), t(2 * I, H)], {}), linear_swiglu, 2 * (H + 2 * I * H + I),
             candidates=gemv_candidates(1)),
        Case("triton.swiglu_merged", model, "SiLU gating (unfused)", lambda: ([t(1, 2 * I)], {}), swiglu_merged,
             2 * 3 * I),
        Case("triton.linear_add", model, "down projection + residual", lambda: ([t(1, I), t(H, I), t(1, H)], {}),
             lambda x, w, r: F.linear(x, w) + r, 2 * (I + H * I + 2 * H), candidates=gemv_candidates(1)),
        Case("triton.linear", model, "lm head", lambda: ([t(1, H), t(V, H)], {}), F.linear, 2 * (H + V * H + V),
             candidates=gemv_candidates(1)),
        Case("triton.softmax", model, "sampling softmax", lambda: ([t(1, V)], {"dim": -1}),
             lambda x, dim: torch.softmax(x, dim), 2 * 2 * V),
    ]


def _large_cases(scale, t, device) -> list[Case]:
    R = 16384 // scale  # rows of activations: 16384 tokens x 4096 = 128 MiB in bf16
    H, I, V, S = 4096 // scale, 14336 // scale, 128256 // scale, 32768 // scale
    eps = {"eps": 1e-6}

    def rope_inputs():
        angles = torch.rand(1, 1, R // 2, 128, device=device) * 6
        return [t(1, 32, R // 2, 128), angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)], {}

    def attention_inputs():
        mask = torch.ones(1, 1, 1, S, device=device, dtype=torch.bool)
        return [t(1, 32, 1, 128), t(1, 8, S, 128), t(1, 8, S, 128), mask], {"enable_gqa": True, "scale": None,
                                                                             "is_causal": False}

    return [
        Case("triton.rmsnorm", "large", f"{R}x{H}", lambda: ([t(R, H), t(H)], eps), rmsnorm, 2 * 2 * R * H),
        Case("triton.add_rmsnorm", "large", f"{R}x{H}", lambda: ([t(R, H), t(R, H), t(H)], eps), add_rmsnorm,
             4 * 2 * R * H),
        Case("triton.swiglu_merged", "large", f"{R // 4}x{2 * I}", lambda: ([t(R // 4, 2 * I)], {}), swiglu_merged,
             2 * 3 * (R // 4) * I),
        Case("triton.softmax", "large", f"{R // 2}x{R // 2}", lambda: ([t(R // 2, R // 2)], {"dim": -1}),
             lambda x, dim: torch.softmax(x, dim), 2 * 2 * (R // 2) ** 2),
        Case("triton.softmax", "large", f"8x{V} (vocabulary)", lambda: ([t(8, V)], {"dim": -1}),
             lambda x, dim: torch.softmax(x, dim), 2 * 2 * 8 * V),
        Case("triton.embedding", "large", f"{R} tokens of {V}x{H}",
             lambda: ([t(V, H), torch.randint(0, V, (R,), device=device)], {}), lambda w, i: F.embedding(i, w),
             2 * 2 * R * H + 8 * R, candidates=EMBEDDING_CANDIDATES),
        Case("triton.rope", "large", f"1x32x{R // 2}x128", rope_inputs, rope, 2 * 2 * 32 * (R // 2) * 128 +
             2 * 2 * (R // 2) * 128),
        Case("triton.decode_attention", "large", "32k cache, 32/8 heads", attention_inputs,
             lambda q, k, v, m, **a: F.scaled_dot_product_attention(q, k, v, attn_mask=m, **a),
             2 * 2 * 8 * S * 128 + S, candidates=ATTENTION_CANDIDATES),
        Case("triton.linear", "large", f"lm head {H}->{V}", lambda: ([t(1, H), t(V, H)], {}), F.linear,
             2 * (H + V * H + V), candidates=gemv_candidates(1)),
        Case("triton.linear", "large", f"M=16, {H}->{I}", lambda: ([t(16, H), t(I, H)], {}), F.linear,
             2 * (16 * H + I * H + 16 * I), candidates=gemv_candidates(16)),
    ]


def _sdxl_cases(scale, t) -> list[Case]:
    """SDXL's UNet at 1024 x 1024, batch 2 (guidance): a ResNet block's group norm + SiLU at each level's
    width (the rows of 20,480 to 491,520 values that torch's kernel gives one program each), and the GEGLU
    of a transformer block at the two levels that have them. `scale` shrinks the spatial dims and tokens
    only, so the channels stay multiples of the 32 groups."""
    side = max(2, 128 // scale)

    def group_norm_silu(x, w, b, num_groups, eps):
        return F.silu(F.group_norm(x, num_groups, w, b, eps))

    def geglu(x):
        hidden, gate = x.chunk(2, dim=-1)
        return hidden * F.gelu(gate)

    norm_cases = [
        Case("triton.group_norm_silu", "SDXL UNet", f"group norm + SiLU, 2x{c}x{h}x{h}",
             lambda c=c, h=h: ([t(2, c, h, h), t(c), t(c)], {"num_groups": 32, "eps": 1e-5}), group_norm_silu,
             2 * 2 * 2 * c * h * h + 2 * 2 * c)
        for c, h in ((320, side), (640, max(1, side // 2)), (1280, max(1, side // 4)), (960, side))
    ]
    def group_norm_nhwc_silu(x, w, b, num_groups, eps):  # torch's on a channels-last tensor, moved back
        return F.silu(F.group_norm(x.permute(0, 3, 1, 2), num_groups, w, b, eps)).permute(0, 2, 3, 1).contiguous()

    # the same norms channels-last (`search/rules/channels_last.py`: between NHWC convolutions)
    norm_cases += [
        Case("triton.group_norm_nhwc_silu", "SDXL UNet", f"group norm + SiLU NHWC, 2x{h}x{h}x{c}",
             lambda c=c, h=h: ([t(2, h, h, c), t(c), t(c)], {"num_groups": 32, "eps": 1e-5}), group_norm_nhwc_silu,
             2 * 2 * 2 * c * h * h + 2 * 2 * c)
        for c, h in ((320, side), (640, max(1, side // 2)), (1280, max(1, side // 4)), (960, side))
    ]
    vae = max(2, 1024 // scale)  # the VAE decoder's last stage, 1024 x 1024 pixels

    def bias_group_norm_nhwc_silu(x, shift, w, b, num_groups, eps):  # the bias pass, then the norm as above
        return group_norm_nhwc_silu(x + shift, w, b, num_groups, eps)

    # with the convolution's bias (+ time embedding) added as the norm reads (`conv-nhwc-bias-apart`): the
    # VAE's widest at 1024 x 1024 and the UNet's first stage
    norm_cases += [
        Case("triton.bias_group_norm_nhwc_silu", model, f"bias + group norm + SiLU NHWC, {n}x{h}x{h}x{c}",
             lambda n=n, c=c, h=h, shift=shift: ([t(n, h, h, c), t(*shift), t(c), t(c)],
                                                 {"num_groups": 32, "eps": 1e-5}),
             bias_group_norm_nhwc_silu, 2 * 2 * n * c * h * h + 2 * 3 * c)
        for model, n, c, h, shift in (("SDXL UNet", 2, 320, side, (2, 1, 1, 320)),
                                      ("SDXL VAE", 1, 128, vae, (128,)))
    ]

    # a ResNet block's second convolution's bias and the skip after it, in one pass (`triton.bias_residual_add`)
    norm_cases += [
        Case("triton.bias_residual_add", model, f"bias + residual add NHWC, {n}x{h}x{h}x{c}",
             lambda n=n, c=c, h=h: ([t(n, h, h, c), t(n, h, h, c), t(c)], {}), lambda r, x, b: r + (x + b),
             2 * 3 * n * c * h * h + 2 * c, candidates=[{"layout": "rows"}, {"layout": "flat"}])  # tuning says which
        for model, n, c, h in (("SDXL UNet", 2, 320, side), ("SDXL VAE", 1, 128, vae))
    ]

    # "auto" and its neighbours: at 2x4096x640 "auto" (4 rows of 1024 lanes, 8 warps) timed 0.76x Inductor's
    # (H100, 12-06 15:40), at 2x1024x1280 1.09x; the tuning says which tile the rows of 640 want
    ADD_LAYER_NORM_TRIES = [{}, {"num_warps": 4}, {"rows_per_program": 1, "num_warps": 4},
                            {"rows_per_program": 2, "num_warps": 4}, {"rows_per_program": 8, "num_warps": 8}]

    def add_layer_norm(x, residual, w, b, eps):
        summed = x + residual
        return summed, F.layer_norm(summed, w.shape, w, b, eps)

    # a transformer layer's residual add and the layer norm after it (Inductor fuses the two)
    norm_cases += [
        Case("triton.add_layer_norm", "SDXL UNet", f"residual add + layer norm, 2x{n}x{c}",
             lambda n=n, c=c: ([t(2, n, c), t(2, n, c), t(c), t(c)], {"eps": 1e-5}), add_layer_norm,
             2 * 2 * 4 * n * c + 2 * 2 * c, candidates=ADD_LAYER_NORM_TRIES)
        for n, c in ((max(1, 4096 // scale), 640), (max(1, 1024 // scale), 1280))
    ]
    geglu_cases = [
        Case("triton.geglu_merged", "SDXL UNet", f"GEGLU, 2x{n}x{2 * inner}",
             lambda n=n, inner=inner: ([t(2, n, 2 * inner)], {}), geglu, 2 * 2 * 3 * n * inner)
        for n, inner in ((max(1, 4096 // scale), 2560), (max(1, 1024 // scale), 5120))
    ]
    # the VAE's mid-block attention: one head of 512 over 128 x 128 latents, which torch's flash and cuDNN
    # kernels refuse (heads of at most 256); moved: q, k, v and the output once (what a fused kernel moves)
    tokens = max(8, 16384 // scale)
    attention_cases = [
        Case("triton.sdpa_wide", "SDXL VAE", f"attention, 1 head of 512 over {tokens} latents",
             lambda: ([t(1, 1, tokens, 512), t(1, 1, tokens, 512), t(1, 1, tokens, 512)],
                      {"is_causal": False, "scale": None, "enable_gqa": False}),
             lambda q, k, v, is_causal, scale, enable_gqa: F.scaled_dot_product_attention(q, k, v),
             2 * 4 * tokens * 512)
    ]
    # the VAE's upsamplers, channels-last, each doubling H and W (torch's NHWC nearest kernel: about 2.5 ms for
    # the two largest on the H100, 12-06); torch's way: the NHWC tensor as a channels-last NCHW view, resized
    def upsample_nhwc(x, size, mode, align_corners):
        return F.interpolate(x.permute(0, 3, 1, 2), size=size, mode="nearest").permute(0, 2, 3, 1)

    upsample_cases = [
        Case("triton.upsample_nhwc", "SDXL VAE", f"nearest 2x upsampling NHWC, 1x{h}x{h}x{c}",
             lambda c=c, h=h: ([t(1, h, h, c)], {"size": (2 * h, 2 * h), "mode": "nearest",
                                                 "align_corners": False}),
             upsample_nhwc, 2 * 5 * h * h * c)
        for h, c in ((max(1, vae // 4), 512), (max(1, vae // 2), 256))
    ]
    return norm_cases + geglu_cases + attention_cases + upsample_cases


def gemv_candidates(m: int) -> list[dict]:
    """The GEMV params tuning tries. A first H200 run (benchmarks/results/kernels_measure.sqlite) found
    bigger tiles per iteration faster for the small-N projections (32x256 beat every 4..16-row tile), so
    the list reaches past it; the 8x512 tile stays for the wide ones (lm head, qkv)."""
    if m > 1:
        return [{"block_n": bn, "block_k": bk, "num_warps": w} for bn, bk, w in
                ((32, 128, 4), (64, 128, 4), (32, 256, 4), (64, 128, 8), (16, 256, 4))]
    shapes = ((4, 512, 4), (8, 512, 4), (16, 512, 4), (16, 256, 4), (32, 256, 8), (64, 256, 8), (32, 512, 8),
              (16, 1024, 8), (64, 128, 8))
    return [{"block_n": bn, "block_k": bk, "num_warps": w} for bn, bk, w in shapes]


ATTENTION_CANDIDATES = [{"split_tokens": s, "block_n": n, "num_stages": st} for s, n, st in
                        ((256, 64, 2), (512, 64, 2), (512, 128, 2), (1024, 128, 3), (256, 128, 3))]
EMBEDDING_CANDIDATES = [{"block": b, "num_warps": w} for b, w in ((1024, 4), (2048, 4), (4096, 8), (512, 2))]


def gb_per_s(moved: int, seconds: float) -> float:
    return moved / seconds / 1e9 if seconds and math.isfinite(seconds) else float("nan")

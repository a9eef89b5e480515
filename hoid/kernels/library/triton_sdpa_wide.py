"""Attention for heads wider than the fused kernels take, its scores materialized: `triton.sdpa_wide`.

Pattern `sdpa(q, k, v)` (no mask, not causal), q [B, H, Tq, D], k and v [B, H, Tk, D], D > 256.

Why: torch's flash and cuDNN attention take heads of at most 256; wider ones fall to the memory-efficient
kernel, a CUTLASS sm80 kernel at a fraction of the tensor cores: SDXL's VAE decoder attends once over 128 x 128
latents with one head of 512, and that one call was 4.5 ms of hoid's 30.0 ms step (reduce-overhead's 4.8) on
the H100 (12-06 15:42). Materialized, the three passes are what cuBLAS and a row softmax do best:

1. scores = (q k^T) * scale into float32 ([B*H, Tq, Tk]; cuBLAS's bf16 GEMM with a float32 output and the scale
   in its epilogue, `baddbmm` with `out_dtype`: the logits are not rounded to bf16 first);
2. probs = softmax(scores) rounded once to q's dtype (`triton_softmax`'s row kernel, float32 in);
3. out = probs v (cuBLAS, float32 accumulation), as the fused kernels round P to bf16 before the same product.

At the VAE's shape that is 0.55 TFLOP on tensor cores and about 3 GB of scores moved: modelled near 1.6 ms.
The scores take 6 bytes each of workspace (1.6 GB there), planned by the runtime like any workspace; the
constraint keeps them under 6 GiB. Narrower heads stay with torch's fused kernels, which never write scores.
"""

from __future__ import annotations

import math
import random

import torch

from ...ir import TensorType
from ..pattern import op_pattern
from ..spec import Constraint, KernelSpec
from . import _constraints as C
from ._triton_build import compile_for, pointer_type
from ._triton_compile import example_floats
from .triton_softmax import launch as softmax
from .triton_softmax import softmax_rows

MIN_HEAD_DIM = 257  # flash and cuDNN take heads up to 256 (torch 2.11's sdp_utils)
MAX_SCORES = 2**30  # 6 GiB of workspace at 6 bytes a score


def _dims(types) -> tuple[int, int, int, int]:
    """(B*H, Tq, Tk, D)."""
    b, h, tq, d = types[0].shape
    return b * h, tq, types[1].shape[2], d


def _workspace(types, attrs, params):
    """The float32 scores and the probabilities in q's dtype, [B*H, Tq, Tk] each."""
    bh, tq, tk, _ = _dims(types)
    return TensorType((bh, tq, tk), "f32"), TensorType((bh, tq, tk), types[0].dtype)


def _scores(q3: torch.Tensor, k3: torch.Tensor, scale: float, scores: torch.Tensor) -> None:
    """scores <- (q3 k3^T) * scale in float32. On CUDA cuBLAS's GEMM with a float32 output (beta = 0: the
    buffer's old contents are ignored); elsewhere, where that overload has no kernel, the same products upcast
    first (bf16 and fp16 products are exact in float32)."""
    kt = k3.transpose(1, 2)
    if q3.is_cuda:
        torch.ops.aten.baddbmm.dtype_out(scores, q3, kt, torch.float32, beta=0, alpha=scale, out=scores)
    else:
        torch.baddbmm(scores, q3.float(), kt.float(), beta=0, alpha=scale, out=scores)


def launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, *, is_causal: bool,
           scale: float | None, enable_gqa: bool, workspace=None) -> None:
    """out <- sdpa(q, k, v) through materialized scores (destination-passing)."""
    bh, tq, tk, d = _dims([q, k])
    if workspace:
        scores, probs = workspace
    else:  # a checker's one-off call
        scores = torch.empty((bh, tq, tk), dtype=torch.float32, device=q.device)
        probs = torch.empty((bh, tq, tk), dtype=q.dtype, device=q.device)
    _scores(q.reshape(bh, tq, d), k.reshape(bh, tk, d), 1 / math.sqrt(d) if scale is None else scale, scores)
    softmax(scores, probs, split="rows")
    torch.bmm(probs, v.reshape(bh, tk, d), out=out.view(bh, tq, d))


def _launches(types, attrs, params) -> None:
    """Unknown: the softmax is one launch, but cuBLAS picks each GEMM's kernels (a split-K one launches two),
    as for a torch vendor call."""
    return None


def _compile(arch: str):
    """The softmax at the VAE's rows (16384 float32 scores in, bf16 out: one tile, 16 warps), the GEMMs
    being cuBLAS's."""
    return compile_for(softmax_rows, arch, {"x_ptr": pointer_type("f32"), "out_ptr": pointer_type("bf16"),
                                            "n_cols": "i32"}, {"BLOCK": 16384, "NUM_TILES": 1}, num_warps=16,
                       divisible_by_16=("n_cols",))


def _examples(rng: random.Random):
    """Heads just past 256 and the VAE's 512, short sequences (the interpreter runs the softmax)."""
    b, h, d = rng.randint(1, 2), rng.randint(1, 2), rng.choice((264, 320, 512))
    tq, tk = rng.choice((1, 7, 33)), rng.choice((5, 40, 130))
    dtype = rng.choice([f for f in example_floats() if f != "f32"])
    q, kv = TensorType((b, h, tq, d), dtype), TensorType((b, h, tk, d), dtype)
    return [q, kv, kv], {"is_causal": False, "scale": rng.choice((None, 0.05)), "enable_gqa": False}


_PATTERN = op_pattern("sdpa", 3)

SPEC = KernelSpec(
    id="triton.sdpa_wide",
    pattern=_PATTERN,
    backend="triton",
    launch=launch,
    constraints=(
        # float32 inputs missed float32's bound on an H100 (12-06, twice: relative L2 6.5e-5 against 1e-5, worst
        # element 0.8% off, through cuBLAS's out_dtype GEMM and through the plain float32 one alike, to the
        # last digit). TF32-sized, but not TF32: that machine runs with allow_tf32 off and no override variable
        # set (checked the same evening). Float32 models keep torch's attention, which takes any head width
        Constraint("q, k and v: bf16 or f16 (float32 misses its bound on the GPU, cause not yet found)",
                   lambda t, attrs: t[0].dtype in ("bf16", "f16")),
        Constraint("q, k and v: one dtype, 4-d, as many heads (no GQA), k and v of one shape",
                   lambda t, attrs: t[0].dtype == t[1].dtype == t[2].dtype and t[0].rank == 4
                   and t[1].shape == t[2].shape and t[1].rank == 4 and t[0].shape[:2] == t[1].shape[:2]
                   and t[0].shape[3] == t[1].shape[3] and not attrs["enable_gqa"]),
        Constraint("not causal (built for the VAE's attention; a causal wide head has not been seen)",
                   lambda t, attrs: not attrs["is_causal"]),
        C.shape_holds(f"heads wider than {MIN_HEAD_DIM - 1} (narrower ones: torch's flash and cuDNN kernels, "
                      "which never write the scores)", lambda t: t[0].shape[3] >= MIN_HEAD_DIM),
        C.shape_holds(f"at most {MAX_SCORES} scores (B*H*Tq*Tk: 6 bytes each of workspace)",
                      lambda t: 0 < t[0].numel // t[0].shape[3] * t[1].shape[2] <= MAX_SCORES),
    ),
    # cuBLAS picks its algorithm by heuristics and may split K (`torch.matmul`'s spec says the same)
    deterministic=False,
    examples=_examples,
    compile=_compile,
    launches=_launches,
    workspace=_workspace,
    doc="attention for heads wider than 256: float32 scores by cuBLAS, a row softmax, then probs v",
)

"""The kernel library: one module (or folder) per kernel, each registering its `KernelSpec`.

The Triton kernels register whether or not triton is installed (their modules import it guarded);
launching one without it raises `MissingTritonError`, which names the package. The CuTe DSL kernels
likewise (`MissingCuteError`, which names `pip install 'hoid[cute]'`).
"""

from ..registry import register_library
from . import (
    cute_gemm,
    cute_gemm_persistent,
    cute_gemv,
    cute_gemv_split,
    torch_conv,
    torch_group_norm_nhwc,
    torch_interpolate,
    torch_linear_bias,
    torch_linear_bias_gelu,
    torch_matmul,
    torch_rmsnorm,
    torch_rope,
    torch_sdpa,
    torch_sdpa_masked,
    torch_silu_mul,
    torch_softmax,
    torch_swiglu_merged,
    triton_add_layer_norm,
    triton_add_rmsnorm,
    triton_bias_residual_add,
    triton_decode_attention,
    triton_decode_attention_onelaunch,
    triton_embedding,
    triton_geglu,
    triton_gemm,
    triton_gemv,
    triton_group_norm,
    triton_group_norm_nhwc,
    triton_moe_experts,
    triton_moe_experts_grouped,
    triton_moe_router,
    triton_moe_router_rows,
    triton_prefill_attention,
    triton_prelude_attention,
    triton_rmsnorm,
    triton_rope,
    triton_sdpa_wide,
    triton_silu_mul,
    triton_softmax,
    triton_upsample_nhwc,
)

TRITON_SPECS = (
    triton_rmsnorm.SPEC,
    triton_add_rmsnorm.SPEC,
    triton_add_layer_norm.SPEC,
    triton_silu_mul.SILU_MUL_SPEC,
    triton_silu_mul.SWIGLU_MERGED_SPEC,
    triton_softmax.SPEC,
    triton_embedding.SPEC,
    triton_gemv.LINEAR_SPEC,
    triton_gemv.LINEAR_ADD_SPEC,
    triton_gemv.LINEAR_BIAS_SPEC,
    triton_gemv.LINEAR_SWIGLU_SPEC,
    triton_gemm.LINEAR_SPEC,
    triton_gemm.LINEAR_ADD_SPEC,
    triton_gemm.LINEAR_SWIGLU_SPEC,
    triton_decode_attention.SPEC,
    triton_decode_attention.NOMASK_SPEC,
    triton_decode_attention_onelaunch.SPEC,
    triton_prefill_attention.SPEC,
    triton_prefill_attention.MERGED_SPEC,
    triton_rope.ROPE_SPEC,
    triton_rope.QK_NORM_ROPE_CACHE_SPEC,
    triton_rope.ROPE_CACHE_SPEC,
    triton_prelude_attention.QK_NORM_ROPE_ATTENTION_SPEC,
    triton_prelude_attention.ROPE_ATTENTION_SPEC,
    triton_moe_experts.SPEC,
    triton_moe_experts_grouped.SPEC,
    triton_moe_router.SPEC,
    triton_moe_router_rows.SPEC,
    triton_group_norm.SPEC,
    triton_group_norm.SILU_SPEC,
    triton_group_norm_nhwc.SPEC,
    triton_group_norm_nhwc.SILU_SPEC,
    triton_group_norm_nhwc.BIAS_SPEC,
    triton_group_norm_nhwc.BIAS_SILU_SPEC,
    triton_geglu.SPEC,
    triton_bias_residual_add.SPEC,
    triton_sdpa_wide.SPEC,
    triton_upsample_nhwc.SPEC,
)

for _spec in TRITON_SPECS:
    register_library(_spec)

# The CuTe DSL kernels register whether or not CuTe DSL is installed: their modules import it only when one
# is launched or built (`_cute_compile`), and then a missing install raises `MissingCuteError` with the fix.
CUTE_SPECS = (
    cute_gemv.LINEAR_SPEC,
    cute_gemv.LINEAR_ADD_SPEC,
    cute_gemv.LINEAR_SWIGLU_SPEC,
    cute_gemv.RMSNORM_LINEAR_SPEC,
    cute_gemv.RMSNORM_LINEAR_SWIGLU_SPEC,
    cute_gemv_split.LINEAR_SPEC,
    cute_gemv_split.LINEAR_ADD_SPEC,
    cute_gemm.LINEAR_SPEC,
    cute_gemm.LINEAR_ADD_SPEC,
    cute_gemm_persistent.LINEAR_SPEC,
    cute_gemm_persistent.LINEAR_ADD_SPEC,
)

for _spec in CUTE_SPECS:
    register_library(_spec)

# The vendor kernels: a correct, measurable fallback for every pattern the library implements.
TORCH_SPECS = tuple(m.SPEC for m in (torch_matmul, torch_sdpa, torch_sdpa_masked, torch_rmsnorm, torch_rope,
                                     torch_silu_mul, torch_swiglu_merged, torch_softmax, torch_linear_bias,
                                     torch_linear_bias_gelu, torch_conv, torch_group_norm_nhwc,
                                     torch_interpolate)) + (torch_conv.NHWC_SPEC, torch_conv.NHWC_NOBIAS_SPEC,
                                                     torch_interpolate.NHWC_SPEC)

for _spec in TORCH_SPECS:
    register_library(_spec)

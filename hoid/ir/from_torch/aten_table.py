"""The ATen -> hoid table: one row per ATen op overload, saying which lowering expresses it.

Read it as a pattern list: `aten.linear.default -> linear` means "a call to aten.linear becomes
what `lower_math.linear` emits" (here `matmul(x, transpose(w))` + bias). What hoid has natively
stays one node (linear, SDPA, SiLU, layer norm, conv, ...); whatever torch.export already
decomposed is imported as it comes, op by op; the e-graph recognizes the patterns later.

An ATen op missing here is first offered to torch's own decomposition table (see `export.py`), and
only then reported as unsupported. To support a new op, add a row (and a lowering if no existing
one fits); to support a new hoid op, add it under `hoid/ir/ops/` and docs/ops.md first.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import lower_math as m
from . import lower_nn as nn
from . import lower_shape as s

aten = torch.ops.aten

# (ATen overload(s), lowering). Lowerings take the emitter and the ATen arguments by schema name.
ROWS: list[tuple[tuple, Callable]] = [
    # --- no computation: export's assertions, aliases, copies, device moves ----------------------
    ((aten._assert_tensor_metadata.default, aten._assert_scalar.default), m.drop),
    ((aten.alias.default, aten.lift_fresh_copy.default, aten.detach.default), m.same),
    ((aten.clone.default,), m.clone),                            # contiguous() -> contiguous
    ((aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout), m.to_copy),  # -> cast (or nothing)
    # --- unary math: one hoid op each -------------------------------------------------------------
    ((aten.neg.default,), m.unary("neg")),
    ((aten.abs.default,), m.unary("abs")),
    ((aten.exp.default,), m.unary("exp")),
    ((aten.log.default,), m.unary("log")),
    ((aten.sqrt.default,), m.unary("sqrt")),
    ((aten.rsqrt.default,), m.unary("rsqrt")),
    ((aten.reciprocal.default,), m.unary("reciprocal")),
    ((aten.sin.default,), m.unary("sin")),
    ((aten.cos.default,), m.unary("cos")),
    ((aten.tanh.default,), m.unary("tanh")),
    ((aten.sigmoid.default,), m.unary("sigmoid")),
    ((aten.relu.default,), m.unary("relu")),
    ((aten.silu.default,), m.unary("silu")),                    # SiLU stays one node
    ((aten.erf.default,), m.unary("erf")),
    ((aten.floor.default,), m.unary("floor")),
    ((aten.ceil.default,), m.ceil),                              # -floor(-x)
    ((aten.logical_not.default,), m.unary("logical_not")),
    ((aten.isnan.default,), m.isnan),                            # x != x
    ((aten.gelu.default,), m.gelu),                              # approximate= kept
    ((aten.hardtanh.default,), m.hardtanh),                      # -> clamp (ReLU6 too)
    ((aten.leaky_relu.default,), m.leaky_relu),                  # -> where(x > 0, x, slope * x)
    # --- binary arithmetic: tensor or Python-number second operand (`scalar=`) --------------------
    ((aten.add.Tensor, aten.add.Scalar), m.add_sub("add")),     # alpha != 1 -> a mul first
    ((aten.sub.Tensor, aten.sub.Scalar), m.add_sub("sub")),
    ((aten.rsub.Scalar, aten.rsub.Tensor), m.rsub),              # other - self = (-self) + other
    ((aten.mul.Tensor, aten.mul.Scalar), m.binary("mul")),
    ((aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode), m.div),  # rounding 'floor' -> floor_divide
    ((aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor), m.binary("pow")),
    ((aten.pow.Scalar,), m.pow_scalar_base),                     # number ** tensor
    ((aten.maximum.default, aten.max.other), m.binary("maximum")),
    ((aten.minimum.default, aten.min.other), m.binary("minimum")),
    ((aten.remainder.Tensor, aten.remainder.Scalar), m.binary("remainder")),
    ((aten.floor_divide.default, aten.floor_divide.Scalar), m.binary("floor_divide")),
    # --- comparisons and logic (bool results) -----------------------------------------------------
    ((aten.eq.Tensor, aten.eq.Scalar), m.binary("eq")),
    ((aten.ne.Tensor, aten.ne.Scalar), m.binary("ne")),
    ((aten.lt.Tensor, aten.lt.Scalar), m.binary("lt")),
    ((aten.le.Tensor, aten.le.Scalar), m.binary("le")),
    ((aten.gt.Tensor, aten.gt.Scalar), m.binary("gt")),
    ((aten.ge.Tensor, aten.ge.Scalar), m.binary("ge")),
    ((aten.logical_and.default,), m.binary("logical_and")),
    ((aten.logical_or.default,), m.binary("logical_or")),
    ((aten.__and__.Tensor, aten.bitwise_and.Tensor), m.bool_only("logical_and")),  # bool tensors only
    ((aten.__or__.Tensor, aten.bitwise_or.Tensor), m.bool_only("logical_or")),     # bool tensors only
    ((aten.bitwise_not.default,), m.bool_only("logical_not")),                      # bool tensors only
    ((aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar), m.where),
    ((aten.masked_fill.Scalar, aten.masked_fill.Tensor), m.masked_fill),  # where(mask, value, x)
    ((aten.clamp.default,), m.clamp),
    ((aten.clamp.Tensor,), m.clamp_tensor),                      # minimum(maximum(x, lo), hi)
    ((aten.clamp_min.default,), m.clamp_min),
    ((aten.clamp_max.default,), m.clamp_max),
    # --- reductions ---------------------------------------------------------------------------------
    ((aten.sum.dim_IntList, aten.sum.default), m.sum_),
    ((aten.mean.dim, aten.mean.default), m.mean),
    ((aten.amax.default,), m.amax_amin("amax")),
    ((aten.amin.default,), m.amax_amin("amin")),
    ((aten.argmax.default,), m.argmax),
    ((aten.max.default,), m.max_min_all("amax")),
    ((aten.min.default,), m.max_min_all("amin")),
    ((aten.max.dim,), m.max_min_dim(largest=True)),             # (amax, argmax)
    ((aten.min.dim,), m.max_min_dim(largest=False)),            # (amin, argmax of -x)
    ((aten.any.default, aten.any.dim, aten.any.dims), m.any_all(want_all=False)),  # count(x != 0) > 0
    ((aten.all.default, aten.all.dim, aten.all.dims), m.any_all(want_all=True)),   # count(x == 0) == 0
    ((aten.var.correction,), m.var),
    ((aten.cumsum.default,), m.cumsum),
    ((aten.linalg_vector_norm.default,), m.vector_norm),         # sqrt(sum(x*x)), sum(|x|), amax(|x|)
    ((aten.softmax.int, aten._softmax.default), m.softmax("softmax")),
    ((aten.log_softmax.int, aten._log_softmax.default), m.softmax("log_softmax")),
    ((aten.topk.default,), m.topk),                              # -> (values, indices)
    # --- matmuls: a linear layer is matmul with a transposed weight view --------------------------
    ((aten.linear.default,), m.linear),                          # matmul(x, transpose(w)) + b
    ((aten.matmul.default, aten.mm.default, aten.bmm.default), m.matmul),
    ((aten.addmm.default, aten.baddbmm.default), m.addmm),       # beta * c + alpha * a @ b
    # --- constants ----------------------------------------------------------------------------------
    ((aten.arange.default, aten.arange.start, aten.arange.start_step), m.arange),
    ((aten.full.default, aten.full_like.default, aten.new_full.default), m.full_like_result("fill_value")),
    ((aten.scalar_tensor.default,), m.full_like_result("s")),
    ((aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default), m.full_like_result(None, 0)),
    ((aten.ones.default, aten.ones_like.default, aten.new_ones.default), m.full_like_result(None, 1)),
    # an empty tensor's contents are undefined: zeros are one valid choice of them
    ((aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default),
     m.full_like_result(None, 0)),
    # --- views and layout ---------------------------------------------------------------------------
    # view, reshape, squeeze, unsqueeze, flatten -> one reshape to the recorded shape
    ((aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.squeeze.dim, aten.squeeze.dims,
      aten.squeeze.default, aten.unsqueeze.default, aten.flatten.using_ints), s.to_result_shape),
    ((aten.permute.default,), s.permute),
    ((aten.transpose.int,), s.transpose),
    ((aten.t.default,), s.t),
    ((aten.expand.default,), s.expand),
    ((aten.slice.Tensor,), s.slice_),                            # None / maxsize bounds made concrete
    ((aten.select.int,), s.select),                              # slice + reshape
    ((aten.cat.default,), s.cat),                                # -> concat
    ((aten.split.Tensor, aten.split_with_sizes.default), s.split),
    ((aten.chunk.default,), s.chunk),                            # -> split
    ((aten.unbind.int,), s.unbind),                              # -> split + reshapes
    ((aten.repeat_interleave.self_int,), s.repeat_interleave),  # -> reshape, expand, reshape
    ((aten.constant_pad_nd.default,), s.constant_pad),           # F.pad: concat constant blocks
    ((aten.repeat.default,), s.repeat),                          # tiling: reshape, expand, reshape
    ((aten.flip.default,), s.flip),                              # index_select of a descending arange
    ((aten.roll.default,), s.roll),                              # slice + concat
    # --- indexing -----------------------------------------------------------------------------------
    ((aten.index.Tensor,), s.index),                             # leading dims; others via permute
    ((aten.index_put.default,), s.index_put),
    ((aten.index_select.default,), s.index_select),
    ((aten.index_copy.default,), s.index_copy),                  # KV-cache updates
    ((aten.gather.default,), s.gather),
    ((aten.scatter.src, aten.scatter.value), s.scatter),
    ((aten.embedding.default,), s.embedding),
    # --- neural-network ops, kept whole -------------------------------------------------------------
    ((aten.layer_norm.default,), nn.layer_norm),
    ((aten.group_norm.default,), nn.group_norm),
    ((aten.rms_norm.default,), nn.rms_norm),
    ((aten._native_batch_norm_legit_no_training.default,), nn.batch_norm_inference),  # scale and shift
    ((aten.conv1d.default, aten.conv2d.default, aten.conv1d.padding, aten.conv2d.padding,
      aten.convolution.default), nn.conv),
    ((aten.max_pool1d.default, aten.max_pool2d.default), nn.max_pool),
    ((aten.avg_pool1d.default, aten.avg_pool2d.default), nn.avg_pool),
    ((aten.adaptive_avg_pool1d.default, aten.adaptive_avg_pool2d.default), nn.adaptive_avg_pool),
    ((aten.upsample_nearest1d.vec, aten.upsample_nearest2d.vec, aten.upsample_nearest2d.default),
     nn.upsample("nearest")),
    ((aten.upsample_bilinear2d.vec, aten.upsample_bilinear2d.default), nn.upsample("bilinear")),
    ((aten.scaled_dot_product_attention.default,), nn.sdpa),    # SDPA stays one node
]

LOWERINGS: dict[torch._ops.OpOverload, Callable] = {op: lower for ops, lower in ROWS for op in ops}


def lowering_for(target) -> Callable | None:
    """The lowering of an FX call target, or None when hoid has none."""
    return LOWERINGS.get(target)

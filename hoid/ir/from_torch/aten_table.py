"""The ATen -> hoid table: one row per ATen op overload, saying which lowering expresses it.

Read it as a pattern list: `aten.linear.default -> linear` means "a call to aten.linear becomes
what `lower_linalg.linear` emits" (here `matmul(x, transpose(w))` + bias). What hoid has natively
stays one node (linear, SDPA, SiLU, layer norm, conv, ...); whatever torch.export already
decomposed is imported as it comes, op by op; the e-graph recognizes the patterns later.

An ATen op missing here is first offered to torch's own decomposition table (see `export.py`), and
only then reported as unsupported. A user adds a lowering from their own code with
`hoid.ir.register_lowering` (below); hoid's own rows live in `ROWS`, and a new hoid op goes under
`hoid/ir/ops/` and docs/ops.md (a user's through `hoid.register_op`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...errors import GraphError
from . import lower_creation as c
from . import lower_elementwise as e
from . import lower_linalg as la
from . import lower_nn as nn
from . import lower_reduction as r
from . import lower_shape as s

aten = torch.ops.aten

# (ATen overload(s), lowering). Lowerings take the emitter and the ATen arguments by schema name.
ROWS: list[tuple[tuple, Callable]] = [
    # --- no computation: export's assertions, aliases, copies, device moves ----------------------
    ((aten._assert_tensor_metadata.default, aten._assert_scalar.default), e.drop),
    ((aten.alias.default, aten.lift_fresh_copy.default, aten.detach.default), e.same),
    ((aten.clone.default,), e.clone),                            # contiguous() -> contiguous
    ((aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout), e.to_copy),  # -> cast (or nothing)
    ((aten.type_as.default,), e.type_as),                        # -> cast to other's dtype (or nothing)
    # --- unary math: one hoid op each -------------------------------------------------------------
    ((aten.neg.default,), e.unary("neg")),
    ((aten.abs.default,), e.unary("abs")),
    ((aten.exp.default,), e.unary("exp")),
    ((aten.log.default,), e.unary("log")),
    ((aten.log1p.default,), e.unary("log1p")),                   # special: accurate near 0
    ((aten.expm1.default,), e.unary("expm1")),                   # special: accurate near 0
    ((aten.sqrt.default,), e.unary("sqrt")),
    ((aten.rsqrt.default,), e.unary("rsqrt")),
    ((aten.reciprocal.default,), e.unary("reciprocal")),
    ((aten.sin.default,), e.unary("sin")),
    ((aten.cos.default,), e.unary("cos")),
    ((aten.tanh.default,), e.unary("tanh")),
    ((aten.sigmoid.default,), e.unary("sigmoid")),
    ((aten.relu.default,), e.unary("relu")),
    ((aten.silu.default,), e.unary("silu")),                    # SiLU stays one node
    ((aten.erf.default,), e.unary("erf")),
    ((aten.floor.default,), e.unary("floor")),
    ((aten.ceil.default,), e.ceil),                              # -floor(-x)
    ((aten.logical_not.default,), e.unary("logical_not")),
    ((aten.isnan.default,), e.isnan),                            # x != x
    ((aten.gelu.default,), e.gelu),                              # approximate= kept
    ((aten.hardtanh.default,), e.hardtanh),                      # -> clamp (ReLU6 too)
    ((aten.leaky_relu.default,), e.leaky_relu),                  # -> where(x > 0, x, slope * x)
    # --- binary arithmetic: tensor or Python-number second operand (`scalar=`) --------------------
    ((aten.add.Tensor, aten.add.Scalar), e.add_sub("add")),     # alpha != 1 -> a mul first
    ((aten.sub.Tensor, aten.sub.Scalar), e.add_sub("sub")),
    ((aten.rsub.Scalar, aten.rsub.Tensor), e.rsub),              # other - self = (-self) + other
    ((aten.mul.Tensor, aten.mul.Scalar), e.binary("mul")),
    ((aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode), e.div),  # rounding 'floor' -> floor_divide
    ((aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor), e.binary("pow")),
    ((aten.pow.Scalar,), e.pow_scalar_base),                     # number ** tensor
    ((aten.maximum.default, aten.max.other), e.binary("maximum")),
    ((aten.minimum.default, aten.min.other), e.binary("minimum")),
    ((aten.remainder.Tensor, aten.remainder.Scalar), e.binary("remainder")),
    ((aten.floor_divide.default, aten.floor_divide.Scalar), e.binary("floor_divide")),
    # --- comparisons and logic (bool results) -----------------------------------------------------
    ((aten.eq.Tensor, aten.eq.Scalar), e.binary("eq")),
    ((aten.ne.Tensor, aten.ne.Scalar), e.binary("ne")),
    ((aten.lt.Tensor, aten.lt.Scalar), e.binary("lt")),
    ((aten.le.Tensor, aten.le.Scalar), e.binary("le")),
    ((aten.gt.Tensor, aten.gt.Scalar), e.binary("gt")),
    ((aten.ge.Tensor, aten.ge.Scalar), e.binary("ge")),
    ((aten.logical_and.default,), e.binary("logical_and")),
    ((aten.logical_or.default,), e.binary("logical_or")),
    ((aten.__and__.Tensor, aten.bitwise_and.Tensor), e.bool_only("logical_and")),  # bool tensors only
    ((aten.__or__.Tensor, aten.bitwise_or.Tensor), e.bool_only("logical_or")),     # bool tensors only
    ((aten.bitwise_not.default,), e.bool_only("logical_not")),                      # bool tensors only
    ((aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar), e.where),
    ((aten.masked_fill.Scalar, aten.masked_fill.Tensor), e.masked_fill),  # where(mask, value, x)
    ((aten.clamp.default,), e.clamp),
    ((aten.clamp.Tensor,), e.clamp_tensor),                      # minimum(maximum(x, lo), hi)
    ((aten.clamp_min.default,), e.clamp_min),
    ((aten.clamp_max.default,), e.clamp_max),
    # --- reductions ---------------------------------------------------------------------------------
    ((aten.sum.dim_IntList, aten.sum.default), r.sum_),
    ((aten.mean.dim, aten.mean.default), r.mean),
    ((aten.amax.default,), r.amax_amin("amax")),
    ((aten.amin.default,), r.amax_amin("amin")),
    ((aten.argmax.default,), r.argmax),
    ((aten.max.default,), r.max_min_all("amax")),
    ((aten.min.default,), r.max_min_all("amin")),
    ((aten.max.dim,), r.max_min_dim(largest=True)),             # (amax, argmax)
    ((aten.min.dim,), r.max_min_dim(largest=False)),            # (amin, argmax of -x)
    ((aten.any.default, aten.any.dim, aten.any.dims), r.any_all(want_all=False)),  # count(x != 0) > 0
    ((aten.all.default, aten.all.dim, aten.all.dims), r.any_all(want_all=True)),   # count(x == 0) == 0
    ((aten.var.correction,), r.var),
    ((aten.cumsum.default,), r.cumsum),
    ((aten.linalg_vector_norm.default,), r.vector_norm),         # sqrt(sum(x*x)), sum(|x|), amax(|x|)
    ((aten.softmax.int, aten._softmax.default), r.softmax("softmax")),
    ((aten.log_softmax.int, aten._log_softmax.default), r.softmax("log_softmax")),
    ((aten.topk.default,), r.topk),                              # -> (values, indices)
    # --- matmuls: a linear layer is matmul with a transposed weight view --------------------------
    ((aten.linear.default,), la.linear),                          # matmul(x, transpose(w)) + b
    ((aten.matmul.default, aten.mm.default, aten.bmm.default), la.matmul),
    ((aten.addmm.default, aten.baddbmm.default), la.addmm),       # beta * c + alpha * a @ b
    # --- constants ----------------------------------------------------------------------------------
    ((aten.arange.default, aten.arange.start, aten.arange.start_step), c.arange),
    ((aten.full.default, aten.full_like.default, aten.new_full.default), c.full_like_result("fill_value")),
    ((aten.scalar_tensor.default,), c.full_like_result("s")),
    ((aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default), c.full_like_result(None, 0)),
    ((aten.ones.default, aten.ones_like.default, aten.new_ones.default), c.full_like_result(None, 1)),
    # an empty tensor's contents are undefined: zeros are one valid choice of them
    ((aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default),
     c.full_like_result(None, 0)),
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


def register_lowering(ops, lowering: Callable | None = None, *, replace: bool = False):
    """Teach `hoid.from_torch` an ATen op hoid has no lowering for, from your own code.

        @hoid.ir.register_lowering(torch.ops.aten.sinh.default)
        def sinh(em, self, **_):                      # sinh(x) = (exp(x) - exp(-x)) / 2
            diff = em.op("sub", em.op("exp", self, tag="exp"), em.op("exp", em.op("neg", self, tag="neg"),
                         tag="exp_neg"), tag="diff")
            return em.op("mul", diff, scalar=0.5)

    ops: an ATen overload (`torch.ops.aten.sinh.default`), a packet (`torch.ops.aten.sinh`: every one of
    its overloads) or a tuple of them. lowering(em, **args): called once per call of the op, with the
    call's arguments by their ATen schema names (tensors as hoid `Value`s, numbers and lists as they are)
    and a `hoid.ir.from_torch.Emitter`: `em.op(op_name, *operands, tag=..., **attrs)` adds a hoid node
    (docs/ops.md lists the ops; `hoid.register_op` adds one) and the lowering returns the value (or tuple
    of values) that stands for the op's result, which must have torch's shape and dtype. Raise
    `hoid.ir.from_torch.NotLowerable(why)` for calls it cannot express: they are reported with the rest.
    A lowering registered for an op hoid already lowers is refused unless `replace=True`.
    Returns `lowering` (so it works as a decorator when `lowering` is left out)."""
    if lowering is None:
        return lambda fn: register_lowering(ops, fn, replace=replace)
    overloads = [o for op in (ops if isinstance(ops, (tuple, list)) else (ops,)) for o in _overloads(op)]
    taken = [str(o) for o in overloads if o in LOWERINGS and LOWERINGS[o] is not lowering]
    if taken and not replace:
        raise GraphError(f"hoid already lowers {', '.join(taken)}; pass replace=True to use your lowering instead")
    if not callable(lowering):
        raise TypeError(f"register_lowering: the lowering must be callable, got {type(lowering).__name__}")
    for overload in overloads:
        LOWERINGS[overload] = lowering
    return lowering


def _overloads(op) -> list[torch._ops.OpOverload]:
    if isinstance(op, torch._ops.OpOverload):
        return [op]
    if isinstance(op, torch._ops.OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]
    raise TypeError(f"register_lowering takes ATen ops such as torch.ops.aten.sinh.default (or "
                    f"torch.ops.aten.sinh), got {op!r}")

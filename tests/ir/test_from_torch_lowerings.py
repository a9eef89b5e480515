"""Rows of the ATen table, one small module per group of lowerings: each imports and runs exactly,
and the ops it should become are in the graph."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hoid
from hoid.ir.from_torch import flatten_outputs
from hoid.ir.from_torch.aten_table import LOWERINGS, ROWS
from hoid.ir.from_torch.emitter import NotLowerable
from tests.oracle import rel_error


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def arithmetic(x, y):
    return (x - 2 * y, 3.0 - x, x / y, torch.div(x, 0.7, rounding_mode="floor"), 2.0 ** x, x.clamp(-0.5, 0.5),
            torch.maximum(x, y), torch.where(x > 0, x, 0.0), x.masked_fill(y < 0, -1.0), torch.sub(x, y, alpha=3),
            (x > 0) & (y > 0), F.gelu(x, approximate="tanh"), x.to(torch.float16), torch.rsqrt(x.abs() + 1),
            F.relu6(x * 4), F.leaky_relu(x, 0.2), torch.log1p(x.abs()), torch.expm1(x), F.softplus(x),
            x.type_as(y.half()), (x > 0).type_as(y))


def reductions(x, y):
    return (x.sum(), x.mean(dim=(0, 2), keepdim=True), x.amax(-1), x.argmax(dim=1), x.var(dim=1, correction=0),
            x.cumsum(2), x.softmax(-1), x.log_softmax(1), torch.topk(x, 2, dim=-1).indices,
            torch.topk(x, 3, dim=1, largest=False).values, torch.linalg.vector_norm(x, dim=-1),
            torch.linalg.vector_norm(x, ord=1, dim=(0, 1), keepdim=True), torch.linalg.vector_norm(x, float("inf")))


def extremes_and_tests(x, y):
    return (x.max(), x.min(), x.max(-1), x.min(1, keepdim=True), x.any(), (x > 0).all(1), (x > 5).any(dim=(0, 1)),
            x.clamp(min=y[0, 0]), x.clamp(y[0], y[1].abs()), torch.ceil(x), torch.isnan(x.sqrt()))


def views(x, y):
    a, b = x.split([1, 2], dim=1)
    c, d = x.chunk(2, dim=-1)
    rows = x.unbind(0)
    return (a, b, c, d, *rows, x.select(2, -1), x[:, 1:, ::2], x.flatten(1), x.unsqueeze(1).squeeze(1),
            x.repeat_interleave(2, dim=1), torch.cat([x, y], dim=0), x.permute(2, 0, 1), x.transpose(0, 1),
            x[:, :1].expand(2, 3, 4), F.pad(x, (1, 2, -1, 0), value=3.0), x.repeat(2, 1, 1, 3),
            x.flip(0, 2), x.roll((1, -2), (1, 2)), x.roll(5))


def indexing(x, y):
    idx, first = torch.tensor([2, 0]), torch.tensor([1, 0, 1])
    table = torch.arange(12.0).reshape(6, 2)
    return (x[:, idx], x[first], x[:, :, idx], x.index_select(1, idx), x.gather(2, torch.zeros_like(x).long()),
            x.index_put((first[:2],), torch.ones(2, 3, 4)), x.scatter(2, torch.ones(2, 3, 1).long(), 5.0),
            F.embedding(torch.tensor([[1, 5]]), table), x.index_copy(1, idx, y[:, :2]))


def constants(x, y):
    return (torch.arange(3, 9, 2), torch.full((2, 2), 7.0), torch.zeros_like(x), x.new_ones(3),
            (x > 0).masked_fill(y > 0, True), torch.full((2,), float("-inf")),
            torch.ones(2, dtype=torch.int32), torch.arange(4.0) * x[0, 0, :])


def matmuls(x, y):
    w = torch.linspace(-1, 1, 20).reshape(5, 4)
    return (x @ y.transpose(1, 2), torch.bmm(x, y.transpose(1, 2)), torch.mm(x[0], w.t()),
            torch.addmm(torch.ones(5), x[0], w.t()), F.linear(x, w, torch.ones(5)),
            torch.baddbmm(torch.ones(2, 3, 3), x, y.transpose(1, 2), beta=0.5, alpha=0.25))


def attention(q, kv):
    """Multi-query attention written as broadcasting (one k/v head for four q heads), as Falcon does,
    and k/v batch dims broadcast against q's."""
    mask = torch.ones(8, 8, dtype=torch.bool).tril()
    q2 = torch.cat([q, q * 2])
    return (F.scaled_dot_product_attention(q, kv, kv, attn_mask=mask),
            F.scaled_dot_product_attention(q, kv, kv, is_causal=True, scale=0.3),
            F.scaled_dot_product_attention(q2, kv.expand(1, 4, 8, 16), kv.expand(1, 4, 8, 16)))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.gn = nn.GroupNorm(2, 4)
        self.conv1d = nn.Conv1d(4, 4, 3, stride=2, groups=2)
        self.same_odd = nn.Conv2d(4, 2, 3, padding="same")
        self.same_even = nn.Conv2d(4, 2, (2, 4), padding="same", dilation=(1, 2))
        self.ln = nn.LayerNorm(8)
        self.bn.running_mean.uniform_(-1, 1)
        self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        h = self.gn(F.relu(self.bn(self.conv(x))))
        h = F.group_norm(h, 2, None, torch.ones(4)) + F.layer_norm(h, (8,), None, torch.ones(8))  # bias only
        pooled = F.avg_pool2d(F.max_pool2d(h, 2, ceil_mode=True), 2, stride=1, padding=1)
        pooled = F.avg_pool2d(pooled, 5, ceil_mode=True, count_include_pad=False)  # neither changes a thing
        up = F.interpolate(h, scale_factor=2, mode="nearest")
        bil = F.interpolate(h, size=(12, 12), mode="bilinear", align_corners=True)
        seq = self.conv1d(h.flatten(2))
        return pooled, up, bil, seq, F.adaptive_avg_pool2d(h, 1), self.ln(h), self.same_odd(h), self.same_even(h)


def float_inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, 4, generator=g), torch.randn(2, 3, 4, generator=g)


def seeded(build, seed=0):
    """Modules and inputs drawn from a fixed seed, so that every run tests the same numbers."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return build()


CASES = {
    "arithmetic": (Fn(arithmetic), float_inputs(), {"sub", "pow", "clamp", "where", "floor_divide", "gelu", "cast",
                                                                  "log1p", "expm1"}),
    "reductions": (Fn(reductions), float_inputs(), {"sum", "mean", "amax", "argmax", "var", "cumsum", "softmax",
                                                    "log_softmax", "topk", "sqrt", "abs"}),
    "extremes_and_tests": (Fn(extremes_and_tests), float_inputs(), {"amax", "amin", "argmax", "maximum",
                                                                    "minimum", "floor", "ne"}),
    "views": (Fn(views), float_inputs(), {"split", "slice", "reshape", "expand", "concat", "permute",
                                          "transpose"}),
    "indexing": (Fn(indexing), float_inputs(), {"index", "index_select", "gather", "index_put", "scatter",
                                                "embedding", "index_copy"}),
    "constants": (Fn(constants), float_inputs(), {"arange", "full"}),
    "attention": (Fn(attention), seeded(lambda: (torch.randn(1, 4, 8, 16), torch.randn(1, 1, 8, 16))), {"sdpa"}),
    "matmuls": (Fn(matmuls), seeded(lambda: (torch.randn(2, 3, 4), torch.randn(2, 3, 4))), {"matmul", "transpose",
                                                                                          "add"}),
    "convnet": (*seeded(lambda: (ConvNet().eval(), (torch.randn(1, 3, 8, 8),))),
                {"conv", "group_norm", "max_pool", "avg_pool", "interpolate", "adaptive_avg_pool", "layer_norm"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_lowerings_run_exactly(case):
    module, args, expected_ops = CASES[case]
    g = hoid.from_torch(module, args)
    assert expected_ops <= set(g.op_counts()), f"missing {expected_ops - set(g.op_counts())}"
    got, want = hoid.run(g, *args), flatten_outputs(module(*args))
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.shape == b.shape and a.dtype == b.dtype, f"output {i}"
        if b.is_floating_point():
            # Exactly in the sense: float32 kernels may order their sums differently from torch's
            # (layer norm over near-constant rows amplifies that to ~1e-5 absolute), so relative L2 < 1e-5.
            # Equal first: zeros and infinities have no relative error.
            assert torch.equal(a, b) or rel_error(a, b) < 1e-5, f"output {i}: relative L2 error {rel_error(a, b):.2e}"
        else:
            assert torch.equal(a, b), f"output {i}"


def test_calls_a_lowering_refuses_are_imported_through_torchs_decomposition(monkeypatch):
    """When a known op's lowering refuses a call, the importer decomposes that op with torch's own
    decomposition (SDPA -> matmuls and softmax) and imports the result, exactly."""
    def refuse(em, **kwargs):
        raise NotLowerable("refused for this test")

    monkeypatch.setitem(LOWERINGS, torch.ops.aten.scaled_dot_product_attention.default, refuse)
    q, kv = torch.randn(1, 4, 8, 16), torch.randn(1, 4, 8, 16)
    module = Fn(lambda q, kv: F.scaled_dot_product_attention(q, kv, kv, is_causal=True))
    g = hoid.from_torch(module, (q, kv))
    assert "sdpa" not in g.op_counts() and {"matmul", "softmax"} <= set(g.op_counts())
    assert torch.allclose(hoid.run(g, q, kv)[0], module(q, kv), rtol=1e-5, atol=1e-6)


def test_unlowerable_arguments_are_reported_with_their_reason():
    def trunc_division(x, y):
        return torch.div(x, y, rounding_mode="trunc"), x & y

    with pytest.raises(hoid.UnsupportedOpError) as info:
        hoid.from_torch(Fn(trunc_division), (torch.randint(1, 5, (3,)), torch.randint(1, 5, (3,))))
    message = str(info.value)
    assert "rounding_mode='trunc'" in message
    assert "bool tensors only" in message


def test_every_row_names_a_distinct_overload():
    overloads = [op for ops, _ in ROWS for op in ops]
    assert len(overloads) == len(set(overloads)) == len(LOWERINGS)
    assert all(isinstance(op, torch._ops.OpOverload) for op in overloads)

"""Small graphs in the decomposed form torch.export gives, shared by the search tests."""

from __future__ import annotations

import hoid


def rms_core(b, h):
    """transformers' RMSNorm core on a float32 value: h * rsqrt(mean(h^2, -1) + eps)."""
    return b.mul(h, b.rsqrt(b.add(b.mean(b.pow(h, 2), dim=[-1], keepdim=True), 1e-6)))


def block(layers: int = 2, dtype: str = "f32", hidden: int = 8, inner: int = 12):
    """A decoder MLP block per layer: decomposed RMSNorm, gate/up/down projections, SiLU gating and a
    residual add; the same structure `layers` times with its own weights."""
    b = hoid.GraphBuilder("block")
    x = b.input("x", (1, 2, hidden), dtype)
    for i in range(layers):
        w = b.weight(f"l{i}.norm", (hidden,), dtype)
        normed = b.mul(w, b.cast(rms_core(b, b.cast(x, dtype="f32")), dtype=dtype))
        gate, up = (b.matmul(normed, b.transpose(b.weight(f"l{i}.{n}", (inner, hidden), dtype), dim0=0, dim1=1))
                    for n in ("gate", "up"))
        act = b.mul(b.mul(gate, b.sigmoid(gate)), up)
        down = b.matmul(act, b.transpose(b.weight(f"l{i}.down", (hidden, inner), dtype), dim0=0, dim1=1))
        x = b.add(x, down)
    return b.build(x)

"""Small graphs that more than one test file builds."""

import torch

import hoid


def attention_block(*, also_added: bool = False, returned: bool = False, own_contiguous: bool = False):
    """Heads transposed out of [B, T, H, D], attention, transposed back and merged: a BERT layer's middle."""
    b = hoid.GraphBuilder("attention")
    x = b.input("x", (2, 8, 32), "f32")
    w = b.weight("w", (32, 32), "f32", torch.randn(32, 32))
    heads = b.transpose(b.reshape(x, shape=(2, 8, 4, 8)), dim0=1, dim1=2)
    attended = b.sdpa(heads, heads, heads)
    back = b.transpose(attended, dim0=1, dim1=2)
    merged = b.reshape(b.contiguous(back) if own_contiguous else back, shape=(2, 8, 32))  # Whisper's, BERT's
    out = [b.matmul(merged, w)]
    if also_added:
        out.append(b.add(attended, 1.0))
    if returned:
        out.append(attended)
    return b.build(*out), attended, merged

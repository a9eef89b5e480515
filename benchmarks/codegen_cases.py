"""What `benchmarks/codegen.py` measures: the three models (real widths, `layers` layers; tiny for --smoke)
and the kernel forms no model needs, as regions of their own at real sizes."""

from __future__ import annotations

import torch


def models(layers: int, smoke: bool) -> dict:
    """name -> (model factory, input factory); bf16 random weights on the GPU."""
    import transformers as T

    def vit():
        cfg = T.ViTConfig(num_hidden_layers=layers) if not smoke else T.ViTConfig(
            hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128, image_size=32,
            patch_size=8)
        return T.ViTModel(cfg, add_pooling_layer=False), lambda: (torch.randn(8 if not smoke else 1, 3,
                                                                              cfg.image_size, cfg.image_size),)

    def whisper():
        from transformers.models.whisper.modeling_whisper import WhisperEncoder

        kw = dict(d_model=1280, encoder_layers=layers, encoder_attention_heads=20, encoder_ffn_dim=5120,
                  num_mel_bins=128, max_source_positions=1500)
        if smoke:
            kw = dict(d_model=64, encoder_layers=1, encoder_attention_heads=4, encoder_ffn_dim=128, num_mel_bins=16,
                      max_source_positions=16)
        cfg = T.WhisperConfig(**kw, vocab_size=100, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                              decoder_start_token_id=1)
        frames = 2 * cfg.max_source_positions  # 30 s of audio: 3000 mel frames
        return WhisperEncoder(cfg), lambda: (torch.randn(1, cfg.num_mel_bins, frames),)

    def bge_m3():
        kw = dict(vocab_size=250002, hidden_size=1024, num_hidden_layers=layers, num_attention_heads=16,
                  intermediate_size=4096, max_position_embeddings=8194, type_vocab_size=1, pad_token_id=1)
        if smoke:
            kw = dict(vocab_size=128, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                      intermediate_size=128, max_position_embeddings=64, type_vocab_size=1, pad_token_id=1)
        cfg = T.XLMRobertaConfig(**kw)
        batch, tokens = (8, 512) if not smoke else (1, 8)
        return (T.XLMRobertaModel(cfg, add_pooling_layer=False),
                lambda: (torch.randint(2, cfg.vocab_size, (batch, tokens)),))

    return {"vit-base-16": vit, "whisper-large-v3-encoder": whisper, "bge-m3": bge_m3}


def forms(smoke: bool) -> dict:
    """name -> the region's graph (bf16 on the GPU; tiny, with tiles of 64 so that rows loop, for --smoke)."""
    from hoid.ir import GraphBuilder

    dt = "f32" if smoke else "bf16"
    rows, long, wide = (3, 200, 256) if smoke else (256, 32768, 65536)

    def region(name, build):
        b = GraphBuilder(name)
        outs = build(b)
        return b.build(*(outs if isinstance(outs, tuple) else (outs,)))

    def whisper_input(b):
        c, t = (8, 6) if smoke else (1280, 1500)
        y = b.add(b.permute(b.gelu(b.input("conv", (1, c, t), dt)), dims=[0, 2, 1]), b.input("pos", (t, c), dt))
        return y, b.layer_norm(y, b.input("w", (c,), dt), b.input("b", (c,), dt), normalized_shape=[c])

    def split_heads(b):
        bs, n, h, d = (1, 4, 2, 4) if smoke else (8, 512, 16, 64)
        x = b.reshape(b.input("qkv", (bs, n, h * d), dt), shape=(bs, n, h, d))
        return b.mul(b.add(x, b.input("bias", (d,), dt)), 0.125)

    def masked_softmax(b):
        bs, h, n = (1, 2, 6) if smoke else (8, 16, 512)
        mask = b.expand(b.input("mask", (bs, 1, 1, n), dt), shape=(bs, h, n, n))
        return b.softmax(b.add(b.input("scores", (bs, h, n, n), dt), mask), dim=-1)

    return {
        "looped-softmax": region("softmax", lambda b: b.softmax(b.input("x", (rows, long), dt), dim=-1)),
        "looped-layer-norm": region("ln", lambda b: b.layer_norm(
            b.input("x", (rows // 2, wide), dt), b.input("w", (wide,), dt), b.input("b", (wide,), dt),
            normalized_shape=[wide])),
        "looped-rmsnorm": region("rms", lambda b: b.op("rmsnorm", b.input("x", (rows, long), dt),
                                                       b.input("w", (long,), dt), eps=1e-6)),
        "looped-var-of-x-minus-max": region("stats", lambda b: b.op("var", b.sub(
            x := b.input("x", (rows // 2, wide), dt), b.amax(x, dim=[-1], keepdim=True)), dim=[-1])),  # 3 passes
        "view-whisper-input": region("whisper_in", whisper_input),
        "view-split-heads": region("heads", split_heads),
        "view-masked-softmax": region("mask", masked_softmax),
    }

"""SDXL in the zoo: one UNet denoising step and the VAE decoder, as hoid graphs (diffusers' own modules).

    unet = hoid.models.build_model("sdxl-unet-tiny")              # diffusers UNet2DConditionModel
    step = unet_step_graph(unet, batch=2, height=128, width=128)  # classifier-free guidance: batch 2
    noise, = hoid.run(step, *unet_inputs(step))                  # f[2, 4, 16, 16]
    vae = hoid.models.build_model("sdxl-vae-decoder-tiny")        # AutoencoderKL, decoder only
    image, = hoid.run(vae_decode_graph(vae, height=64, width=64), latents)   # f[1, 3, 64, 64]

The published architectures (stabilityai/stable-diffusion-xl-base-1.0's `unet/config.json` and
`vae/config.json`) are written out here, with random weights: nothing is downloaded. diffusers is imported
only by the builders.

- UNet step: `sample` f[B, 4, H/8, W/8] (the scaled latents), `timestep` f32[B], `encoder_hidden_states`
  f[B, T, 2048] (the two text encoders' states, concatenated), `text_embeds` f[B, 1280] (the pooled text
  embedding) and `time_ids` f[B, 6] (original size, crop corner, target size: SDXL's added conditions) ->
  the noise prediction f[B, 4, H/8, W/8]. With classifier-free guidance the pipeline runs batch 2 (the
  unconditional and the conditional half); the guidance combine after it is two elementwise ops, left out.
- VAE decode: `latents` f[B, 4, H/8, W/8] -> the image f[B, 3, H, W], as the pipeline calls it:
  `vae.decode(latents / scaling_factor)`. The encoder is dropped when the model is built.

Weights keep diffusers' module paths (`unet.down_blocks.1.attentions.0.proj_in.weight`). The convolutions,
group norms, attention (SDPA) and upsampling import as single hoid nodes. The zoo serves the four names
through `configs.REGISTERED`; `config(name)` is the diffusers config dict.
"""

from __future__ import annotations

import torch
from torch import nn

from ..ir.graph import Graph
from . import configs

# stabilityai/stable-diffusion-xl-base-1.0 unet/config.json (UNet2DConditionModel). `attention_head_dim` is,
# in diffusers' naming for this config, the number of heads per level (5, 10, 20 heads of 64 channels).
SDXL_UNET = dict(
    act_fn="silu", addition_embed_type="text_time", addition_embed_type_num_heads=64, addition_time_embed_dim=256,
    attention_head_dim=[5, 10, 20], block_out_channels=[320, 640, 1280], center_input_sample=False,
    class_embed_type=None, class_embeddings_concat=False, conv_in_kernel=3, conv_out_kernel=3,
    cross_attention_dim=2048, cross_attention_norm=None,
    down_block_types=["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"], downsample_padding=1,
    dual_cross_attention=False, encoder_hid_dim=None, encoder_hid_dim_type=None, flip_sin_to_cos=True,
    freq_shift=0, in_channels=4, layers_per_block=2, mid_block_only_cross_attention=None,
    mid_block_scale_factor=1, mid_block_type="UNetMidBlock2DCrossAttn", norm_eps=1e-05, norm_num_groups=32,
    num_attention_heads=None, num_class_embeds=None, only_cross_attention=False, out_channels=4,
    projection_class_embeddings_input_dim=2816, resnet_out_scale_factor=1.0, resnet_skip_time_act=False,
    resnet_time_scale_shift="default", sample_size=128, time_cond_proj_dim=None, time_embedding_act_fn=None,
    time_embedding_dim=None, time_embedding_type="positional", timestep_post_act=None,
    transformer_layers_per_block=[1, 2, 10], up_block_types=["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    upcast_attention=None, use_linear_projection=True)

# Test size: one plain level and one cross-attention level (every block type SDXL has: DownBlock2D,
# CrossAttnDownBlock2D, the cross-attention mid block, CrossAttnUpBlock2D, UpBlock2D), 32 and 64 channels in
# groups of 4, heads of 16, two transformer layers in the attention level; text states of 32, a pooled text
# embedding of 32 and time ids embedded in 8 each (32 + 6 x 8 = 80 added-condition inputs).
SDXL_UNET_TINY = dict(
    SDXL_UNET, attention_head_dim=[2, 4], block_out_channels=[32, 64], cross_attention_dim=32,
    down_block_types=["DownBlock2D", "CrossAttnDownBlock2D"], up_block_types=["CrossAttnUpBlock2D", "UpBlock2D"],
    layers_per_block=1, norm_num_groups=8, addition_time_embed_dim=8, projection_class_embeddings_input_dim=80,
    sample_size=16, transformer_layers_per_block=[1, 2])

# stabilityai/stable-diffusion-xl-base-1.0 vae/config.json (AutoencoderKL). force_upcast asks the pipeline to
# run the VAE in float32 because it overflows in float16; bfloat16 has float32's range, and the workload runs it.
SDXL_VAE = dict(
    act_fn="silu", block_out_channels=[128, 256, 512, 512], down_block_types=["DownEncoderBlock2D"] * 4,
    force_upcast=True, in_channels=3, latent_channels=4, layers_per_block=2, norm_num_groups=32, out_channels=3,
    sample_size=1024, scaling_factor=0.13025, up_block_types=["UpDecoderBlock2D"] * 4)

# Test size: the four levels kept (so the latents are 1/8 of the image, as SDXL's), 32 and 64 channels in
# groups of 8, one resnet per level in the encoder (two in the decoder: diffusers adds one).
SDXL_VAE_TINY = dict(SDXL_VAE, block_out_channels=[32, 32, 64, 64], layers_per_block=1, norm_num_groups=8,
                     sample_size=64)

UNETS = {"sdxl-unet": SDXL_UNET, "sdxl-unet-tiny": SDXL_UNET_TINY}
VAES = {"sdxl-vae-decoder": SDXL_VAE, "sdxl-vae-decoder-tiny": SDXL_VAE_TINY}
NAMES = (*UNETS, *VAES)
LATENT_SCALE = 8  # image pixels per latent, each way: 2 ** (VAE levels - 1), tiny and full alike
TEXT_TOKENS = 77  # CLIP's context: the pipeline pads every prompt to it


def config(name: str) -> dict:
    """The diffusers config (its keyword arguments) of a zoo entry: a copy, safe to edit."""
    if name not in UNETS and name not in VAES:
        raise KeyError(f"unknown SDXL model {name!r}; the zoo has: {', '.join(NAMES)}")
    return {k: list(v) if isinstance(v, list) else v for k, v in {**UNETS, **VAES}[name].items()}


def build_model(name: str, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                seed: int = 0):
    """`UNet2DConditionModel`, or `AutoencoderKL` without its encoder, with random weights (seeded), in eval
    mode. `device="meta"` builds the structure alone (graphs with the real shapes, no memory)."""
    from diffusers import AutoencoderKL, UNet2DConditionModel

    cfg = config(name)
    torch.manual_seed(seed)
    with torch.device(device):
        if name in UNETS:
            model = UNet2DConditionModel(**cfg)
        else:
            model = AutoencoderKL(**cfg)
            # decoding reads post_quant_conv and the decoder only: the encoder's 34M parameters go
            model.encoder, model.quant_conv = None, None
    # nn.Module.to: diffusers' own `to` warns of modules to keep in float32 even when it lists none (SDXL's)
    return nn.Module.to(model, dtype).eval()


configs.REGISTERED.update({name: (config, build_model) for name in NAMES})


class UNetStep(nn.Module):
    """`forward(sample, timestep, encoder_hidden_states, text_embeds, time_ids) -> noise prediction`: the
    UNet with SDXL's added conditions as plain arguments. Holds the UNet as `unet`."""

    def __init__(self, unet):
        super().__init__()
        self.unet = unet

    def forward(self, sample, timestep, encoder_hidden_states, text_embeds, time_ids):
        added = {"text_embeds": text_embeds, "time_ids": time_ids}
        return self.unet(sample, timestep, encoder_hidden_states, added_cond_kwargs=added, return_dict=False)[0]


class VAEDecode(nn.Module):
    """`forward(latents) -> image`: `vae.decode(latents / scaling_factor)`, as the pipeline calls it. Holds
    the VAE as `vae`."""

    def __init__(self, vae):
        super().__init__()
        self.vae = vae
        self.scaling_factor = vae.config.scaling_factor

    def forward(self, latents):
        return self.vae.decode(latents / self.scaling_factor, return_dict=False)[0]


def _latent_size(height: int, width: int) -> tuple[int, int]:
    if height % LATENT_SCALE or width % LATENT_SCALE:
        raise ValueError(f"{height}x{width} pixels: both must be multiples of {LATENT_SCALE} (one latent each)")
    return height // LATENT_SCALE, width // LATENT_SCALE


def unet_step_shapes(unet, batch: int, height: int, width: int, text_tokens: int) -> list[tuple[int, ...]]:
    """The shapes of the step's five inputs, in order, for an image of height x width pixels."""
    cfg = unet.config
    h, w = _latent_size(height, width)
    pooled = cfg.projection_class_embeddings_input_dim - 6 * cfg.addition_time_embed_dim
    return [(batch, cfg.in_channels, h, w), (batch,), (batch, text_tokens, cfg.cross_attention_dim),
            (batch, pooled), (batch, 6)]


def unet_step_graph(unet, batch: int = 2, height: int = 1024, width: int = 1024, text_tokens: int = TEXT_TOKENS,
                    *, name: str = "sdxl_unet_step") -> Graph:
    """One denoising step of an image of height x width pixels (batch 2: classifier-free guidance)."""
    from ..ir.from_torch import from_torch

    shapes = unet_step_shapes(unet, batch, height, width, text_tokens)
    dtypes = [unet.dtype, torch.float32, unet.dtype, unet.dtype, unet.dtype]  # the scheduler's timesteps: f32
    args = tuple(torch.zeros(s, dtype=d, device=unet.device) for s, d in zip(shapes, dtypes, strict=True))
    return from_torch(UNetStep(unet).eval(), args, name=name)


def vae_decode_graph(vae, batch: int = 1, height: int = 1024, width: int = 1024, *,
                     name: str = "sdxl_vae_decode") -> Graph:
    """The decode of `batch` latents into images of height x width pixels."""
    from ..ir.from_torch import from_torch

    h, w = _latent_size(height, width)
    latents = torch.zeros((batch, vae.config.latent_channels, h, w), dtype=vae.dtype, device=vae.device)
    return from_torch(VAEDecode(vae).eval(), (latents,), name=name)


def unet_inputs(graph_or_shapes, *, seed: int = 0, timestep: float = 500.0, dtype: torch.dtype | None = None,
                device="cpu") -> list[torch.Tensor]:
    """Inputs for a UNet step graph (or its five input shapes): unit-normal latents and text states, as the
    scheduler hands the UNet (its scaled model input) and the text encoders give it; one timestep for the
    whole batch; time ids of a full-size, uncropped image (SDXL's default conditions)."""
    if isinstance(graph_or_shapes, Graph):
        values = graph_or_shapes.runtime_inputs
        shapes = [v.type.shape for v in values]
        dtype = dtype or values[0].type.torch_dtype
    else:
        shapes = list(graph_or_shapes)
    dtype = dtype or torch.float32
    gen = torch.Generator().manual_seed(seed)
    sample, _, states, pooled, _ = (torch.randn(s, generator=gen) for s in shapes)
    batch, _, h, w = shapes[0]
    size = [h * LATENT_SCALE, w * LATENT_SCALE]
    time_ids = torch.tensor([size + [0, 0] + size], dtype=torch.float32).expand(batch, 6)
    tensors = [sample.to(dtype), torch.full((batch,), timestep), states.to(dtype), pooled.to(dtype),
               time_ids.to(dtype)]
    return [t.contiguous().to(device) for t in tensors]

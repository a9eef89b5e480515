"""The model zoo: decoder LLMs with random weights, and their prefill and decode-step graphs.

    lm = hoid.models.build_model("llama-3.2-1b-tiny")          # transformers model, random weights
    step = hoid.models.decode_step_graph(lm, cache_len=64)     # one token over a static KV cache
    tokens = hoid.models.generate(step, prompt, 16)            # greedy, through the interpreter

`configs` holds the four models (Qwen3-1.7B, Qwen3-4B, Llama-3.2-1B, Llama-3.1-8B) and their tiny
variants, and `moe` the mixture-of-experts Qwen3-30B-A3B (its experts imported in their gathered form);
`llm` builds the graphs; `llama_block` is a plain-PyTorch block with no transformers dependency. Models that
are not decoder LLMs register their names with `configs` from their own modules: `whisper` (Whisper-large-v3:
encoder, cross K/V and decode-step graphs), `encoders` (BGE-M3, an embedding encoder, and its graph) and
`diffusion` (SDXL: the UNet denoising step and the VAE decoder, built with diffusers).
Nothing here downloads anything. Importing this package imports neither transformers nor diffusers.
"""

from . import diffusion, whisper  # register their zoo entries with configs
from .configs import NAMES, build_model, config
from .encoders import DenseEmbedding, embedding_graph, example_batch
from .llama_block import LlamaBlock
from .llm import CausalLMStep, decode_step_graph, empty_cache, generate, prefill_graph

__all__ = ["NAMES", "CausalLMStep", "DenseEmbedding", "LlamaBlock", "build_model", "config", "decode_step_graph",
           "diffusion", "embedding_graph", "empty_cache", "example_batch", "generate", "prefill_graph", "whisper"]

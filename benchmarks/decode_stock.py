"""The stock PyTorch lattice of `benchmarks/decode.py`: every way a PyTorch user would decode, same weights.

transformers eager (its dynamic cache); transformers eager over a static cache (`hoid.models.CausalLMStep`,
the module hoid itself imports); a gpt-fast-style loop over that static-cache model under `torch.compile`
default, reduce-overhead and max-autotune; the plain fast model (`decode_fast.FastModel`) under
reduce-overhead, max-autotune, and max-autotune with coordinate-descent tuning; the fast model's eager step
captured by hand in a CUDA graph. Each compiled row compiles one step function (argmax inside, as gpt-fast
does) with `dynamic=False`: the prefill is its own specialisation, so time to first token is the
configuration's too (`--eager-prefill` runs the prefill uncompiled instead, as gpt-fast does by default).
Builders run, and rows are called, under `torch.no_grad()` (decode.py's main).

On the CPU (the smoke run) rows that need CUDA are skipped with the reason: reduce-overhead (CUDA graphs),
max-autotune (it tunes GPU kernels), the CUDA-graph row; `torch.compile` default runs through dynamo's
"eager" backend (inductor's C++ build takes minutes there) unless `cpu_inductor` is set, and says so.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from decode_fast import FastModel
from decode_loop import Decoder, Shape, Skip, greedy, last_logits, logits_and_token, paired


@dataclass
class Context:
    device: torch.device
    compile_prefill: bool = True
    cpu_inductor: bool = False


def _cache_arg(lm) -> str:
    """transformers renamed the forward's `past_key_values` argument to `cache` (5.2x)."""
    return "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"


def hf_eager(lm, shape: Shape, ctx: Context) -> Decoder:
    """transformers as shipped: its dynamic cache, grown by each call."""
    from transformers import DynamicCache

    arg, held = _cache_arg(lm), {}

    def logits(ids, pos, *, fresh):
        if fresh:
            held["cache"] = DynamicCache(config=lm.config)
        return lm(input_ids=ids, use_cache=True, **{arg: held["cache"]}).logits

    return Decoder(prefill=lambda ids, pos: greedy(logits(ids, pos, fresh=True)),
                   step=lambda tok, pos: greedy(logits(tok, pos, fresh=False)),
                   prefill_logits=lambda ids, pos: last_logits(logits(ids, pos, fresh=True)),
                   step_logits=lambda tok, pos: last_logits(logits(tok, pos, fresh=False)))


def _static(lm, shape: Shape):
    from hoid.models import CausalLMStep

    return CausalLMStep(lm, shape.cache_len, shape.batch).eval()


def hf_static(lm, shape: Shape, ctx: Context) -> Decoder:
    module = _static(lm, shape)
    return Decoder(prefill=lambda ids, pos: greedy(module(ids, pos)), step=lambda ids, pos: greedy(module(ids, pos)),
                   prefill_logits=lambda ids, pos: last_logits(module(ids, pos)),
                   step_logits=lambda ids, pos: last_logits(module(ids, pos)))


# The torch.compile rows every benchmark runs: key -> (name, mode, coordinate-descent tuning)
COMPILE_ROWS = {
    "compile-default": ("torch.compile default", "default", False),
    "compile-reduce-overhead": ("torch.compile reduce-overhead", "reduce-overhead", False),
    "compile-max-autotune": ("torch.compile max-autotune", "max-autotune", False),
    "compile-max-autotune-cd": ("torch.compile max-autotune + coordinate descent", "max-autotune", True),
}


def compile_stock(fn, mode: str, device: torch.device, *, fullgraph: bool, cd: bool = False,
                  cpu_inductor: bool = False):
    """(compiled fn, info, close) of `fn` under torch.compile `mode`, `dynamic=False`: what every stock compiled
    row of every benchmark runs. On the CPU, reduce-overhead and max-autotune raise `Skip` (they need CUDA) and
    default runs through dynamo's eager backend unless `cpu_inductor`. `cd` turns coordinate-descent tuning on
    until `close()`: inductor reads it when the first call compiles, which is inside the row's warm-up."""
    info = {"mode": mode, "coordinate_descent_tuning": cd, "fullgraph": fullgraph}
    backend = "inductor"
    if device.type != "cuda":
        if mode == "reduce-overhead":
            raise Skip("needs CUDA: reduce-overhead is torch.compile with CUDA graphs")
        if mode.startswith("max-autotune"):
            raise Skip("needs CUDA: max-autotune tunes GPU kernels (Triton templates, cuBLAS configurations)")
        if not cpu_inductor:
            backend = "eager"
            info["compiler"] = "dynamo, eager backend (CPU smoke: inductor's C++ build is not run)"
    options = {"mode": mode} if backend == "inductor" else {}
    compiled = torch.compile(fn, backend=backend, fullgraph=fullgraph, dynamic=False, **options)
    import torch._inductor.config as inductor

    restore = inductor.coordinate_descent_tuning
    inductor.coordinate_descent_tuning = cd

    def close():
        inductor.coordinate_descent_tuning = restore

    return compiled, info, close


def _compiled(module, mode: str, ctx: Context, *, fullgraph: bool, cd: bool = False) -> Decoder:
    """`logits_and_token(module(ids, pos))` under torch.compile `mode`: one compiled function for prefill and
    step, the greedy token computed inside it (as gpt-fast samples inside its compiled step) and the last
    logits returned beside it, for the gate (they are computed anyway: the argmax reads them)."""

    def step(ids, pos):
        return logits_and_token(module(ids, pos))

    fn, info, close = compile_stock(step, mode, ctx.device, fullgraph=fullgraph, cd=cd, cpu_inductor=ctx.cpu_inductor)
    info["compiled_prefill"] = ctx.compile_prefill
    if "compiler" in info:
        info["compiler"] += " (--cpu-inductor)"
    prefill = fn if ctx.compile_prefill else step
    return paired(prefill, fn, info=info, close=close)


def hf_compiled(mode: str):
    def build(lm, shape: Shape, ctx: Context) -> Decoder:
        # transformers' cache bookkeeping is Python: a graph break there is stock behaviour, not ours to forbid
        return _compiled(_static(lm, shape), mode, ctx, fullgraph=False)

    return build


def fast_compiled(mode: str, cd: bool = False):
    def build(lm, shape: Shape, ctx: Context) -> Decoder:
        return _compiled(FastModel(lm, shape.cache_len, shape.batch).eval(), mode, ctx, fullgraph=True, cd=cd)

    return build


def fast_cuda_graph(lm, shape: Shape, ctx: Context) -> Decoder:
    """The fast model's eager step recorded once in a CUDA graph (static token and position buffers),
    replayed per token; the prefill runs eagerly."""
    if ctx.device.type != "cuda":
        raise Skip("needs CUDA: a CUDA graph")
    from hoid.runtime.graphs import capture

    model = FastModel(lm, shape.cache_len, shape.batch).eval()
    token = torch.zeros((shape.batch, 1), dtype=torch.long, device=ctx.device)
    position = torch.zeros((1,), dtype=torch.long, device=ctx.device)
    step = lambda t, p: logits_and_token(model(t, p))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up off the capture stream, as torch.cuda.graph's docs ask
        for _ in range(3):
            step(token, position)
    torch.cuda.current_stream().wait_stream(stream)
    graph, outputs, reason = capture(step, [token, position])
    if graph is None:
        raise RuntimeError(reason)

    def replay(tok, pos):
        token.copy_(tok)
        position.copy_(pos)
        graph.replay()
        return outputs

    return paired(step, replay, info={"captured": True})


# key -> (name, builder), in the order the rows run and print
ROWS = {
    "hf-eager": ("transformers eager (dynamic cache)", hf_eager),
    "hf-static": ("transformers eager, static cache", hf_static),
    "hf-compile-default": ("transformers static cache, torch.compile default", hf_compiled("default")),
    "hf-compile-reduce-overhead": ("transformers static cache, torch.compile reduce-overhead",
                                   hf_compiled("reduce-overhead")),
    "hf-compile-max-autotune": ("transformers static cache, torch.compile max-autotune", hf_compiled("max-autotune")),
    "fast-reduce-overhead": ("plain fast model, torch.compile reduce-overhead", fast_compiled("reduce-overhead")),
    "fast-max-autotune": ("plain fast model, torch.compile max-autotune", fast_compiled("max-autotune")),
    "fast-max-autotune-cd": ("plain fast model, torch.compile max-autotune + coordinate descent",
                             fast_compiled("max-autotune", cd=True)),
    "fast-cuda-graph": ("plain fast model, eager step in a hand-captured CUDA graph", fast_cuda_graph),
}

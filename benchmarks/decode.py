"""Decode throughput: hoid's compiled Qwen3-1.7B decode step against a gpt-fast-style PyTorch loop, one run.

hoid: the decode-step graph, rewritten for the H200 (`hoid.search.rewrite`), compiled (CUDA graph, greedy
argmax inside the step). Stock: a plain-PyTorch model written for speed as gpt-fast writes it (merged
QKV and gate/up weights, static cache updated with `index_copy_`, one step function) under
`torch.compile` reduce-overhead and max-autotune with coordinate-descent tuning, the same weights.

    python benchmarks/decode.py                     # writes benchmarks/results/decode.json
    python benchmarks/decode.py --modes reduce-overhead --steps 128 --no-profile
    python benchmarks/decode.py --modes --no-profile   # hoid and torch.compile(backend="hoid") alone

Reports tokens/s of each, hoid's in-context profile (slowest nodes, their floors) and the gap between
hoid's step time and the sum of its kernels' durations.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


class FastQwen3(nn.Module):
    """gpt-fast's decode model for Qwen3: merged projections, a static cache, no transformers in the step."""

    def __init__(self, lm, cache_len: int):
        super().__init__()
        cfg, m = lm.config, lm.model
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.eps = cfg.rms_norm_eps
        self.embed, self.norm = m.embed_tokens.weight, m.norm.weight
        self.head = lm.lm_head.weight
        self.layers = []
        for layer in m.layers:
            a, p = layer.self_attn, layer.mlp
            self.layers.append(dict(
                wqkv=torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]), wo=a.o_proj.weight,
                w13=torch.cat([p.gate_proj.weight, p.up_proj.weight]), w2=p.down_proj.weight,
                ln1=layer.input_layernorm.weight, ln2=layer.post_attention_layernorm.weight,
                qn=a.q_norm.weight, kn=a.k_norm.weight))
        shape = (1, self.kv_heads, cache_len, self.head_dim)
        dev, dtype = self.embed.device, self.embed.dtype
        self.caches = [(torch.zeros(shape, device=dev, dtype=dtype), torch.zeros(shape, device=dev, dtype=dtype))
                       for _ in self.layers]
        theta = cfg.rope_parameters["rope_theta"] if hasattr(cfg, "rope_parameters") else cfg.rope_theta
        inv = 1.0 / theta ** (torch.arange(0, self.head_dim, 2, device=dev).float() / self.head_dim)
        freqs = torch.outer(torch.arange(cache_len, device=dev).float(), inv)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos, self.sin = emb.cos().to(dtype), emb.sin().to(dtype)
        self.slots = torch.arange(cache_len, device=dev)

    def _norm(self, x, w):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * w

    def _rope(self, x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def forward(self, ids, pos):
        x = F.embedding(ids, self.embed)  # [1, 1, H]
        cos, sin = self.cos[pos].view(1, 1, 1, -1), self.sin[pos].view(1, 1, 1, -1)
        mask = (self.slots <= pos).view(1, 1, 1, -1)
        hq, hk, d = self.heads * self.head_dim, self.kv_heads * self.head_dim, self.head_dim
        for w, (kc, vc) in zip(self.layers, self.caches):
            q, k, v = F.linear(self._norm(x, w["ln1"]), w["wqkv"]).split([hq, hk, hk], dim=-1)
            q = self._rope(self._norm(q.view(1, 1, self.heads, d), w["qn"]).transpose(1, 2), cos, sin)
            k = self._rope(self._norm(k.view(1, 1, self.kv_heads, d), w["kn"]).transpose(1, 2), cos, sin)
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v.view(1, 1, self.kv_heads, d).transpose(1, 2))
            o = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, enable_gqa=True)
            x = x + F.linear(o.transpose(1, 2).reshape(1, 1, hq), w["wo"])
            g, u = F.linear(self._norm(x, w["ln2"]), w["w13"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(g) * u, w["w2"])
        return F.linear(self._norm(x, self.norm), self.head).argmax(dim=-1)  # the next token [1, 1]


def tokens_per_second(step, steps: int, warmup: int = 8) -> float:
    """Greedy decode of `steps` tokens from position 0: the token each step returns is the next input."""
    token = torch.zeros((1, 1), dtype=torch.long, device="cuda")
    pos = torch.zeros((1,), dtype=torch.long, device="cuda")
    for i in range(warmup):
        pos.fill_(i)
        token = step(token, pos).clone()
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for i in range(steps):
        pos.fill_(i)
        token = step(token, pos).clone()
    torch.cuda.synchronize()
    return steps / (time.perf_counter() - begin)


def stock(lm, cache_len: int, mode: str, steps: int) -> dict:
    import torch._inductor.config as inductor

    inductor.coordinate_descent_tuning = True
    torch._dynamo.reset()
    model = FastQwen3(lm, cache_len)
    fn = torch.compile(model.forward, mode=mode, fullgraph=True)
    begin = time.perf_counter()
    with torch.no_grad():
        fn(torch.zeros((1, 1), dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda"))
        compile_s = time.perf_counter() - begin
        rate = tokens_per_second(lambda t, p: fn(t, p), steps)
    return {"name": f"gpt-fast-style torch.compile {mode}", "tokens_per_s": rate, "compile_s": compile_s}


def hoid_backend(lm, cache_len: int, steps: int) -> dict:
    """The same gpt-fast-style step through `torch.compile(backend="hoid")` (hoid/backend.py): the FX graph
    imported, rewritten with the rules and the kernels accepted for this GPU (HOID_KERNELS, filled by an
    optimize run), compiled by hoid's runtime; a subgraph hoid cannot take runs eagerly and is logged."""
    import logging

    logging.basicConfig()
    from hoid.backend import backend  # what backend="hoid" resolves to once `pip install` wrote the entry point

    torch._dynamo.reset()
    model = FastQwen3(lm, cache_len)
    fn = torch.compile(model.forward, backend=backend, fullgraph=True)
    begin = time.perf_counter()
    with torch.no_grad():
        fn(torch.zeros((1, 1), dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda"))
        compile_s = time.perf_counter() - begin
        rate = tokens_per_second(lambda t, p: fn(t, p), steps)
    return {"name": "torch.compile(backend='hoid')", "tokens_per_s": rate, "compile_s": compile_s}


def hoid_run(lm, cache_len: int, steps: int, profile: bool) -> dict:
    import hoid
    from hoid.models import decode_step_graph
    from hoid.runtime import compile
    from hoid.runtime.profile import example_inputs
    from hoid.runtime.profile import profile as in_context
    from hoid.runtime.sampling import Greedy

    begin = time.perf_counter()
    graph = hoid.search.rewrite(decode_step_graph(lm, cache_len), device="h200")
    rewrite_s = time.perf_counter() - begin
    compiled = compile(graph, sample=Greedy())
    state = compiled.state

    def step(token, pos):
        return compiled(token, pos, *state)[0]

    rate = tokens_per_second(step, steps)
    kernels = {n.attrs["kernel"] for n in compiled.plan.steps if n.op == "kernel"}
    out = {"name": "hoid compiled (CUDA graph)", "tokens_per_s": rate, "rewrite_s": rewrite_s,
           "captured": compiled.captured, "cuda_graph_reason": compiled.cuda_graph_reason,
           "nodes": len(compiled.plan.steps), "kernel_nodes": sum(n.op == "kernel" for n in compiled.plan.steps),
           "kernels": sorted(kernels), "fallbacks": compiled.fallbacks, "state_copies": compiled.copies,
           "memory": vars(compiled.memory)}
    if profile:
        prof = in_context(compiled, example_inputs(compiled))
        out["profile"] = {"step_s": prof.step, "kernels_s": prof.kernels,
                          "gap_s": prof.step - prof.kernels if prof.kernels is not None else None,
                          "rows": [dict(node=r.node, op=r.op, kernel=r.kernel, seconds=r.seconds, share=r.share,
                                        floor=r.floor) for r in prof.rows[:40]]}
        print(prof.table(limit=25))
    return out


def exported_run(lm, cache_len: int, steps: int) -> dict:
    """The same rewritten graph as `hoid_run`, shipped through `hoid.export` and run as plain PyTorch: the
    package loaded from a temporary directory, under torch.compile(reduce-overhead) as a user would."""
    import importlib
    import sys
    import tempfile

    import hoid
    from hoid.models import decode_step_graph

    graph = hoid.search.rewrite(decode_step_graph(lm, cache_len), device="h200")
    folder = tempfile.mkdtemp()
    hoid.export(graph, Path(folder) / "hoid_decode_export")
    sys.path.insert(0, folder)
    model = importlib.import_module("hoid_decode_export").load("cuda")
    fn = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    state = [torch.zeros(v.type.shape, dtype=v.type.torch_dtype, device="cuda")
             for v in graph.inputs_of_kind("state")]

    def step(token, pos):
        logits, *new = fn(token, pos, *state)
        for old, t in zip(state, new):
            if t.data_ptr() != old.data_ptr():
                old.copy_(t)
        return logits[:, -1:].argmax(dim=-1)

    rate = tokens_per_second(step, steps)
    return {"name": "hoid.export package, torch.compile reduce-overhead", "tokens_per_s": rate}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3-1.7b")
    ap.add_argument("--cache-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--modes", nargs="*", default=["reduce-overhead", "max-autotune"])
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--no-backend", action="store_true", help="skip the torch.compile(backend='hoid') row")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "decode.json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks/decode.py needs a CUDA GPU")
    from hoid.models import build_model

    lm = build_model(args.model, dtype=torch.bfloat16, device="cuda")
    rows = [hoid_run(lm, args.cache_len, args.steps, not args.no_profile)]
    print(json.dumps({k: v for k, v in rows[0].items() if k != "profile"}, default=str))
    rows.append(exported_run(lm, args.cache_len, args.steps))
    print(json.dumps(rows[-1]))
    for mode in args.modes:
        rows.append(stock(lm, args.cache_len, mode, args.steps))
        print(json.dumps(rows[-1]))
    if not args.no_backend:
        rows.append(hoid_backend(lm, args.cache_len, args.steps))
        print(json.dumps(rows[-1]))
    import triton

    result = {"benchmark": "decode", "model": args.model, "dtype": "bf16", "cache_len": args.cache_len,
              "steps": args.steps, "device": torch.cuda.get_device_name(),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
              "results": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Graphs shared by the runtime tests, built once per session (importing a decode step takes seconds)."""

import pytest
import torch

CACHE = 16


def _full_width_lm():
    """Qwen3-1.7B's layer width (hidden 2048, 16 heads of 128, MLP 6144) at 2 layers and a 512-token
    vocabulary: the shapes the decode kernels see, at a size a CPU interprets in seconds."""
    from transformers import AutoModelForCausalLM

    from hoid.models import config

    cfg = config("qwen3-1.7b")
    cfg.num_hidden_layers, cfg.vocab_size = 2, 512
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def tiny_lm():
    from hoid.models import build_model

    return build_model("qwen3-1.7b-tiny")


@pytest.fixture(scope="session")
def tiny_step(tiny_lm):
    from hoid.models import decode_step_graph

    return decode_step_graph(tiny_lm, CACHE)


@pytest.fixture(scope="session")
def tiny_rewritten(tiny_step):
    import hoid

    # the kernels this machine runs: priced by the H200's rows, the search may pick a CuTe kernel, which
    # the CPU cannot run (its node would run its body, and the tests below see no kernel there)
    kernels = hoid.kernels.KernelSet.default().runnable_here()
    return hoid.search.rewrite(tiny_step, device="h200", kernels=kernels)


@pytest.fixture(scope="session")
def gpu_step():
    """The tiny decode step in float16 on the GPU, rewritten for the H200 (GPU tests only)."""
    import hoid
    from hoid.models import build_model, decode_step_graph

    lm = build_model("qwen3-1.7b-tiny", dtype=torch.float16, device="cuda")
    kernels = hoid.kernels.KernelSet.default().runnable_here()  # CuTe's kernels only where CuTe DSL is here
    return hoid.search.rewrite(decode_step_graph(lm, 64), device="h200", kernels=kernels)


@pytest.fixture(scope="session")
def wide_step():
    from hoid.models import decode_step_graph

    return decode_step_graph(_full_width_lm(), CACHE)


def kernel_chain(dtype=torch.float32, device="cpu", seed=0):
    """A decode-layer-like chain of library kernel nodes and views only (no torch op launches a kernel):
    add_rmsnorm -> linear (split-K) -> decode attention (two launches) -> linear_add (split-K) -> rmsnorm.
    Small enough for the interpreter; params fixed so split-K and split attention run (workspaces)."""
    import hoid
    from hoid.ir import KernelImpl
    from hoid.ir.dtypes import dtype_name
    from hoid.kernels import get, resolve_params

    dt = dtype_name(dtype)
    g = torch.Generator().manual_seed(seed)

    def tensor(*shape):
        return (torch.randn(*shape, generator=g) * 0.5).to(dtype).to(device)

    hidden, heads, kv_heads, dim, cache = 256, 4, 2, 32, 40
    b = hoid.GraphBuilder("chain")
    x, res = b.input("x", (1, hidden), dt), b.input("res", (1, hidden), dt)
    k = b.input("k", (1, kv_heads, cache, dim), dt)
    v = b.input("v", (1, kv_heads, cache, dim), dt)
    w_norm = b.weight("norm", (hidden,), dt, tensor(hidden))
    w_q = b.weight("q", (heads * dim, hidden), dt, tensor(heads * dim, hidden) / 8)
    w_o = b.weight("o", (hidden, heads * dim), dt, tensor(hidden, heads * dim) / 8)
    w_out = b.weight("out_norm", (hidden,), dt, tensor(hidden))

    def kernel(kernel_id, ins, attrs=None, **params):
        spec = get(kernel_id)
        types = [i.type for i in ins]
        attrs = attrs or {}
        full = resolve_params(spec, types, attrs, params)
        impl = KernelImpl(spec.id, spec.version, full, spec.pattern.graph(types, attrs), attrs)
        return b.op("kernel", *ins, **impl.node_attrs())

    summed, normed = kernel("triton.add_rmsnorm", [x, res, w_norm], {"eps": 1e-6})
    q = kernel("triton.linear", [normed, w_q], split_k=2, block_k=128, block_n=16)
    q4 = b.reshape(q, shape=(1, heads, 1, dim))
    o = kernel("triton.decode_attention_nomask", [q4, k, v], {"is_causal": False, "scale": None, "enable_gqa": True},
               block_n=32, split_tokens=32)
    h = kernel("triton.linear_add", [b.reshape(o, shape=(1, heads * dim)), w_o, summed], split_k=2, block_k=64,
               block_n=32)
    y = kernel("triton.rmsnorm", [h, w_out], {"eps": 1e-6})
    graph = b.build(y, h)
    inputs = [tensor(1, hidden), tensor(1, hidden), tensor(1, kv_heads, cache, dim), tensor(1, kv_heads, cache, dim)]
    return graph, inputs

"""On the GPU (marked gpu): the exported package launches the same Triton kernels as the compiled graph
(torch.profiler), eager and under torch.compile, where its kernels are triton_ops; and, where CuTe DSL is
installed, the same CuTe builds (counted at their launch: a CuTe kernel's symbol names the module it was
built from, which the package's copy renames)."""

import sys

import pytest
import torch

import hoid
from hoid.kernels import KernelSet

pytestmark = pytest.mark.gpu


def _kernel_names(fn, *args) -> set[str]:
    fn(*args)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}


def _triton_function_names() -> set[str]:
    from tests.kernels.library.modules import triton_kernels

    return {k.name for k in triton_kernels().values()}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_exported_package_launches_the_compiled_graphs_kernels(tmp_path):
    from hoid.models import build_model, decode_step_graph

    lm = build_model("qwen3-1.7b-tiny", dtype=torch.bfloat16, device="cuda")
    kernels = KernelSet.default().runnable_here()  # CuTe's kernels only where CuTe DSL is here
    graph = hoid.search.rewrite(decode_step_graph(lm, 64), device="h200", kernels=kernels)
    compiled = hoid.compile(graph, cuda_graph=False)
    package = hoid.export(graph, tmp_path / "gpu_pkg")
    sys.path.insert(0, str(tmp_path))
    try:
        import gpu_pkg

        model = gpu_pkg.load("cuda")
    finally:
        sys.path.remove(str(tmp_path))
    assert package.is_dir()
    ids, pos = torch.tensor([[3]], device="cuda"), torch.tensor([2], device="cuda")
    state = [torch.zeros_like(t) for t in compiled.state]
    # hoid's own kernels: the library's Triton functions, by name (vendor kernels such as cuBLAS's are chosen
    # by the vendor's heuristics per call, which an exported matmul need not repeat exactly)
    ours = {n for n in _kernel_names(compiled, ids, pos, *compiled.state) if n in _triton_function_names()}
    assert ours, "the compiled graph launches Triton kernels"
    theirs = _kernel_names(model, ids, pos, *state)
    missing = {n for n in ours if n not in theirs}
    assert not missing, f"the package does not launch {missing}"
    fast = torch.compile(model, fullgraph=True)
    assert not {n for n in ours if n not in _kernel_names(fast, ids, pos, *[torch.zeros_like(t) for t in state])}
    torch.export.export(model, (ids, pos, *state))
    from hoid.kernels.library._cute_compile import have_cute

    if have_cute():  # the H200's prices pick CuTe's gate/up GEMV for this model (as test_export.py asserts)
        ours = cute_launches(compiled, (ids, pos, *compiled.state), "hoid.kernels.library._cute_compile")
        assert ours, "the compiled graph launches CuTe kernels"
        assert cute_launches(model, (ids, pos, *state), "gpu_pkg._kernels.cute_compile") == ours


def cute_launches(fn, args, module: str) -> list[str]:
    """The CuTe builds one call of `fn` launches, by name in order, counted where `module` (hoid's
    `_cute_compile` or a package's copy) picks the build for each launch (names, not keys: a key holds the
    launch's PDL flags, which hoid.compile sets and a package does not)."""
    import importlib

    helpers, seen = importlib.import_module(module), []
    picked = helpers.compiled_for

    def counting(name, key, *rest):
        seen.append(name)
        return picked(name, key, *rest)

    helpers.compiled_for = counting
    try:
        fn(*args)
        torch.cuda.synchronize()
    finally:
        helpers.compiled_for = picked
    return seen


def _package_under_torch_compile(graph, tmp_path, name: str, tokens: int, vocab: int):
    """(hoid.compile's logits, the exported package's under torch.compile(fullgraph=True)) on one input."""
    compiled = hoid.compile(graph, cuda_graph=False)
    hoid.export(graph, tmp_path / name)
    sys.path.insert(0, str(tmp_path))
    try:
        model = __import__(name).load("cuda")
    finally:
        sys.path.remove(str(tmp_path))
    ids = torch.randint(0, vocab, (1, tokens), device="cuda")
    pos = torch.tensor([0], device="cuda")
    want = compiled(ids, pos, *[torch.zeros_like(t) for t in compiled.state])
    got = torch.compile(model, fullgraph=True)(ids, pos, *[torch.zeros_like(t) for t in compiled.state])
    return want[0].float(), got[0].float()


def _with_kernels(graph, *names):
    """`graph` rewritten with only `names` in the library, priced so that each is chosen where it matches."""
    from hoid.kernels import all_kernels
    from hoid.search.cost import AnalyticCost, MeasuredCost

    kernels = KernelSet.empty()
    for name in names:
        kernels = kernels.with_library(all_kernels()[name])
    cheap_kernels = MeasuredCost(lambda call: 1e-9 if call.op == "kernel" else None, fallback=AnalyticCost())
    return hoid.search.rewrite(graph, device="h200", kernels=kernels, cost=cheap_kernels)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_an_exported_prefill_with_its_attention_kernel_compiles_under_torch_compile(tmp_path):
    """The prompt's graph computes its causal mask (bool) in the graph: torch.compile traces into the
    attention kernel's launch, where a uint8 view of that computed mask failed Inductor's lowering (found on
    the H200: the export row raised). Priced so that the kernel is chosen, the package compiles and agrees
    with hoid.compile."""
    from hoid.models import build_model
    from hoid.models.llm import prefill_graph

    lm = build_model("qwen3-1.7b-tiny", dtype=torch.bfloat16, device="cuda")
    graph = _with_kernels(prefill_graph(lm, 16, 64), "triton.prefill_attention")
    assert [n.attrs["kernel"] for n in graph.nodes if n.op == "kernel"] == ["triton.prefill_attention"] * 2
    want, got = _package_under_torch_compile(graph, tmp_path, "prefill_pkg", 16, lm.config.vocab_size)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_an_exported_decode_step_with_attention_and_gemv_compiles_under_torch_compile(tmp_path):
    """The decode step's mask is computed in the graph too: the decode attention kernel's uint8 view of it
    failed Inductor's lowering (the H200's export row raised, 2026-12-03). And torch.compile's analysis of
    which tensors a kernel writes must trace the GEMV: it failed on `n_out.to(...)` (an int there) and torch
    then treats every input, the weights too, as written."""
    import logging

    from torch._higher_order_ops import triton_kernel_wrap

    from hoid.models import build_model
    from hoid.models.llm import decode_step_graph

    lm = build_model("qwen3-1.7b-tiny", dtype=torch.bfloat16, device="cuda")
    graph = _with_kernels(decode_step_graph(lm, 64), "triton.decode_attention", "triton.linear_swiglu_merged")
    chosen = {n.attrs["kernel"] for n in graph.nodes if n.op == "kernel"}
    assert chosen == {"triton.decode_attention", "triton.linear_swiglu_merged"}, chosen
    # on the module's own logger (torch._dynamo's in torch 2.13): torch's loggers need not propagate to the
    # root, where pytest's caplog listens
    records, handler = [], logging.Handler(logging.WARNING)
    handler.emit = records.append
    analysis = getattr(triton_kernel_wrap, "log", None) or logging.getLogger(triton_kernel_wrap.__name__)
    analysis.addHandler(handler)
    try:
        want, got = _package_under_torch_compile(graph, tmp_path, "step_pkg", 1, lm.config.vocab_size)
    finally:
        analysis.removeHandler(handler)
    assert not [r.getMessage() for r in records if "every input is mutated" in r.getMessage()]
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_an_opaque_package_compiles_without_tracing_a_kernel_and_agrees(tmp_path):
    """`trace_triton=False`: torch.compile sees each Triton kernel through its fake, so its mutation analysis
    (`generate_ttir`, once per call site: the H200's export row spent over 164 s there) never runs, and the
    package still launches the compiled graph's kernels and agrees with it."""
    import torch._higher_order_ops.triton_kernel_wrap as wrap

    from hoid.models import build_model, decode_step_graph

    lm = build_model("qwen3-1.7b-tiny", dtype=torch.bfloat16, device="cuda")
    graph = _with_kernels(decode_step_graph(lm, 64), "triton.decode_attention", "triton.linear")
    assert {n.attrs["kernel"] for n in graph.nodes if n.op == "kernel"} >= {"triton.decode_attention"}
    compiled = hoid.compile(graph, cuda_graph=False)
    hoid.export(graph, tmp_path / "opaque_pkg", trace_triton=False)
    sys.path.insert(0, str(tmp_path))
    try:
        import opaque_pkg

        model = opaque_pkg.load("cuda")
    finally:
        sys.path.remove(str(tmp_path))
    calls, original = [], wrap.generate_ttir
    wrap.generate_ttir = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        ids, pos = torch.tensor([[3]], device="cuda"), torch.tensor([2], device="cuda")
        want = compiled(ids, pos, *[torch.zeros_like(t) for t in compiled.state])
        got = torch.compile(model, fullgraph=True)(ids, pos, *[torch.zeros_like(t) for t in compiled.state])
    finally:
        wrap.generate_ttir = original
    assert not calls, f"torch.compile traced into {len(calls)} Triton launches"
    torch.testing.assert_close(got[0].float(), want[0].float(), rtol=2e-2, atol=2e-2)

"""On the GPU (marked gpu, skipped without CUDA): a chain of kernel nodes launches exactly what its specs
declare (torch.profiler, and the CUDA graph's kernel nodes), and programmatic dependent launch changes
when kernels start, never what they compute."""

import ctypes

import pytest
import torch

from hoid.kernels.launch import recording
from hoid.runtime import compile
from hoid.runtime.decode import generate

from .conftest import kernel_chain

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def chain():
    return kernel_chain(torch.bfloat16, device="cuda")


def _pdl_gpu():
    major, _ = torch.cuda.get_device_capability()
    if major < 9:
        pytest.skip("programmatic dependent launch needs sm_90 or later")


def _cuda_kernels(run, args) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run(*args)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type.name == "CUDA"]


def test_the_chain_launches_its_declared_kernels_in_order(chain):
    graph, inputs = chain
    compiled = compile(graph)
    if compiled.pdl:  # sm_90+: every PDL kernel waits first unless asked (`pdl_early=True`: the two GEMVs)
        assert not any(b.pdl_early for b in compiled.lowered.kernels.values())
        early = compile(graph, pdl_early=True)
        assert sum(b.pdl_early for b in early.lowered.kernels.values()) == 2
    compiled(*inputs)  # eager: Triton compiled, the split-K counters allocated (a fill kernel, once)
    compiled(*inputs)  # captured
    with recording() as records:
        compiled.run_eager(*inputs)
    expected = [name for r in records for name in r.device_kernels]
    assert len(expected) == compiled.launches.declared == 6
    # the graph reads buffers of its own since its capture: the caller's tensors are copied in (one copy
    # each, seen on the H200), its own buffers passed back are not, and then nothing but the kernels runs
    own = compiled.input_buffers
    copies = compiled.stats.input_copies
    assert _cuda_kernels(compiled.run_eager, own) == expected  # nothing else launches: no copy, no alloc
    assert _cuda_kernels(compiled, own) == expected  # the replay launches the same
    assert compiled.stats.input_copies == copies


def test_the_cuda_graph_holds_one_kernel_node_per_declared_launch(chain):
    graph, inputs = chain
    compiled = compile(graph, cuda_graph=False)
    args = compiled._stage(inputs)
    compiled.run_eager(*inputs)
    cuda_graph = torch.cuda.CUDAGraph(keep_graph=True)
    torch.cuda.synchronize()
    with torch.cuda.graph(cuda_graph):
        compiled._fn(*args)
    assert _kernel_nodes(cuda_graph) == compiled.launches.declared


def _kernel_nodes(cuda_graph) -> int:
    """Kernel nodes of a captured graph, through the CUDA runtime this process loaded."""
    cudart = _cudart()
    raw, count = ctypes.c_void_p(cuda_graph.raw_cuda_graph()), ctypes.c_size_t(0)
    assert cudart.cudaGraphGetNodes(raw, None, ctypes.byref(count)) == 0
    nodes = (ctypes.c_void_p * count.value)()
    assert cudart.cudaGraphGetNodes(raw, nodes, ctypes.byref(count)) == 0
    kinds = []
    for node in nodes:
        kind = ctypes.c_int(-1)
        assert cudart.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)) == 0
        kinds.append(kind.value)
    return kinds.count(0)  # cudaGraphNodeTypeKernel


def _cudart():
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "libcudart.so" in line})
    if not paths:
        pytest.skip("no libcudart loaded in this process (torch linked it statically): cannot read graph nodes")
    return ctypes.CDLL(paths[0])


def test_a_pdl_chain_gives_what_the_chain_without_it_gives(chain):
    _pdl_gpu()
    graph, inputs = chain
    plain, chained = compile(graph, pdl=False), compile(graph, pdl=True)
    assert chained.pdl and not plain.pdl and "programmatic dependent launch" in chained.source
    assert [s.pdl for s in chained.launches.kernels] == [True] * 5  # the attention's two launches too
    for _ in range(3):  # eager, capture, replays
        a, b = plain(*inputs), chained(*inputs)
        torch.cuda.synchronize()
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            assert torch.equal(x, y), f"output {k} differs with PDL"
    assert chained.captured, chained.cuda_graph_reason


def test_pdl_is_on_by_default_with_cuda_graphs(chain):
    _pdl_gpu()
    graph, _ = chain
    assert compile(graph).pdl and not compile(graph, cuda_graph=False).pdl


def test_a_decode_step_decodes_the_same_tokens_with_pdl(gpu_step):
    _pdl_gpu()
    plain, chained = compile(gpu_step, pdl=False), compile(gpu_step, pdl=True)
    assert any(s.pdl for s in chained.launches.kernels)
    prompt = torch.tensor([[1, 2, 3]], device="cuda")
    assert torch.equal(generate(plain, prompt, 12), generate(chained, prompt, 12))
    assert chained.captured, chained.cuda_graph_reason

"""On the GPU (marked gpu, skipped without CUDA): CUDA-graph replay equals eager execution, replays
allocate nothing, caches keep their addresses, the launches are the kernel nodes', peak memory is bounded."""

import pytest
import torch

from hoid.runtime import compile
from hoid.runtime.decode import generate

pytestmark = pytest.mark.gpu


def _args(compiled, position=3):
    ids = torch.tensor([[7]], device="cuda")
    return [ids, torch.tensor([position], device="cuda"), *compiled.state]


def test_replay_equals_eager(gpu_step):
    compiled = compile(gpu_step)
    assert compiled.use_cuda_graph and not compiled.fallbacks
    for t in compiled.state:
        t.normal_()
    saved = [t.clone() for t in compiled.state]
    eager = [t.clone() for t in compiled.run_eager(*_args(compiled))]
    for t, s in zip(compiled.state, saved):
        t.copy_(s)
    compiled(*_args(compiled))  # eager first call, then capture
    for t, s in zip(compiled.state, saved):
        t.copy_(s)
    replayed = compiled(*_args(compiled))
    assert compiled.captured, compiled.cuda_graph_reason
    for k, (a, b) in enumerate(zip(replayed, eager)):
        assert torch.equal(a, b), f"output {k} differs between replay and eager"


def test_a_captured_graph_reads_and_writes_none_of_the_callers_tensors(gpu_step):
    compiled = compile(gpu_step)
    first = _args(compiled)
    compiled(*first)  # eager, then captured
    for position in (4, 5, 6):
        args = _args(compiled, position)
        args[0].fill_(position)
        compiled(*args)
    # the H200 saw later tokens land in the tensors of the captured call (a prompt's first token)
    assert first[0].item() == 7 and first[1].item() == 3
    assert compiled.stats.input_copies == 6  # each later call's ids and position, into the graph's own


def test_generate_returns_its_prompt_untouched(gpu_step):
    prompt = torch.tensor([[1, 2, 3]], device="cuda")
    tokens = generate(compile(gpu_step), prompt, 6)
    assert torch.equal(tokens[:, :3], prompt), tokens


def test_replays_allocate_nothing_and_caches_keep_their_addresses(gpu_step):
    compiled = compile(gpu_step)
    pointers = [t.data_ptr() for t in compiled.state]
    args = _args(compiled)
    compiled(*args)
    compiled(*args)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    for p in range(4, 14):
        args[1].fill_(p)
        _, *cache = compiled(*args)
    torch.cuda.synchronize()
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before
    assert [t.data_ptr() for t in cache] == pointers
    tokens = generate(compiled, torch.tensor([[1, 2, 3]], device="cuda"), 8)
    assert tokens.shape == (1, 11) and [t.data_ptr() for t in compiled.state] == pointers
    assert compiled.stats.state_copies == 0


def test_the_launches_are_the_kernel_nodes_in_order(gpu_step):
    """The Triton kernels torch.profiler sees in one call are, in order, those each kernel node launches
    (the recording launcher), as many as its spec declares (split attention: two)."""
    from torch.profiler import ProfilerActivity, profile

    from hoid.kernels.launch import recording

    compiled = compile(gpu_step)
    args = _args(compiled)
    compiled(*args)
    compiled(*args)
    torch.cuda.synchronize()
    with recording() as records:
        compiled.run_eager(*args)
    triton_steps = [s for s in compiled.launches.kernels if s.what.startswith("kernel triton.")]
    triton_records = [r for r in records if r.kernel.startswith("triton.")]
    assert [len(r.device_kernels) for r in triton_records] == [s.count for s in triton_steps]
    expected = [name for r in triton_records for name in r.device_kernels]
    names = set(expected)
    for run in (compiled.run_eager, compiled):  # eagerly, and replayed from the CUDA graph
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run(*args)
            torch.cuda.synchronize()
        launched = [e.name for e in prof.events() if e.device_type.name == "CUDA" and e.name in names]
        assert launched == expected


def test_peak_memory_is_weights_caches_and_buffers(gpu_step):
    """Above what was allocated before (the graph's own weights live on the GPU already), binding adds
    at most the merged weights, the caches and the planned buffers, plus the parts of one merge in flight."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    compiled = compile(gpu_step)
    m = compiled.memory
    largest = max(t.numel() * t.element_size() for t in gpu_step.weights.values())
    assert m.peak is not None and m.peak - before <= m.weights + m.state + m.buffers + 3 * largest


def test_the_profile_lists_what_the_step_launched_and_its_sum_is_the_kernels_time(gpu_step):
    from hoid.runtime.profile import example_inputs, profile

    compiled = compile(gpu_step)
    result = profile(compiled, example_inputs(compiled))
    assert result.launched and all(n >= 1 and seconds > 0 for _, n, seconds in result.launched)
    assert sum(s for _, _, s in result.launched) == pytest.approx(result.kernels)
    assert [s for _, _, s in result.launched] == sorted((s for _, _, s in result.launched), reverse=True)
    assert "launched x" in result.table()

import pytest
import torch

from hoid.ir import GraphBuilder
from hoid.measure.cpu import calibrate_cpu
from hoid.measure.devices import H200
from hoid.measure.profile import profile_graph
from hoid.measure.roofline import graph_time

FAST = {"min_runs": 3, "min_seconds": 0.005}


def mlp(dtype="f32"):
    b = GraphBuilder("mlp")
    x = b.input("x", (64, 512), dtype)
    w = b.weight("w", (512, 2048), dtype)
    norm = b.weight("norm", (2048,), dtype)
    h = b.matmul(x, w, name="proj")
    g = b.silu(h, name="act")
    return b.build(b.rmsnorm(g, norm, name="out"))


def test_analytic_profile_rows_are_sorted_with_shares():
    profile = profile_graph(mlp(), mode="analytic", device=H200)
    assert profile.mode == "analytic" and profile.device == "NVIDIA H200"
    assert [r.op for r in profile.rows][0] == "matmul"
    seconds = [r.seconds for r in profile.rows]
    assert seconds == sorted(seconds, reverse=True)
    assert sum(r.share for r in profile.rows) == pytest.approx(1.0)
    assert profile.total == pytest.approx(graph_time(mlp(), H200))
    assert all(r.source == "analytic" and r.method == "roofline" for r in profile.rows)
    matmul = profile.rows[0]
    assert matmul.flops == 2 * 64 * 512 * 2048 and matmul.bytes == 4 * (64 * 512 + 512 * 2048 + 64 * 2048)


def test_measured_profile_on_the_cpu_times_every_node():
    profile = profile_graph(mlp(), mode="measured", device=calibrate_cpu(), **FAST)
    assert profile.mode == "measured" and len(profile.rows) == 3
    assert all(r.source == "measured" and r.seconds > 0 and r.timed == "op" for r in profile.rows)
    assert all(r.method.startswith("cpu-wall") for r in profile.rows)
    assert {r.node for r in profile.rows} == {"%proj", "%act", "%out"}
    table = profile.table()
    assert "matmul" in table and "100.0%" in table


def test_by_op_sums_each_ops_nodes_slowest_first():
    """A layered model's slowest rows are one op's copies; the sum per op says where the rest went."""
    from hoid.measure.profile import Profile, ProfileRow

    def row(node, op, seconds, kernel=None):
        return ProfileRow(node, op, kernel, seconds, 0.0, "measured", "op", 0, 0)

    rows = (row("%a1", "sdpa", 3.0), row("%a2", "sdpa", 3.0), row("%k", "kernel", 2.0, "triton.x"),
            *(row(f"%n{i}", "add", 1.0) for i in range(7)))
    result = Profile("g", "H200", "in-context", rows)
    assert result.by_op() == [("add", 7, 7.0), ("sdpa", 2, 6.0), ("kernel triton.x", 1, 2.0)]
    assert result.table(limit=2).endswith("by op: add x7 7 s (47%), sdpa x2 6 s (40%)")
    assert "by op" not in result.table(limit=0)


def test_the_kernels_a_step_launched_are_listed_under_the_step():
    from hoid.measure.profile import Profile

    launched = (("void cutlass_gemm<...>", 144, 9e-3), ("elementwise_copy", 96, 2e-3), ("layer_norm", 49, 1e-3))
    text = Profile("g", "H200", "in-context", (), step=13e-3, kernels=12e-3, launched=launched).table(limit=2)
    lines = text.splitlines()
    assert lines[-3].startswith("step 13") and "gaps 1" in lines[-3]
    assert lines[-2:] == ["  launched x144        9 ms  void cutlass_gemm<...>",
                          "  launched x96         2 ms  elementwise_copy"]


def test_repeated_layers_are_timed_once_per_signature(monkeypatch):
    from hoid.measure import profile as profile_module

    b = GraphBuilder("layers")
    h = b.input("x", (16, 256), "f32")
    for layer in range(3):  # three identical layers, then one of another width
        h = b.silu(b.matmul(h, b.weight(f"w{layer}", (256, 256), "f32"), name=f"proj{layer}"), name=f"act{layer}")
    wide = b.matmul(h, b.weight("w_wide", (256, 512), "f32"), name="wide")
    graph = b.build(wide)
    timed = []
    real = profile_module.time_on
    monkeypatch.setattr(profile_module, "time_on", lambda device, fn, args, **o: timed.append(args) or real(
        device, fn, args, **o))
    profile = profile_graph(graph, mode="measured", device=calibrate_cpu(), **FAST)
    assert len(timed) == 3  # proj0, act0 and wide: the other layers' nodes share their signatures
    rows = {r.node: r for r in profile.rows}
    assert rows["%proj2"].seconds == rows["%proj0"].seconds and rows["%proj2"].method.endswith("as %proj0")
    assert rows["%wide"].seconds != rows["%proj0"].seconds and "as %" not in rows["%wide"].method


def test_a_cache_makes_a_second_profile_time_and_run_nothing(monkeypatch, tmp_path):
    from hoid.measure import profile as profile_module
    from hoid.measure.cache import MeasureCache

    timed, runs = [], []
    real_time, real_run = profile_module.time_on, profile_module.run
    monkeypatch.setattr(profile_module, "time_on", lambda device, fn, args, **o: timed.append(args) or real_time(
        device, fn, args, min_runs=3, min_seconds=0.005))
    monkeypatch.setattr(profile_module, "run", lambda *a, **k: runs.append(1) or real_run(*a, **k))
    device = calibrate_cpu()
    with MeasureCache(tmp_path / "cache.sqlite") as cache:
        first = profile_graph(mlp(), mode="measured", device=device, cache=cache)
        assert len(timed) == 3 and len(runs) == 1
        again = profile_graph(mlp(), mode="measured", device=device, cache=cache)
        assert len(timed) == 3 and len(runs) == 1  # every signature held: nothing timed, nothing run
        assert {r.node: r.seconds for r in again.rows} == {r.node: r.seconds for r in first.rows}
        assert all(r.method == "cache" for r in again.rows)
        b = GraphBuilder("mlp_exp")  # the same three nodes and one new: only it is timed; the graph runs again
        x, w, norm = b.input("x", (64, 512), "f32"), b.weight("w", (512, 2048), "f32"), b.weight("norm", (2048,), "f32")
        profile_graph(b.build(b.exp(b.rmsnorm(b.silu(b.matmul(x, w)), norm))), mode="measured", device=device,
                      cache=cache)
        assert len(timed) == 4 and len(runs) == 2


def test_auto_is_analytic_without_a_gpu_and_bad_modes_are_refused():
    if not torch.cuda.is_available():
        assert profile_graph(mlp(), device=H200).mode == "analytic"
    with pytest.raises(ValueError, match="expected one of"):
        profile_graph(mlp(), mode="guess")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_auto_profile_on_the_gpu_is_measured():
    profile = profile_graph(mlp("bf16"))
    print(profile.table())
    for row in profile.rows:
        print(f"{row.node}: {row.method}")
    assert profile.mode == "measured" and profile.device == torch.cuda.get_device_name()
    assert all(r.source == "measured" and r.seconds > 0 for r in profile.rows)
    assert sum(r.share for r in profile.rows) == pytest.approx(1.0)


@pytest.fixture
def counting_silu():
    """A registered kernel that counts its launches (removed again: the registry is global)."""
    from hoid.kernels import KernelSpec, op_pattern, register
    from hoid.kernels.registry import _KERNELS

    launches = []

    def launch(x, out):
        launches.append(x.shape)
        out.copy_(torch.nn.functional.silu(x))

    spec = register(KernelSpec("test.counting_silu", op_pattern("silu"), "torch", launch))
    yield spec, launches
    _KERNELS.pop(spec.id)


def test_measured_profile_launches_a_kernel_nodes_implementation(counting_silu):
    spec, launches = counting_silu
    b = GraphBuilder("k")
    x = b.input("x", (8, 64), "f32")
    body = spec.pattern.graph([x.type])
    g = b.build(b.kernel(x, body=body, kernel=spec.id, version=spec.version, name="k"))
    profile = profile_graph(g, mode="measured", device=calibrate_cpu(), **FAST)
    assert launches and all(shape == (8, 64) for shape in launches)
    assert [(r.node, r.kernel, r.timed) for r in profile.rows] == [("%k", spec.id, "kernel")]


def test_measured_profile_draws_positions_inside_a_short_cache():
    """A cache of 4 slots indexed by a position input: drawn positions stay inside it (a draw in [0, 16)
    once crashed profiling, and so hoid.optimize, on caches shorter than 16)."""
    b = GraphBuilder("append")
    cache, pos, row = b.input("cache", (4, 8), "f32"), b.input("pos", (1,), "i64"), b.input("row", (1, 8), "f32")
    graph = b.build(b.op("index_copy", cache, pos, row, dim=0))
    profile = profile_graph(graph, mode="measured", device=calibrate_cpu(), **FAST)
    assert [r.op for r in profile.rows] == ["index_copy"] and profile.rows[0].seconds > 0


def test_kernels_that_overlap_the_step_are_said_to_overlap_not_a_negative_gap():
    from hoid.measure.profile import Profile

    # the H200 decode step: 1.40 ms replayed, its kernels' durations summing to 1.98 ms (PDL waits inside)
    overlapping = Profile("step", "H200", "in-context", (), step=1.40e-3, kernels=1.98e-3).table()
    assert "overlapping by 580 µs" in overlapping and "gaps" not in overlapping
    assert "gaps 100 µs" in Profile("step", "H200", "in-context", (), step=1.1e-3, kernels=1.0e-3).table()


def test_a_measured_profile_keeps_only_what_the_nodes_it_times_read(monkeypatch):
    """Each signature's first node is timed on the run's real values; the run kept every value for it, 50 GB
    of an H100 for a 3 GB BGE-M3 batch (12-05). After the run, of the values the graph computes only the
    inputs of the nodes to be timed are held (and the output)."""
    import weakref

    from hoid.ir import interpreter
    from hoid.measure import profile as profile_module

    b = GraphBuilder("layers")
    h = b.input("x", (16, 256), "f32")
    for layer in range(4):
        h = b.silu(b.matmul(h, b.weight(f"w{layer}", (256, 256), "f32"), name=f"proj{layer}"), name=f"act{layer}")
    graph = b.build(h)
    refs: dict[str, weakref.ref] = {}
    real_run = interpreter.run

    def run(g, *inputs, on_node=None, **kw):
        def watch(node, outs):
            on_node(node, outs)
            refs.update((v.name, weakref.ref(t)) for v, t in zip(node.outputs, outs, strict=True))
        out = real_run(g, *inputs, on_node=watch, **kw)
        alive = {name for name, ref in refs.items() if ref() is not None}
        # proj0 reads x (an input), act0 reads proj0's output: of the computed values only that one and the
        # graph's output (held by `out`) outlive the run
        assert alive == {graph.nodes[0].outputs[0].name, graph.outputs[0].name}, alive
        return out

    monkeypatch.setattr(profile_module, "run", run)
    profile = profile_graph(graph, mode="measured", device=calibrate_cpu(), **FAST)
    assert len(profile.rows) == 8

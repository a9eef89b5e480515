"""hoid.export: the package of each tiny zoo graph (rewritten, with kernel nodes), run in a fresh process
where `import hoid` fails, matches hoid.compile eager, under torch.compile(fullgraph=True) and under
torch.export; its kernels are torch ops of its own namespace; a device it does not build for is refused."""

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import hoid
from hoid.models import NAMES
from hoid.verify.compare import compare_output
from hoid.verify.tolerance import tolerance_for

from .frees import assert_frees_as_it_goes

WORKER = Path(__file__).with_name("export_worker.py")
TINY = [n for n in NAMES if n.endswith("-tiny")]


def _rewritten(name, dtype=torch.float32):
    from hoid.models import build_model, decode_step_graph

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = decode_step_graph(build_model(name, dtype=dtype), 16)
    return hoid.search.rewrite(step, device="h200", kernels=hoid.kernels.KernelSet.default().runnable_here())


def _rewritten_prompt(name, tokens=12):
    """A prompt's graph: the tiny MoE's holds `triton.moe_experts_grouped`, whose module imports other kernels'."""
    from hoid.models import build_model, prefill_graph

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = prefill_graph(build_model(name), tokens, 16)
    return hoid.search.rewrite(graph, device="h200", kernels=hoid.kernels.KernelSet.default().runnable_here())


def _inputs(graph):
    g = torch.Generator().manual_seed(0)
    states = [torch.randn(v.type.shape, generator=g).to(v.type.torch_dtype) for v in graph.inputs_of_kind("state")]
    shape = graph.inputs_of_kind("input")[0].type.shape  # a step's one token ([[7]]), or a prompt's
    tokens = ((torch.arange(1, shape[-1] + 1) * 7) % 64).reshape(shape)
    return [tokens, torch.tensor([5 if shape[-1] == 1 else 0]), *states]


def _run_fresh(tmp_path, jobs: list[dict]) -> list[dict]:
    """Run the packages of `jobs` (package, inputs, backend) in one fresh process, where hoid is blocked;
    their outputs, in order."""
    for i, job in enumerate(jobs):
        torch.save(job["inputs"], tmp_path / f"inputs{i}.pt")
    (tmp_path / "jobs.json").write_text(json.dumps([
        {"parent": str(job["package"].parent), "name": job["package"].name, "inputs": str(tmp_path / f"inputs{i}.pt"),
         "outputs": str(tmp_path / f"outputs{i}.pt"), "backend": job["backend"], "build": job.get("build", False)}
        for i, job in enumerate(jobs)]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, str(WORKER), str(tmp_path / "jobs.json")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [torch.load(tmp_path / f"outputs{i}.pt") for i in range(len(jobs))]


# inductor (C++ codegen on the CPU) for one model, aot_eager (functionalization and the fakes, no codegen)
# for the others: each inductor build costs a minute on the shared CPU. All the packages run in one fresh
# process (export_worker.py): a process each imported torch and warmed torch.compile up five times (the four
# aot_eager packages: 23 s in five processes, 14 s in one)
def test_exported_packages_match_the_compiled_graphs_without_hoid(tmp_path):
    jobs = []
    # the tiny models in float32, the MoE in float16 too (only a 16-bit router is `triton.moe_router`'s), and the
    # MoE's prompt (its experts are `triton.moe_experts_grouped`, whose module imports another kernel's module)
    for name, dtype in [*((n, torch.float32) for n in TINY), ("qwen3-30b-a3b-tiny", torch.float16),
                        ("qwen3-30b-a3b-tiny-prompt", None)]:
        graph = _rewritten(name, dtype) if dtype else _rewritten_prompt(name.removesuffix("-prompt"))
        assert "kernel" in graph.op_counts(), name
        if dtype is None:
            assert any(n.attrs.get("kernel") == "triton.moe_experts_grouped" for n in graph.nodes), name
        if dtype == torch.float16:
            assert any(n.attrs.get("kernel") == "triton.moe_router" for n in graph.nodes), name
            name += "-f16"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CuTe nodes run their bodies on the CPU, here as in hoid.compile
            package = hoid.export(graph, tmp_path / ("pkg_" + re.sub(r"\W", "_", name)))
            compiled = hoid.compile(graph, device="cpu")
        source = (package / "model.py").read_text() + (package / "ops.py").read_text()
        assert_frees_as_it_goes((package / "model.py").read_text(), "forward")
        assert "hoid" not in source.replace("hoid.export", "").replace(json.loads(
            (package / "meta.json").read_text())["namespace"], ""), name
        inputs = _inputs(graph)
        ref = compiled(*[t.clone() for t in inputs])
        backend = "inductor" if name == TINY[0] else "aot_eager"
        jobs.append({"name": name, "package": package, "inputs": inputs, "ref": ref, "backend": backend})
    for job, got in zip(jobs, _run_fresh(tmp_path, jobs), strict=True):
        name, ref = job["name"], job["ref"]
        assert not got["hoid_loaded"], name
        assert got["custom_ops"], f"{name}: the kernels appear as the package's own torch ops in the exported program"
        # Inductor meets each opaque op registered already (the fallback it would make), never as an unknown
        # op whose every input's IR it stringifies for a log line: minutes on Whisper's encoder (torch 2.11)
        assert not got["implicit_fallbacks"], f"{name}: {got['implicit_fallbacks'][:3]}"
        for how in ("eager", "compiled", "exported"):
            assert len(got[how]) == len(ref), (name, how)
            for k, (a, b) in enumerate(zip(got[how], ref)):
                assert compare_output(k, a, b, tolerance_for(b.dtype)) is None, f"{name} {how}: output {k}"


def test_package_refuses_a_device_its_kernels_do_not_build_for(tmp_path, monkeypatch):
    graph = _rewritten(TINY[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        package = hoid.export(graph, tmp_path / "pkg_arch")
    meta = json.loads((package / "meta.json").read_text())
    assert meta["arch"] == "sm_90" and "sm_90" in meta["archs"]
    sys.path.insert(0, str(tmp_path))
    try:
        import pkg_arch

        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "A100")
        with pytest.raises(pkg_arch.UnsupportedDeviceError, match="sm_80"):
            pkg_arch.check_device(torch.device("cuda", 0))
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        with pytest.raises(pkg_arch.UnsupportedDeviceError, match="TRITON_INTERPRET"):
            pkg_arch.check_device("cpu")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("pkg_arch", None)


def test_cute_kernels_are_exported_as_opaque_ops_that_need_a_gpu_and_cute_dsl(tmp_path):
    from hoid.models import build_model, decode_step_graph

    # the H200's prices pick CuTe's GEMV for the tiny model's gate/up; on this CPU it cannot run
    graph = hoid.search.rewrite(decode_step_graph(build_model(TINY[0]), 16), device="h200",
                                kernels=hoid.kernels.KernelSet.default())
    cute = {n.attrs["kernel"] for n in graph.nodes if n.op == "kernel" and n.attrs["kernel"].startswith("cute.")}
    assert cute, "the H200's prices choose a CuTe kernel for the tiny model"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        package = hoid.export(graph, tmp_path / "pkg_cute")
    assert not [w for w in caught if "cute." in str(w.message)], "a CuTe node fell back to its body"
    meta = json.loads((package / "meta.json").read_text())
    assert set(meta["cute"]) == cute and not meta["fallbacks"]
    # the ops whose body launches a CuTe kernel: custom_ops (opaque), never triton_ops
    cute_ops = re.findall(r"@_op\('(k\d+)', mutates_args=\(\), traceable=(\w+)\)\ndef \w+\([^)]*\)[^\n]*\n"
                          r"(?:    [^\n]*\n)*?    cute_gemv\.launch", (package / "ops.py").read_text())
    assert cute_ops and all(traceable == "False" for _, traceable in cute_ops)
    from hoid.kernels.library._cute_compile import have_cute

    build = have_cute() or os.environ.get("HOID_REQUIRE_CUTE") == "1"  # CI has CuTe DSL: the build runs there
    [got] = _run_fresh(tmp_path, [{"package": package, "inputs": _inputs(graph), "backend": "--cute", "build": build}])
    assert not got["hoid_loaded"] and not got["cutlass_loaded"], "importing and tracing the package builds nothing"
    assert "CUDA GPU only" in got["said"]["cpu"] and "kernels=" in got["said"]["cpu"]
    assert "pip install nvidia-cutlass-dsl" in got["said"]["no_cute_dsl"]
    # the copy's CuTe code builds outside hoid (its @cute.jit annotations resolve where they were written)
    assert not build or got["built"], "no CuTe launch of the package was built"
    # torch.export sees each CuTe kernel through its fake, as an op of the package's namespace
    assert {f"{meta['namespace']}.{name}.default" for name, _ in cute_ops} <= set(got["custom_ops"])
    # a package for machines without CuTe DSL: its CuTe nodes run their bodies, which META says
    with pytest.warns(UserWarning, match="cute"):
        plain = hoid.export(graph, tmp_path / "pkg_plain", kernels=hoid.kernels.KernelSet.default().runnable_here())
    meta = json.loads((plain / "meta.json").read_text())
    assert not meta["cute"] and len(meta["fallbacks"]) == sum(
        n.op == "kernel" and n.attrs["kernel"].startswith("cute.") for n in graph.nodes)


def test_export_refuses_a_directory_that_cannot_be_imported(tmp_path):
    with pytest.raises(hoid.ExportError, match="identifier"):
        hoid.export(_small_graph(), tmp_path / "not-a-name")


def _small_graph():
    b = hoid.GraphBuilder("small")
    x = b.input("x", (2, 4), "f32")
    return b.build(b.op("relu", x))


def test_trace_triton_false_makes_every_triton_kernel_an_opaque_op(tmp_path):
    """Traced, torch.compile lowers every Triton call site to TTIR (its mutation analysis): a whole model's
    warm-up passed 164 s on the H200. Opaque, it sees each kernel through its fake."""
    graph = _rewritten(TINY[0])
    assert any(n.attrs["kernel"].startswith("triton.") for n in graph.nodes if n.op == "kernel")
    traced = (hoid.export(graph, tmp_path / "traced_pkg") / "ops.py").read_text()
    opaque_pkg = hoid.export(graph, tmp_path / "opaque_pkg", trace_triton=False)
    opaque = (opaque_pkg / "ops.py").read_text()
    assert "traceable=True" in traced and "traceable=True" not in opaque
    assert opaque.count("@_op(") == traced.count("@_op(")  # the same kernels, only how torch sees them differs
    assert json.loads((opaque_pkg / "meta.json").read_text())["trace_triton"] is False


def test_a_kernel_with_a_workspace_exports_and_runs_without_hoid(tmp_path):
    """A ResNet block's group norm + SiLU as `triton.group_norm_silu`, whose launch takes a workspace (its rows'
    chunk statistics): the package holds the kernel's module, plans the buffer, and matches hoid.compile
    eager, compiled and exported, where hoid cannot be imported."""
    from hoid.kernels import KernelSet, all_kernels
    from hoid.search.cost import AnalyticCost, MeasuredCost

    g = torch.Generator().manual_seed(0)
    b = hoid.GraphBuilder("resnet_norm")
    x = b.input("x", (2, 8, 6, 6), "f32")
    weight, bias = (b.weight(n, (8,), "f32", torch.randn(8, generator=g)) for n in ("w", "b"))
    graph = b.build(b.silu(b.group_norm(x, weight, bias, num_groups=4, eps=1e-5)))
    cheap_kernels = MeasuredCost(lambda call: 1e-9 if call.op == "kernel" else None, fallback=AnalyticCost())
    kernels = KernelSet.empty().with_library(all_kernels()["triton.group_norm_silu"])
    graph = hoid.search.rewrite(graph, device="h200", kernels=kernels, cost=cheap_kernels)
    assert [n.attrs["kernel"] for n in graph.nodes if n.op == "kernel"] == ["triton.group_norm_silu"]
    package = hoid.export(graph, tmp_path / "group_norm_pkg")
    inputs = [torch.randn(2, 8, 6, 6, generator=g)]
    ref = hoid.compile(graph, device="cpu")(*[t.clone() for t in inputs])
    (got,) = _run_fresh(tmp_path, [{"package": package, "inputs": inputs, "backend": "aot_eager"}])
    assert not got["hoid_loaded"] and got["custom_ops"]
    for how in ("eager", "compiled", "exported"):
        torch.testing.assert_close(got[how][0], ref[0], rtol=1e-5, atol=1e-5)

"""The directory proposer and the file-boundary commands, on a tiny f32 decode layer (CPU, Triton's
interpreter): the example kernels of examples/kernels with their regions cut from that layer."""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path

import pytest

import hoid
from hoid.agent import Journal, optimize
from hoid.agent.dir_proposer import KernelDirError, load_kernels
from hoid.cli import main
from hoid.ir import GraphBuilder
from hoid.models.examples import decode_layer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernels"
MAKE = runpy.run_path(str(EXAMPLES / "make_regions.py"))

pytestmark = pytest.mark.slow


def _folder(root: Path, name: str, region, kernel: Path) -> None:
    (root / name).mkdir(parents=True)
    shutil.copy(kernel, root / name / "kernel.py")
    hoid.save(region, root / name / "region.hoid")


def _off_graph_kernels(root: Path, kernel: Path) -> None:
    """Two kernel folders whose regions the layer lacks: one cut from a wider layer (it matches, at the layer's
    types, which its kernel does not claim), one of an op the layer has none of."""
    wider = MAKE["regions"](decode_layer(**{**MAKE["SMALL"], "hidden": 96}))["rmsnorm_gate_up_silu"]
    _folder(root, "elsewhere", wider, kernel)
    b = GraphBuilder("nowhere")
    _folder(root, "nowhere", b.build(b.exp(b.input("x", (1, 1, 64), "f32"))), kernel)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A saved tiny decode layer, the example kernels with their regions cut from it, and one loop run over
    all of them and two kernels whose regions the layer lacks (its journal)."""
    root = tmp_path_factory.mktemp("dir")
    graph = decode_layer(**MAKE["SMALL"])
    hoid.save(graph, root / "layer.hoid")
    MAKE["write"](root / "all", graph, copy_kernels=True)
    shutil.copytree(root / "all", root / "run")
    _off_graph_kernels(root / "run", root / "all" / "rmsnorm_gate_up_silu" / "kernel.py")
    mp = pytest.MonkeyPatch()
    mp.setenv("HOID_CACHE", str(root / "cache.sqlite"))
    opt = optimize(graph, agent=f"dir:{root / 'run'}", device="cpu", journal=root / "journal.sqlite", store=False,
                   rules=True, trials=4)
    mp.undo()
    return root, opt


def _rows(root: Path, opt) -> list[dict]:
    with Journal(root / "journal.sqlite") as journal:
        return journal.attempts(opt.report.run)


def test_every_example_kernel_reaches_a_verdict_at_its_region(small):
    root, opt = small
    rows = _rows(root, opt)
    shipped = sorted(p.name for p in EXAMPLES.iterdir() if (p / "kernel.py").is_file())
    assert len(shipped) >= 5 and "qkv_norm_rope_cache" in shipped
    for name in shipped:  # checked (and, when it passed, measured and tried in the whole graph) at its region
        row = next((r for r in rows if r["kernel"] == f"dir.{name}"), None)
        assert row is not None, f"dir.{name} never matched: {[r['why'] for r in rows if name in r['region']]}"
        assert row["verdict"] in ("passed", "rejected") and row["region"].startswith(f"region:dir.{name}(")
        assert row["why"] and (row["verdict"] == "rejected" or row["kernel_evidence"] == "measured")
    # the multi-output prelude (q rotated, k and v appended: no output reaches every input) was matched and
    # injected as the library's fused preludes are, and passed its check
    qkv = next(r for r in rows if r["kernel"] == "dir.qkv_norm_rope_cache")
    assert qkv["verdict"] == "passed" and qkv["kernel_s"] > 0


def test_a_kernel_whose_region_is_not_in_the_graph_is_reported_with_the_reason(small):
    root, opt = small
    skipped = {r["region"].split(" for ")[0]: r["why"] for r in _rows(root, opt) if r["verdict"] == "skipped"}
    assert set(skipped) == {"dir.elsewhere", "dir.nowhere"}
    assert skipped["dir.nowhere"].startswith("its region never matched") and "no exp node" in skipped["dir.nowhere"]
    assert "where the kernel does not apply: the region's own input types (f32[1,1,96]" in skipped["dir.elsewhere"]
    text = str(opt.report)
    assert "## skipped: 2" in text and "dir.nowhere" in text and "hoid regions FILE --cut" in text


def test_wrong_kernel_rejected_with_counterexample_and_slow_one_discarded(small):
    root, opt = small
    rows = {a["kernel"]: a for a in _rows(root, opt)}
    wrong, slow = rows["dir.wrong_rmsnorm_gate_up_silu"], rows["dir.slow_rmsnorm_gate_up_silu"]
    assert wrong["verdict"] == "rejected" and not wrong["kept"]
    assert "differs from the reference" in wrong["verdict_reason"] and "worst output" in wrong["verdict_reason"]
    assert "replay with seed=" in wrong["verdict_reason"]  # the counterexample can be replayed
    assert wrong["source"].count("eps dropped") == 1  # the journal holds the source that was checked
    assert slow["verdict"] == "passed" and not slow["kept"]
    assert slow["kernel_evidence"] == "measured"  # timed on the CPU, then discarded on that time: by the
    # extraction, which its measured price keeps out of every finalist, or by the whole graph's measurement
    assert slow["why"].startswith("no finalist uses it") or (
        slow["graph_s"] is not None and slow["why"].startswith("whole graph") and "(measured)" in slow["why"])
    assert not any(n.op == "kernel" and n.attrs["kernel"] == "dir.slow_rmsnorm_gate_up_silu" for n in opt.graph.nodes)


def test_every_example_kernel_loads_and_its_region_occurs_in_the_layer(small):
    root, _ = small
    kernels = load_kernels(root / "all")
    assert len(kernels) >= 5 and {k.id for k in kernels} >= {"dir.qkv_norm_rope_cache", "dir.oproj_residual_rmsnorm"}
    qkv = next(k for k in kernels if k.id == "dir.qkv_norm_rope_cache").spec()
    assert qkv.aliases == ((1, 8), (2, 10))  # the cache appends are in place, inferred from index_copy
    shipped = load_kernels(EXAMPLES) + load_kernels(EXAMPLES / "halves")  # the shipped ones: bf16, Qwen3-1.7B's
    assert {str(gi.value.type) for k in shipped for gi in k.region.inputs} >= {"bf16[6144,2048]"}
    # meta.json's "pdl": the halves launch inside the runtime's PDL chain (at each of their regions), the
    # others break it; a region of regions/ is a kernel of its own, labelled
    assert {k.id for k in shipped if k.spec().pdl} == {f"dir.{h}{m}" for h in ("attention_half", "mlp_half")
                                                         for m in ("", "@qwen3-4b", "@llama-3.2-1b", "@llama-3.1-8b")
                                                         } - {"dir.attention_half@llama-3.1-8b"}
    four_b = next(k for k in shipped if k.id == "dir.mlp_half@qwen3-4b")
    assert four_b.label == "qwen3-4b" and str(four_b.region.inputs[0].value.type) == "bf16[1,1,2560]"
    # regions/LABEL.json: a region's constant given to the launch, one value, never tuned (Llama's eps)
    llama = next(k for k in shipped if k.id == "dir.mlp_half@llama-3.1-8b").spec()
    assert [(p.name, p.choices) for p in llama.params if p.name == "EPS"] == [("EPS", (1e-5,))]
    assert "EPS" not in {p.name for p in four_b.spec().params}
    # ... and the entry that takes a region's inputs: Llama's attention has no q/k norm weights
    llama_attention = next(k for k in shipped if k.id == "dir.attention_half@llama-3.2-1b")
    assert llama_attention.source.entry == "launch_no_qk_norm" and len(llama_attention.region.inputs) == 12


def test_a_region_params_file_that_is_wrong_or_clashes_is_one_clear_error(tmp_path):
    shutil.copytree(EXAMPLES / "halves" / "mlp_half", tmp_path / "k")
    sidecar = tmp_path / "k" / "regions" / "qwen3-4b.json"
    sidecar.write_text('{"params": {"EPS": [1e-5]}}')
    with pytest.raises(KernelDirError, match="launch keywords of one"):
        load_kernels(tmp_path)
    sidecar.write_text('{"params": {"BLOCK_I": 32}}')  # PARAMS tunes it: fixing it too is refused
    with pytest.raises(KernelDirError, match="BLOCK_I fixed for its region, but tuned"):
        [k.spec() for k in load_kernels(tmp_path)]


def test_a_meta_pdl_that_is_not_a_bool_is_one_clear_error(tmp_path):
    shutil.copytree(EXAMPLES / "halves" / "mlp_half", tmp_path / "k")
    (tmp_path / "k" / "meta.json").write_text('{"pdl": "yes"}')
    with pytest.raises(KernelDirError, match='"pdl" must be true or false'):
        load_kernels(tmp_path)


# the tiny Llama has one KV head: its step imports without the GQA form of attention (enable_gqa) that the
# regions, cut for Llama-3.2-1B's eight, hold; test_every_shipped_region_applies_... finds them at full size
@pytest.mark.parametrize("model, halves", [("qwen3-1.7b-tiny", ("attention_half", "mlp_half")),
                                           ("llama-3.2-1b-tiny", ("mlp_half",))])
def test_the_layer_halves_are_found_and_pass_in_an_imported_decode_step(model, halves, tmp_path, monkeypatch):
    """The one-launch halves, their regions cut from decode_layer at a tiny model's sizes (for a Llama: its eps,
    1e-5, and no q/k norms, told to the launch by regions/LABEL.json as the shipped Llama regions are), are
    found in that model's decode step as `hoid.from_torch` imports it (after the rule sets: the regions are
    the import's, not only the example's), and pass their checks there (the attention half's three phases,
    which a GPU runs between grid barriers, as three launches under the interpreter)."""
    import json

    from hoid.models.configs import build_model
    from hoid.models.llm import decode_step_graph

    lm, sizes = build_model(model), MAKE["model_sizes"](model)
    layer = decode_layer(**sizes, cache_len=32, dtype="f32")
    other = "llama-3.2-1b" if model.startswith("qwen3") else "qwen3-4b"  # the other family's: another eps
    for name, body in MAKE["regions"](layer, halves).items():  # as make_regions.py writes regions/MODEL.*
        (tmp_path / "halves" / name / "regions").mkdir(parents=True)
        for shipped in ("kernel.py", "region.hoid", "meta.json"):  # its region.hoid: Qwen3-1.7B's, not found
            shutil.copy(EXAMPLES / MAKE["folder"](name) / shipped, tmp_path / "halves" / name)
        for shipped in (EXAMPLES / MAKE["folder"](name) / "regions").glob(f"{other}.*"):
            shutil.copy(shipped, tmp_path / "halves" / name / "regions")
        hoid.save(body, tmp_path / "halves" / name / "regions" / "tiny.hoid")
        if differs := MAKE["overrides"](name, sizes):
            (tmp_path / "halves" / name / "regions" / "tiny.json").write_text(json.dumps(differs))
    monkeypatch.setenv("HOID_CACHE", str(tmp_path / "cache.sqlite"))
    opt = optimize(decode_step_graph(lm, 32), agent=f"dir:{tmp_path / 'halves'}", device="cpu",
                   journal=tmp_path / "journal.sqlite", store=False, rules=True, trials=2)
    rows = [r for r in _rows(tmp_path, opt) if r["verdict"] != "skipped"]
    assert sorted(r["kernel"] for r in rows) == [f"dir.{h}@tiny" for h in halves], opt.report
    # a region of regions/ for another model's graph is skipped saying so, not with advice to cut it again
    skipped = {r["region"].split(" for ")[0]: r["why"] for r in _rows(tmp_path, opt) if r["verdict"] == "skipped"}
    assert all(f"it is written for {other}'s graph" in skipped[f"dir.{h}@{other}"] for h in halves), skipped
    assert all(r["verdict"] == "passed" and r["kernel_evidence"] == "measured" for r in rows), rows


@pytest.mark.parametrize("model, layers", [("qwen3-1.7b", 28), ("qwen3-4b", 36), ("llama-3.2-1b", 16),
                                           ("llama-3.1-8b", 32)])
def test_every_shipped_region_applies_in_the_decode_benchmarks_step(model, layers):
    """The shipped regions (bf16, cache 384: region.hoid at Qwen3-1.7B's sizes, regions/MODEL.hoid at another
    model's) are found in `benchmarks/decode.py MODEL`'s step (prompt 128 + 256 new tokens), at types their
    kernels take, in each of its layers: a region that differs from the import in a type or an attr (the
    cache's length, the attention's scale, an eps) never matches."""
    import torch

    from hoid.agent.dir_proposer import DirectoryProposer
    from hoid.agent.regions import discover
    from hoid.measure.devices import get_device
    from hoid.models.configs import build_model
    from hoid.models.llm import decode_step_graph
    from hoid.search.rules import default_rulesets
    from hoid.search.space import SearchSpace

    step = decode_step_graph(build_model(model, dtype=torch.bfloat16, device="meta"), 384)
    h200 = get_device("h200")
    space = SearchSpace(step, target=h200.target())
    space.saturate(default_rulesets())
    proposers = [DirectoryProposer(EXAMPLES), DirectoryProposer(EXAMPLES / "halves")]
    specs = {s.pattern.name: s for p in proposers for s in p.region_specs()}
    applies = {r.pattern: r.matches for r in discover(space, list(specs.values()), h200, measured=False)
               if specs[r.pattern].rejects(list(r.types), r.attrs) is None}
    label = None if model == "qwen3-1.7b" else model
    expected = {f"region:{k.id}": layers for p in proposers for k in p.kernels if k.label == label}
    assert expected and applies == expected, applies


@pytest.mark.parametrize("name, entry", [("attention_half", "launch"), ("attention_half", "launch_no_qk_norm"),
                                         ("mlp_half", "launch")])
def test_a_half_leaves_its_workspace_zero_for_the_next_launch(name, entry):
    """The halves clear no workspace at launch (in a CUDA graph that memset would break the PDL chain): each
    launch must leave its sums and counters zero, or the next one starts from its leftovers. (And each entry
    computes its region: Llama's attention, without q/k norms, through `launch_no_qk_norm`.)"""
    import sys

    import torch

    from hoid.kernels.loader import KernelSource, load_entry

    layer = decode_layer(**MAKE["SMALL"], qk_norm=entry != "launch_no_qk_norm")
    region = MAKE["regions"](layer, MAKE["HALVES"])[name]
    source = KernelSource.from_file(EXAMPLES / MAKE["folder"](name) / "kernel.py", entry)
    launch = load_entry(source)
    workspaces = sys.modules[f"hoid_kernel_{source.version}"]._WORKSPACE
    gen = torch.Generator().manual_seed(0)
    inputs = []
    for gi in region.inputs:
        shape = tuple(gi.value.type.shape)
        kind = gi.value.type.dtype
        inputs.append(torch.tensor([5]) if kind == "i64" else torch.arange(shape[-1]).reshape(shape) < 9
                      if kind == "bool" else torch.randn(shape, generator=gen))
    expected = hoid.run(region, *[t.clone() for t in inputs])
    for _ in range(2):
        outs = [torch.empty(tuple(v.type.shape)) for v in region.outputs]
        launch(*[t.clone() for t in inputs], *outs)
        for got, want in zip(outs, expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert workspaces and all(not ws.any() for ws in workspaces.values())


def test_a_folder_without_its_region_is_one_clear_error(tmp_path):
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "kernel.py").write_text("def launch(x, out):\n    out.copy_(x)\n")
    with pytest.raises(KernelDirError, match="region.hoid"):
        load_kernels(tmp_path)
    assert main(["optimize", str(tmp_path / "missing.hoid"), "--agent", f"dir:{tmp_path}"]) == 2


def test_cli_show_regions_cut(small, capsys):
    root, _ = small
    assert main(["show", str(root / "layer.hoid")]) == 0
    out = capsys.readouterr().out
    assert "37 nodes" in out and "state updates" in out and "rmsnorm x4" in out
    cut = root / "cut.hoid"
    assert main(["regions", str(root / "layer.hoid"), "--cut", ",".join(MAKE["CUTS"]["rmsnorm_gate_up_silu"]),
                 "--out", str(cut)]) == 0
    assert hoid.dumps(hoid.load(cut)) == (root / "all" / "rmsnorm_gate_up_silu" / "region.hoid").read_text()
    assert main(["regions", str(root / "layer.hoid"), "--cut", "t999"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hoid: ") and err.count("\n") == 1 and "t999" in err


def test_cli_regions_ranked(small, capsys):
    root, _ = small
    assert main(["regions", str(root / "layer.hoid"), "--device", "h200"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line[:4].strip().rstrip(".").isdigit()]
    shares = [float(line.split("%")[0].split()[-1]) for line in lines]
    assert len(lines) > 5 and shares == sorted(shares, reverse=True) and "modelled" in lines[0]
    assert main(["regions", str(root / "layer.hoid"), "--device", "h200", "--show", "1"]) == 0
    assert capsys.readouterr().out.startswith("hoid 1\ngraph @")


def test_cli_propose_correct_and_wrong(small, capsys, monkeypatch):
    root, _ = small
    monkeypatch.setenv("HOID_CACHE", str(root / "cache.sqlite"))
    slow = root / "all" / "slow_rmsnorm_gate_up_silu"
    args = ["propose", str(root / "layer.hoid"), "--device", "cpu", "--trials", "4", "--region"]
    assert main(args + [str(slow / "region.hoid"), "--kernel", str(slow / "kernel.py")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("passed: dir.slow_rmsnorm_gate_up_silu") and "region now" in out and "floor" in out
    assert "(measured" in out
    wrong = root / "all" / "wrong_rmsnorm_gate_up_silu"
    assert main(args + [str(wrong / "region.hoid"), "--kernel", str(wrong / "kernel.py")]) == 3
    out = capsys.readouterr().out
    assert out.startswith("rejected: dir.wrong_rmsnorm_gate_up_silu") and "worst output" in out
    other = root / "all" / "oproj_residual_rmsnorm" / "region.hoid"  # a region this kernel does not take
    assert main(args + [str(other), "--kernel", str(wrong / "kernel.py")]) == 3


def test_cli_propose_without_the_sweep_measures_the_defaults_alone(small, capsys, monkeypatch):
    import runpy

    from hoid.agent.executor import LocalExecutor

    root, _ = small
    monkeypatch.setenv("HOID_CACHE", str(root / "cache.sqlite"))
    swept = []
    measure = LocalExecutor.measure_kernel

    def counting(self, spec, region, sweep):
        swept.append(list(sweep))
        return measure(self, spec, region, sweep)

    monkeypatch.setattr(LocalExecutor, "measure_kernel", counting)
    fused = root / "all" / "rmsnorm_gate_up_silu"  # PARAMS of several values: its sweep would be several sets
    args = ["propose", str(root / "layer.hoid"), "--device", "cpu", "--trials", "4", "--region",
            str(fused / "region.hoid"), "--kernel", str(fused / "kernel.py"), "--no-sweep"]
    assert main(args) == 0
    declared = runpy.run_path(str(fused / "kernel.py"))["PARAMS"]
    assert max(len(v) for v in declared.values()) > 1
    assert swept == [[{name: values[0] for name, values in declared.items()}]], swept  # the defaults alone
    assert "passed: dir.rmsnorm_gate_up_silu" in capsys.readouterr().out


def test_cli_report_writes_markdown_and_png(small, capsys):
    root, opt = small
    md = root / "report.md"
    assert main(["report", str(root / "journal.sqlite"), "--out", str(md)]) == 0
    text = md.read_text()
    assert "dir.wrong_rmsnorm_gate_up_silu" in text and "rejected" in text and "report.png" in text
    png = md.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert main(["report", str(root / "nothing.sqlite")]) == 2


def test_cli_optimize_keeps_the_fused_prelude_on_a_modelled_h200_and_says_what_it_skipped(small, capsys, monkeypatch):
    root, _ = small
    monkeypatch.setenv("HOID_CACHE", str(root / "cli-cache.sqlite"))
    monkeypatch.setenv("HOID_KERNELS", str(root / "cli-kernels.sqlite"))
    folder = root / "prelude"
    shutil.copytree(root / "all" / "qkv_norm_rope_cache", folder / "qkv_norm_rope_cache")
    shutil.copytree(root / "run" / "nowhere", folder / "nowhere")
    assert main(["optimize", str(root / "layer.hoid"), "--agent", f"dir:{folder}", "--device", "h200",
                 "--journal", str(root / "cli.sqlite")]) == 0
    out, err = capsys.readouterr()
    # its three outputs matched together, injected at the layer's prelude, and cheaper on the H200's model
    assert "[kept] dir:" in out and "dir.qkv_norm_rope_cache for region:dir.qkv_norm_rope_cache(" in out
    assert "(modelled: provisional, not stored)" in out and "dir.qkv_norm_rope_cache {" in out
    assert "## skipped: 1" in out and "dir.nowhere for region:dir.nowhere: its region never matched" in out
    assert "skipped dir.nowhere" in err and "kept" in err

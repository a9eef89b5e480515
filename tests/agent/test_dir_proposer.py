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
from hoid.models.examples import decode_layer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernels"
MAKE = runpy.run_path(str(EXAMPLES / "make_regions.py"))

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A saved tiny decode layer, the example kernels with their regions cut from it, and one loop run over
    the wrong and the slow kernel (its journal)."""
    root = tmp_path_factory.mktemp("dir")
    graph = decode_layer(**MAKE["SMALL"])
    hoid.save(graph, root / "layer.hoid")
    MAKE["write"](root / "all", graph, copy_kernels=True)
    pair = root / "pair"
    for name in ("wrong_rmsnorm_gate_up_silu", "slow_rmsnorm_gate_up_silu"):
        shutil.copytree(root / "all" / name, pair / name)
    mp = pytest.MonkeyPatch()
    mp.setenv("HOID_CACHE", str(root / "cache.sqlite"))
    opt = optimize(graph, agent=f"dir:{pair}", device="cpu", journal=root / "journal.sqlite", store=False, rules=True,
                   trials=4)
    mp.undo()
    return root, opt


def test_wrong_kernel_rejected_with_counterexample_and_slow_one_discarded(small):
    root, opt = small
    with Journal(root / "journal.sqlite") as journal:
        rows = {a["kernel"]: a for a in journal.attempts(opt.report.run)}
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
    assert not any(n.op == "kernel" and n.attrs["kernel"].startswith("dir.") for n in opt.graph.nodes)


def test_every_example_kernel_loads_and_its_region_occurs_in_the_layer(small):
    root, _ = small
    kernels = load_kernels(root / "all")
    assert len(kernels) >= 5 and {k.id for k in kernels} >= {"dir.qkv_norm_rope_cache", "dir.oproj_residual_rmsnorm"}
    qkv = next(k for k in kernels if k.id == "dir.qkv_norm_rope_cache").spec()
    assert qkv.aliases == ((1, 8), (2, 10))  # the cache appends are in place, inferred from index_copy
    shipped = load_kernels(EXAMPLES)  # the shipped ones: bf16, Qwen3-1.7B's shapes
    assert {str(gi.value.type) for k in shipped for gi in k.region.inputs} >= {"bf16[6144,2048]"}


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


def test_cli_report_writes_markdown_and_png(small, capsys):
    root, opt = small
    md = root / "report.md"
    assert main(["report", str(root / "journal.sqlite"), "--out", str(md)]) == 0
    text = md.read_text()
    assert "dir.wrong_rmsnorm_gate_up_silu" in text and "rejected" in text and "report.png" in text
    png = md.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert main(["report", str(root / "nothing.sqlite")]) == 2

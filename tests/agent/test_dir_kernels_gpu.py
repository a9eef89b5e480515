"""The example kernels of examples/kernels on the GPU, at the layer they are written for (Qwen3-1.7B's decode
layer in bf16, `hoid.models.examples.decode_layer`): `hoid propose` checks each against its region and
times it. What the interpreter's runs (test_dir_proposer.py) cannot show is checked here: the attention
half's grid-wide barriers (on the CPU its phases are three launches), atomics ordered across SMs, bf16."""

from __future__ import annotations

from pathlib import Path

import pytest

import hoid
from hoid.cli import main
from hoid.models.examples import decode_layer

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernels"
CORRECT = ["attention_half", "mlp_half", "oproj_residual_rmsnorm", "qkv_norm_rope_cache", "rmsnorm_gate_up_silu"]


@pytest.fixture(scope="module")
def layer(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("layer") / "layer.hoid"
    hoid.save(decode_layer(), path)
    return path


def _propose(layer: Path, name: str, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setenv("HOID_CACHE", str(layer.parent / "cache.sqlite"))
    folder = EXAMPLES / name
    code = main(["propose", str(layer), "--region", str(folder / "region.hoid"), "--kernel", str(folder / "kernel.py")])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("name", CORRECT)
def test_example_kernel_passes_its_check_on_the_gpu(layer, name, monkeypatch, capsys):
    code, out = _propose(layer, name, monkeypatch, capsys)
    assert code == 0 and out.startswith(f"passed: dir.{name}") and "(measured" in out, out


def test_the_wrong_kernel_is_rejected_on_the_gpu(layer, monkeypatch, capsys):
    code, out = _propose(layer, "wrong_rmsnorm_gate_up_silu", monkeypatch, capsys)
    assert code == 3 and out.startswith("rejected: dir.wrong_rmsnorm_gate_up_silu") and "worst output" in out, out

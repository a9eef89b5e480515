"""The plain-PyTorch Llama block imports exactly, with its attention, SiLU and matmuls kept whole."""

from __future__ import annotations

import sys

import pytest
import torch

import hoid
from hoid.models import LlamaBlock


@pytest.fixture(scope="module")
def block_and_graph():
    torch.manual_seed(0)
    block = LlamaBlock(hidden=64, heads=4, kv_heads=2, intermediate=128).eval()
    return block, hoid.from_torch(block, (torch.randn(2, 8, 64),))


def test_runs_exactly_like_eager(block_and_graph):
    block, g = block_and_graph
    x = torch.randn(2, 8, 64)
    (y,) = hoid.run(g, x)
    want = block(x)
    assert ((y - want).norm() / want.norm()).item() < 1e-6


def test_keeps_sdpa_silu_and_linear_layers_as_single_nodes(block_and_graph):
    _, g = block_and_graph
    ops = g.op_counts()
    assert ops["sdpa"] == 1 and ops["silu"] == 1 and ops["matmul"] == 7  # q k v o gate up down
    sdpa = next(n for n in g.nodes if n.op == "sdpa")
    assert sdpa.attrs["is_causal"] and sdpa.attrs["enable_gqa"]


def test_is_causal():
    torch.manual_seed(0)
    block = LlamaBlock().eval()
    x = torch.randn(1, 6, 64)
    changed = x.clone()
    changed[:, -1] += 1.0  # the last token cannot influence the earlier ones
    assert torch.allclose(block(x)[:, :-1], block(changed)[:, :-1], atol=1e-6)


def test_bad_head_counts_are_refused():
    with pytest.raises(ValueError, match="kv heads"):
        LlamaBlock(hidden=64, heads=4, kv_heads=3)


def test_importing_the_zoo_does_not_import_transformers():
    import subprocess

    code = "import hoid.models, sys; assert 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)

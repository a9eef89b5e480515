"""Graphs shared by the runtime tests, built once per session (importing a decode step takes seconds)."""

import os

import pytest
import torch

os.environ.setdefault("TRITON_INTERPRET", "1")  # kernel nodes run under the Triton interpreter on the CPU

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

    return hoid.search.rewrite(tiny_step, device="h200")


@pytest.fixture(scope="session")
def wide_step():
    from hoid.models import decode_step_graph

    return decode_step_graph(_full_width_lm(), CACHE)

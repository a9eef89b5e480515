"""A search of N identical decoder layers picks, in each layer, what it picks for one, at the same price:
each added layer adds the same calls (kernel or op, input types, attrs) and the same seconds, measured and
modelled. What keeps these few layers' choice keeps the 28-layer one that benchmarks/search_scaling.py
times (the speed-ups of the search were checked this way, and on 28 layers)."""

import math
from collections import Counter

import pytest
import torch

from hoid.search import search

from .graphs import block

pytest.importorskip("transformers")


def decode_step(layers: int):
    """The Qwen3-1.7B decode step (cache 4096, bf16) at full width, weights on the meta device: the search
    reads shapes only."""
    from transformers import AutoModelForCausalLM

    from hoid.models.configs import config
    from hoid.models.llm import decode_step_graph

    cfg = config("qwen3-1.7b")
    cfg.num_hidden_layers = layers
    with torch.device("meta"):
        lm = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    return decode_step_graph(lm, 4096)


def calls(graph) -> Counter:
    """Each node as what it runs: kernel id or op, input types, attrs (a kernel's without its body)."""
    def attrs(node) -> str:
        shown = {k: v for k, v in node.attrs.items() if k != "body"}
        return repr(sorted(shown.items(), key=lambda item: item[0]))

    return Counter((n.attrs["kernel"] if n.op == "kernel" else n.op, tuple(str(v.type) for v in n.inputs), attrs(n))
                   for n in graph.nodes)


@pytest.fixture(scope="module")
def decode_results():
    return {n: search(decode_step(n), device="h200") for n in (1, 2, 3)}


def test_each_decode_layer_adds_the_same_calls(decode_results):
    found = {n: calls(r.graph) for n, r in decode_results.items()}
    second, third = found[2] - found[1], found[3] - found[2]
    assert second == third
    assert not found[1] - found[2] and not found[2] - found[3]  # a layer more removes nothing
    # either backend (they compete on price), the norm before a GEMV folded in or not
    ops = {name.split(".", 1)[1].removeprefix("rmsnorm_") for name, _, _ in second if "." in name}
    # the prelude and the attention as one kernel, or as two, as the prices decide
    assert "linear_swiglu_merged" in ops
    assert "qk_norm_rope_attention" in ops or {"qk_norm_rope_cache", "decode_attention"} <= ops


def test_each_decode_layer_adds_the_same_price(decode_results):
    for part in ("cost", "measured_seconds", "modelled_seconds"):
        price = {n: getattr(r.report, part) for n, r in decode_results.items()}
        assert math.isclose(price[3] - price[2], price[2] - price[1], rel_tol=1e-9, abs_tol=1e-15), part
    assert decode_results[3].report.cost > decode_results[2].report.cost


def test_each_block_after_the_first_adds_the_same_calls():
    # not n copies of one block: a block's residual add fuses with the next block's norm (add_rmsnorm),
    # which the first block has no neighbour for; every later block is priced and rewritten alike
    found = {n: search(block(layers=n, dtype="bf16", hidden=64, inner=192), device="h200") for n in (2, 3, 4)}
    added = [calls(found[n + 1].graph) - calls(found[n].graph) for n in (2, 3)]
    assert added[0] == added[1] and not calls(found[2].graph) - calls(found[3].graph)
    assert math.isclose(found[4].report.cost - found[3].report.cost, found[3].report.cost - found[2].report.cost,
                        rel_tol=1e-9)

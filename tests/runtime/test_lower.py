"""Lowering's own steps (the rest is tested through `compile`): a bool mask that several attentions read is
converted once, and the step computes what the interpreter computes."""

import pytest
import torch

import hoid
from hoid.runtime import compile
from hoid.runtime.lower import lower


def _masked_layers(layers: int, dtype: str = "f32"):
    """`layers` attentions over one key-padding mask ([B, 1, T, T] bool), as BERT's layers read it."""
    b = hoid.GraphBuilder("masked")
    x = b.input("x", (2, 4, 6, 8), dtype)
    mask = b.input("mask", (2, 1, 6, 6), "bool")
    for _ in range(layers):
        x = b.add(b.sdpa(x, x, x, mask), x)
    return b.build(x)


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 4, 6, 8, generator=g)
    lengths = torch.tensor([6, 3])  # the second sequence padded after 3 tokens: no row is all masked
    keys = torch.arange(6)[None, :] < lengths[:, None]
    return x, keys[:, None, None, :].expand(2, 1, 6, 6).contiguous()


def test_a_mask_that_three_attentions_read_is_converted_once_before_the_first():
    flat = lower(_masked_layers(3)).graph
    [where] = [n for n in flat.nodes if n.op == "where"]
    attentions = [n for n in flat.nodes if n.op == "sdpa"]
    assert len(attentions) == 3 and all(n.inputs[3] == where.output for n in attentions)
    assert where.inputs[0].name == "mask" and where.output.type.dtype == "f32"
    assert flat.nodes.index(where) < flat.nodes.index(attentions[0])
    constants = {n.outputs[0].name: n.attrs["value"] for n in flat.nodes if n.op == "full"}
    assert [constants[v.name] for v in where.inputs[1:]] == [0.0, float("-inf")]  # true attends


def test_a_mask_one_attention_reads_is_left_to_torch():
    flat = lower(_masked_layers(1)).graph
    assert "where" not in flat.op_counts() and flat.nodes[0].inputs[3].name == "mask"


def test_the_compiled_step_with_the_converted_mask_computes_what_the_interpreter_computes():
    graph = _masked_layers(3)
    x, mask = _inputs()
    expected = hoid.run(graph, x, mask)[0]
    got = compile(graph, device="cpu")(x, mask)[0]
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    # and the mask matters: attending to the padding gives another answer
    assert not torch.allclose(compile(graph, device="cpu")(x, torch.ones_like(mask))[0], expected, atol=1e-3)


@pytest.mark.gpu
def test_on_the_gpu_the_step_with_the_converted_mask_matches_the_interpreter_in_bf16():
    graph = _masked_layers(3, "bf16")
    x, mask = _inputs()
    x = x.to(torch.bfloat16)
    expected = hoid.run(_masked_layers(3, "f32"), x.float(), mask)[0].double()  # float32 on the CPU: the reference
    got = compile(graph, device="cuda")(x.cuda(), mask.cuda())[0].double().cpu()
    assert ((got - expected).norm() / expected.norm()).item() < 2e-2

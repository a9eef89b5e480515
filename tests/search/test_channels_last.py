"""The channels-last rules: where convolutions gain from NHWC, the tensors between them stay NHWC, with
copies only where a chain has to end; where they do not, nothing changes."""

from __future__ import annotations

import functools

import pytest
import torch

import hoid
from hoid.ir import GraphBuilder, TensorType
from hoid.measure.devices import get_device
from hoid.search.cost import AnalyticCost, OpCall, node_costs
from hoid.search.library import apply_library
from hoid.search.prices import PricedCost
from hoid.search.rewriting import default_prices
from hoid.search.rules import default_rulesets
from hoid.search.rules.channels_last import CHANNELS_LAST
from hoid.search.space import SearchSpace
from tests.oracle import rel_error

CHANNEL_PERMUTES = ((0, 3, 1, 2), (0, 2, 3, 1))


class _CheaperChannelsLast:
    """The default prices with every NCHW convolution three times dearer: what cuDNN's conversions around it
    cost on Hopper, in the large."""

    def __init__(self, base):
        self.base = base

    def __call__(self, call: OpCall) -> float:
        return self.base(call) * (3 if call.name in ("conv", "torch.conv") else 1)


class _BiasAsItsOwnPass(_CheaperChannelsLast):
    """Channels-last cheaper, and a bias added over an image as torch adds it: a broadcast pass of its own, in
    a kernel that does not vectorize (SDXL's VAE, H100: 42 launches after cuDNN's, 6.8 ms), priced 10x the
    roofline's add, whether inside a convolution with a bias (either layout) or as a plain add. (At the
    roofline's price a plain add of the bias before the norm cost within the ILP's 0.1% gap of the bias joined
    to the time embedding, and the extraction took either: the test failed one run in four.) Only over an
    image: the bias joined to the time embedding ([B, 1, 1, C]) is a launch at any price, and priced 10x too
    it cost what the tiny mid block's bias pass costs (within 0.02% of the total: HiGHS took either, 12-06)."""

    def __call__(self, call: OpCall) -> float:
        if call.op == "add" and [t.rank for t in call.inputs] == [4, 1] and _image(call.inputs[0]):
            return 10 * self.base(call)
        cost = super().__call__(call)
        if call.name in ("conv", "torch.conv", "conv_nhwc", "torch.conv_nhwc") and len(call.inputs) == 3:
            out = call.outputs[0]  # torch's pass in either layout (the bias priced as [C] over the image)
            cost += 10 * self.base(OpCall("add", (out, call.inputs[2]), (out,), {}))
        return cost


def _image(t) -> bool:
    """An NCHW or NHWC tensor of more than one pixel: two of its last three sizes above 1."""
    return sorted(t.shape[1:])[1] > 1


@functools.cache
def _unet():
    pytest.importorskip("diffusers")
    from hoid.models import build_model, diffusion

    return diffusion.unet_step_graph(build_model("sdxl-unet-tiny"), 2, 128, 128, 8)


def _extract(graph, cost=None, *, roofline: bool = False):
    """The extraction at the default prices (or the roofline alone, every kernel at its floor), through
    `cost` where given."""
    device = get_device("h200")
    space = SearchSpace(graph, target=device.target())
    assert str(space.saturate(default_rulesets()).stop_reason) == "saturated"
    apply_library(space, None)
    base = AnalyticCost(device) if roofline else PricedCost(device, default_prices(device), space.encoding.kernels)
    return space.extract(cost(base) if cost else base).best.graph


def test_where_convolutions_gain_channels_last_the_tensors_between_them_stay_nhwc():
    from hoid.models import diffusion

    graph = _unet()
    rewritten = _extract(graph, _CheaperChannelsLast)
    ops = rewritten.op_counts()
    assert ops.get("conv", 0) == 0 and ops["conv_nhwc"] == 25
    kernels = [n.attrs["kernel"] for n in rewritten.nodes if n.op == "kernel"]
    # 9 norms after a convolution alone, 8 after one and the time embedding (the shift the fused kernel adds)
    assert "triton.group_norm_silu" not in kernels
    assert (kernels.count("triton.group_norm_nhwc_silu"), kernels.count("triton.bias_group_norm_nhwc_silu")) == (9, 8)
    producer = {v.name: n for n in rewritten.nodes for v in n.outputs}
    readers = {}
    for n in rewritten.nodes:
        for v in n.inputs:
            readers.setdefault(v.name, []).append(n)
    weights = {v.name for v in rewritten.weight_inputs}
    # every permute between the layouts ends a chain: at the model's input and output, around the
    # upsampling (interpolate has no NHWC form), a weight laid out once, or a [N, C, 1, 1] time embedding
    for n in rewritten.nodes:
        if n.op != "permute" or tuple(n.attrs["dims"]) not in CHANNEL_PERMUTES:
            continue
        source, value = n.inputs[0], n.outputs[0]
        ends = (source.name in weights or source.name in {v.name for v in rewritten.runtime_inputs}
                or value.name in {v.name for v in rewritten.outputs}
                or source.type.shape[2:] == (1, 1)
                or (source.name in producer and producer[source.name].op == "interpolate")
                or any(r.op == "interpolate" for r in readers.get(value.name, [])))
        assert ends, f"a permute {n.attrs['dims']} in the middle of a chain: {n}"
    inputs = diffusion.unet_inputs(graph, seed=8)
    assert rel_error(hoid.run(rewritten, *inputs)[0], hoid.run(graph, *inputs)[0]) < 1e-5


def test_a_plain_channels_last_convolution_reads_its_weight_laid_out_once():
    """The decoder gives a plain conv_nhwc the operands its torch kernel was measured on: the permuted weight
    copied contiguous (a weight-only node, folded when weights are bound, never run per step)."""
    rewritten = _extract(_unet(), _CheaperChannelsLast)
    producer = {v.name: n for n in rewritten.nodes for v in n.outputs}
    weights = {v.name for v in rewritten.weight_inputs}
    for n in (n for n in rewritten.nodes if n.op == "conv_nhwc"):
        weight = n.inputs[1]
        assert weight.type.is_contiguous
        chain = producer[weight.name]
        if chain.op == "contiguous":
            chain = producer[chain.inputs[0].name]
        assert chain.op == "permute" and chain.inputs[0].name in weights


def _conv_chain():
    b = GraphBuilder("chain")
    x = b.input("x", (1, 8, 16, 16), "f32")
    conv = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1))
    h = b.silu(b.conv(x, b.weight("w1", (8, 8, 3, 3), "f32"), b.weight("b1", (8,), "f32"), **conv))
    return b.build(b.conv(h, b.weight("w2", (8, 8, 3, 3), "f32"), b.weight("b2", (8,), "f32"), **conv))


def test_a_chain_stays_nchw_where_nothing_pays_for_the_copies_at_its_ends():
    """Two convolutions with a SiLU between, both layouts' convolutions priced alike (the roofline): the
    copies into and out of NHWC would gain nothing, so none is made; priced as on Hopper, the chain goes NHWC."""
    same = _extract(_conv_chain(), roofline=True).op_counts()
    assert same["conv"] == 2 and "conv_nhwc" not in same and "permute" not in same
    cheaper = _extract(_conv_chain(), _CheaperChannelsLast, roofline=True).op_counts()
    assert cheaper["conv_nhwc"] == 2 and "conv" not in cheaper


def test_a_permute_between_the_layouts_is_priced_as_the_copy_its_reader_makes():
    space = SearchSpace(_conv_chain())
    space.saturate([CHANNELS_LAST])
    snapshot = space.snapshot()
    seen = {"copy": 0, "free": 0}

    def cost(call: OpCall) -> float:
        if call.op == "contiguous":
            seen["copy"] += 1
            assert not call.inputs[0].is_contiguous and call.inputs[0].shape == call.outputs[0].shape
            return 1.0
        return 0.0

    costs = node_costs(snapshot, space.encoding.kernels, cost, weight_only=set())
    permutes = [nid for nid, node in snapshot.nodes.items() if node.op == "permute"]
    assert permutes and all(costs[nid] == 1.0 for nid in permutes) and seen["copy"] >= 1
    # any other permute stays a free view
    b = GraphBuilder("heads")
    x = b.input("x", (1, 2, 3, 4), "f32")
    other = SearchSpace(b.build(b.exp(b.permute(x, dims=(0, 2, 1, 3)))))
    snap = other.snapshot()
    priced = node_costs(snap, other.encoding.kernels, lambda call: 0.0 if call.op != "contiguous" else 1.0,
                        weight_only=set())
    assert all(priced[nid] == 0.0 for nid, node in snap.nodes.items() if node.op == "permute")


def test_the_rules_keep_one_nhwc_twin_per_value():
    """Only P and Q take part, so each rank-4 value gains at most one NHWC form: the e-graph grows linearly."""
    graph = _unet()
    before = SearchSpace(graph)
    before.saturate([r for r in default_rulesets() if r.name != "channels-last"])
    after = SearchSpace(graph)
    report = after.saturate(default_rulesets())
    assert str(report.stop_reason) == "saturated"
    assert after.size() < 2 * before.size()


def test_a_conv_nhwc_type_is_the_nchw_one_permuted():
    from hoid.ir.registry import infer_node

    (out,), _ = infer_node("conv_nhwc", [TensorType((2, 9, 7, 4), "f32"), TensorType((6, 3, 3, 2), "f32")],
                           {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 1), "groups": 2})
    (nchw,), _ = infer_node("conv", [TensorType((2, 4, 9, 7), "f32"), TensorType((6, 2, 3, 3), "f32")],
                            {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 1), "groups": 2})
    assert out.shape == (nchw.shape[0], *nchw.shape[2:], nchw.shape[1])


def test_the_vae_decoder_resizes_channels_last_between_its_convolutions():
    """The tiny VAE decoder where NCHW convolutions cost 3x: every convolution NHWC, and the upsamplers between
    NHWC convolutions resize as the tensors lie (`interpolate_nhwc`), not through two copies. The mid block's
    attention reads its input as [N, C, H*W] tokens and writes them back as an image: through the token rules
    it stays channels-last too (its group norm NHWC), and the first upsampler after it (before them, 12-06,
    the mid block ran NCHW, with torch's group norm and copies back before the next convolutions)."""
    pytest.importorskip("diffusers")
    import torch

    from hoid.models import build_model, diffusion

    graph = diffusion.vae_decode_graph(build_model("sdxl-vae-decoder-tiny"), 1, 64, 64)
    rewritten = _extract(graph, _CheaperChannelsLast)
    ops = rewritten.op_counts()
    assert ops["conv_nhwc"] == graph.op_counts()["conv"] and "conv" not in ops
    assert ops["interpolate_nhwc"] == 3 and "interpolate" not in ops
    assert "group_norm" not in ops  # the attention's norm too: NHWC, in the library's kernels or as the op
    x = torch.randn(graph.runtime_inputs[0].type.shape, generator=torch.Generator().manual_seed(0))
    assert rel_error(hoid.run(rewritten, x)[0], hoid.run(graph, x)[0]) < 1e-5


def test_where_a_bias_costs_a_pass_the_norm_after_the_convolution_adds_it():
    """Priced as torch runs it (the bias its own pass), each convolution read by a group norm alone loses its
    bias to the norm's kernel: the tiny UNet's 8 ResNet blocks' second norms, their bias joined with the time
    embedding (the others read a residual sum, a concat or conv_in, whose output the skip reads too); each
    block's second convolution loses its bias to the residual add; the step computes the same."""
    from hoid.models import diffusion

    graph = _unet()
    rewritten = _extract(graph, _BiasAsItsOwnPass)
    producer = {v.name: n for n in rewritten.nodes for v in n.outputs}
    fused = [n for n in rewritten.nodes if n.op == "kernel" and n.attrs["kernel"] == "triton.bias_group_norm_nhwc_silu"]
    assert len(fused) == 8
    for n in fused:
        conv, shift = producer[n.inputs[0].name], producer[n.inputs[1].name]
        assert conv.op == "conv_nhwc" and len(conv.inputs) == 2, conv  # the bias left to the norm
        assert shift.op == "add" and [v.type.rank for v in shift.inputs] == [4, 1], shift  # time embedding + bias
    # and each block's second convolution's bias goes into the residual add after it (`triton.bias_residual_add`)
    after_conv = [n for n in rewritten.nodes if n.op == "kernel" and n.attrs["kernel"] == "triton.bias_residual_add"
                  and producer[n.inputs[1].name].op == "conv_nhwc"]
    assert len(after_conv) == 8 and all(len(producer[n.inputs[1].name].inputs) == 2 for n in after_conv)
    inputs = diffusion.unet_inputs(graph, seed=8)
    assert rel_error(hoid.run(rewritten, *inputs)[0], hoid.run(graph, *inputs)[0]) < 1e-5


def test_the_vae_s_convolutions_lose_their_bias_to_the_norms_and_residual_adds_after_them():
    """The tiny VAE decoder, priced as torch runs a bias: 24 of its 27 convolutions without one, their biases
    added by the 13 group norms + SiLU after them and the 10 residual adds, 4 of which take two convolutions'
    biases joined (the skip a shortcut's or an upsampler's output, whose bias the block's first norm takes in
    too); the image computed the same. (21 and 7 while the mid block around the attention ran NCHW.)"""
    pytest.importorskip("diffusers")
    from hoid.models import build_model, diffusion

    graph = diffusion.vae_decode_graph(build_model("sdxl-vae-decoder-tiny"), 1, 64, 64)
    rewritten = _extract(graph, _BiasAsItsOwnPass)
    convs = [len(n.inputs) for n in rewritten.nodes if n.op == "conv_nhwc"]
    kernels = [n.attrs["kernel"] for n in rewritten.nodes if n.op == "kernel"]
    assert (len(convs), convs.count(2)) == (27, 24)
    assert (kernels.count("triton.bias_group_norm_nhwc_silu"), kernels.count("triton.bias_residual_add")) == (13, 10)
    producer = {v.name: n for n in rewritten.nodes for v in n.outputs}
    joined = [n for n in rewritten.nodes if n.attrs.get("kernel") == "triton.bias_residual_add"
              and n.inputs[2].name in producer and producer[n.inputs[2].name].op == "add"]
    assert len(joined) == 4 and all(producer[n.inputs[0].name].op == "conv_nhwc" for n in joined)
    latents = torch.randn(graph.runtime_inputs[0].type.shape, generator=torch.Generator().manual_seed(3))
    assert rel_error(hoid.run(rewritten, latents)[0], hoid.run(graph, latents)[0]) < 1e-5

"""A channels-last graph (`search/rules/channels_last.py`) compiled: the same values, its permuted weights laid
out once when weights are bound, and only the chain's own ends copied per call."""

from __future__ import annotations

import torch

import hoid
from hoid.measure.devices import get_device
from hoid.search.cost import AnalyticCost
from hoid.search.rules import default_rulesets
from hoid.search.space import SearchSpace


def _chain():
    gen = torch.Generator().manual_seed(0)
    b = hoid.GraphBuilder("chain")
    x = b.input("x", (2, 8, 6, 6), "f32")
    conv = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1))

    def weight(name, shape):
        return b.weight(name, shape, "f32", torch.randn(shape, generator=gen) * 0.2)

    h = b.conv(x, weight("w1", (8, 8, 3, 3)), weight("b1", (8,)), **conv)
    h = b.silu(b.group_norm(h, weight("gw", (8,)), weight("gb", (8,)), num_groups=4))
    return b.build(b.conv(h, weight("w2", (8, 8, 3, 3)), weight("b2", (8,)), **conv))


def _channels_last(graph):
    """The extraction where NCHW convolutions cost 3x (cuDNN's conversions, in the large)."""
    space = SearchSpace(graph, target=get_device("h200").target())
    space.saturate(default_rulesets())
    base = AnalyticCost(get_device("h200"))
    return space.extract(lambda call: base(call) * (3 if call.name == "conv" else 1)).best.graph


def test_a_channels_last_chain_compiles_to_the_same_values_with_its_weights_laid_out_at_bind():
    graph = _chain()
    rewritten = _channels_last(graph)
    ops = rewritten.op_counts()
    assert ops["conv_nhwc"] == 2 and ops["group_norm_nhwc"] == 1 and "conv" not in ops
    compiled = hoid.compile(rewritten, device="cpu")
    x = torch.randn(2, 8, 6, 6, generator=torch.Generator().manual_seed(1))
    (got,), (want,) = compiled(x), hoid.run(graph, x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # both weights' permuted copies are bind-time values; per call, only the input's copy into NHWC
    copies = [n for n in compiled.lowered.graph.nodes if n.op == "contiguous"]
    static = compiled.lowered.static
    weight_copies = [n for n in copies if n.outputs[0].name in static]
    assert len(weight_copies) == 2
    assert len([n for n in copies if n.outputs[0].name not in static]) == 1


def test_a_channels_last_chain_exports_to_a_package_that_computes_the_same(tmp_path, monkeypatch):
    """The package's code for conv_nhwc and group_norm_nhwc is traced from their references like any op's."""
    import importlib

    graph = _chain()
    hoid.export(_channels_last(graph), tmp_path / "pkg_channels_last")
    monkeypatch.syspath_prepend(str(tmp_path))
    model = importlib.import_module("pkg_channels_last").load("cpu")
    x = torch.randn(2, 8, 6, 6, generator=torch.Generator().manual_seed(2))
    got = model(x)
    got = got[0] if isinstance(got, (tuple, list)) else got
    torch.testing.assert_close(got, hoid.run(graph, x)[0], rtol=1e-5, atol=1e-5)

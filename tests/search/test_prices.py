"""PricedCost: both sides of a choice from measurements, or both from the model; an unmeasured kernel never
undercuts a measured rival of its pattern on the roofline alone."""

from hoid.ir import GraphBuilder, KernelImpl, TensorType
from hoid.kernels import get
from hoid.measure.devices import H200
from hoid.search.cost import OpCall
from hoid.search.prices import UNMEASURED_PENALTY, PricedCost, Prices, body_calls, price_key


def _linear_call(kernel_id: str) -> tuple[OpCall, KernelImpl]:
    spec = get(kernel_id)
    types = [TensorType((1, 2048), "bf16"), TensorType((4096, 2048), "bf16")]
    b = GraphBuilder("body")
    x, w = b.input("x", types[0].shape, "bf16"), b.input("w", types[1].shape, "bf16")
    body = b.build(b.matmul(x, b.transpose(w, dim0=0, dim1=1)))
    impl = KernelImpl(spec.id, spec.version, {}, body, {})
    out = (TensorType((1, 4096), "bf16"),)
    return OpCall("kernel", tuple(types), out, impl.node_attrs()), impl


def test_an_unmeasured_kernel_is_priced_above_its_measured_rival():
    triton, triton_impl = _linear_call("triton.linear")
    cute, cute_impl = _linear_call("cute.linear")
    rows = {price_key(H200.name, triton): (9e-6, None)}
    rows |= {price_key(H200.name, c): (20e-6, None) for c in body_calls(triton_impl.body)}  # the plain side
    model = PricedCost(H200, Prices(H200.name, rows, "test"), {"a": triton_impl, "b": cute_impl})
    assert model(triton) == 9e-6
    assert model.status(cute) == "modelled"
    assert model(cute) >= 9e-6 * UNMEASURED_PENALTY  # the roofline alone would say ~4 us
    alone = PricedCost(H200, Prices(H200.name, {}, "none"), {"b": cute_impl})
    assert alone(cute) < 9e-6  # with nothing measured, the model's own price


def test_a_call_bound_by_its_floor_is_priced_by_rows_bound_by_theirs():
    # a decode-size add (16 KB: its 2 us are launch and ramp-up) says nothing of an encoder's 32 MiB add
    launch = H200.graph_launch_overhead
    small, big = (TensorType((1, 4096), "bf16"),) * 2, (TensorType((32, 512, 1024), "bf16"),) * 2
    add_small, add_big = OpCall("add", small, small[:1], {}), OpCall("add", big, big[:1], {})
    roofline = PricedCost(H200).analytic  # nothing measured: the floor plus one launch
    floor_small = roofline(add_small) - launch
    prices = Prices(H200.name, {price_key(H200.name, add_small): (2e-6, floor_small)}, "test")
    assert prices.efficiencies()["add"] < 0.01 and "add" not in prices.efficiencies(4 * launch, launch)
    model = PricedCost(H200, prices)
    assert model(add_big) == roofline(add_big)  # not a thousand times it
    other = OpCall("add", (TensorType((2, 4096), "bf16"),) * 2, small[:1], {})
    assert model(other) > 2 * roofline(other)  # a small call still pays what small rows measured
    # a row bound by its floor sets the efficiency of the calls bound by theirs: twice the floor, elsewhere too
    floor_big = roofline(add_big) - launch
    prices = Prices(H200.name, {price_key(H200.name, add_big): (2 * floor_big + launch, floor_big)}, "test")
    assert prices.efficiencies(4 * launch, launch)["add"] == 0.5
    wide = (TensorType((64, 512, 1024), "bf16"),) * 2
    add_wide = OpCall("add", wide, wide[:1], {})
    assert abs(PricedCost(H200, prices)(add_wide) - (2 * (roofline(add_wide) - launch) + launch)) < 1e-12


def test_live_prices_follow_the_cache_and_price_a_choice_from_both_sides_or_neither(tmp_path):
    from hoid.measure.cache import MeasureCache
    from hoid.measure.timing import Timing
    from hoid.search.prices import LivePricedCost

    triton, impl = _linear_call("triton.linear")
    cache = MeasureCache(tmp_path / "m.sqlite")
    model = LivePricedCost(H200, cache, shipped=Prices(H200.name, {}, "none"))

    def put(call, seconds):  # as the loop's measurements land: keyed as `price_key` keys them
        cache.put(price_key(H200.name, call), Timing((seconds,) * 5, "cuda-events"), floor=None)

    put(triton, 9e-6)
    model.prepare({"a": impl})
    assert model.status(triton) == "modelled"  # the kernel alone measured: a real time against ideal ones
    plain = [c for c in body_calls(impl.body) if model.analytic(c) > 0]
    for c in plain:
        put(c, 20e-6)
    assert model.status(triton) == "modelled"  # read again only when an extraction prepares it
    model.prepare({"a": impl})
    assert model.status(triton) == "measured" and model(triton) == 9e-6
    assert all(model(c) == 20e-6 for c in plain)


def test_extraction_tells_a_choice_pricing_model_the_e_graphs_kernels():
    from hoid.agent.finalists import Allowed
    from hoid.search.library import apply_library
    from hoid.search.space import SearchSpace

    b = GraphBuilder("norm")
    x, w = b.input("x", (1, 64), "f32"), b.weight("w", (64,), "f32")
    space = SearchSpace(b.build(b.op("rmsnorm", x, w, eps=1e-6)), target=H200.target())
    apply_library(space)
    told = []

    class Spy(PricedCost):
        def prepare(self, kernels):
            told.append(dict(kernels))
            super().prepare(kernels)

    space.extract(Allowed(Spy(H200), set()))  # through the loop's wrapper too
    assert told and told[-1] and told[-1] == dict(space.encoding.kernels)


def test_a_small_call_costs_its_floor_a_launch_and_the_fixed_cost_small_rows_measured():
    # the decode-size add measured 2 us (its floor 6 ns): a prefill's 128-row add is still too small for its
    # floor to bound it; dividing its floor by the decode row's ratio would price it at ~100x its time
    launch = H200.graph_launch_overhead
    decode = (TensorType((1, 4096), "bf16"),) * 2
    prefill = (TensorType((128, 4096), "bf16"),) * 2
    add_decode, add_prefill = OpCall("add", decode, decode[:1], {}), OpCall("add", prefill, prefill[:1], {})
    roofline = PricedCost(H200).analytic
    floor_decode, floor_prefill = roofline(add_decode) - launch, roofline(add_prefill) - launch
    assert floor_prefill < 4 * launch  # below the bound: a small call
    prices = Prices(H200.name, {price_key(H200.name, add_decode): (2e-6, floor_decode)}, "test")
    fixed = 2e-6 - floor_decode - launch
    assert abs(prices.overheads(4 * launch, launch)["add"] - fixed) < 1e-15
    model = PricedCost(H200, prices)
    assert abs(model(add_prefill) - (floor_prefill + launch + fixed)) < 1e-12
    ratio = floor_decode / 2e-6
    assert model(add_prefill) < (floor_prefill / ratio) / 50  # what the ratio alone said


def test_a_carried_over_version_is_priced_by_the_rows_of_the_version_it_replaced(tmp_path):
    import json

    call, impl = _linear_call("triton.linear")
    key = price_key(H200.name, call)
    row = {"device": key.device, "kernel": key.kernel, "params": key.params, "types": key.types,
           "attrs": key.attrs, "median": 7e-6, "floor": 4e-6}
    shipped = tmp_path / "decode_prices.json"
    shipped.write_text(json.dumps({"versions": {}, "rows": [{**row, "version": "0ld0ld0ld0ld"}]}))
    assert Prices.shipped(H200.name, shipped).seconds(call) is None  # another version: never its price
    (tmp_path / "price_carryover.json").write_text(json.dumps({"carryovers": [
        {"kernel": key.kernel, "from": "0ld0ld0ld0ld", "to": impl.version, "fingerprint": "x", "why": "test"}]}))
    assert Prices.shipped(H200.name, shipped).seconds(call) == 7e-6


def _rmsnorm_then_linear():
    b = GraphBuilder("norm_linear")
    x = b.input("x", (4, 64), "f32")
    g, w = b.weight("g", (64,), "f32"), b.weight("w", (32, 64), "f32")
    return b.build(b.matmul(b.rmsnorm(x, g, eps=1e-6), b.transpose(w, dim0=0, dim1=1)))


def test_a_measured_search_times_every_call_it_prices_so_no_choice_is_modelled(tmp_path):
    from hoid.kernels import KernelSet
    from hoid.measure import MeasureCache
    from hoid.measure.local import local_device
    from hoid.search import search

    here = local_device()
    graph = _rmsnorm_then_linear()
    kernels = KernelSet.default().runnable_here()
    modelled = search(graph, device=here, kernels=kernels)
    assert modelled.report.modelled and not modelled.report.measured  # nothing measured on this CPU before
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        result = search(graph, device=here, kernels=kernels, measure=cache)
        assert len(cache.entries(device=here.name)) >= len(result.report.measured) > 0
    assert not result.report.modelled and not result.report.unmeasured, result.report
    assert "m.sqlite" in result.report.prices


def test_a_measured_search_needs_the_device_it_prices_for(tmp_path):
    import pytest

    from hoid.measure import MeasureCache
    from hoid.measure.local import has_cuda
    from hoid.search import search

    if has_cuda() and __import__("torch").cuda.get_device_name() == H200.name:
        pytest.skip("this machine is an H200: the search would measure")
    with MeasureCache(tmp_path / "m.sqlite") as cache, pytest.raises(ValueError, match="needs that device"):
        search(_rmsnorm_then_linear(), device=H200, measure=cache)


def test_a_kernel_that_raised_when_timed_is_never_chosen():
    from hoid.search.prices import UNRUNNABLE_SECONDS

    triton, triton_impl = _linear_call("triton.linear")
    rows = {price_key(H200.name, triton): (UNRUNNABLE_SECONDS, None)}
    model = PricedCost(H200, Prices(H200.name, rows, "test"), {"a": triton_impl})
    assert model(triton) == UNRUNNABLE_SECONDS  # its plain side unmeasured: still not the model's price

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

import pytest
import torch

from hoid.ir import TensorType
from hoid.measure.inputs import empty_outputs, random_inputs, random_tensor


def test_random_inputs_have_the_declared_types_and_are_not_zeros():
    types = [TensorType((8, 16), "bf16"), TensorType((16,), "f32"), TensorType((5,), "i64"),
             TensorType((3,), "bool")]
    xs = random_inputs(types, index_bounds={2: 3})
    assert [TensorType.of(x) for x in xs] == types
    assert xs[0].float().abs().sum() > 0 and xs[0].float().std() > 0.5
    assert int(xs[2].min()) >= 0 and int(xs[2].max()) < 3


def test_strided_types_keep_their_layout():
    t = TensorType((4, 8), "f32", strides=(1, 4))  # a transposed view
    x = random_tensor(t)
    assert x.stride() == (1, 4) and TensorType.of(x) == t


def test_inputs_are_reproducible_by_seed_and_outputs_contiguous():
    types = [TensorType((32,), "f32")]
    assert torch.equal(random_inputs(types, seed=1)[0], random_inputs(types, seed=1)[0])
    assert not torch.equal(random_inputs(types, seed=1)[0], random_inputs(types, seed=2)[0])
    (out,) = empty_outputs([TensorType((2, 3), "f16")])
    assert out.shape == (2, 3) and out.dtype == torch.float16 and out.is_contiguous()


def test_a_given_generator_draws_where_it_lives_and_the_tensor_moves_to_its_device():
    # the host's draw is the oracle: a CPU generator with the seed gives these values, whatever the device
    t = TensorType((4, 8), "f16")
    expected = torch.randn((4, 8), generator=torch.Generator().manual_seed(5)).to(torch.float16)
    drawn = random_tensor(t, generator=torch.Generator().manual_seed(5))
    assert torch.equal(drawn, expected)


@pytest.mark.gpu
def test_on_the_gpu_inputs_are_drawn_on_the_device_reproducibly():
    types = [TensorType((64, 256), "bf16"), TensorType((7,), "i64"), TensorType((5,), "bool")]
    first, again = random_inputs(types, device="cuda", index_bounds={1: 3}, seed=4), \
        random_inputs(types, device="cuda", index_bounds={1: 3}, seed=4)
    assert all(x.is_cuda for x in first) and all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert [TensorType.of(x) for x in first] == types and int(first[1].max()) < 3
    assert first[0].float().std() > 0.5

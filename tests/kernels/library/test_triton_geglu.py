import pytest
import torch
import torch.nn.functional as F

from hoid.kernels.library import triton_geglu
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches, launch

SPEC = triton_geglu.SPEC


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("params", [{}, {"block": 256}])  # one block a row; rows of several blocks, the last short
def test_matches_float64_reference(dtype, params):
    x = (torch.randn(3, 5, 2 * 700, generator=torch.Generator().manual_seed(0)) * 3).to(dtype)
    assert_matches(SPEC, [x], {}, params)


def test_the_first_half_gates_by_the_second_as_diffusers_geglu():
    x = torch.randn(2, 4, 64, dtype=torch.float16, generator=torch.Generator().manual_seed(1))
    hidden, gate = x.chunk(2, dim=-1)
    (got,) = launch(SPEC, [x], {})
    assert torch.equal(got, hidden * F.gelu(gate))  # the unfused ops' roundings, bit for bit


def test_own_examples_pass():
    verdict = check_kernel(SPEC, examples=1, trials=3, seed=6, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_joins_the_layout_rules_slices_in_the_e_graph():
    """A GEGLU imported from diffusers is a split the layout rules also see as two slices: the kernel, written
    against the split, still joins the product's e-class."""
    import hoid
    from hoid.search.library import apply_library
    from hoid.search.rules import default_rulesets
    from hoid.search.space import SearchSpace

    b = hoid.GraphBuilder("geglu")
    x = b.input("x", (2, 3, 8), "f32")
    h = b.matmul(x, b.transpose(b.weight("proj", (12, 8), "f32"), dim0=0, dim1=1))
    hidden, gate = b.split(h, sizes=(6, 6), dim=-1)
    space = SearchSpace(b.build(b.mul(hidden, b.gelu(gate))))
    space.saturate(default_rulesets())
    assert apply_library(space, [SPEC]).injected == {"triton.geglu_merged": 1}

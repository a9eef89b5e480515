import pytest
import torch
import torch.nn.functional as F

from hoid.ir import TensorType
from hoid.kernels.library import triton_group_norm_nhwc
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches, launch, reference

SPECS = (triton_group_norm_nhwc.SPEC, triton_group_norm_nhwc.SILU_SPEC)


def _inputs(shape, groups, dtype, offset=0.0):
    """x [N, *spatial, C], weight and bias [C]."""
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=gen) * 3 + offset).to(dtype)
    w, b = (torch.randn(shape[-1], generator=gen).to(dtype) for _ in range(2))
    return [x, w, b], {"num_groups": groups, "eps": 1e-5}


def _small(stats_block, write_block, tiles=1, block_c=16):
    """Tiles of a few rows (the statistics' and the write's of different shapes), `tiles` a chunk."""
    return {"stats_block": stats_block, "stats_block_c": block_c, "block": write_block, "block_c": block_c,
            "tiles": tiles}


# (x's shape, groups, params): one tile at "auto"; cut into many tiles along S, one or three a chunk (the last
# chunk short, its last tile too), into blocks of C that groups straddle (cg = 10: no power of two), other ranks
CASES = [
    ((2, 20, 30, 6), 3, {}),
    ((2, 20, 30, 6), 3, _small(256, 128)),
    ((2, 7, 9, 40), 4, _small(128, 64)),
    ((2, 7, 9, 40), 4, _small(64, 128, tiles=3)),
    ((1, 50, 12), 4, _small(64, 32, tiles=2)),
    ((2, 3, 5, 2, 15), 5, _small(32, 64)),
    ((2, 8), 4, {}),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(("shape", "groups", "params"), CASES, ids=lambda c: str(c).replace(" ", ""))
def test_matches_float64_reference(spec, dtype, shape, groups, params):
    inputs, attrs = _inputs(shape, groups, dtype)
    assert_matches(spec, inputs, attrs, params)


def test_a_group_of_more_figures_than_the_groups_launch_holds_at_once():
    """300 chunks (a row a tile) of cg = 20 channels: the groups launch loops over 2 blocks of chunks and 3 of
    channels."""
    inputs, attrs = _inputs((1, 300, 20), 1, torch.float32)
    params = _small(32, 4096, block_c=32)
    assert triton_group_norm_nhwc._group_tile(20, triton_group_norm_nhwc.plan(300, 20, **params).chunks) == (8, 256, 4)
    assert_matches(triton_group_norm_nhwc.SPEC, inputs, attrs, params)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
@pytest.mark.parametrize("params", [_small(128, 128), _small(128, 64, tiles=4)])
def test_a_large_mean_does_not_cancel_the_variance(spec, params):
    """Values far from zero with a small spread: a sum of squares less the squared mean would lose the
    variance to float32 rounding; the tiles', chunks' and channels' deviations keep it."""
    inputs, attrs = _inputs((1, 20, 20, 8), 2, torch.float32, offset=1000.0)
    assert_matches(spec, inputs, attrs, params)


def test_a_large_mean_is_carried_past_float32_s_rounding():
    """At a mean of 1000 and a spread of 3, a float32 mean alone is up to half an ulp (3e-5) off, 1e-5 of the
    spread; the pair hi + lo takes the error down to float32's on the deviations."""
    inputs, attrs = _inputs((1, 40, 40, 8), 2, torch.float32, offset=1000.0)
    (got,) = launch(triton_group_norm_nhwc.SPEC, inputs, attrs)
    (want,) = reference(triton_group_norm_nhwc.SPEC, inputs, attrs)
    assert ((got.double() - want).norm() / want.norm()).item() <= 1e-6


@pytest.mark.parametrize("silu", [False, True])
def test_agrees_with_torch_s_ops_on_the_channels_moved_in_f16(silu):
    inputs, attrs = _inputs((2, 8, 8, 40), 4, torch.float16)
    spec = triton_group_norm_nhwc.SILU_SPEC if silu else triton_group_norm_nhwc.SPEC
    (got,) = launch(spec, inputs, attrs, _small(128, 256))
    want = F.group_norm(inputs[0].movedim(-1, 1), 4, inputs[1], inputs[2], 1e-5).movedim(1, -1)
    want = F.silu(want) if silu else want
    assert got.is_contiguous() and (got.float() - want.float()).abs().max() <= 2e-3


def test_the_declared_workspace_is_what_the_launch_takes_and_its_padding_is_never_read():
    """The runtime plans the spec's workspace; poisoned with NaN, the figures' padding (chunks rounded up to
    16) and whatever the launch does not write stay out of every sum."""
    spec = triton_group_norm_nhwc.SPEC
    inputs, attrs = _inputs((2, 7, 9, 40), 4, torch.float32)
    params = spec.check_params(_small(128, 128))
    types = spec.workspace_types([TensorType.of(t) for t in inputs], attrs, params)
    assert [t.shape for t in types] == [(3, 2, 40, 16), (3, 8)]  # 63 rows of 8: 8 chunks, padded to 16
    workspace = tuple(torch.full(t.shape, float("nan")) for t in types)
    out = torch.empty_like(inputs[0])
    spec.launch(*inputs, out, **attrs, **params, workspace=workspace)
    want = F.group_norm(inputs[0].movedim(-1, 1), 4, inputs[1], inputs[2], 1e-5).movedim(1, -1)
    assert (out - want).abs().max() <= 1e-4


def test_a_workspace_for_other_params_is_refused_with_the_shapes_it_needs():
    spec = triton_group_norm_nhwc.SPEC
    inputs, attrs = _inputs((2, 7, 9, 40), 4, torch.float32)
    wrong = (torch.empty(3, 2, 40, 32), torch.empty(3, 8))
    with pytest.raises(ValueError, match=r"workspace \(3, 2, 40, 32\), \(3, 8\) given, these params need "
                                         r"\(3, 2, 40, 16\), \(3, 8\)"):
        spec.launch(*inputs, torch.empty_like(inputs[0]), **attrs, **_small(128, 128), workspace=wrong)


def test_auto_tiles_fit_sdxl_s_channels_and_bound_the_chunks():
    plan = triton_group_norm_nhwc.plan
    for channels, block_c in ((320, 64), (640, 128), (960, 64), (1280, 128), (1920, 128), (2560, 128), (128, 128)):
        assert plan(4096, channels).write.channels == block_c, channels  # no masked lane at SDXL's or the VAE's C
        assert plan(4096, channels).stats.channels == 64, channels
    # the UNet's first stage (2 samples): statistics of 4 tiles of 128 x 64 (8 would leave 160 programs for 132
    # multiprocessors), written 64 x 64
    unet = plan(128 * 128, 320, samples=2)
    assert (unet.stats, unet.tiles, unet.chunks, unet.write) == ((128, 64, 8), 4, 32, (64, 64, 4))
    assert plan(32 * 32, 1280, samples=2).tiles == 1  # 20 blocks of channels x 8 chunks x 2 samples: 320 programs
    assert plan(32 * 32, 1280, samples=2, multiprocessors=20).tiles == 8  # a small GPU: 8 tiles fill it
    vae = plan(1024 * 1024, 128)  # the VAE's largest: 8 tiles a chunk, MAX_CHUNKS of them
    assert (vae.stats.rows, vae.tiles, vae.chunks) == (128, 8, triton_group_norm_nhwc.MAX_CHUNKS)
    assert plan(1024 * 1024, 128, tiles=1).tiles == 8  # too few tiles a chunk asked: grown to fit
    assert plan(2048 * 2048, 128).tiles == 32
    assert plan(3, 12).stats.rows == plan(3, 12).write.rows == 4  # no more rows than S has
    assert plan(100, 12, stats_block=128, tiles=3).stride_chunks == 16  # 13 tiles of 8 rows: 5 chunks, padded


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_own_examples_pass(spec):
    verdict = check_kernel(spec, examples=1, trials=3, seed=5, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_rejects_a_strided_input_and_says_why():
    attrs = {"num_groups": 2, "eps": 1e-5}
    affine = [TensorType((4,), "f32")] * 2
    assert triton_group_norm_nhwc.SPEC.rejects([TensorType((2, 8, 4), "f32"), *affine], attrs) is None
    strided = TensorType((2, 8, 4), "f32", strides=(32, 1, 8))  # an NCHW tensor's channels-last view
    assert "contiguous" in triton_group_norm_nhwc.SPEC.rejects([strided, *affine], attrs)


def test_both_join_a_channels_last_norm_and_activation_in_the_e_graph():
    """On a channels-last ResNet block's group_norm_nhwc then silu, the plain kernel joins the norm's e-class
    and the fused one the silu's: the search may choose either. The NCHW kernels match neither."""
    import hoid
    from hoid.kernels.library import triton_group_norm
    from hoid.search.library import apply_library
    from hoid.search.rules import default_rulesets
    from hoid.search.space import SearchSpace

    b = hoid.GraphBuilder("resnet_block_nhwc")
    x = b.input("x", (2, 6, 6, 8), "f32")
    normed = b.op("group_norm_nhwc", x, b.weight("w", (8,), "f32"), b.weight("b", (8,), "f32"), num_groups=4,
                  eps=1e-5)
    space = SearchSpace(b.build(b.add(b.silu(normed), x)))
    space.saturate(default_rulesets())
    specs = [*SPECS, triton_group_norm.SPEC, triton_group_norm.SILU_SPEC]
    assert apply_library(space, specs).injected == {"triton.group_norm_nhwc": 1, "triton.group_norm_nhwc_silu": 1}


BIAS_SPECS = (triton_group_norm_nhwc.BIAS_SPEC, triton_group_norm_nhwc.BIAS_SILU_SPEC)


def _bias_inputs(shape, groups, dtype, per_sample):
    """`_inputs` with the addend after x: [C], or [N, 1, ..., 1, C] (a bias + a time embedding)."""
    (x, w, b), attrs = _inputs(shape, groups, dtype)
    shift_shape = (shape[0], *(1,) * (len(shape) - 2), shape[-1]) if per_sample else (shape[-1],)
    shift = (torch.randn(shift_shape, generator=torch.Generator().manual_seed(1)) * 2).to(dtype)
    return [x, shift, w, b], attrs


@pytest.mark.parametrize("spec", BIAS_SPECS, ids=lambda s: s.id)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("per_sample", [False, True], ids=["bias", "bias+temb"])
@pytest.mark.parametrize(("shape", "groups", "params"), [CASES[1], CASES[3], CASES[4]],
                         ids=lambda c: str(c).replace(" ", ""))
def test_with_a_bias_matches_float64_reference(spec, dtype, per_sample, shape, groups, params):
    inputs, attrs = _bias_inputs(shape, groups, dtype, per_sample)
    assert_matches(spec, inputs, attrs, params)


@pytest.mark.parametrize("per_sample", [False, True], ids=["bias", "bias+temb"])
def test_with_a_bias_is_the_add_then_norm_in_f16(per_sample):
    """torch's ops over the sum in float32 (the kernel keeps it unrounded, as the float64 oracle does), within
    f16's rounding of the output."""
    inputs, attrs = _bias_inputs((2, 8, 8, 40), 4, torch.float16, per_sample)
    (got,) = launch(triton_group_norm_nhwc.BIAS_SILU_SPEC, inputs, attrs, _small(128, 256))
    x, shift, w, b = inputs

    def norm_silu(values):
        return F.silu(F.group_norm(values.movedim(-1, 1), 4, w.float(), b.float(), 1e-5).movedim(1, -1))

    want = norm_silu(x.float() + shift.float())
    assert ((got.float() - want).abs() <= 2e-3 * (1 + want.abs())).all()  # f16's rounding of each
    # the shift is not lost: 10 channels a group, each moved apart
    assert (got.float() - norm_silu(x.float())).abs().max() > 0.1


def test_with_a_bias_refuses_one_of_another_shape_and_says_why():
    attrs = {"num_groups": 2, "eps": 1e-5}
    x, affine = TensorType((2, 8, 4), "f32"), [TensorType((4,), "f32")] * 2
    spec = triton_group_norm_nhwc.BIAS_SPEC
    assert spec.rejects([x, TensorType((4,), "f32"), *affine], attrs) is None
    assert spec.rejects([x, TensorType((2, 1, 4), "f32"), *affine], attrs) is None
    assert "shift: [C] or [N, 1, ..., 1, C]" in spec.rejects([x, TensorType((8, 4), "f32"), *affine], attrs)


@pytest.mark.parametrize("spec", BIAS_SPECS, ids=lambda s: s.id)
def test_a_shift_moves_a_large_mean_without_rounding_it_away(spec):
    """At a mean of 1000 and a spread of 3, x + shift rounded to float32 is up to 3e-5 off (1e-5 of the
    spread, beyond float32's check); the shift moves each channel's mean pair instead, exactly."""
    (x, shift, w, b), attrs = _bias_inputs((1, 40, 40, 8), 2, torch.float32, per_sample=False)
    inputs = [x + 1000.0, shift, w, b]
    (got,) = launch(spec, inputs, attrs)
    (want,) = reference(spec, inputs, attrs)
    assert ((got.double() - want).norm() / want.norm()).item() <= 2e-6


@pytest.mark.parametrize("spec", BIAS_SPECS, ids=lambda s: s.id)
def test_with_a_bias_own_examples_pass(spec):
    verdict = check_kernel(spec, examples=2, trials=3, seed=5, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason

"""What "auto" picks (modelled on Inductor's heuristics), the sweep around it, and `hoid.measure.tune` keeping
the measured-fastest of that sweep (under a fake timer: the choice logic, with real launches)."""

from __future__ import annotations

import pytest
import torch

import hoid.kernels.launch as launch
import hoid.measure.kernel_bench as kernel_bench
from hoid.kernels.codegen import generate
from hoid.kernels.codegen.params import auto_params, declared_choices, pointwise_block_n, sweep
from hoid.kernels.loader import load_entry
from hoid.measure import tune
from hoid.measure.devices import CPU
from hoid.measure.timing import Timing

from .helpers import assert_verified, builder


def _bias_add(rows: int, cols: int, dtype: str = "f32"):
    b = builder()
    return generate(b.build(b.add(b.input("x", (rows, cols), dtype), b.input("w", (cols,), dtype))))


def _layer_norm(rows: int, cols: int):
    b = builder()
    x, w = b.input("x", (rows, cols), "f32"), b.input("w", (cols,), "f32")
    return generate(b.build(b.layer_norm(x, w, normalized_shape=[cols])))


@pytest.mark.parametrize(("cols", "block"), [(768, 256), (1280, 256), (3072, 1024), (3000, 1024), (197, 256),
                                             (64, 64)])
def test_an_elementwise_tile_wastes_the_fewest_lanes(cols, block):
    """ViT's 768 columns at 1024 left a quarter of every tile masked off; 256 divides them."""
    assert pointwise_block_n(cols) == block


def test_auto_follows_inductors_pointwise_and_persistent_reduction_defaults():
    # pointwise: 1024 elements a program, a warp per 256 (triton_heuristics.triton_config)
    assert auto_params(_bias_add(1576, 768).layout) == {"block_m": 4, "block_n": 256, "num_warps": 4}
    # a row of 768 (a 1024-wide tile): one row a program and RBLOCK // 128 = 8 warps
    assert auto_params(_layer_norm(1576, 768).layout) == {"block_m": 1, "block_n": 1024, "num_warps": 8}
    # narrow rows are packed up to 2048 elements a program
    assert auto_params(_layer_norm(512, 64).layout) == {"block_m": 32, "block_n": 64, "num_warps": 8}


def test_the_sweep_is_auto_then_distinct_neighbours_within_the_declared_choices():
    generated = _bias_add(1576, 768)
    combos = sweep(generated.layout)
    choices = declared_choices(generated.layout)
    assert combos[0] == {"block_m": "auto", "block_n": "auto", "num_warps": "auto"}
    assert combos[1:] == ({"block_m": 2, "block_n": "auto", "num_warps": "auto"},
                          {"block_m": 8, "block_n": "auto", "num_warps": "auto"},
                          {"block_m": "auto", "block_n": "auto", "num_warps": 2},
                          {"block_m": "auto", "block_n": "auto", "num_warps": 8})
    for combo in combos:
        assert all(v in choices[k] for k, v in combo.items())
    auto = auto_params(generated.layout)
    resolved = [{**auto, **{k: v for k, v in c.items() if v != "auto"}} for c in combos]
    assert len({repr(sorted(r.items())) for r in resolved}) == len(combos)  # each a different kernel
    assert len(sweep(generated.layout, 3)) == 3


def test_a_sweep_from_one_row_a_program_also_tries_four():
    # one row a program has no half: the slot goes to four rows (BGE-M3's add ran faster at two, 12-04)
    combos = sweep(_bias_add(4096, 1024).layout)
    assert auto_params(_bias_add(4096, 1024).layout)["block_m"] == 1
    assert [c["block_m"] for c in combos] == ["auto", 2, "auto", "auto", 4]


def test_the_sweep_never_takes_more_rows_than_there_are():
    combos = sweep(_bias_add(1, 64).layout)  # one row: "auto" takes it, and no neighbour takes two
    assert [c["block_m"] for c in combos] == ["auto"] * len(combos)
    assert combos[1:] == ({"block_m": "auto", "block_n": "auto", "num_warps": 2},)  # 1 warp: none fewer


@pytest.mark.parametrize("block_m", ["auto", 8, 16, 32])
def test_unmasked_and_masked_tiles_are_both_right(block_m):
    """EVEN_M / EVEN_N drop the bounds where the blocks divide the shape (12 rows: 4 divides, 8 does not)."""
    generated = _layer_norm(12, 256)
    assert_verified(generated)
    x, w = torch.randn(12, 256), torch.randn(256)
    out = torch.empty(12, 256)
    load_entry(generated.source)(x, w, out, block_m=block_m)
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (256,), w), rtol=1e-5, atol=1e-5)


def test_tune_keeps_the_measured_fastest_of_the_sweep(monkeypatch):
    """A fake timer (each candidate still launched once, under the interpreter): the candidate it makes
    fastest, beyond the noise of the repeated "auto", is the choice."""
    generated = _bias_add(24, 768)
    combos = sweep(generated.layout)
    fastest = generated.spec.check_params(combos[3])
    bound_params = []
    real_bind = launch.bind_spec

    def bind(spec, types, attrs, params=None, **kw):
        bound_params.append(spec.check_params(params or {}))
        return real_bind(spec, types, attrs, params, **kw)

    def fake_time_on(device, fn, args, **options):
        fn(*args)
        base = 5e-6 if bound_params[-1] == fastest else 10e-6 + 1e-7 * len(bound_params)
        return Timing((base, base * 1.001, base * 0.999), "cpu-wall")

    monkeypatch.setattr(launch, "bind_spec", bind)
    monkeypatch.setattr(kernel_bench, "time_on", fake_time_on)
    result = tune(generated.spec, generated.types, {}, device=CPU, candidates=combos)
    assert result.params == fastest and not result.cached
    assert len(result.trials) == len(combos)  # auto (timed twice, reported once) and every neighbour
    assert "faster" in result.reason


def test_tune_keeps_auto_when_no_neighbour_beats_it_beyond_noise(monkeypatch):
    generated = _bias_add(24, 768)
    monkeypatch.setattr(kernel_bench, "time_on",
                        lambda device, fn, args, **o: Timing((10e-6, 10.5e-6, 9.5e-6), "cpu-wall"))
    result = tune(generated.spec, generated.types, {}, device=CPU, candidates=sweep(generated.layout))
    assert result.params == generated.spec.default_params()
    assert "kept the defaults" in result.reason


def test_a_bias_every_row_reads_is_kept_in_the_l2_and_every_load_stays_16_bytes():
    """ViT's bias add at its real shape: the activation streamed, the bias marked evict_last (as Inductor
    marks a load with no x term), both loaded 16 bytes a thread in the sm_90 build."""
    generated = _bias_add(1576, 768, "bf16")
    loads = [ln for ln in generated.source.text.splitlines() if "tl.load(" in ln]
    assert [("evict_last" in ln) for ln in loads] == [False, True]
    built = generated.spec.compile("sm_90")
    assert built.wide_loads >= 2 and built.narrow_loads == 0, built

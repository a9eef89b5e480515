"""Tuning through the measurement layer, on a torch kernel whose one param really changes its speed."""

import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels import KernelSpec, Param, op_pattern
from hoid.kernels.launch import resolve_params
from hoid.kernels.registry import library_kernels
from hoid.kernels.spec import Target
from hoid.measure.cache import MeasureCache, MeasureKey
from hoid.measure.cpu import calibrate_cpu
from hoid.measure.tune import candidates_of, descend, neighbours, tune

FAST = {"min_runs": 5, "min_seconds": 0.02}
# Small enough that one call stays on one thread (torch parallelizes from 32K elements, and a thread
# pool on a loaded 2-core machine makes a single call slower than many small ones).
TYPES = [TensorType((4096,), "f32")]


def chunked_silu(x: torch.Tensor, out: torch.Tensor, *, chunks: int) -> None:
    """silu in `chunks` separate calls: 1024 calls of 4 elements cost far more than one call of 4096."""
    for xs, os_ in zip(x.chunk(chunks), out.chunk(chunks), strict=True):
        os_.copy_(torch.nn.functional.silu(xs))


def spec_with_default(chunks: int) -> KernelSpec:
    return KernelSpec(id=f"test.silu_chunked_{chunks}", pattern=op_pattern("silu"), backend="torch",
                      launch=chunked_silu, params=(Param("chunks", (1, 1024), chunks),))


def test_tune_picks_the_faster_params_beyond_noise_and_caches_the_choice(tmp_path):
    spec = spec_with_default(1024)
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        result = tune(spec, TYPES, {}, device=calibrate_cpu(), cache=cache, **FAST)
        assert result.params == {"chunks": 1} and not result.cached
        assert "beyond the noise" in result.reason
        assert len(result.trials) == 2 and "chose {'chunks': 1}" in result.report()
        recorded = result.to_json()  # what benchmarks write of a tuning
        assert recorded["params"] == {"chunks": 1} and recorded["reason"] == result.reason
        assert recorded["trials"][0] == {"params": {"chunks": 1024}, "median_s": result.trials[0].median,
                                         "suspect": ""}
        again = tune(spec, TYPES, {}, device=calibrate_cpu(), cache=cache)
        assert again.cached and again.params == {"chunks": 1} and again.trials == ()
        assert len(cache.entries(kernel=spec.id)) == 2  # every candidate's measurement is kept


def test_a_choice_tuned_under_another_torch_is_tuned_again_and_the_reason_says_so(tmp_path):
    spec = spec_with_default(1)
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        device = calibrate_cpu()
        stale = MeasureKey.of(device.name, spec.id, spec.version, {}, TYPES, {}, torch="1.0.0")
        cache.put_choice(stale, {"chunks": 1024}, 1e-9, tried=2)
        result = tune(spec, TYPES, {}, device=device, cache=cache, **FAST)
        assert not result.cached and result.params == {"chunks": 1}
        assert "tuned again" in result.reason and "torch 1.0.0" in result.reason


def test_tune_keeps_defaults_that_nothing_beats():
    result = tune(spec_with_default(1), TYPES, {}, device=calibrate_cpu(), **FAST)
    assert result.params == {"chunks": 1}
    assert "kept the defaults" in result.reason


def test_candidates_are_every_combination_within_a_limit():
    spec = spec_with_default(1)
    assert candidates_of(spec) == [{"chunks": 1}, {"chunks": 1024}]
    with pytest.raises(ValueError, match="pass candidates= a subset"):
        candidates_of(spec, limit=1)


def test_a_suspect_default_stops_tuning_before_the_candidates_are_timed(monkeypatch):
    import sys
    from types import SimpleNamespace

    tune_module = sys.modules["hoid.measure.tune"]  # the module: hoid.measure.tune is the function

    timed = []

    def suspect_measure(spec, types, attrs, params, **_):
        timed.append(params)
        return SimpleNamespace(suspect=True, sanity=SimpleNamespace(reason="faster than DRAM allows"))

    monkeypatch.setattr(tune_module, "measure_kernel", suspect_measure)
    with pytest.raises(tune_module.TuneRefused, match="below the roofline floor .faster than DRAM allows."):
        tune(spec_with_default(1), TYPES, {}, device=calibrate_cpu(), **FAST)
    assert timed == [{"chunks": 1}]  # the default alone: no candidate timed against a useless baseline


def test_neighbours_vary_every_param_before_any_twice_each_a_different_kernel_at_the_shape():
    """The CuTe GEMV at Llama-3.2-1B's down projection (K = 8192): its heuristic takes one row a warp, 8
    warps, the K loop unrolled 8 times; the sweep tries 2 and 4 rows a warp (x re-read half and a quarter as
    often) within its 8, where the product of the choices in declared order never moved `rows`."""
    spec = library_kernels()["cute.linear_add"]
    types = [TensorType((1, 8192), "bf16"), TensorType((2048, 8192), "bf16"), TensorType((1, 2048), "bf16")]
    combos = neighbours(spec, 8, types=types, attrs={}, target=Target.H200)
    assert combos[0] == spec.default_params()
    assert [{k: v for k, v in c.items() if v != "auto"} for c in combos[1:]] == [
        {"rows": 2}, {"warps": 4}, {"unroll": 4},  # each param once, nearest the resolved 1, 8, 8 first
        {"rows": 4}, {"unroll": 16}, {"unroll": 2}, {"unroll": 1}]  # warps has no third choice
    resolved = [resolve_params(spec, types, {}, c, Target.H200) for c in combos]
    assert len({tuple(sorted(r.items())) for r in resolved}) == len(combos)  # no "rows: 1" twin of the defaults
    assert len(neighbours(spec, 3, types=types, attrs={}, target=Target.H200)) == 3


def test_neighbours_without_types_start_from_the_declared_defaults():
    spec = KernelSpec("test.tuned", op_pattern("relu"), "torch", lambda x, out, **p: None,
                      params=(Param("block", (64, 128, 256, 512), 256), Param("warps", (2, 4, 8), 4)))
    assert neighbours(spec) == ({"block": 256, "warps": 4}, {"block": 128, "warps": 4}, {"block": 256, "warps": 2},
                                {"block": 512, "warps": 4}, {"block": 256, "warps": 8}, {"block": 64, "warps": 4})


def test_neighbours_around_a_choice_leave_out_what_was_timed():
    spec = KernelSpec("test.tuned", op_pattern("relu"), "torch", lambda x, out, **p: None,
                      params=(Param("block", (64, 128, 256, 512), 256), Param("warps", (2, 4, 8), 4)))
    around = {"block": 128, "warps": 4}
    assert neighbours(spec, 3, around=around) == (around, {"block": 64, "warps": 4}, {"block": 128, "warps": 2})
    timed = [*neighbours(spec, 3), {"block": 64, "warps": 4}]  # the defaults (block 256), block 128, warps 2; 64
    # block 64 and 256 (the defaults) are timed: left out and not counted; warps 2 and 8 come instead
    assert neighbours(spec, 3, around=around, skip=timed) == (around, {"block": 128, "warps": 2},
                                                              {"block": 128, "warps": 8})


def _chunked_copies(x: torch.Tensor, out: torch.Tensor, *, chunks: int, copies: int) -> None:
    for _ in range(copies):
        chunked_silu(x, out, chunks=chunks)


# The steps the tests below rely on are factors of 8 in calls: a factor of 2 flipped under CI's load (12-07)
DESCENT = KernelSpec(id="test.silu_chunked_copies", pattern=op_pattern("silu"), backend="torch",
                     launch=_chunked_copies,
                     params=(Param("chunks", (1024, 64, 4, 1), 1024), Param("copies", (1, 2), 2)))


def test_one_round_is_tune_over_the_neighbours_and_more_rounds_walk_further():
    """The fastest params (one chunk, one copy) are several changes from the defaults (1024 chunks, two
    copies): 3 candidates a round reach 64 chunks in one round (128 calls against 1024 chunks once), and
    the descent walks on (4 chunks twice, 8 calls, against 64 once) before it stops."""
    one = descend(DESCENT, TYPES, {}, size=3, rounds=1, device=calibrate_cpu(), **FAST)
    assert one.params == {"chunks": 64, "copies": 2} and len(one.trials) == 3, one.report()
    walked = descend(DESCENT, TYPES, {}, size=3, rounds=10, device=calibrate_cpu(), **FAST)
    assert walked.params["chunks"] <= 4 and walked.median < one.median, walked.report()
    rounds = int(walked.reason.split("(round ")[1].split()[0])
    assert 2 <= rounds < 10  # it stops where a round keeps what it started from, or nothing is left to time
    timed = [str(t.params) for t in walked.trials]
    assert len(timed) == len(set(timed)) > 3  # each round's trials are new params (the defaults once)
    assert "beyond the noise" in walked.reason


def test_a_descent_reads_a_cached_choice_and_tunes_again_on_refresh(tmp_path):
    with MeasureCache(tmp_path / "m.sqlite") as cache:
        first = descend(DESCENT, TYPES, {}, size=3, rounds=10, device=calibrate_cpu(), cache=cache, **FAST)
        again = descend(DESCENT, TYPES, {}, size=3, rounds=10, device=calibrate_cpu(), cache=cache, **FAST)
        assert again.cached and again.params == first.params and first.params["chunks"] <= 4
        fresh = descend(DESCENT, TYPES, {}, size=3, rounds=1, device=calibrate_cpu(), cache=cache, refresh=True,
                        **FAST)
        assert not fresh.cached and fresh.params == {"chunks": 64, "copies": 2}
        with pytest.raises(ValueError, match="rounds=0, size=3; each must be at least 1"):
            descend(DESCENT, TYPES, {}, size=3, rounds=0, device=calibrate_cpu(), cache=cache)

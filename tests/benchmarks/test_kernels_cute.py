"""benchmarks/kernels_cute.py: each row is kept as it finishes (printed, added, the JSON rewritten), a row that
fails among them, so a GPU call cut at its limit keeps every finished row."""

import json

import pytest


def test_every_finished_row_is_saved_even_one_that_failed(capsys):
    from kernels_cute import prefill_cases, run_prefill

    rows, saved = [], []
    # on this machine every case fails (CuTe kernels run on CUDA tensors only): each is still a row, and saved
    run_prefill("Qwen3-1.7B", rows=rows, save=lambda: saved.append(len(rows)))
    cases = [c for c in prefill_cases() if "Qwen3-1.7B" in c[0]]
    assert len(rows) == len(cases) >= 2
    assert saved == list(range(1, len(cases) + 1))  # after every row, with that row in
    assert all("error" in r for r in rows)
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [p["what"] for p in printed] == [r["what"] for r in rows]


def test_the_new_grid_is_the_added_tiles_and_the_earlier_best_and_full_is_everything():
    from kernels_cute import GEMM_GRID, GEMM_GRID_ADDED, plain_grid

    before = {"what": "qkv p128", "params": {"tile_m": 64, "tile_n": 64, "stages": 6, "split_k": 1, "cluster_m": 1,
                                             "unrelated": 3}}
    new = plain_grid("new", before)
    assert new[:len(GEMM_GRID_ADDED)] == GEMM_GRID_ADDED
    assert new[-1] == {"tile_m": 64, "tile_n": 64, "stages": 6, "split_k": 1, "cluster_m": 1}
    assert plain_grid("new", None) == GEMM_GRID_ADDED  # a shape the table has no row for: the added tiles only
    assert plain_grid("full", before) == GEMM_GRID and len(GEMM_GRID) > len(new)
    with pytest.raises(ValueError, match="'full' .* or 'new'"):
        plain_grid("every", before)


def test_a_new_grid_row_keeps_the_earlier_tries_apart_from_its_own(capsys):
    from kernels_cute import run_prefill

    earlier = [{"what": "qkv p128", "params": {"tile_m": 64, "tile_n": 64}, "tried": [{"params": {}, "seconds": 1.0}]}]
    rows = run_prefill("Qwen3-1.7B", tune=True, grid="new", before=earlier)
    by_what = {r["what"]: r for r in rows}
    assert by_what["qkv p128"]["tried_before"] == earlier[0]["tried"]
    assert "tried_before" not in by_what["o + residual p128"]  # no earlier row: nothing carried


def test_a_run_keeps_the_parts_it_did_not_run_only_from_the_same_device(capsys):
    """12-08: an H100's prefill run copied the H200's table, and the file named the H100 over the H200's rows."""
    from kernels_cute import parts_kept, table

    h200 = {"device": "NVIDIA H200", "decode": [{"what": "qkv"}], "prefill": [], "whole_model": []}
    assert parts_kept(h200, "NVIDIA H200") is h200
    assert parts_kept(h200, "NVIDIA H100 80GB HBM3") == {}
    assert "from NVIDIA H200, this run on NVIDIA H100" in capsys.readouterr().out
    assert parts_kept({}, "NVIDIA H100 80GB HBM3") == {}
    # the whole-model rows are in the table file too, a row that failed with its error
    rows = [{"model": "qwen3-1.7b", "gemvs": "cute", "cache_len": 1024, "steps": 128, "tokens_per_s": 591.77,
             "kernels": ["cute.linear", "triton.rmsnorm"]}, {"model": "qwen3-1.7b", "gemvs": "triton", "error": "boom"}]
    text = table([], [], rows)
    assert "| qwen3-1.7b | cute | 1024 | 128 | 591.8 | cute.linear, triton.rmsnorm |" in text and "| boom |" in text


def test_the_whole_model_parts_triton_set_has_no_cute_kernel_and_the_cute_set_no_triton_gemv():
    """12-08: the "triton" set lacked only the plain CuTe GEMVs, and the rewrite chose CuTe's split-K ones there."""
    from kernels_cute import WHOLE_MODEL_GEMVS, whole_model_sets

    sets = whole_model_sets()
    assert not [s.id for s in sets["triton"] if s.backend == "cute"]
    assert all(k in sets["triton"] for k in WHOLE_MODEL_GEMVS["triton"])
    assert all(k in sets["cute"] for k in WHOLE_MODEL_GEMVS["cute"])
    assert not any(k in sets["cute"] for k in WHOLE_MODEL_GEMVS["triton"])

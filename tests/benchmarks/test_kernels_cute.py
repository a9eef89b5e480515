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

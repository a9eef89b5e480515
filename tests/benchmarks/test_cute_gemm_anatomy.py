"""benchmarks/cute_gemm_anatomy.py: the line it fits, the K values it times, and every case kept as a row
(here, without a GPU, each one's error)."""

import json

import pytest


def test_the_fit_recovers_a_line_and_reports_how_far_a_bent_curve_is_from_it():
    from cute_gemm_anatomy import fit_line

    f = fit_line([1, 4, 16, 32], [3e-6 + 0.5e-6 * x for x in (1, 4, 16, 32)])
    assert f["fixed"] == pytest.approx(3e-6) and f["per"] == pytest.approx(0.5e-6)
    assert f["worst_residual"] == pytest.approx(0, abs=1e-12)
    bent = fit_line([1, 2, 4, 8], [1.0, 2.0, 4.0, 16.0])
    assert bent["worst_residual"] > 1.0


def test_k_values_walk_whole_tiles_split_evenly_up_to_the_shapes_own():
    from cute_gemm_anatomy import k_values

    # K = 2048 in two splits: 16 tiles of 64 a split, so walks of 1, 4 and 16 (the shape's own)
    assert k_values(2048, 2) == [128, 512, 2048]
    assert k_values(6144, 4) == [256, 1024, 4096, 6144]  # 24 tiles a split: 1, 4, 16 and 24
    assert all(k % (64 * 4) == 0 for k in k_values(6144, 4))


def test_every_case_is_a_row_saved_as_it_finishes(capsys):
    from cute_gemm_anatomy import CASES, run

    rows, saved = [], []
    run(rows, save=lambda: saved.append(len(rows)))  # no GPU here: each case fails, and is still a row
    assert [r["what"] for r in rows] == [c[0] for c in CASES]
    assert saved == list(range(1, len(CASES) + 1))
    assert all("error" in r for r in rows)
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [p["what"] for p in printed] == [c[0] for c in CASES]


def test_a_case_fits_each_launch_and_cublas_and_its_table_row_reads_them(monkeypatch):
    # the GPU timings replaced by known lines (the CuTe GEMM's: 3 us + 0.4 us a K tile a split walks; cuBLAS's:
    # 2 us + 0.1 us a K tile): the fits must give them back, and the unsplit launch is timed only where "auto"
    # splits
    import cute_gemm_anatomy as anatomy

    def cute_seconds(kernel, inputs, params):
        return 3e-6 + 0.4e-6 * inputs[0].shape[1] / (64 * params["split_k"]), params, 0.0

    monkeypatch.setattr(anatomy, "make_inputs", lambda pattern, m, n, k: [anatomy.torch.empty(m, k)])
    monkeypatch.setattr(anatomy, "hoid_seconds", cute_seconds)
    monkeypatch.setattr(anatomy, "eager_seconds", lambda pattern, inputs: 2e-6 + 0.1e-6 * inputs[0].shape[1] / 64)
    split = anatomy.run_case("down + residual p128", 128, 2048, 6144, "linear_add")  # "auto": 64 x 64, 2 splits
    assert split["fits"]["auto"]["params"]["split_k"] == 2 and split["fits"]["unsplit"]["params"]["split_k"] == 1
    for label in ("auto", "unsplit", "cublas"):
        fit = split["fits"][label]
        assert fit["fixed"] == pytest.approx(2e-6 if label == "cublas" else 3e-6)
        assert fit["per"] == pytest.approx(0.1e-6 if label == "cublas" else 0.4e-6)
    assert [t["k"] for t in split["fits"]["auto"]["times"]][-1] == 6144  # the shape's own K last
    unsplit = anatomy.run_case("qkv p1024", 1024, 4096, 2048, "linear")  # one wave of 128 x 256: no split
    assert set(unsplit["fits"]) == {"auto", "cublas"}
    text = anatomy.table([split, {"what": "broken", "error": "E: no"}])
    assert "| down + residual p128 | auto | 64x64 split 2 | 3.00 | 400 |" in text
    assert "| down + residual p128 | cublas | cuBLAS | 2.00 | 100 |" in text and "| broken | E: no |" in text

"""benchmarks/kernels_cute.py: each row is kept as it finishes (printed, added, the JSON rewritten), a row that
fails among them, so a GPU call cut at its limit keeps every finished row."""

import json


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

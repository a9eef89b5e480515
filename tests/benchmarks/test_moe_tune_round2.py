"""`benchmarks/moe_tune_round2.py` on the CPU: every candidate it times is one the kernel launches (no
combination its heuristic refuses), and without CUDA it says so instead of timing the interpreter."""

import pytest

from hoid.kernels import all_kernels
from hoid.kernels.launch import resolve_params


def test_every_candidate_resolves_at_its_width():
    import moe_tune_round2

    timed = moe_tune_round2.calls()
    assert [(k, t[0].shape[0]) for k, t, _, _ in timed] == [
        ("triton.moe_experts", 1), ("triton.moe_experts", 4),
        ("triton.moe_router", 1), ("triton.moe_router", 4), ("triton.moe_router", 16)]
    for kernel, types, attrs, candidates in timed:
        spec = all_kernels()[kernel]
        assert candidates[0] == spec.default_params(), kernel  # tune's baseline is the defaults
        for params in candidates:
            resolved = resolve_params(spec, types, attrs, params)
            assert "auto" not in resolved.values() and {k: v for k, v in params.items() if v != "auto"}.items() \
                <= resolved.items(), (kernel, params)


def test_without_cuda_it_says_it_needs_one(monkeypatch, tmp_path):
    import moe_tune_round2
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        moe_tune_round2.main(["--out", str(tmp_path)])
    assert not list(tmp_path.iterdir())

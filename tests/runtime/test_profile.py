"""The in-context profile: one row per compiled step with its floor; `hoid profile FILE` prints it."""

import hoid
from hoid.runtime import compile
from hoid.runtime.profile import example_inputs, print_profile, profile


def test_every_step_is_timed_with_its_floor(tiny_step):
    compiled = compile(tiny_step, device="cpu")
    result = profile(compiled, example_inputs(compiled), min_runs=1, min_seconds=0.0, warmup=0)
    assert len(result.rows) == len(compiled.plan.steps) and result.mode == "in-context"
    assert abs(sum(r.share for r in result.rows) - 1) < 1e-9
    matmuls = [r for r in result.rows if r.op == "matmul"]
    assert matmuls and all(r.floor > 0 and r.seconds > 0 for r in matmuls)
    assert result.step > 0 and result.kernels is None  # no device kernels to sum on the CPU


def test_cli_prints_the_table(tmp_path, capsys):
    from hoid.cli import main
    from hoid.models.examples import EXAMPLES

    path = tmp_path / "g.hoid"
    hoid.save(EXAMPLES["mlp_block"](), path)
    assert main(["profile", str(path), "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert "x floor" in out and "step" in out
    assert print_profile is not None

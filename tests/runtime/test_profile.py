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


def test_each_signature_is_timed_once_and_its_time_given_to_every_node_of_it(tiny_step, monkeypatch):
    import hoid.runtime.profile as module

    compiled = compile(tiny_step, device="cpu")
    calls = []
    real = module.time_on
    monkeypatch.setattr(module, "time_on", lambda *a, **k: calls.append(1) or real(*a, **k))
    options = dict(min_runs=1, min_seconds=0.0, warmup=0)
    result = profile(compiled, example_inputs(compiled), **options)
    no_launch = {r.node for r in result.rows if r.method.startswith("no launch")}  # views: nothing timed
    timed = [n for n in compiled.plan.steps if n.name not in no_launch]
    keys = [module.signature(n) for n in timed]
    timings = len({k for k in keys if k is not None}) + keys.count(None)
    # the two layers repeat their signatures: fewer timings than nodes, one per signature (and the step)
    assert len(calls) == timings + 1 < len(compiled.plan.steps) + 1
    assert len(result.rows) == len(compiled.plan.steps)
    seconds = {r.node: r.seconds for r in result.rows}
    by_signature = {}
    for node, key in zip(timed, keys, strict=True):
        if key is not None:
            by_signature.setdefault(key, set()).add(seconds[node.name])
    assert all(len(times) == 1 for times in by_signature.values())
    assert any("once per signature" in r.method for r in result.rows)
    calls.clear()
    every = profile(compiled, example_inputs(compiled), per_signature=False, **options)
    assert len(calls) == len(compiled.plan.steps) - len(no_launch) + 1
    assert not any("once per signature" in r.method for r in every.rows)


def test_a_view_torch_makes_without_a_copy_is_not_timed(tiny_step):
    """Timed, it captured an empty CUDA graph (torch warns "The CUDA Graph is empty", as on the H200's
    profiles) and reported the timer's floor for a step that launches nothing."""
    from hoid.ir.registry import get_op

    compiled = compile(tiny_step, device="cpu")
    result = profile(compiled, example_inputs(compiled), min_runs=1, min_seconds=0.0, warmup=0)
    views = [r for r in result.rows if get_op(r.op).is_view]
    assert views and all(r.seconds == 0.0 and r.method.startswith("no launch") for r in views)
    assert all(r.seconds > 0 for r in result.rows if not get_op(r.op).is_view and r.op != "kernel")

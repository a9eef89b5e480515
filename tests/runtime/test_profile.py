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


def test_a_value_is_gone_before_the_steps_after_its_last_reader_are_timed(monkeypatch):
    """The profile once ran the whole call first and kept every value to time each step over: 42 GB of the
    H200 for BGE-M3's optimized plan at 32 x 512 tokens (12-05), whose step peaks at 3 GB. When a step is
    timed, only what it or a later step reads may be alive."""
    import weakref

    import torch

    import hoid.runtime.profile as module

    b = hoid.GraphBuilder("chain")
    h = b.input("x", (64, 64), "f32")
    for _ in range(6):
        h = b.exp(b.mul(h, 0.5))
    compiled = compile(b.build(h), device="cpu")
    steps = compiled.plan.steps
    made: dict[str, weakref.ref] = {}
    alive_at: list[set[str]] = []
    real_run, real_time = module.run_node, module.time_on

    def run(node, args):
        outs = real_run(node, args)
        made.update((v.name, weakref.ref(t)) for v, t in zip(node.outputs, outs, strict=True))
        return outs

    def time_on(*a, **k):
        alive_at.append({name for name, ref in made.items() if ref() is not None})
        return real_time(*a, **k)

    monkeypatch.setattr(module, "run_node", run)
    monkeypatch.setattr(module, "time_on", time_on)
    profile(compiled, [torch.randn(64, 64)], per_signature=False, min_runs=1, min_seconds=0.0, warmup=0)
    assert len(alive_at) == len(steps) + 1 == 13  # each step, then the whole call
    reads = {v.name: i for i, n in enumerate(steps) for v in n.inputs}
    for i, alive in enumerate(alive_at[:-1]):
        assert alive <= {name for name, last in reads.items() if last >= i}, (steps[i].name, alive)

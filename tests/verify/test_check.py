"""check, check_region and check_kernel: honest candidates pass, the API does what it says."""

import concurrent.futures
import functools
import importlib
import pathlib

import pytest
import torch
import torch.nn.functional as F

import hoid
from hoid.kernels import KernelSpec, op_pattern
from hoid.kernels import get as get_kernel
from hoid.verify import Dim, Input, KernelSource, VerifyError, check, check_kernel, check_region
from hoid.verify.trials import TrialRunner

from . import honest as H
from . import references as R
from . import triton_honest as T

M = Dim("m", 1, 16)
ROWS = [((M, 64), "f32"), ((64,), "f32")]
ONE = [((M, 64), "f32")]
MATMUL = [((M, 48), "f32"), ((48, 40), "f32")]
B, SEQ = Dim("b", 1, 3), Dim("t", 1, 12)
DECODE = [
    Input((B, 16), "f32", name="q"),
    Input((B, SEQ, 16), "f32", name="k"),
    Input((B, SEQ, 16), "f32", name="v"),
    Input((B,), "i64", low=0, high=lambda earlier, sizes: sizes["t"], name="pos"),
    Input((B, SEQ), "bool", derive=lambda e, sizes: torch.arange(sizes["t"])[None, :] <= e[3][:, None], name="mask"),
]

HONEST = [
    (H.rmsnorm, R.rmsnorm, ROWS, {}),
    (H.rmsnorm_into, R.rmsnorm, ROWS, {"destination_passing": True}),
    (H.matmul_blocked, R.matmul, MATMUL, {}),
    (H.matmul_split_k, R.matmul, MATMUL, {}),
    (H.softmax_online, R.softmax, ONE, {}),
    (H.softmax_logsumexp, R.softmax, ONE, {}),
    (H.var_welford, R.row_var, ONE, {}),
    (H.row_sum_kahan, R.row_sum, [((M, 24), "f32")], {}),
    (H.silu_formula, R.silu, ONE, {}),
    (H.relu_where, R.relu, ONE, {}),
    (H.decode_attention, R.decode_attention, DECODE, {}),
    (T.softmax, R.softmax, [((Dim("m", 1, 4), 48), "f32")], {}),
]


@pytest.mark.parametrize("candidate, reference, inputs, options", HONEST,
                         ids=[f"{row[0].__module__.split('.')[-1]}.{row[0].__name__}" for row in HONEST])
def test_honest_candidate_is_accepted(candidate, reference, inputs, options):
    verdict = check(candidate, reference, inputs, trials=8, seed=11, **options)
    assert verdict.ok, verdict
    assert verdict.kind is None and verdict.counterexample is None


def test_honest_candidates_given_as_source_pass_isolated():
    triton_file = pathlib.Path(T.__file__)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        text = pool.submit(check, (H.RMSNORM_SOURCE, "rmsnorm"), R.rmsnorm, ROWS, trials=6, seed=3)
        path = pool.submit(check, KernelSource.from_file(triton_file, "softmax"), R.softmax, [((4, 48), "f32")],
                           trials=4, seed=3)
        assert text.result().ok, text.result()
        assert path.result().ok, path.result()


def test_float16_is_checked_at_float16_tolerance():
    x16 = [((M, 64), "f16"), ((64,), "f16")]
    in_float32 = functools.partial(_via, torch.float32, H.rmsnorm)  # as the op contract computes it
    # Accumulating in float32 and rounding the result to float16 is within float16's tolerance...
    assert check(in_float32, R.rmsnorm, x16, trials=8, seed=1).ok
    # ...squaring in float16 is not: large values overflow it, small ones fall into its subnormals.
    in_half = check(H.rmsnorm, in_float32, x16, trials=8, seed=1)
    assert in_half.kind == "mismatch"
    assert any(" large," in line or " small," in line for line in in_half.counterexample.inputs)
    # It passes against a reference that squares in float16 too: no kernel is held to more than the
    # reference computes in the same dtypes.
    assert check(H.rmsnorm, R.rmsnorm, x16, trials=8, seed=1).ok
    # And float16 arithmetic never passes for float32 outputs.
    assert not check(functools.partial(_via, torch.float16, H.rmsnorm), R.rmsnorm, ROWS, trials=8, seed=1).ok


def _via(dtype, fn, *xs):
    return fn(*(x.to(dtype) for x in xs)).to(xs[0].dtype)


def matmul_like_tf32(a, b):
    """Inputs rounded to tf32's 10-bit mantissa (float32's exponent range), products summed in float32."""
    def to_tf32(x):
        return ((x.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)

    return to_tf32(a) @ to_tf32(b)


def test_tf32_loosens_float32_matmuls_to_tf32_tolerance():
    small = [((8, 16), "f32"), ((16, 8), "f32")]
    assert check(matmul_like_tf32, R.matmul, small, trials=6, seed=2).kind == "mismatch"
    assert check(matmul_like_tf32, R.matmul, small, trials=6, seed=2, tf32=True).ok


def test_the_reference_runs_in_float64_after_the_candidate():
    calls = []

    def candidate(x):
        calls.append(("candidate", x.dtype))
        return x * 2

    def reference(x):
        calls.append(("reference", x.dtype))
        return x * 2

    assert check(candidate, reference, [((4, 4), "f32")], trials=3, seed=0).ok
    # Native runs of the reference only learn the output types, on throwaway inputs, before anything else.
    trial_calls = [c for c in calls if c != ("reference", torch.float32)]
    assert trial_calls[:3] == [("candidate", torch.float32)] * 2 + [("reference", torch.float64)]
    for i, call in enumerate(trial_calls):
        if call[0] == "reference":
            assert trial_calls[i - 2:i] == [("candidate", torch.float32)] * 2


def test_a_reference_that_cannot_run_in_float64_runs_natively_and_says_so():
    def reference(x):
        if x.dtype == torch.float64:
            raise TypeError("float32 only")
        return x + 1

    verdict = check(lambda x: x + 1, reference, [((3,), "f32")], trials=2, seed=0)
    assert verdict.ok
    assert any("could not run in float64" in note for note in verdict.notes)


def test_counterexample_is_shrunk_and_replays_from_the_seed():
    verdict = check(wrong_from_row_five, R.rmsnorm, ROWS, trials=12, seed=5)
    assert verdict.kind == "mismatch"
    # The smallest failing size is five rows, with plain normal values.
    assert verdict.counterexample.sizes == {"m": 5}
    assert all(" normal," in line for line in verdict.counterexample.inputs)
    assert "seed=5" in verdict.reason and verdict.seed == 5
    again = check(wrong_from_row_five, R.rmsnorm, ROWS, trials=12, seed=5)
    assert again.counterexample == verdict.counterexample and again.reason == verdict.reason


def test_the_shrunk_trial_is_not_run_again(monkeypatch):
    runs = []
    real = TrialRunner.run

    def counted(self, spec):
        runs.append(spec)
        return real(self, spec)

    monkeypatch.setattr(TrialRunner, "run", counted)
    verdict = check(wrong_from_row_five, R.rmsnorm, ROWS, trials=12, seed=5)
    assert verdict.counterexample.sizes == {"m": 5}
    smallest = [s for s in runs if s.size_map == {"m": 5} and set(s.dists) == {"normal"}]
    assert len(smallest) == 1, smallest


def wrong_from_row_five(x, w):
    out = R.rmsnorm(x, w)
    out[4:] *= 1.5
    return out


def test_every_signature_the_sweep_draws_runs_at_least_twice_with_new_contents():
    contents: dict[tuple, set] = {}

    def recording_gelu(x):
        contents.setdefault(tuple(x.shape), set()).add(hash(x.cpu().numpy().tobytes()))
        return F.gelu(x)

    verdict = check(recording_gelu, R.gelu, [((Dim("r", 1, 64), Dim("c", 1, 64)), "f32")], seed=3)
    assert verdict.ok, verdict
    assert len(contents) >= 5  # the sweep still explores sizes
    assert all(len(seen) >= 2 for seen in contents.values()), contents


def test_timing_runs_are_the_calls_between_the_sweep_and_the_rechecks():
    def calls_and_verdict(**kw):
        calls = []

        def counting_gelu(x):
            calls.append(1)
            return F.gelu(x)

        verdict = check(counting_gelu, R.gelu, [((4, 8), "f32")], trials=3, seed=1, **kw)
        return len(calls), verdict

    default, none, two = calls_and_verdict(), calls_and_verdict(timing_runs=0), calls_and_verdict(timing_runs=2)
    assert all(v.ok for _, v in (default, none, two))
    assert default[0] - none[0] == 30 and two[0] - none[0] == 2  # 30: the default every hoid check runs
    assert "2 timing runs and 3 re-checks" in two[1].reason


def test_declaration_mistakes_raise_verify_error():
    with pytest.raises(VerifyError, match="expected a hoid.TensorType"):
        check(H.relu_where, R.relu, ["f32"])
    with pytest.raises(VerifyError, match="declare their ranges"):
        check(lambda i: i.clone(), lambda i: torch.arange(5)[i], [((3,), "i64")], trials=2)
    with pytest.raises(VerifyError, match="not a lambda or a closure"):
        check(lambda x: x, R.copy, ONE, isolate=True)
    with pytest.raises(VerifyError, match="always runs isolated"):
        check((H.RMSNORM_SOURCE, "rmsnorm"), R.rmsnorm, ROWS, isolate=False)


def test_the_output_types_are_learnt_on_inputs_drawn_as_declared():
    # Cholesky needs a positive-definite input: derived here, and the reference must only ever see such.
    spd = Input((4, 4), "f32", derive=lambda earlier, sizes: earlier[0] @ earlier[0].T + 4 * torch.eye(4))
    declared = [((4, 4), "f32"), spd]

    def cholesky(x, a):
        return torch.linalg.cholesky(a)

    assert check(cholesky, cholesky, declared, trials=2, seed=0).ok


def test_check_accepts_tensor_types_and_pairs():
    declared = [hoid.TensorType((6, 64), "f32"), ((64,), torch.float32)]
    assert check(H.rmsnorm, R.rmsnorm, declared, trials=2, seed=0).ok


# --- check_region -----------------------------------------------------------------------------------

def _gated_graph():
    b = hoid.GraphBuilder("gated")
    x = b.input("x", (4, 32), "f32")
    w = b.weight("w", (4, 32), "f32")
    gated = b.silu(b.mul(x, w, name="scaled"), name="gated")
    return b.build(b.add(gated, x, name="out"))


def silu_of_product(x, w):
    return F.silu(x * w)


def test_check_region_uses_the_interpreter_on_the_cut_region():
    g = _gated_graph()
    assert check_region(g, ["scaled", "gated"], silu_of_product, trials=4, seed=0).ok
    wrong = check_region(g, ["scaled", "gated"], lambda x, w: x * w, trials=4, seed=0)
    assert wrong.kind == "mismatch"


def test_a_graph_can_be_the_reference():
    b = hoid.GraphBuilder("silu_of_product")
    x, w = b.input("x", (4, 32), "f32"), b.input("w", (4, 32), "f32")
    g = b.build(b.silu(b.mul(x, w)))
    assert check(silu_of_product, g, [((4, 32), "f32")] * 2, trials=4, seed=0).ok


# --- check_kernel -------------------------------------------------------------------------------------

def silu_launch(x, out):
    out.copy_(torch.nn.functional.silu(x))


def silu_launch_half_written(x, out):
    out[: out.shape[0] // 2 + 1] = torch.nn.functional.silu(x[: x.shape[0] // 2 + 1])


def _silu_spec(launch):
    def examples(rng):
        return [hoid.TensorType((rng.randint(2, 6), 32), "f32")], {}

    return KernelSpec(f"test.{launch.__name__}", op_pattern("silu"), "torch", launch, deterministic=True,
                      examples=examples)


def test_check_kernel_accepts_a_library_kernel():
    verdict = check_kernel(get_kernel("torch.rmsnorm"), examples=2, trials=8, seed=0)
    assert verdict.ok, verdict
    assert "passed 2 examples" in verdict.reason


def test_a_kernel_spec_is_a_destination_passing_candidate():
    assert check(_silu_spec(silu_launch), R.silu, [((3, 32), "f32")], trials=4, seed=0).ok
    assert check(_silu_spec(silu_launch_half_written), R.silu, [((3, 32), "f32")], trials=4, seed=0).kind == "unwritten"


SILU_SOURCE = """
import torch

PARAMS = {"SCALE": (1.0, 2.0)}


def silu(x, out, SCALE):
    out.copy_(torch.nn.functional.silu(x) * SCALE)
"""


def test_a_kernel_spec_built_from_source_is_read_by_the_static_pass_and_runs_isolated_with_its_params():
    # The same launch behind a try/except the static pass refuses: refused before running, so it was read.
    fallback = "    try:\n        pass\n    except Exception:\n        pass\n"
    sneaky = SILU_SOURCE.replace("    out.copy_(", fallback + "    out.copy_(")
    refused = check(KernelSource(sneaky, "silu").to_spec("test.silu_try", op_pattern("silu")), R.silu,
                    [((3, 32), "f32")], trials=2, seed=0)
    assert refused.kind == "static" and "try/except" in refused.reason, refused
    honest = check(KernelSource(SILU_SOURCE, "silu").to_spec("test.silu", op_pattern("silu")), R.silu,
                   [((3, 32), "f32")], trials=2, seed=0)
    assert honest.ok, honest
    assert not any("could not read" in note for note in honest.notes), honest.notes


def test_check_kernel_draws_the_shape_space_and_passes_outputs():
    verdict = check_kernel(_silu_spec(silu_launch), examples=2, trials=8, seed=0)
    assert verdict.ok, verdict
    bad = check_kernel(_silu_spec(silu_launch_half_written), examples=2, trials=8, seed=0)
    assert bad.kind == "unwritten" and bad.reason.startswith("example 1")


def test_check_kernel_keeps_the_notes_of_passing_examples(monkeypatch):
    module = importlib.import_module("hoid.verify.check")  # hoid.verify.check is the function
    real = module.run_check

    def noting(trial_runner, **kwargs):
        trial_runner.notes.append(f"note of example {trial_runner.plan.key}")
        return real(trial_runner, **kwargs)

    monkeypatch.setattr(module, "run_check", noting)
    verdict = check_kernel(_silu_spec(silu_launch), examples=2, trials=8, seed=0)
    assert verdict.ok and {"note of example 0", "note of example 1"} <= set(verdict.notes), verdict


def test_check_kernel_needs_an_example():
    with pytest.raises(VerifyError, match="examples must be at least 1"):
        check_kernel(_silu_spec(silu_launch), examples=0)


# --- on a GPU -----------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_triton_kernel_on_the_gpu_passes_in_process_and_isolated():
    rows = [((Dim("m", 1, 64), 1000), "f32")]
    assert check(T.softmax, R.softmax, rows, trials=8, seed=0).ok
    isolated = check(KernelSource.from_file(pathlib.Path(T.__file__), "softmax"), R.softmax, rows, trials=8, seed=0)
    assert isolated.ok, isolated


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_outputs_are_compared_where_they_were_computed(monkeypatch):
    """The comparison ran in float64 on the CPU: a check of one linear at BGE-M3's [32, 512, 1024] took 33 s of
    a 1-minute optimize on an H100 (12-05). Every comparison of a GPU check now gets the GPU's tensors."""
    from hoid.verify import compare, trials

    devices = []
    real = compare.compare_output

    def recording(k, cand, ref, tol, **kw):
        devices.append((cand.device.type, ref.device.type))
        return real(k, cand, ref, tol, **kw)

    monkeypatch.setattr(trials, "compare_output", recording)
    rows = [((32, 512, 1024), "bf16"), ((1024, 1024), "bf16")]
    assert check(F.linear, F.linear, rows, trials=4, seed=0).ok
    assert devices and set(devices) == {("cuda", "cuda")}, devices


def rmsnorm_as_transformers(x, w):
    """The op contract: normalize in float32, round to x's dtype, then multiply by the weight."""
    x32 = x.float()
    return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)


def test_mixed_dtypes_are_held_to_the_least_precise_input():
    # bfloat16 rows, a float32 weight, a float32 output that went through bfloat16 by definition.
    mixed = [((M, 64), "bf16"), ((64,), "f32")]
    assert check(rmsnorm_as_transformers, rmsnorm_as_transformers, mixed, trials=8, seed=4).ok


def doubled(x):
    return x * 2


def doubled_from_raw_memory(x):
    """Assumes a contiguous input: reads the storage row-major, whatever the strides say."""
    return torch.as_strided(x, x.shape, (x.shape[1], 1)) * 2


def test_inputs_come_in_their_declared_layout():
    transposed = hoid.TensorType((4, 6), "f32", strides=(1, 4))  # a [6, 4] tensor seen transposed
    assert check(doubled, doubled, [transposed], trials=3, seed=0).ok
    assert check(doubled_from_raw_memory, doubled, [transposed], trials=3, seed=0).kind == "mismatch"

"""The public checks: `check`, `check_region` and `check_kernel`.

    from hoid.verify import check, Dim
    n = Dim("n", 1, 128)
    verdict = check(my_rmsnorm, reference_rmsnorm, [((n, 256), "f32"), ((256,), "f32")])
    if not verdict:
        print(verdict.reason, verdict.counterexample)

Every check assumes the candidate is adversarial: static pass first (`static.py`), then trials with
fresh inputs from several value distributions, poisoned outputs, two runs compared, mutation and
aliasing checks, the reference in float64 after the candidate, timing runs and re-checks (`sweep.py`).
`isolate=True` runs the candidate in a child process (`isolate.py`); kernel source always runs so.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Sequence

import torch

from ..ir import Graph, Node, TensorType
from ..kernels.loader import KernelSource
from ..kernels.spec import KernelSpec, alias_error
from .candidate import as_candidate, static_findings
from .inputs import Input, as_input, dims_of
from .isolate import IsolatedRunner
from .region import extract_region, graph_reference, index_bounds
from .runners import InProcessRunner
from .selection import selections
from .sweep import DEFAULT_TRIALS, RECHECKS, TIMING_RUNS, run_check
from .trials import Plan, TrialRunner
from .verdict import Verdict, VerifyError


def _device(device) -> torch.device:
    return torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))


def _new_seed(seed: int | None) -> int:
    return random.SystemRandom().randrange(2**31) if seed is None else int(seed)


def _static_verdict(candidate, seed: int) -> tuple[Verdict | None, list[str]]:
    """The rejection by the static pass (or None), and its notes on sources it could not read."""
    findings, notes = static_findings(candidate)
    if not findings:
        return None, notes
    listed = "; ".join(str(f) for f in findings[:6]) + ("; ..." if len(findings) > 6 else "")
    reason = (f"the static check refused the candidate before running it: {listed}. An honest kernel needs "
              "none of these: remove them")
    return Verdict(False, reason, "static", seed=seed, notes=tuple(notes)), notes


def _runner(candidate, *, isolate: bool | None, destination_passing: bool, timeout_s: float,
            device: torch.device):
    if isinstance(candidate, KernelSource):
        if isolate is False:
            raise VerifyError("kernel source always runs isolated; leave isolate unset (or True)")
        isolate = True
    if isolate:
        return IsolatedRunner(candidate, destination_passing=destination_passing, timeout_s=timeout_s,
                              device=device, triton_interpret=not torch.cuda.is_available())
    return InProcessRunner(candidate, destination_passing=destination_passing, timeout_s=timeout_s, device=device)


def _output_types(outputs) -> Callable | None:
    if outputs is None or callable(outputs):
        return outputs
    fixed = [o if isinstance(o, TensorType) else TensorType(*o) for o in outputs]
    return lambda types: fixed


def _kernel_candidate(spec: KernelSpec) -> Callable | KernelSource:
    """What a check runs of a kernel spec: the source of one built from source (`KernelSource.to_spec`),
    which the static pass reads and which runs isolated; else its launch."""
    source = getattr(spec.launch, "source", None)
    return source if isinstance(source, KernelSource) else spec.launch


def _run(runner, plan: Plan, trials: int, seed: int, timing_runs: int) -> Verdict:
    try:
        return run_check(TrialRunner(plan, runner), trials=trials, seed=seed, timing_runs=timing_runs)
    finally:
        runner.close()


def check(candidate, reference: Callable | Graph, inputs: Sequence, *, trials: int | None = None,
          seed: int | None = None, isolate: bool | None = None, timeout_s: float = 60, atol: float | None = None,
          rtol: float | None = None, destination_passing: bool = False, deterministic: bool = False,
          outputs=None, tf32: bool = False, device=None, aliases: tuple[tuple[int, int], ...] = (),
          timing_runs: int = TIMING_RUNS) -> Verdict:
    """Check `candidate` against `reference` on inputs drawn from the declarations in `inputs`.

    candidate: a callable over tensors returning a tensor or a tuple of them, or (with
      `destination_passing=True`) writing the outputs it is given after its inputs; a
      `hoid.kernels.KernelSpec` (destination-passing, its default params); or kernel source, a
      `hoid.kernels.loader.KernelSource` or a pair `(path or text, entry name)`, always run isolated.
    reference: a callable over tensors, or a `hoid.Graph` of plain inputs (run by the interpreter); it
      runs on float64 copies of float inputs where it can. A graph's outputs that hold a `topk`'s indices
      are judged up to ties among the scores it selects from (`selection.py`).
    inputs: `hoid.TensorType`s, `(shape, dtype)` pairs or `Input`s (symbolic `Dim`s, value ranges,
      derived inputs).
    trials: trials of the sweep (default 20); seed: replays a check exactly (default: a random one,
      reported in the verdict); isolate: run the candidate in a child process; timeout_s: per call;
      atol/rtol: override the dtype's tolerance (`tolerance.py`); tf32: float32 outputs get tf32's;
      deterministic: two runs must agree bitwise; outputs: the output types, where the reference should
      not be run to learn them (a list, or a callable of the input types); device: default cuda if present;
      aliases: in-place outputs of a destination-passing candidate, (output, input) pairs as in
      `KernelSpec.aliases` (a spec's own are used): each such output is written into its input's buffer.
    timing_runs: calls in a row between the sweep and the re-checks (default 30), which catch a candidate
      that turns wrong once a benchmark loop has called it; hoid's own checks never lower it. Only a
      caller checking code it wrote itself (stateless, e.g. generated kernels under Triton's interpreter,
      where each call costs) has a reason to.
    """
    chosen = {}
    if isinstance(reference, Graph):
        outputs = outputs if outputs is not None else [v.type.contiguous() for v in reference.outputs]
        chosen = selections(reference)
        reference = graph_reference(reference)
    call_kwargs = {}
    if isinstance(candidate, KernelSpec):  # its launch (or source), with default params; attrs: use check_kernel
        destination_passing, deterministic = True, deterministic or candidate.deterministic
        call_kwargs, aliases = candidate.default_params(), aliases or candidate.aliases
        candidate = _kernel_candidate(candidate)
    candidate = as_candidate(candidate)
    seed = _new_seed(seed)
    declared = [as_input(x, i) for i, x in enumerate(inputs)]
    dims_of(declared)
    aliases = _checked_aliases(aliases, declared, destination_passing)
    refused, notes = _static_verdict(candidate, seed)
    if refused is not None:
        return refused
    device = _device(device)
    runner = _runner(candidate, isolate=isolate, destination_passing=destination_passing, timeout_s=timeout_s,
                     device=device)
    plan = Plan(declared, reference, device, destination_passing, deterministic, _output_types(outputs),
                call_kwargs=call_kwargs, tf32=tf32, atol=atol, rtol=rtol, aliases=aliases, selections=chosen)
    verdict = _run(runner, plan, DEFAULT_TRIALS if trials is None else trials, seed, timing_runs)
    return dataclasses.replace(verdict, notes=tuple(notes) + verdict.notes)


def _checked_aliases(aliases, declared: list[Input], destination_passing: bool) -> tuple[tuple[int, int], ...]:
    aliases = tuple(tuple(p) if isinstance(p, (tuple, list)) else p for p in aliases)
    error = alias_error(aliases, [d.name for d in declared])
    if error is not None:
        raise VerifyError(error)
    if aliases and not destination_passing:  # a returning candidate has no buffers to be given
        raise VerifyError("aliases declare outputs written in place into inputs: the candidate must be "
                          "destination-passing (destination_passing=True)")
    return aliases


def region_inputs(graph: Graph) -> list[Input]:
    """The inputs of a (region) graph as declarations: integer inputs that index get their bounds."""
    return _declared([v.type for v in graph.runtime_inputs], [v.name for v in graph.runtime_inputs],
                     index_bounds(graph))


def _declared(types: Sequence[TensorType], names: Sequence[str], bounds: dict) -> list[Input]:
    """Declarations of inputs of these types and names; those in `bounds` (position -> upper bound) index."""
    return [Input(t.shape, t.dtype, low=0 if k in bounds else None, high=bounds.get(k), name=name,
                  strides=t.strides) for k, (t, name) in enumerate(zip(types, names, strict=True))]


def check_region(graph: Graph, region: Iterable[Node | str], candidate, **options) -> Verdict:
    """Check a candidate for a region of `graph` (its nodes, or names of values they produce): the
    reference is the interpreter on the region cut out of the graph (`extract_region`); the candidate
    takes the values the region consumes, in order of first use, and gives the values it produces that
    are used outside it. `options` are `check`'s."""
    sub = extract_region(graph, region)
    return check(candidate, sub, region_inputs(sub), **options)


def check_kernel(spec, *, examples: int = 3, trials: int | None = None, seed: int | None = None,
                 isolate: bool | None = None, timeout_s: float = 60, params: dict | None = None,
                 device=None, timing_runs: int = TIMING_RUNS) -> Verdict:
    """Check a kernel (a `hoid.kernels.KernelSpec`) over its declared shape space: `examples` draws of
    `spec.examples`, each checked against its pattern's graph (in float64 where it can run so) with
    `spec.launch` destination-passing, bitwise run-to-run where the spec says deterministic, with
    `params` (default: the spec's defaults); `timing_runs` as in `check`. One runner (one child when isolated)
    serves every example.
    A spec built from kernel source (`KernelSource.to_spec`) is read by the static pass and runs isolated."""
    if spec.examples is None:
        raise VerifyError(f"kernel {spec.id}: it declares no examples(rng), so its shape space cannot be drawn")
    if examples < 1:
        raise VerifyError(f"kernel {spec.id}: examples must be at least 1, got {examples}")
    seed = _new_seed(seed)
    candidate = _kernel_candidate(spec)
    refused, notes = _static_verdict(candidate, seed)
    if refused is not None:
        return refused
    params = spec.check_params(params or {})
    per_example = max(4, (DEFAULT_TRIALS if trials is None else trials) // examples)
    rng, device = random.Random(seed), _device(device)
    runner = _runner(candidate, isolate=isolate, destination_passing=True,
                     timeout_s=timeout_s, device=device)
    passed_notes: list[str] = []
    try:
        for i in range(examples):
            types, attrs = spec.examples(rng)
            unmet = spec.rejects(types, attrs)
            if unmet is not None:
                raise VerifyError(f"kernel {spec.id}: its own example {[str(t) for t in types]} {attrs} breaks "
                                  f"its constraint: {unmet}")
            plan = _kernel_plan(spec, types, attrs, params, device, key=i)
            # The timing runs and re-checks come once, after the last example: under Triton's interpreter
            # every call costs, and call counting does not care which example it counts.
            last = i == examples - 1
            verdict = run_check(TrialRunner(plan, runner), trials=per_example, seed=seed + i,
                                timing_runs=timing_runs if last else 0, rechecks=RECHECKS if last else 0)
            if not verdict.ok:
                shown = ", ".join(str(t) for t in types)
                return dataclasses.replace(verdict, reason=f"example {i + 1} ({shown}; {attrs}): {verdict.reason}",
                                           notes=_unique(notes + passed_notes + list(verdict.notes)))
            passed_notes += verdict.notes
    finally:
        runner.close()
    return Verdict(True, f"kernel {spec.id} passed {examples} examples of its shape space, {per_example} trials "
                   "each", trials=examples * per_example, seed=seed, notes=_unique(notes + passed_notes))


def _unique(notes: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(notes))  # each example's runner may note the same thing


def _kernel_plan(spec, types, attrs: dict, params: dict, device: torch.device, key: int) -> Plan:
    graph = spec.pattern.graph(types, attrs)
    bounds = spec.index_bounds(types, attrs) if spec.index_bounds is not None else {}
    inputs = _declared(types, spec.pattern.operands, bounds)
    outputs = [v.type.contiguous() for v in graph.outputs]
    return Plan(inputs, graph_reference(graph), device, destination_passing=True, deterministic=spec.deterministic,
                output_types=_output_types(outputs), call_kwargs={**attrs, **params}, key=key, aliases=spec.aliases,
                selections=selections(graph))

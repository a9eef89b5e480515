"""One trial of a check: fresh inputs, two runs of the candidate, the reference, the comparison.

The order is what defeats the cheats a single call would not show:

1. new values are written into the same input buffers as the last trial of this signature (a cache
   keyed by address or shape returns stale results);
2. the outputs are poisoned and the candidate runs, before the reference exists anywhere (nothing of
   the reference's to find, in freed memory or elsewhere); the inputs are checked for writes;
3. it runs again on the same inputs: the two runs must agree (bitwise, if it declares itself deterministic);
4. the reference runs on the checker's own copy of the inputs, in float64 where it can (and in their own
   dtypes, for what torch itself computes there), and is compared; its outputs are then overwritten, so
   that a later allocation cannot find them.

An in-place output (`Plan.aliases`, a kernel's `KernelSpec.aliases`) has no buffer of its own: it is the
buffer of the input it updates, refilled with that input's values before each of the two runs (a second
run must not start from the first one's result), never poisoned (it holds the input: that is the
contract), exempt from the mutation check and compared with the reference instead. Every other input is
still read-only, so an alias the candidate did not declare is still a mutation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from ..ir import TensorType
from ..kernels.spec import output_buffers
from .compare import compare_output, compare_runs
from .inputs import Input, TrialSpec, draw
from .poison import bits, poison_
from .selection import Selection, compare_selection
from .tolerance import Tolerance, tolerance_for
from .verdict import Failure, VerifyError


@dataclass
class Plan:
    """What stays fixed over the trials of one check.

    reference(*tensors) -> tensor or tuple; output_types(input types) -> output types, when known without
    running the reference (kernels, regions); call_kwargs: keyword arguments of every call (attrs, params);
    key: distinguishes plans that share one runner (check_kernel's examples); aliases: (output, input) pairs,
    in-place outputs written into their input's buffer (destination-passing only); selections: outputs that
    hold a topk's indices, judged up to ties (`selection.py`)."""

    inputs: list[Input]
    reference: Callable
    device: torch.device
    destination_passing: bool = False
    deterministic: bool = False
    output_types: Callable[[list[TensorType]], Sequence[TensorType]] | None = None
    call_kwargs: dict = field(default_factory=dict)
    tf32: bool = False
    atol: float | None = None
    rtol: float | None = None
    key: object = None
    aliases: tuple[tuple[int, int], ...] = ()
    selections: dict[int, Selection] = field(default_factory=dict)


@dataclass
class Outcome:
    failure: Failure | None
    key: tuple
    values: list[torch.Tensor]
    outputs: list[torch.Tensor] = field(default_factory=list)


def _as_list(result, what: str) -> list[torch.Tensor]:
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    if not all(isinstance(t, torch.Tensor) for t in items):
        raise VerifyError(
            f"the {what} must return a tensor or a tuple of tensors, got {type(result).__name__}"
        )
    return items


def scrub_(tensors: Sequence[torch.Tensor]) -> None:
    """Overwrite tensors before they are freed, so that their memory tells nothing to whoever gets it next."""
    for t in tensors:
        t.detach().fill_(float("nan") if t.is_floating_point() else 0)


class TrialRunner:
    """Runs trials of one plan on one runner (`runners.InProcessRunner` or `isolate.IsolatedRunner`)."""

    def __init__(self, plan: Plan, runner):
        self.plan, self.runner = plan, runner
        self.notes: list[str] = []
        self._buffers: dict[tuple, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        self._expected: dict[tuple, list[TensorType]] = {}
        self._reference_in_float64 = True

    # --- buffers and expected outputs ----------------------------------------------------------
    def _signature(self, types: list[TensorType], spec: TrialSpec) -> tuple[tuple, Failure | None]:
        key = (self.plan.key, tuple(types))
        if key not in self._buffers:
            expected = self._output_types(types, spec)
            self._expected[key] = expected
            inputs = self.runner.allocate(types)
            self._buffers[key] = (inputs, self._output_buffers(inputs, types, expected))
            failure = self.runner.prepare(key, *self._buffers[key], self.plan.call_kwargs)
            if failure is not None:
                return key, failure
        return key, None

    def _output_buffers(self, inputs: list[torch.Tensor], types: list[TensorType],
                        expected: list[TensorType]) -> list[torch.Tensor]:
        """Fresh buffers for the outputs, except in-place ones: those are their input's buffer itself."""
        for o, i in self.plan.aliases:
            if o >= len(expected) or expected[o] != types[i]:
                got = f"is {expected[o]}" if o < len(expected) else f"does not exist ({len(expected)} outputs)"
                raise VerifyError(f"output {o} is declared to be written in place into input {i} ({types[i]}), "
                                  f"but it {got}: an in-place output needs its input's type")
        return output_buffers(self.plan.aliases, inputs, len(expected),
                              lambda k: self.runner.allocate([expected[k]])[0])

    def _output_types(self, types: list[TensorType], spec: TrialSpec) -> list[TensorType]:
        if self.plan.output_types is not None:
            return [t.contiguous() for t in self.plan.output_types(types)]
        # Learn them from the reference in native precision, on throwaway inputs (never the trial's): drawn
        # as declared (ranges, derived inputs), normal values, another seed.
        probe_spec = TrialSpec(spec.sizes, tuple("-" if d == "-" else "normal" for d in spec.dists),
                               spec.seed ^ 0x5EED)
        probe = draw(self.plan.inputs, probe_spec, self.plan.device)
        outs = self._call_reference([p.to(self.plan.device) for p in probe])
        expected = [TensorType(tuple(o.shape), o.dtype) for o in outs]
        scrub_(outs)
        return expected

    # --- the reference ---------------------------------------------------------------------------
    def _call_reference(self, tensors: list[torch.Tensor], reference: Callable | None = None) -> list[torch.Tensor]:
        try:
            return _as_list((reference or self.plan.reference)(*tensors), "reference")
        except VerifyError:
            raise
        except Exception as exc:
            shapes = ", ".join(str(TensorType.of(t)) for t in tensors)
            raise VerifyError(
                f"the reference raised {type(exc).__name__}: {exc} on inputs ({shapes}); if these "
                "inputs are invalid for it, declare their ranges or derive them (hoid.verify.Input)"
            ) from exc

    def reference_outputs(self, values: list[torch.Tensor], reference: Callable | None = None
                          ) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
        """The reference (or another callable of the same inputs: a selection's scores) on copies of the
        trial's inputs: in float64 where it runs so, then also in the inputs' own dtypes (what torch itself
        computes there, which `compare_output` also accepts); else only as given, and None."""
        call = self.plan.reference if reference is None else reference
        device = self.plan.device
        # Copies (copy=True) even where nothing changes: scrub_ must never reach the trial's `values`.
        native = [v.to(device, copy=True) for v in values]
        if self._reference_in_float64:
            wide = [v.to(device, torch.float64 if v.is_floating_point() else v.dtype, copy=True) for v in values]
            try:
                refs = _as_list(call(*wide), "reference")
            except Exception as exc:
                self._reference_in_float64 = False
                self.notes.append(f"the reference could not run in float64 ({type(exc).__name__}: {exc}); "
                                  "it ran in the inputs' own dtypes")
            else:
                return refs, self._float32_where_torch_overflowed(refs, self._call_reference(native, call),
                                                                  values, call)
        return self._call_reference(native, call), None

    def _float32_where_torch_overflowed(self, refs: list[torch.Tensor], natives: list[torch.Tensor],
                                        values: list[torch.Tensor], call: Callable) -> list[torch.Tensor]:
        """`natives`, with the reference in float32 standing in wherever torch overflowed in the inputs'
        narrower dtypes (Inf or NaN where the float64 value is finite): no kernel is held to more than torch
        computes, and where torch cannot compute in float16, a kernel keeps float32 intermediates and is held
        to float32's own error. An MoE's float16 experts, drawn large, cancel partials of 3e8 to 4e3: float16
        overflows, float32 misses by 1%, past float16's bound (12-07). Those outputs come back in float64."""
        narrow = [v.is_floating_point() and torch.finfo(v.dtype).bits < 32 for v in values]
        if not any(narrow):  # float32 inputs: no wider torch to stand in (and no per-trial scan of the outputs)
            return natives
        holes = [torch.isfinite(r) & ~torch.isfinite(n.to(r.device)) if r.shape == n.shape else None
                 for r, n in zip(refs, natives, strict=True)]
        if not any(h is not None and bool(h.any()) for h in holes):
            return natives
        wide = [v.to(self.plan.device, torch.float32 if n else v.dtype, copy=True) for v, n in zip(values, narrow)]
        try:
            in_float32 = _as_list(call(*wide), "reference")
        except Exception:  # the float64 run went through: a float32 one that cannot is no evidence either way
            return natives
        patched = [n if h is None or not bool(h.any()) else
                   torch.where(h, f.to(h.device, torch.float64), n.to(h.device, torch.float64))
                   for n, h, f in zip(natives, holes, in_float32, strict=True)]
        scrub_(in_float32 + [n for n, kept in zip(natives, patched, strict=True) if n is not kept])
        return patched

    # --- a trial -------------------------------------------------------------------------------
    def tolerances(self, key) -> list[Tolerance]:
        p, inputs = self.plan, [t.dtype for t in key[1]]
        return [tolerance_for(t.dtype, tf32=p.tf32, atol=p.atol, rtol=p.rtol, inputs=inputs)
                for t in self._expected[key]]

    def run(self, spec: TrialSpec) -> Outcome:
        values = draw(self.plan.inputs, spec, self.plan.device)
        key, failure = self._signature([inp.type(spec.size_map) for inp in self.plan.inputs], spec)
        if failure is not None:
            return Outcome(failure, key, values)
        inputs, outputs = self._buffers[key]
        for buf, value in zip(inputs, values, strict=True):
            buf.copy_(value)
        aliased = dict(self.plan.aliases)
        runs = []
        for n in range(2):
            if n:  # the second run updates the trial's inputs, not what the first run left in them
                for i in aliased.values():
                    inputs[i].copy_(values[i])
            for k, out in enumerate(outputs):
                if k not in aliased:
                    poison_(out)
            failure = self.runner.call(key) or self._mutation(inputs, values)
            if failure is not None:
                return Outcome(failure, key, values)
            runs.append([out.detach().clone() for out in outputs])  # compared on the check's device
        tols = self.tolerances(key)
        failure = compare_runs(runs[0], runs[1], tols, bitwise=self.plan.deterministic)
        if failure is not None:
            return Outcome(failure, key, values, runs[0])
        refs, natives = self.reference_outputs(values)
        if [tuple(r.shape) for r in refs] != [t.shape for t in self._expected[key]]:
            raise VerifyError(
                f"the reference returned shapes {[list(r.shape) for r in refs]}, but the outputs "
                f"are declared {[str(t) for t in self._expected[key]]}"
            )
        for k, (cand, ref, tol) in enumerate(zip(runs[0], refs, tols, strict=True)):
            if failure is None:
                failure = compare_output(k, cand, ref, tol, native=natives[k] if natives else None)
                if failure is not None and k in self.plan.selections:
                    failure = self._selected(k, cand, ref, values, key)
        scrub_(refs + (natives or []))
        return Outcome(failure, key, values, runs[0])

    def _selected(self, k: int, cand: torch.Tensor, ref: torch.Tensor, values: list[torch.Tensor],
                  key) -> Failure | None:
        """Output `k` holds a topk's indices that differ from the reference's: judged up to ties, on the scores
        the reference graph selects from (in float64 where the reference ran so, and in the inputs' dtypes)."""
        sel = self.plan.selections[k]
        scores, natives = self.reference_outputs(values, sel.scores)
        inputs = [t.dtype for t in key[1]]
        tol = tolerance_for(sel.dtype, tf32=self.plan.tf32, atol=self.plan.atol, rtol=self.plan.rtol, inputs=inputs)
        try:
            return compare_selection(k, cand, ref, sel, scores[0], natives[0] if natives else None, tol)
        finally:
            scrub_(scores + (natives or []))

    def _mutation(self, inputs: list[torch.Tensor], values: list[torch.Tensor]) -> Failure | None:
        updated = {i for _, i in self.plan.aliases}  # in place by declaration: compared as outputs instead
        for i, (buf, value) in enumerate(zip(inputs, values, strict=True)):
            if i in updated:
                continue
            changed = bits(buf.detach()) != bits(value.to(buf.device))
            if bool(changed.any()):
                name = self.plan.inputs[i].name
                return Failure(
                    "mutated",
                    f"the candidate wrote into input {name} ({int(changed.sum())} of "
                    f"{changed.numel()} elements changed); inputs are read-only: put results in new "
                    "tensors or in the outputs given (a kernel that updates an input in place declares it: "
                    "KernelSpec.aliases)",
                )
        return None

    def timing_runs(self, key, times: int) -> Failure | None:
        """Calls in a row on the last inputs, as a benchmark makes them (nothing is compared)."""
        return self.runner.repeat(key, times)

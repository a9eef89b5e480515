"""Parameter tuning through the measurement layer (not `triton.autotune`): choices are cached and reported.

For one kernel at one signature (input types and attrs), every combination of its params' choices is
timed with `measure_kernel`. The default params are timed twice, first and last, so that the noise model
(`hoid.measure.noise`) can say whether the fastest candidate beats them by more than the noise; if it
does not, the default stays. The choice goes to the cache (`MeasureCache.put_choice`), so the next
process, or the next model with the same signature, reads it instead of tuning again.
`neighbours` picks a few candidates near the defaults where the product of the choices is too many, and
`descend` repeats that around each round's choice (coordinate descent).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..ir import TensorType
from .cache import MeasureCache, MeasureKey
from .devices import Device
from .kernel_bench import KernelMeasurement, measure_kernel
from .local import local_device
from .noise import compare
from .timing import format_seconds


class TuneRefused(RuntimeError):
    """Tuning cannot start or finish: the defaults' time, every candidate's baseline, is below the roofline
    floor (a broken measurement, or a floor that overcounts the kernel's work: `KernelSpec.work`)."""


@dataclass(frozen=True)
class Trial:
    """One candidate: its params, its median (None when suspect) and, when suspect, why."""

    params: dict
    median: float | None
    suspect: str = ""

    def to_json(self) -> dict:
        return {"params": self.params, "median_s": self.median, "suspect": self.suspect}


@dataclass(frozen=True)
class TuneResult:
    """params: the choice; median: its time; cached: read from the cache rather than tuned now; reason:
    why this choice (the noise model's words); trials: every candidate timed (empty when cached)."""

    kernel: str
    params: dict
    median: float
    cached: bool
    reason: str
    trials: tuple[Trial, ...] = field(default=())

    def report(self) -> str:
        """A short text table of the trials, fastest first, then the choice and why."""
        what = "cached choice" if self.cached else f"{len(self.trials)} candidates"
        lines = [f"tuning {self.kernel}: {what}"]
        for t in sorted(self.trials, key=lambda t: t.median if t.median is not None else float("inf")):
            time = format_seconds(t.median) if t.median is not None else f"suspect: {t.suspect}"
            lines.append(f"  {t.params}  {time}")
        lines.append(f"chose {self.params} ({format_seconds(self.median)}): {self.reason}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        """The choice, its time, why, and every trial (what a benchmark's JSON records of a tuning)."""
        return {"params": self.params, "median_s": self.median, "reason": self.reason, "cached": self.cached,
                "trials": [t.to_json() for t in self.trials]}


def candidates_of(spec, limit: int = 64) -> list[dict]:
    """Every combination of the kernel's param choices; refuses more than `limit` with the fix."""
    names = [p.name for p in spec.params]
    combos = [dict(zip(names, values, strict=True))
              for values in itertools.product(*(p.choices for p in spec.params))]
    if len(combos) > limit:
        raise ValueError(f"kernel {spec.id} has {len(combos)} param combinations, more than limit={limit}: "
                         "pass candidates= a subset, or raise the limit")
    return combos


def neighbours(spec, size: int = 8, *, types: Sequence[TensorType] | None = None, attrs: dict | None = None,
               target=None, around: dict | None = None, skip: Sequence[dict] = ()) -> tuple[dict, ...]:
    """At most `size` param sets for a search to time: the defaults first, then, one param changed at a time,
    the choices nearest the value the defaults take (for `types` on `target`, "auto" resolved by the spec's
    heuristic; without types, the declared default), taken in turn across params so that every param is
    varied before any is varied twice, each a different kernel once resolved.
    around: start from these params instead of the defaults (a later round of `descend`); skip: resolved
    param sets already timed, left out and not counted in `size`.

    Why not the product of the choices in declared order: its last param varies fastest, so a sweep of 8
    never reached the first param's second choice (the CuTe GEMV's `rows`, which decides how often x is
    re-read at K = 8192, was never tried by a search)."""
    from ..kernels.launch import resolve_params

    default = spec.check_params(around) if around is not None else spec.default_params()

    def resolved(params: dict) -> dict | None:
        if types is None:
            return params
        try:
            return resolve_params(spec, types, attrs or {}, params, target)
        except ValueError:  # a combination the kernel's heuristic refuses at this shape
            return None

    here = resolved(default) or default
    ranked = []
    for p in spec.params:
        at = p.choices.index(here[p.name]) if here[p.name] in p.choices else 0
        values = [v for v in p.choices if v != "auto" and v != here[p.name]]
        values.sort(key=lambda v: (abs(p.choices.index(v) - at), p.choices.index(v)))
        ranked.append((p.name, values))
    combos, seen = [default], [here, *skip]
    for rank in range(max((len(values) for _, values in ranked), default=0)):
        for name, values in ranked:
            if len(combos) >= size:
                return tuple(combos)
            if rank >= len(values):
                continue
            combo = {**default, name: values[rank]}
            if (full := resolved(combo)) is None or full in seen:
                continue
            seen.append(full)
            combos.append(combo)
    return tuple(combos)


def _trial(params: dict, m: KernelMeasurement) -> Trial:
    return Trial(params, None, m.sanity.reason) if m.suspect else Trial(params, m.median)


def tune(spec, types: Sequence[TensorType], attrs: dict, *, device: Device | None = None,
         cache: MeasureCache | None = None, candidates: Sequence[dict] | None = None, refresh: bool = False,
         limit: int = 64, **timer_options) -> TuneResult:
    """The fastest params of `spec` at `types` and `attrs`, beyond noise against the defaults.
    `candidates`: the params to try (default: every combination of choices, at most `limit`)."""
    device = device or local_device()
    key = MeasureKey.of(device.name, spec.id, spec.version, {}, types, attrs)
    if cache is not None and not refresh and (choice := cache.get_choice(key)) is not None:
        why = f"cached choice among {choice.tried} candidates"
        return TuneResult(spec.id, choice.params, choice.median, True, why)
    # a choice tuned under another kernel, Triton or torch version is tuned again; the reason says so
    stale = cache.explain_miss(key, choice=True) if cache is not None and not refresh else None
    default = spec.default_params()
    tried = candidates if candidates is not None else candidates_of(spec, limit)
    todo = [p for p in (spec.check_params(c) for c in tried) if p != default]

    def measure(params: dict) -> KernelMeasurement:
        return measure_kernel(spec, types, attrs, params, device=device, cache=cache, refresh=True,
                              **timer_options)

    def check_baseline(baseline: KernelMeasurement) -> None:
        if baseline.suspect:
            raise TuneRefused(f"tuning {spec.id}: the default params' time is below the roofline floor "
                               f"({baseline.sanity.reason}); fix the measurement before tuning")

    first = measure(default)
    check_baseline(first)  # before timing every candidate against a baseline that cannot be used
    measured = [(params, measure(params)) for params in todo]
    last = measure(default)
    check_baseline(last)
    trials = (_trial(default, first), *(_trial(p, m) for p, m in measured))
    params, median, reason = _choose(default, [first.timing, last.timing], measured)
    reason += f" (tuned again: {stale})" if stale else ""
    if cache is not None:
        cache.put_choice(key, params, median, tried=len(trials))
    return TuneResult(spec.id, params, median, False, reason, trials)


def _choose(default: dict, baselines, measured) -> tuple[dict, float, str]:
    """The fastest valid candidate if it beats the repeated default beyond noise, else the default."""
    valid = [(p, m) for p, m in measured if not m.suspect]
    base = min(b.median for b in baselines)
    if not valid:
        return default, base, "the defaults are the only valid candidate"
    best_params, best = min(valid, key=lambda pm: pm[1].median)
    verdict = compare(best.timing, baselines)
    if verdict.faster:
        return best_params, best.median, f"fastest candidate {best_params}: {verdict.reason}"
    return default, base, f"fastest candidate {best_params}: {verdict.reason}; kept the defaults"


def descend(spec, types: Sequence[TensorType], attrs: dict, *, size: int = 8, rounds: int = 2,
            device: Device | None = None, cache: MeasureCache | None = None, refresh: bool = False,
            **timer_options) -> TuneResult:
    """Coordinate descent over `neighbours`: round 1 tunes the defaults' neighbours (`size` of them, the
    defaults included); each later round, the neighbours of the choice before it, params already timed left
    out; it stops after `rounds`, or where a round keeps what it started from. Every round is judged as
    `tune` judges (the fastest beyond noise against the defaults, timed first and last), and the trials of
    all rounds are returned together.

    Why more than one round: on the H100 (12-07, Qwen3-30B-A3B's MoE kernels; benchmarks/results/workloads/
    h100/moe-tune-round2.json) one round moved the router to 3 stages (10.3 -> 6.1 us at one token), and
    only a second round, around that choice, found 1 warp there (5.6) and 4 warps at 16 tokens (17.0 ->
    11.8 us): the best params were two changes away from the defaults."""
    from ..kernels.launch import resolve_params

    if rounds < 1 or size < 1:
        raise ValueError(f"descend: rounds={rounds}, size={size}; each must be at least 1")
    device = device or local_device()
    target = device.target()
    timed, trials, base, result, done = [], [], None, None, 0
    for round_ in range(rounds):
        candidates = neighbours(spec, size, types=types, attrs=attrs, target=target, around=base, skip=timed)
        if round_ and len(candidates) == 1:  # nothing around the choice left untimed
            break
        result = tune(spec, types, attrs, device=device, cache=cache, candidates=candidates,
                      refresh=refresh or round_ > 0, **timer_options)
        if result.cached:  # a choice made before (by a whole descent or one tune): not tuned again
            return result
        done = round_ + 1
        trials += result.trials if not trials else [t for t in result.trials[1:] if t.params != base]
        timed += [resolve_params(spec, types, attrs, t.params, target) for t in result.trials]
        if result.params == (base or spec.default_params()):
            break
        base = result.params
    return TuneResult(spec.id, result.params, result.median, False,
                      f"{result.reason} (round {done} of at most {rounds})", tuple(trials))


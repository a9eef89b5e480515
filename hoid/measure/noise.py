"""The noise model: when is a candidate *faster*?

Timings on a real machine wander: clocks, other tenants, the allocator, the cache. A gain is only a gain
when it exceeds what the baseline alone does when timed again. So the baseline is measured at least
twice (ideally before and after the candidate), and the noise is the larger of

- the spread *between* repeated baselines (how far their medians disagree), and
- the spread *within* runs (half the interquartile range of the baseline and of the candidate),

with `min_gain` as a floor, so that a 0.1% "win" between two identical timings is never called one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .timing import Timing


@dataclass(frozen=True)
class Comparison:
    """faster: the decision; gain: baseline / candidate - 1 (0.25: the candidate takes 20% less time);
    noise: the relative gain it had to beat; reason: the decision in words."""

    faster: bool
    gain: float
    noise: float
    reason: str


def noise_level(baselines: Sequence[Timing], candidate: Timing | None = None) -> float:
    """The relative noise of a measurement, from repeated timings of the same baseline."""
    if len(baselines) < 2:
        raise ValueError(f"the noise model needs the baseline timed at least twice, got {len(baselines)}: "
                         "time the baseline again (before and after the candidate) and pass every timing")
    medians = [b.median for b in baselines]
    center = statistics.median(medians)
    between = (max(medians) - min(medians)) / center if center > 0 else 0.0
    within = [b.relative_spread for b in baselines] + ([candidate.relative_spread] if candidate else [])
    return max(between, statistics.median(within) / 2)


def compare(candidate: Timing, baselines: Sequence[Timing], *, min_gain: float = 0.01) -> Comparison:
    """Is `candidate` faster than the baseline beyond the noise of the baseline's repeated timings?"""
    noise = max(noise_level(baselines, candidate), min_gain)
    base = statistics.median(b.median for b in baselines)
    gain = base / candidate.median - 1 if candidate.median > 0 else float("inf")
    if gain > noise:
        reason = f"{gain:.1%} faster, beyond the noise of {noise:.1%}"
    elif gain > 0:
        reason = f"{gain:.1%} faster, within the noise of {noise:.1%}: not a win"
    else:
        reason = f"slower: takes {-gain / (1 + gain):.1%} longer"
    return Comparison(gain > noise, gain, noise, reason)


def is_faster(candidate: Timing, baselines: Sequence[Timing], *, min_gain: float = 0.01) -> bool:
    """Whether `candidate` beats the baselines' median by more than their noise (at least `min_gain`): `compare`."""
    return compare(candidate, baselines, min_gain=min_gain).faster

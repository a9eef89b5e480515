"""The noise model: when is a candidate *faster*?

Timings on a real machine wander: clocks, other tenants, the allocator, the cache. A gain is only a gain
when it exceeds what the baseline alone does when timed again. So the baseline is measured at least
twice (ideally before and after the candidate), and the noise is the larger of

- the spread *between* repeated baselines (how far their medians disagree), and
- the spread *within* runs (half the interquartile range of the baseline and of the candidate),

with `min_gain` as a floor, so that a 0.1% "win" between two identical timings is never called one.

Where that floor refuses a gain that may be real, the two can be timed again in turn, one timing each a
round (A B A B ...), and judged round by round (`compare_rounds`): a drift of the machine between the two
measurements then falls on both alike, and a smaller floor holds.
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


# The three repeats of one whole-graph measurement on the H200 spread 0.004-0.27% (median 0.06-0.17% per run;
# the optimizes' journals in benchmarks/results/decode_runs/2026-12-04-evening/), while the 1% floor above
# refused Llama-3.2-1B's codegen batch measured 0.9% faster (882 against 890 us, same journal): timed in turn,
# a gain above this floor in every round is not one repeat's spread.
INTERLEAVED_MIN_GAIN = 0.002


def compare_rounds(candidate: Sequence[float], baseline: Sequence[float], *,
                   min_gain: float = INTERLEAVED_MIN_GAIN) -> Comparison:
    """Is `candidate` faster than `baseline`, the two timed in turn (A B A B ...), one timing each a round?

    Timed in turn, whatever drifts (clocks, temperature, the host) drifts for both alike, so each round's
    ratio is a comparison on its own: the candidate is faster only where it wins every round by more than
    `min_gain`. One round that disagrees is enough to refuse (five rounds that all agree by chance, where
    there is no gain: one in 32)."""
    if len(candidate) != len(baseline) or not candidate:
        raise ValueError(f"rounds timed in turn pair up: got {len(candidate)} candidate and {len(baseline)} "
                         "baseline timings (time both, one after the other, the same number of rounds)")
    gains = sorted(b / c - 1 if c > 0 else float("inf") for b, c in zip(baseline, candidate, strict=True))
    gain, low, high = statistics.median(gains), gains[0], gains[-1]
    span = f"{low:+.2%} to {high:+.2%} over {len(gains)} rounds timed in turn"
    if low > min_gain:
        reason = f"{gain:.2%} faster ({span}), beyond {min_gain:.1%} in every round"
    else:
        wins = sum(g > min_gain for g in gains)
        reason = f"{gain:+.2%} ({span}): beyond {min_gain:.1%} in {wins} of them, not in every one"
    return Comparison(low > min_gain, gain, min_gain, reason)

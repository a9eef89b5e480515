"""`Timing`: what one measurement of one thing produced, whichever timer took it.

A timing keeps every sample (seconds per run), so that a caller can ask for the median, the spread, or
a quantile later, and says how it was taken (`method`), whether the inputs were rotated through copies
larger than the cache (`rotated_bytes`), and anything the timer had to do differently (`note`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

METHODS = ("cuda-events", "cuda-graph", "cpu-wall", "given")


@dataclass(frozen=True)
class Timing:
    """samples: seconds per run, one per repetition; method: one of METHODS; rotated_bytes: bytes the
    inputs were rotated through (0: one set of inputs, reused); note: what the timer wants known."""

    samples: tuple[float, ...]
    method: str
    rotated_bytes: int = 0
    note: str = ""

    def __post_init__(self):
        if not self.samples:
            raise ValueError("a Timing needs at least one sample")
        if any(not s >= 0 for s in self.samples):  # `not >=` also catches NaN
            raise ValueError(f"timing samples must be non-negative seconds, got {self.samples[:5]}")
        if self.method not in METHODS:
            raise ValueError(f"unknown timing method {self.method!r}; expected one of {METHODS}")
        object.__setattr__(self, "samples", tuple(float(s) for s in self.samples))

    @classmethod
    def of(cls, seconds: float, runs: int = 1, note: str = "") -> Timing:
        """A timing given rather than measured (a figure from elsewhere, a planted value in a test)."""
        return cls((seconds,) * runs, "given", note=note)

    @property
    def runs(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    def quantile(self, q: float) -> float:
        """The q-quantile of the samples (linear interpolation), q in [0, 1]."""
        if not 0 <= q <= 1:
            raise ValueError(f"quantile {q} is outside [0, 1]")
        ordered = sorted(self.samples)
        pos = q * (len(ordered) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    @property
    def spread(self) -> float:
        """The interquartile range in seconds: robust to the odd descheduled run."""
        return self.quantile(0.75) - self.quantile(0.25)

    @property
    def relative_spread(self) -> float:
        """The spread as a fraction of the median (0.02: the middle half of the runs lies within 2%)."""
        return self.spread / self.median if self.median > 0 else 0.0

    def __str__(self) -> str:
        return f"{format_seconds(self.median)} ±{self.relative_spread:.1%} ({self.runs} runs, {self.method})"


def format_seconds(seconds: float) -> str:
    """`1.23 ms`, `4.5 µs`: the unit that keeps the number between 1 and 1000."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"

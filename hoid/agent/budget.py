"""`Budget`: the one budget of the package, and `Spend`, what a run has used of it.

A budget bounds a whole optimization run (wall-clock minutes, attempts, LLM tokens, LLM turns); any
limit left None is unbounded. It is not the search's saturation `Limits` (iterations, e-nodes, seconds
of one saturation), which bound one step inside the run. The loop asks `Spend.exhausted(budget)` before
every attempt (and the minutes before the region profile and the rules-only measurement too), so a run
stops between attempts, never in the middle of one, and says which limit stopped it (like egg's Runner
and its StopReason). What a spent clock cannot stop: the saturation and the baseline measurement (a run
returns nothing without them) and the attempt in flight.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Budget:
    """minutes: wall clock of the run; attempts: proposals tried (checked, measured, decided); tokens,
    turns: what LLM proposers may spend (offline proposers spend none). None: no limit."""

    minutes: float | None = None
    attempts: int | None = None
    tokens: int | None = None
    turns: int | None = None

    def __post_init__(self):
        for name in ("minutes", "attempts", "tokens", "turns"):
            value = getattr(self, name)
            if value is not None and not value >= 0:  # `not >=` also refuses NaN
                raise ValueError(f"Budget({name}={value!r}): a limit is a non-negative number, or None for none")

    @classmethod
    def parse(cls, text: str) -> Budget:
        """From the CLI's words: "10m", "90s", "1h", "50 attempts", "20000 tokens", "8 turns", or several
        joined by commas ("10m,50 attempts"). A bare number is minutes."""
        kw: dict = {}
        for part in (p.strip() for p in text.split(",") if p.strip()):
            m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(h|m|min|minutes|s|attempts?|tokens?|turns?)?", part)
            if m is None:
                raise ValueError(f"budget {part!r}: expected e.g. 10m, 90s, 1h, 50 attempts, 20000 tokens, 8 turns")
            number, unit = float(m.group(1)), (m.group(2) or "m")
            if unit in ("h", "m", "min", "minutes", "s"):
                kw["minutes"] = kw.get("minutes", 0.0) + number * {"h": 60, "s": 1 / 60}.get(unit, 1)
            else:
                kw[unit.rstrip("s") + "s"] = int(number)
        return cls(**kw)

    def __str__(self) -> str:
        parts = [f"{self.minutes:g} min" if self.minutes is not None else None,
                 f"{self.attempts} attempts" if self.attempts is not None else None,
                 f"{self.tokens} tokens" if self.tokens is not None else None,
                 f"{self.turns} turns" if self.turns is not None else None]
        return ", ".join(p for p in parts if p) or "unlimited"


@dataclass
class Spend:
    """What a run has spent; `started` is a monotonic clock reading."""

    started: float = field(default_factory=time.monotonic)
    attempts: int = 0
    tokens: int = 0
    turns: int = 0

    @property
    def minutes(self) -> float:
        return (time.monotonic() - self.started) / 60

    def exhausted(self, budget: Budget) -> str | None:
        """The limit that is spent (its words, for the stop reason), or None while all have room."""
        if budget.attempts is not None and self.attempts >= budget.attempts:
            return f"budget spent: {budget.attempts} attempts"
        if budget.minutes is not None and self.minutes >= budget.minutes:
            return f"budget spent: {budget.minutes:g} minutes"
        if budget.tokens is not None and self.tokens >= budget.tokens:
            return f"budget spent: {budget.tokens} tokens"
        if budget.turns is not None and self.turns >= budget.turns:
            return f"budget spent: {budget.turns} turns"
        return None

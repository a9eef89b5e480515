"""`Budget`: the one budget of the package, and `Spend`, what a run has used of it.

A budget bounds a whole optimization run (wall-clock minutes, attempts, LLM tokens, LLM turns); any
limit left None is unbounded. It is not the search's saturation `Limits` (iterations, e-nodes, seconds
of one saturation), which bound one step inside the run. The loop asks `Spend.exhausted(budget)` before
every attempt (and the minutes before the region profile and the rules-only measurement too), so a run
stops between attempts, never in the middle of one, and says which limit stopped it (like egg's Runner
and its StopReason). What a spent clock cannot stop: the saturation and the baseline measurement (a run
returns nothing without them) and the attempt in flight. `Shares` divides a budget's minutes among the
proposers' turns (`hoid.agent.loop`'s module doc says why and how).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

_MINUTES_PER = {"h": 60.0, "m": 1.0, "min": 1.0, "minutes": 1.0, "s": 1 / 60}
# one time ("5m", "30 s"); no letter may follow it, so "5ms" and "5 mins" are refused, not misread
_TERM = r"(\d+(?:\.\d+)?)\s*(minutes|min|h|m|s)(?![a-z])"
_DURATION = rf"(?:{_TERM}\s*)+"


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
        """From the CLI's words: "10m", "90s", "1h", "5m30s", "50 attempts", "20000 tokens", "8 turns", or
        several joined by commas ("10m,50 attempts"). A bare number is minutes."""
        kw: dict = {}
        for part in (p.strip() for p in text.split(",") if p.strip()):
            if re.fullmatch(_DURATION, part):  # one or more times, added up: "5m30s", "1h 30m"
                for number, unit in re.findall(_TERM, part):
                    kw["minutes"] = kw.get("minutes", 0.0) + float(number) * _MINUTES_PER[unit]
                continue
            m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(attempts?|tokens?|turns?)?", part)
            if m is None:
                raise ValueError(f"budget {part!r}: expected e.g. 10m, 90s, 1h, 5m30s, 50 attempts, 20000 tokens, "
                                 "8 turns")
            number, unit = float(m.group(1)), m.group(2)
            if unit is None:  # a bare number: minutes
                kw["minutes"] = kw.get("minutes", 0.0) + number
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


class Shares:
    """A run's minutes among its proposers' turns: a turn that begins with others still to come may spend an
    equal share of the minutes left (the last, all that is left). A `together` batch is never cut short: its
    share bounds only its sweeps' tails (every proposal is measured at its first params first)."""

    def __init__(self, budget: Budget, spend: Spend):
        self.budget, self.spend = budget, spend
        self._turn_ends: float | None = None  # monotonic clock: where the turn of a one-by-one proposer ends
        self._tails_end: float | None = None  # the same for a batch: where its sweeps' tails stop (together.py)

    def begin_turn(self, turns_left: int, *, batch: bool, shared: bool) -> None:
        """A proposer's turn begins, `turns_left` counting it; `shared`: capped at its share of the minutes."""
        share = self._share_ends(turns_left) if shared else None
        self._turn_ends, self._tails_end = (None, share) if batch else (share, None)

    def end_turns(self) -> None:
        """No share bounds what follows (the turns that a share cut short go on with what is left)."""
        self._turn_ends = self._tails_end = None

    def out_of_time(self) -> str | None:
        """The budget's words once its minutes are spent, else None."""
        return self.spend.exhausted(Budget(minutes=self.budget.minutes))

    def share_spent(self) -> str | None:
        """Why the one-by-one proposer whose turn it is must give way to the next, else None."""
        return _past(self._turn_ends)

    def turn_over(self) -> str | None:
        """Why the proposer whose turn it is may evaluate no more (the minutes, or its share of them)."""
        return self.out_of_time() or self.share_spent()

    def tails_wait(self) -> bool:
        """Does the batch whose turn it is measure its proposals at their first params first, and their
        sweeps' other params after, within its share? Only under a budget of minutes with a turn to come."""
        return self._tails_end is not None

    def tails_over(self) -> str | None:
        """Why the batch whose turn it is may measure no more of its sweeps' tails, else None."""
        return self.out_of_time() or _past(self._tails_end)

    def _share_ends(self, turns_left: int) -> float | None:
        """When a turn that begins now ends: an equal share of the minutes left; the last turn, never early."""
        if self.budget.minutes is None or turns_left <= 1:
            return None
        left = max(self.budget.minutes * 60 - self.spend.minutes * 60, 0.0)
        return time.monotonic() + left / turns_left


def _past(end: float | None) -> str | None:
    """Why a share that ends at `end` (monotonic clock; None: no share) allows no more, else None."""
    if end is None or time.monotonic() < end:
        return None
    return "its share of the budget's minutes is spent"

"""Saturation under limits: iterations, e-nodes, seconds, and a back-off scheduler for expansive rules.

(Limits, not a budget: `hoid.Budget` is the optimization loop's, in minutes, attempts and tokens.)

Like egg's Runner: run every ruleset one iteration at a time until nothing changes or a limit is reached,
and say which. Expansive rules run in their own egglog rulesets; when one matches more than its limit in
an iteration it is banned for a few iterations, and each ban doubles both its limit and the ban's length
(egg's BackoffScheduler), so a rule that explodes cannot starve the others of the limits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

from ._egglog import Engine
from .rules import RuleSet


@dataclass(frozen=True)
class Limits:
    """Limits on one saturation. `match_limit` and `ban_length` configure the back-off of expansive rules."""

    iterations: int = 30
    enodes: int = 500_000
    seconds: float = 20.0
    match_limit: int = 1_000
    ban_length: int = 2


class StopReason(StrEnum):
    """Why saturation stopped."""

    SATURATED = "saturated"  # every rule ran and none changed anything: the e-graph holds all it can
    ITERATIONS = "iteration limit"
    ENODES = "e-node limit"
    TIME = "time limit"


@dataclass
class SaturationReport:
    """Why saturation stopped (`StopReason`), after how many iterations and seconds, the e-graph's size,
    matches per rule, and bans per expansive rule."""

    stop_reason: StopReason
    iterations: int
    enodes: int
    seconds: float
    matches: dict[str, int] = field(default_factory=dict)
    bans: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return (f"{self.stop_reason} after {self.iterations} iteration(s), {self.seconds:.2f} s: "
                f"{self.enodes} e-nodes")


class BackoffScheduler:
    """Which rulesets run in an iteration: every normal one, and each expansive one that is not banned."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.banned_until: dict[str, int] = {}
        self.times_banned: dict[str, int] = {}

    def runnable(self, rulesets: list[str], iteration: int) -> list[str]:
        return [r for r in rulesets if self.banned_until.get(r, -1) <= iteration]

    def observe(self, ruleset: str, matches: int, iteration: int) -> None:
        """Ban an expansive ruleset that matched more than its (growing) limit in this iteration."""
        times = self.times_banned.get(ruleset, 0)
        if matches > self.limits.match_limit << times:
            self.banned_until[ruleset] = iteration + 1 + (self.limits.ban_length << times)
            self.times_banned[ruleset] = times + 1

    def any_banned(self, iteration: int) -> bool:
        return any(until > iteration for until in self.banned_until.values())


def saturate(engine: Engine, rulesets: list[RuleSet], limits: Limits | None = None) -> SaturationReport:
    """Run `rulesets` (already declared in `engine`) to saturation or until a limit is reached."""
    limits = limits or Limits()
    scheduler = BackoffScheduler(limits)
    expansive = {rs.ruleset_of(r): r.name for rs in rulesets for r in rs.rules if r.expansive}
    names = [name for rs in rulesets for name in rs.rulesets()]
    report = SaturationReport(StopReason.ITERATIONS, 0, engine.size(), 0.0)
    start = time.perf_counter()
    for iteration in range(limits.iterations):
        step = engine.step(scheduler.runnable(names, iteration))
        report.iterations = iteration + 1
        for rule, count in step.matches.items():
            report.matches[rule] = report.matches.get(rule, 0) + count
        for ruleset, rule in expansive.items():
            scheduler.observe(ruleset, step.matches.get(rule, 0), iteration)
        report.enodes = engine.size()
        report.seconds = time.perf_counter() - start
        if not step.updated and not scheduler.any_banned(iteration):  # every rule ran, none changed anything
            report.stop_reason = StopReason.SATURATED
            break
        if report.enodes > limits.enodes:
            report.stop_reason = StopReason.ENODES
            break
        if report.seconds > limits.seconds:
            report.stop_reason = StopReason.TIME
            break
    report.bans = {expansive[r]: n for r, n in scheduler.times_banned.items()}
    return report

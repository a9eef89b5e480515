"""Rule sets: egglog rules over hoid's term language (see `hoid.search.language`), one module per set.

A `Rule` is one egglog `rule` or `rewrite` command, written without its `:ruleset` and `:name` (the set
adds them), with a sentence saying what it does and why it is sound, and an `example`: a small graph in
which it fires. The soundness harness (`hoid.search.soundness`) runs every rule on its example and
compares the rewritten graph with the original through the interpreter on random inputs, so a wrong rule
is caught by the tests, not by a user.

A rule whose meaning depends on rank or dtype guards on the `shape`/`dtype` facts: an unguarded rule
puts a wrong e-node into a correct e-class, and one wrong e-node poisons every program that uses it.
Rules marked `expansive` (they can fire without end, or grow the e-graph a lot) each get their own
egglog ruleset, so the back-off scheduler of `hoid.search.limits` can pause them.

Add a rule set: build a `RuleSet` and pass it to `hoid.search.rewrite(..., rulesets=[...])` or
`SearchSpace.saturate`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...ir import Graph


@dataclass(frozen=True)
class Rule:
    name: str
    text: str
    doc: str
    example: Callable[[], Graph] | None = None
    expansive: bool = False
    needs: tuple[str, ...] = ()  # rules of the same set that must run for this one to fire on its example

    def command(self, ruleset: str) -> str:
        """The egglog command, in `ruleset`, named after the rule (reports count matches by name)."""
        body = self.text.strip()
        if not body.endswith(")"):
            raise ValueError(f"rule {self.name}: its text must be one egglog command")
        return f'{body[:-1]} :ruleset {ruleset} :name "{self.name}")'


@dataclass(frozen=True)
class RuleSet:
    name: str
    rules: tuple[Rule, ...]
    doc: str = ""
    prelude: str = ""  # egglog declarations the rules need (helper relations), run before them

    def ruleset_of(self, rule: Rule) -> str:
        """The egglog ruleset a rule runs in: its own when expansive, else the set's."""
        return f"{self.name}-{rule.name}" if rule.expansive else self.name

    def rulesets(self) -> list[str]:
        names = [self.name] if any(not r.expansive for r in self.rules) else []
        return names + [self.ruleset_of(r) for r in self.rules if r.expansive]

    def commands(self) -> list[str]:
        """egglog commands declaring the rulesets and every rule."""
        lines = [self.prelude] if self.prelude else []
        lines += [f"(ruleset {name})" for name in self.rulesets()]
        lines += [r.command(self.ruleset_of(r)) for r in self.rules]
        return lines

    def program(self) -> str:
        return "\n".join(self.commands())

    def only(self, *names: str) -> RuleSet:
        """The same set restricted to some rules (for tests and experiments)."""
        unknown = set(names) - {r.name for r in self.rules}
        if unknown:
            raise KeyError(f"rule set {self.name} has no rule(s) {sorted(unknown)}")
        return RuleSet(self.name, tuple(r for r in self.rules if r.name in names), self.doc, self.prelude)


def default_rulesets() -> list[RuleSet]:
    """algebra, patterns, layout and channels-last: what `hoid.search.rewrite` saturates before the library
    rules."""
    from .algebra import ALGEBRA
    from .channels_last import CHANNELS_LAST
    from .layout import LAYOUT
    from .patterns import PATTERNS

    return [ALGEBRA, PATTERNS, LAYOUT, CHANNELS_LAST]


__all__ = ["Rule", "RuleSet", "default_rulesets"]

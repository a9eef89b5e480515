"""The one module that touches egglog: an e-graph driven by program text, and its serialized form.

hoid talks to egglog through its low-level bindings (the text language) rather than the Python DSL:
rules read like the egglog papers, encoding is plain text run as batches of actions (which keeps it linear
in the graph's size: `Engine.act`), and extraction happens in Python on the serialized
e-graph, because egglog's own extractors do not survive a whole model. egglog is imported on first use,
so `import hoid.search` stays light.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import HoidError


ACTIONS = 40  # top-level actions per batch (see `Engine.act`)


class EgglogError(HoidError, RuntimeError):
    """egglog refused a program: a malformed rule, or an unsound one (a fact with two values)."""


@dataclass(frozen=True)
class RunStep:
    """What one `run` of some rulesets did: whether anything changed, and matches per rule name."""

    updated: bool
    matches: dict[str, int]


class Engine:
    """An egglog e-graph. `run(text)` executes commands; `step(rulesets)` runs one iteration."""

    def __init__(self):
        from egglog import bindings

        self._bindings = bindings
        self._egraph = bindings.EGraph()
        self._batches = 0  # rulesets made by `act`, one per batch

    def run(self, program: str) -> list:
        """Execute egglog commands; egglog's errors become `EgglogError` quoting the program's start."""
        try:
            return self._egraph.run_program(*self._egraph.parse_program(program))
        except self._bindings.EggSmolError as e:
            head = "\n".join(program.strip().splitlines()[:3])
            raise EgglogError(f"egglog rejected the program ({e}); it begins:\n{head}") from None

    def act(self, actions: Sequence[str]) -> None:
        """Execute top-level actions (`union`, `set`) in order, `ACTIONS` at a time, each batch as the body
        of a rule with no query, run once. egglog compiles every top-level action into a rule of its own and
        runs it (then rebuilds), about 100 us each; a batch pays that once. The batches stay small because
        egglog's cost per command grows with the size of the program it is in, and a rule's compile time
        with its number of actions (measured on the 28-layer decode step, 9k actions: one per command
        0.97 s, batches of 30 to 80 0.5 s, of 300 1.4 s, of 2000 19 s)."""
        for start in range(0, len(actions), ACTIONS):
            batch = actions[start:start + ACTIONS]
            name = f"hoid-actions-{self._batches}"
            self._batches += 1
            try:
                self._egraph.run_program(*self._egraph.parse_program(
                    f"(ruleset {name})\n(rule () ({' '.join(batch)}) :ruleset {name})\n(run {name} 1)"))
            except self._bindings.EggSmolError as e:
                head = "\n".join(batch[:3])
                raise EgglogError(f"egglog rejected the actions ({e}); they begin:\n{head}") from None

    def step(self, rulesets: list[str]) -> RunStep:
        """One iteration of each ruleset, in order; matches are summed over them."""
        if not rulesets:
            return RunStep(False, {})
        schedule = " ".join(f"(run {name})" for name in rulesets)
        outputs = self.run(f"(run-schedule (seq {schedule}))")
        report = outputs[-1].report
        return RunStep(bool(report.updated), dict(report.num_matches_per_rule))

    def size(self) -> int:
        """The number of e-nodes (rows of every constructor and function)."""
        (output,) = self.run("(print-size)")
        return sum(count for _, count in output.sizes)

    def serialize(self) -> dict:
        """The e-graph in extraction-gym JSON form: {"nodes": {id: {op, children, eclass}}, "class_data"}."""
        serialized = self._egraph.serialize([])
        if serialized.truncated_functions or serialized.discarded_functions:
            raise EgglogError(f"egglog truncated the serialized e-graph ({serialized.truncated_functions}, "
                              f"{serialized.discarded_functions}); extraction would be wrong")
        return json.loads(serialized.to_json())

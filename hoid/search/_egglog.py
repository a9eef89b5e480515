"""The one module that touches egglog: an e-graph driven by program text, and its rows read back.

hoid talks to egglog through its low-level bindings (the text language) rather than the Python DSL:
rules read like the egglog papers, encoding is plain text (template rules and their rows, run in small
batches, which keeps it linear in the graph's size: `encode.Templates`, `Engine.act`), and extraction
happens in Python on the e-graph's rows (`Engine.tables`), because egglog's own extractors do not survive a
whole model. egglog is imported on first use, so `import hoid.search` stays light.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import HoidError

ACTIONS = 40  # top-level actions per batch, commands per program (see `Engine.act`)
HIDDEN = "hoid-"  # functions and rulesets named so are hoid's bookkeeping (templates' relations), not e-nodes


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

    def run_each(self, commands: Sequence[str]) -> None:
        """Execute commands `ACTIONS` at a time: egglog's cost per command grows with its program's size."""
        for start in range(0, len(commands), ACTIONS):
            self.run("\n".join(commands[start:start + ACTIONS]))

    def act(self, actions: Sequence[str]) -> None:
        """Execute top-level actions (`union`, `set`) in order, `ACTIONS` at a time, each batch as the body
        of a rule with no query, run once. egglog compiles every top-level action into a rule of its own and
        runs it (then rebuilds), about 100 us each; a batch pays that once. The batches stay small because
        egglog's cost per command grows with the size of the program it is in, and a rule's compile time
        with its number of actions (measured on the 28-layer decode step, 9k actions: one per command
        0.97 s, batches of 30 to 80 0.5 s, of 300 1.4 s, of 2000 19 s)."""
        for start in range(0, len(actions), ACTIONS):
            batch = actions[start:start + ACTIONS]
            name = f"{HIDDEN}actions-{self._batches}"
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
        """The number of e-nodes (rows of every constructor and function but the `HIDDEN` ones)."""
        (output,) = self.run("(print-size)")
        return sum(count for name, count in output.sizes if not name.startswith(HIDDEN))

    def tables(self, containers: Mapping[str, str]) -> list[Table]:
        """Every function's rows, decoded: a value of an e-class sort as its class id (`Sort-n`, the names
        egglog's serializer gives), a primitive as its Python value, a container of `containers` (sort ->
        element sort) as a tuple. Read from a frozen copy of the e-graph, whose rows are canonical after
        each run: egglog's JSON serialization of the same rows costs 0.3 s at 28 layers, this 0.07 s (each
        distinct value is decoded once: the 70k values in its rows are 12k distinct ones)."""
        egraph = self._egraph
        primitive = {"i64": egraph.value_to_i64, "f64": egraph.value_to_f64, "String": egraph.value_to_string,
                     "bool": egraph.value_to_bool, "Unit": lambda value: None}
        decoded: dict[str, dict] = {}  # sort -> Value -> its decoding

        def decode(sort: str, values) -> list:
            memo = decoded.setdefault(sort, {})
            missing = [v for v in values if v not in memo]
            if missing:
                if sort in primitive:
                    memo.update((v, primitive[sort](v)) for v in missing)
                elif sort in containers:
                    element = primitive[containers[sort]]
                    memo.update((v, tuple(element(e) for e in egraph.value_to_vec(v))) for v in missing)
                else:
                    memo.update((v, f"{sort}-{_value_id(v)}") for v in missing)
            return [memo[v] for v in values]

        tables = []
        for name, function in egraph.freeze().functions.items():
            if function.is_let_binding or name.startswith(HIDDEN):
                continue
            rows = function.rows
            inputs = [row.inputs for row in rows]
            columns = [decode(sort, [values[i] for values in inputs]) for i, sort in enumerate(function.input_sorts)]
            outputs = decode(function.output_sort, [row.output for row in rows])
            tables.append(Table(name, tuple(function.input_sorts), function.output_sort, columns, outputs))
        return tables


@dataclass(frozen=True)
class Table:
    """One egglog function (constructor, relation, fact) and its rows, decoded, by column: a list per input
    and the outputs (a few lists, not a tuple per row: the rows of a model are 25k, and objects that outlive
    a collection bring the interpreter's full collections closer)."""

    name: str
    inputs: tuple[str, ...]  # sort names
    output: str
    columns: list[list]  # one per input, a value per row
    outputs: list

    def rows(self):
        """(inputs, output) per row."""
        return zip(zip(*self.columns, strict=True) if self.columns else (() for _ in self.outputs), self.outputs,
                   strict=True)


def _value_id(value) -> str:
    """The id of an e-class value: egglog's bindings expose it only as `str(Value)`, "Value(<id>)"."""
    text = str(value)
    if not text.startswith("Value(") or not text.endswith(")"):
        raise EgglogError(f"egglog wrote an e-class value as {text!r}, not Value(<id>): its bindings changed; "
                          "update hoid.search._egglog.Engine.tables")
    return text[6:-1]

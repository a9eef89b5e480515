"""Checking that a rewrite rule is sound: it fires on its example, and what it derives computes the same.

    check_rule(PATTERNS, PATTERNS.rules[0])  -> RuleCheck(ok=True, ...)

The rule (with the rules it `needs`) saturates its example graph; extraction then avoids every call the
original graph makes (same op, attrs and input types cost 1000x more), so the extracted graph uses what
the rule derived; both graphs run through the interpreter on random inputs and must agree within the
dtype's tolerance. A wrong rule fails here with the error it causes, before it reaches a user's model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..ir import Graph, run
from ..measure.inputs import random_tensor
from .cost import OpCall
from .limits import Limits
from .rules import Rule, RuleSet
from .space import SearchSpace

TOLERANCE = {"f64": 1e-9, "f32": 1e-4, "f16": 1e-2, "bf16": 2e-2}


@dataclass
class RuleCheck:
    rule: str
    ok: bool
    message: str
    rewritten: Graph | None = None
    max_error: float = 0.0


def max_difference(a: Graph, b: Graph, *, trials: int = 3, seed: int = 0) -> float:
    """The largest error of b's outputs against a's over random inputs, relative to a's magnitude."""
    generator = torch.Generator().manual_seed(seed)
    worst = 0.0
    for _ in range(trials):
        # integers in [0, 2): valid indices for the small examples' index operands
        inputs = [random_tensor(v.type, high=2, generator=generator) for v in a.runtime_inputs]
        weights = {v.name: random_tensor(v.type, high=2, generator=generator) for v in a.weight_inputs}
        for x, y in zip(run(a, *inputs, weights=weights), run(b, *inputs, weights=weights), strict=True):
            x, y = x.double(), y.double()
            if x.shape != y.shape:
                return float("inf")
            scale = 1.0 + x.abs().max().item() if x.numel() else 1.0
            both_nan = torch.isnan(x) & torch.isnan(y)
            diff = torch.where(both_nan, 0.0, (x - y).abs())
            worst = max(worst, (diff.max().item() if diff.numel() else 0.0) / scale)
    return worst


def check_rule(ruleset: RuleSet, rule: Rule, *, trials: int = 3, seed: int = 0) -> RuleCheck:
    """Run `rule` on its example and compare; `ok` is False with a reason when it does not fire, does not
    change the program, or changes what it computes."""
    if rule.example is None:
        return RuleCheck(rule.name, False, f"rule {rule.name} has no example to check it on")
    graph = rule.example()
    space = SearchSpace(graph)
    report = space.saturate([ruleset.only(rule.name, *rule.needs)], Limits(iterations=8))
    if not report.matches.get(rule.name):
        return RuleCheck(rule.name, False, f"rule {rule.name} did not fire on its example")
    # the e-graph knows shapes and dtypes, not layouts: compare calls on contiguous types
    original = {OpCall(n.op, tuple(v.type.contiguous() for v in n.inputs), (), n.attrs).key() for n in graph.nodes}
    avoid_original = lambda c: 1.0 if OpCall(c.op, c.inputs, (), c.attrs).key() in original else 1e-3
    rewritten = space.extract(avoid_original).graph
    if rewritten == graph:
        return RuleCheck(rule.name, False, f"rule {rule.name} fired but the extracted graph did not change")
    error = max_difference(graph, rewritten, trials=trials, seed=seed)
    tolerance = max(TOLERANCE.get(v.type.dtype, 0.0) for v in graph.outputs)
    if not error <= tolerance:
        return RuleCheck(rule.name, False, f"rule {rule.name} is unsound: error {error:.3g} > {tolerance:g} "
                         "on its example", rewritten, error)
    return RuleCheck(rule.name, True, "sound on its example", rewritten, error)

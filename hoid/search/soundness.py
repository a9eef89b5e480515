"""Checking that a rewrite rule is sound: it fires on its example, and what it derives computes the same.

    check_rule(PATTERNS, PATTERNS.rules[0])  -> RuleCheck(ok=True, ...)

The rule (with the rules it `needs`) saturates its example graph; extraction then avoids every call the
original graph makes (same op, attrs and input types cost 1000x more), so the extracted graph uses what
the rule derived; both graphs run through the interpreter on random inputs and must agree as
`hoid.verify` judges a kernel against its reference: its tolerance per dtype (`tolerance_for`, governed
by the least precise input) and its comparison (`compare_output`), so "the same within rounding" means
one thing across hoid. A wrong rule fails here with the error it causes, before it reaches a user's model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..ir import Graph, run
from ..measure.inputs import random_tensor
from ..verify.compare import compare_output
from ..verify.tolerance import EXACT, tolerance_for
from ..verify.verdict import Failure
from .cost import OpCall
from .limits import Limits
from .rules import Rule, RuleSet
from .space import SearchSpace


@dataclass
class RuleCheck:
    """max_error: the relative L2 error of the output that failed (verify's figure); 0 when sound."""

    rule: str
    ok: bool
    message: str
    rewritten: Graph | None = None
    max_error: float = 0.0


def compare_graphs(a: Graph, b: Graph, *, exact: bool = False, trials: int = 3, seed: int = 0) -> Failure | None:
    """None when b computes what a does on random inputs, within `hoid.verify`'s tolerance for each output
    (a's outputs standing as the reference), or bit for bit with `exact`; else the first failure, in
    verify's words. Raises ValueError when the graphs have different numbers of outputs."""
    generator = torch.Generator().manual_seed(seed)
    input_dtypes = [v.type.dtype for v in a.runtime_inputs + a.weight_inputs]
    for _ in range(trials):
        # integers in [0, 2): valid indices for the small examples' index operands
        inputs = [random_tensor(v.type, high=2, generator=generator) for v in a.runtime_inputs]
        weights = {v.name: random_tensor(v.type, high=2, generator=generator) for v in a.weight_inputs}
        pairs = zip(a.outputs, run(a, *inputs, weights=weights), run(b, *inputs, weights=weights), strict=True)
        for k, (value, x, y) in enumerate(pairs):
            if x.shape != y.shape or x.dtype != y.dtype:
                return Failure("output_type", f"output {k} is {y.dtype}{list(y.shape)} where the original "
                                              f"graph's is {x.dtype}{list(x.shape)}")
            tolerance = EXACT if exact else tolerance_for(value.type.dtype, inputs=input_dtypes)
            failure = compare_output(k, y, x, tolerance)
            if failure is not None:  # in this comparison the reference is the graph before the rewrite
                return Failure(failure.kind, failure.message.replace("the reference", "the original graph"),
                               failure.figures)
    return None


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
    failure = compare_graphs(graph, rewritten, trials=trials, seed=seed)
    if failure is not None:
        error = failure.figures.get("rel_l2", float("inf"))
        return RuleCheck(rule.name, False, f"rule {rule.name} is unsound on its example: {failure.message}",
                         rewritten, error)
    return RuleCheck(rule.name, True, "sound on its example", rewritten)

"""Library: map ops and recognized patterns to the library's kernels whose constraints hold.

This is the hook the kernel library fills: every registered `KernelSpec` (`hoid.kernels.all_kernels()`)
names a `Pattern`. After the other rule sets have saturated, each pattern is matched against the e-graph
in Python, which gives the input types and attrs at each match; where the kernel's constraints hold for
them, the kernel is injected as a rule at that exact signature (`hoid.search.inject`), so it joins every
match in one pass. Constraints are Python predicates, which egglog cannot evaluate: that is why the
matching to find signatures happens here and not in a rule.

A single-op pattern matches every e-node of that op with as many operands; a fused pattern is matched
structurally from its output (ops only, on an instance built from the kernel's examples), then exactly
(attrs too) against the pattern built at the matched types.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ...ir import Graph, TensorType
from ...ir.graph import attr_key
from ...ir.registry import has_op
from ..encode import KernelImpl
from ..inject import inject
from ..snapshot import ABSENT, OUT, Snapshot


@dataclass
class LibraryReport:
    """Kernels injected (id -> number of regions joined) and kernels skipped, with the reason."""

    injected: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def _operands(snapshot: Snapshot, children) -> list[str]:
    absent = {c for c in children if any(n.op == ABSENT for n in snapshot.enodes(c))}
    return [c for c in children if c not in absent]


def match(snapshot: Snapshot, pattern: Graph, value, cls: str, bind: dict[str, str], exact: bool) -> bool:
    """Whether `value` of `pattern` can be computed by e-class `cls`, extending `bind` (value name -> class)."""
    if value.name in bind:
        return bind[value.name] == cls
    producer = pattern.producers().get(value.name)
    if producer is None:  # a pattern input matches any class
        bind[value.name] = cls
        return True
    index = producer.outputs.index(value)
    candidates = list(snapshot.enodes(cls))
    if len(producer.outputs) > 1:
        candidates = [t for o in candidates if o.op == OUT and o.attrs["index"] == index
                      for t in snapshot.enodes(o.children[0])]
    for enode in candidates:
        kids = _operands(snapshot, enode.children)
        if enode.op != producer.op or len(kids) != len(producer.inputs):
            continue
        if exact and attr_key(enode.attrs) != attr_key(producer.attrs):
            continue
        trial = {**bind, value.name: cls}
        if all(match(snapshot, pattern, v, c, trial, exact) for v, c in zip(producer.inputs, kids, strict=True)):
            bind.update(trial)
            return True
    return False


def _signatures(snapshot: Snapshot, spec) -> list[tuple[tuple[TensorType, ...], dict]]:
    """(input types, attrs) at every match of the kernel's pattern, each signature once."""
    pattern = spec.pattern
    found: dict[tuple, tuple] = {}
    if has_op(pattern.name):
        for node in snapshot.nodes.values():
            kids = _operands(snapshot, node.children)
            if node.op == pattern.name and len(kids) == len(pattern.operands):
                types = tuple(snapshot.types[c] for c in kids)
                found[(types, attr_key(node.attrs))] = (types, dict(node.attrs))
        return list(found.values())
    example = pattern.graph(*spec.examples(random.Random(0)))
    out = example.outputs[0]
    root_op = example.producers()[out.name].op
    defaults = {a.name: a.default for a in pattern.attrs}
    for cls in {n.eclass for n in snapshot.nodes.values() if n.op == root_op}:
        bind: dict[str, str] = {}
        if not match(snapshot, example, out, cls, bind, exact=False):
            continue
        types = tuple(snapshot.types[bind[v.name]] for v in example.inputs_of_kind("input"))
        try:
            exact = pattern.graph(types, defaults)
        except Exception:  # the pattern does not build at these types: not a match
            continue
        if match(snapshot, exact, exact.outputs[0], cls, {}, exact=True):
            found[(types, attr_key(defaults))] = (types, defaults)
    return list(found.values())


def apply_library(space, kernels=None) -> LibraryReport:
    """Inject every kernel of `kernels` (default: the whole library) wherever its constraints hold."""
    if kernels is None:
        from ...kernels import all_kernels

        kernels = list(all_kernels().values())
    report = LibraryReport()
    snapshot = space.snapshot()
    for spec in kernels:
        if not has_op(spec.pattern.name) and spec.examples is None:
            report.skipped[spec.id] = "a fused pattern without examples cannot be matched structurally"
            continue
        for types, attrs in _signatures(snapshot, spec):
            reason = spec.rejects(list(types), attrs)
            if reason is not None:
                report.skipped.setdefault(spec.id, reason)
                continue
            body = spec.pattern.graph(list(types), attrs)
            impl = KernelImpl(spec.id, spec.version, spec.default_params(), body)
            injected = inject(space, impl)
            report.injected[spec.id] = report.injected.get(spec.id, 0) + injected.matches
    return report


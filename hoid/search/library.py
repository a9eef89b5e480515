"""The library phase: inject the kernels of a `KernelSet` wherever the set allows them.

An injection step (beside `inject.py`), not a rule set: every `KernelSpec` of the set names a `Pattern`.
After the rule sets have saturated, each pattern is matched against the e-graph in Python, which gives
the input types and attrs at each match; where the set allows the kernel there (a library kernel whose
constraints hold, an accepted one at a signature it was verified at), it is injected as a rule at that
exact signature (`hoid.search.inject`), so it joins every match in one pass, with its "auto" params
resolved for the search's target (`hoid.kernels.resolve_params`). Constraints are Python predicates,
which egglog cannot evaluate: that is why the matching to find signatures happens here and not in a rule.

A single-op pattern matches every e-node of that op with as many operands; a fused pattern is matched
structurally (ops only, on an instance built from the kernel's examples) from each of its outputs that
reaches every input, or from all its outputs together where none does (`joint.py`), then exactly (attrs
too) against the pattern built at the matched types.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import HoidError
from ..ir import Graph, TensorType
from ..ir.graph import attr_key
from ..ir.ops.kernel import KernelImpl
from ..ir.registry import has_op
from ..kernels.kernel_set import KernelSet
from ..kernels.launch import resolve_params
from ._egglog import HIDDEN
from .encode import Templates
from .inject import pinned_union, region_rule
from .joint import joint_matches, reaches_all
from .limits import Limits
from .rules import RuleSet
from .snapshot import OUT, Snapshot

if TYPE_CHECKING:
    from .space import SearchSpace


@dataclass
class LibraryReport:
    """Kernels injected (id -> number of regions joined) and kernels skipped, with the reason."""

    injected: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def match(snapshot: Snapshot, pattern: Graph, value, cls: str, bind: dict, exact: bool) -> bool:
    """Whether `value` of `pattern` can be computed by e-class `cls`, extending `bind` (value name -> class,
    and `(NODE, pattern node index) -> ENode` for each pattern node matched) with the first of `match_all`'s
    bindings."""
    first = next(match_all(snapshot, pattern, value, cls, bind, exact), None)
    if first is None:
        return False
    bind.update(first)
    return True


def _candidates(snapshot: Snapshot, producer, index: int, attrs, cls: str):
    """(e-node, operand classes) of `cls` that can be `producer`'s node of the pattern (its output `index`
    where it has several: through the class's projections); with `attrs` (an attr key), those alone."""
    candidates = list(snapshot.enodes(cls))
    if len(producer.outputs) > 1:
        candidates = [t for o in candidates if o.op == OUT and o.attrs["index"] == index
                      for t in snapshot.enodes(o.children[0])]
    for enode in candidates:
        kids = snapshot.operands(enode)
        if enode.op == producer.op and len(kids) == len(producer.inputs) and (
                attrs is None or attr_key(enode.attrs) == attrs):
            yield enode, kids


def match_all(snapshot: Snapshot, pattern: Graph, value, cls: str, bind: dict, exact: bool):
    """Every extension of `bind` under which `value` of `pattern` is computed by e-class `cls`: `match`'s
    bindings, all of them (each a new dict, or `bind` itself where `value` is bound already and agrees),
    where `match` keeps the first. A class holds equivalent e-nodes
    over different inputs (a prompt's attention over the caches as stored, grouped, beside the one over the
    expanded heads that transformers writes): the first alone gave a fused pattern the signature of the
    expanded one only, whose expansion copies."""
    if value.name in bind:
        if bind[value.name] == cls:
            yield bind
        return
    found = _index(pattern).get(value.name)
    if found is None:
        yield {**bind, value.name: cls}
        return
    producer, index, position, attrs = found
    for enode, kids in _candidates(snapshot, producer, index, attrs if exact else None, cls):
        yield from _all_operands(snapshot, pattern, list(zip(producer.inputs, kids, strict=True)),
                                 {**bind, value.name: cls, (NODE, position): enode}, exact)


def _all_operands(snapshot: Snapshot, pattern: Graph, pairs: list, bind: dict, exact: bool):
    if not pairs:
        yield bind
        return
    (value, cls), rest = pairs[0], pairs[1:]
    for extended in match_all(snapshot, pattern, value, cls, bind, exact):
        yield from _all_operands(snapshot, pattern, rest, extended, exact)


# A root class's structural matches read, at most: each is a signature to build and match exactly, and a class
# of many equivalent e-nodes under many more could make thousands of the same few signatures.
MAX_MATCHES_PER_ROOT = 16


# pattern id -> (pattern, {value name: (producer, output index, node position, attr key)}): `match` runs per
# candidate e-node (21k times at 28 layers) on the patterns of one `_matches` call, which empties it
_INDEXES: dict[int, tuple[Graph, dict]] = {}


def _index(pattern: Graph) -> dict:
    entry = _INDEXES.get(id(pattern))
    if entry is None or entry[0] is not pattern:
        entry = _INDEXES[id(pattern)] = (pattern, {
            out.name: (node, i, position, attr_key(node.attrs))
            for position, node in enumerate(pattern.nodes) for i, out in enumerate(node.outputs)})
    return entry[1]


NODE = object()  # marks the keys of `bind` that record which e-node a pattern node matched


def _perturbed(value) -> tuple:
    """Other values of the same kind, to see where an attr lands in a pattern's nodes: several, as an attr
    may constrain which build (a group norm's group count must divide the channels: 2 * 8 + 1 does not
    divide 16, 2 * 8 does)."""
    if isinstance(value, bool):
        return (not value,)
    if isinstance(value, int):
        return tuple(v for v in (value * 2 + 1, value * 2, value // 2, value + 1) if v != value)
    if isinstance(value, float):
        return (value * 2 + 1,)
    return ()


def attr_sites(pattern, types, attrs: dict) -> dict[str, list[tuple[int, str]]]:
    """For each pattern attr, the (node index, node attr) places of the pattern's graph that hold its value
    as is: where building with another value of the attr changes that node attr to that value, and
    nothing else about the graph. Attrs that land nowhere as is (transformed, or changing the structure)
    are left out."""
    base = pattern.graph(types, attrs)
    sites: dict[str, list[tuple[int, str]]] = {}
    for name, value in attrs.items():
        for other in _perturbed(value):
            try:
                probe = pattern.graph(types, {**attrs, name: other})
            except (HoidError, ValueError, IndexError):
                continue  # not a value the pattern builds with at these types: try the next
            if [n.op for n in probe.nodes] == [n.op for n in base.nodes]:
                sites[name] = [(i, k) for i, (a, b) in enumerate(zip(base.nodes, probe.nodes, strict=True))
                               for k in a.attrs if a.attrs[k] == value and b.attrs.get(k) == other]
            break
    return sites


def _signatures(snapshot: Snapshot, spec, by_op: dict[str, list] | None = None, missed: list[str] | None = None,
                counts: dict | None = None) -> list[tuple[tuple[TensorType, ...], dict]]:
    """(input types, attrs) at every match of the kernel's pattern, each signature once. `counts`, when
    given, receives {(types, attr_key(attrs)): how many places in the graph match there}: the regions the
    loop ranks by their share (`hoid.agent.regions`) are worth their time at every match."""
    matched_at: dict = {}
    found = _matches(snapshot, spec, by_op, missed, matched_at)
    if counts is not None:
        counts.update((k, len(v)) for k, v in matched_at.items())
    return list({(t, attr_key(a)): (t, a) for t, a, _ in found}.values())


def _matches(snapshot: Snapshot, spec, by_op: dict[str, list] | None = None,
             missed: list[str] | None = None,
             matched_at: dict | None = None) -> list[tuple[tuple[TensorType, ...], dict, tuple | None]]:
    """(input types, attrs, pins) at every match of the kernel's pattern. A fused pattern's attrs are read
    off the e-nodes it matched structurally; `missed` collects why a structural match was not an exact one.

    pins is None where some output of the pattern reaches every input: matching from it finds the whole
    region, and a rule at that signature joins every match (each signature once). Otherwise (the attention
    prelude: q's rotation, the k and the v cache appends) the outputs are matched together
    (`joint.joint_matches`) and pins holds the input classes of that one match, one entry per match.
    `matched_at` receives {(types, attr_key(attrs)): the set of e-classes (or pins) matched there}: one per place
    in the graph, however many equivalent e-nodes a class holds."""
    try:
        return _matches_of(snapshot, spec, by_op, missed, {} if matched_at is None else matched_at)
    finally:
        _INDEXES.clear()


def _matches_of(snapshot: Snapshot, spec, by_op: dict[str, list] | None, missed: list[str] | None,
                matched_at: dict) -> list[tuple[tuple[TensorType, ...], dict, tuple | None]]:
    pattern = spec.pattern
    if by_op is None:
        by_op = _nodes_by_op(snapshot)
    found: dict[tuple, tuple] = {}
    if has_op(pattern.name):
        for node in by_op.get(pattern.name, ()):
            kids = snapshot.operands(node)
            if len(kids) == len(pattern.operands):
                types = tuple(snapshot.types[c] for c in kids)
                found[(types, attr_key(node.attrs))] = (types, dict(node.attrs), None)
                matched_at.setdefault((types, attr_key(node.attrs)), set()).add(node.eclass)
        return list(found.values())
    example_types, example_attrs = spec.examples(random.Random(0))
    defaults = {a.name: a.default for a in pattern.attrs}
    example_attrs = {**defaults, **example_attrs}
    example = pattern.graph(example_types, example_attrs)
    sites = attr_sites(pattern, example_types, example_attrs)
    inputs = example.inputs_of_kind("input")
    rooted = [i for i, out in enumerate(example.outputs) if reaches_all(example, out)]
    structural = (_rooted_matches(snapshot, example, rooted, by_op) if rooted
                  else joint_matches(snapshot, example, by_op, match))
    built: dict[tuple, Graph | None] = {}
    for roots, bind in structural:
        if any(v.name not in bind for v in inputs):
            continue
        types = tuple(snapshot.types[bind[v.name]] for v in inputs)
        attrs = dict(defaults)
        for name, places in sites.items():  # the values at this match, where the match reached them
            for i, key in places:
                enode = bind.get((NODE, i))
                if enode is not None and key in enode.attrs:
                    attrs[name] = enode.attrs[key]
                    break
        signature = (types, attr_key(attrs))
        if signature not in built:  # the same layer matches many times: build its pattern once
            try:
                built[signature] = pattern.graph(types, attrs)
            except (HoidError, ValueError, IndexError):  # it does not build at these types: no match
                built[signature] = None
        exact = built[signature]
        if exact is None:
            continue
        exact_bind: dict = {}
        if all(match(snapshot, exact, exact.outputs[i], cls, exact_bind, exact=True) for i, cls in roots.items()):
            pins = None if rooted else (tuple(exact_bind[v.name] for v in exact.inputs_of_kind("input")),
                                        tuple(exact_bind[v.name] for v in exact.outputs))
            found[(types, attr_key(attrs), pins)] = (types, attrs, pins)
            matched_at.setdefault(signature, set()).add(pins if pins is not None else tuple(sorted(roots.values())))
        elif missed is not None:
            missed.append(f"the pattern matched e-class {', '.join(roots.values())} structurally at "
                          f"{', '.join(map(str, types))} but not with attrs {attrs}")
    return list(found.values())


def _rooted_matches(snapshot: Snapshot, example: Graph, rooted: list[int], by_op: dict):
    """({output index: class}, bind) for each structural match from one output that reaches every input."""
    for i in rooted:
        out = example.outputs[i]
        for cls in dict.fromkeys(n.eclass for n in by_op.get(example.producers()[out.name].op, ())):
            for bind in itertools.islice(match_all(snapshot, example, out, cls, {}, exact=False),
                                         MAX_MATCHES_PER_ROOT):
                yield {i: cls}, bind


def _nodes_by_op(snapshot: Snapshot) -> dict[str, list]:
    by_op: dict[str, list] = {}
    for node in snapshot.nodes.values():
        by_op.setdefault(node.op, []).append(node)
    return by_op


def as_kernel_set(kernels) -> KernelSet:
    """`kernels` as a `KernelSet`: the set itself, None for the built-in library, or specs to use as a
    library (injected wherever their constraints hold)."""
    if kernels is None:
        return KernelSet.default()
    return kernels if isinstance(kernels, KernelSet) else KernelSet(kernels)


def apply_library(space: SearchSpace, kernels: KernelSet | None = None) -> LibraryReport:
    """Inject every kernel of `kernels` (default: the built-in library) wherever the set allows it."""
    kernels = as_kernel_set(kernels)
    report = LibraryReport()
    specs = kernels.specs()
    if not specs:
        return report
    snapshot = space.snapshot()
    by_op = _nodes_by_op(snapshot)
    handle_of = {cls: h for h, cls in snapshot.handles.items()}
    rules, kernel_of = [], {}
    pinned = Templates(f"{HIDDEN}pinned-{len(space.reports)}")
    arch = getattr(space.target, "arch", None)
    for spec in specs:
        if arch is not None and spec.backend != "torch" and arch not in spec.archs:
            # e.g. the WGMMA GEMM on sm_100: the region keeps the other kernels (the vendor GEMM).
            report.skipped[spec.id] = f"builds for {', '.join(spec.archs)}, not the target's {arch}"
            continue
        if not has_op(spec.pattern.name) and spec.examples is None:
            report.skipped[spec.id] = "a fused pattern without examples cannot be matched structurally"
            continue
        missed: list[str] = []
        matches = _matches(snapshot, spec, by_op, missed)
        if missed and not matches:
            report.skipped[spec.id] = missed[0]
        for types, attrs, pins in matches:
            reason = kernels.allows(spec, list(types), attrs)
            if reason is None and pins is not None and any(c not in handle_of for c in pins[0] + pins[1]):
                reason = "an input of a match has no handle to pin the match to"
            if reason is not None:
                report.skipped.setdefault(spec.id, reason)
                continue
            body = spec.pattern.graph(list(types), attrs)
            params = resolve_params(spec, types, attrs, _accepted_params(kernels, spec, types, attrs), space.target)
            impl = KernelImpl(spec.id, spec.version, params, body, dict(attrs))
            key = space.encoding.kernel_key(impl)
            if pins is None:
                rules.append(region_rule(body, key, f"library-{key}"))
                kernel_of[rules[-1].name] = spec.id
            else:  # this one match, by its classes' handles (a rule per match costs egglog seconds to declare)
                pinned_union(pinned, key, [handle_of[c] for c in pins[0]], [handle_of[c] for c in pins[1]])
                report.injected[spec.id] = report.injected.get(spec.id, 0) + 1
    if pinned.rows:
        pinned.run(space.engine)
    # one pass of every signature's rule: each joins its kernel to every region it matches
    saturation = space.saturate([RuleSet(f"library-{len(space.reports)}", tuple(rules))], Limits(iterations=1))
    for name, spec_id in kernel_of.items():
        report.injected[spec_id] = report.injected.get(spec_id, 0) + saturation.matches.get(name, 0)
    return report


def _accepted_params(kernels: KernelSet, spec, types, attrs) -> dict:
    """The params an accepted kernel was tuned to at this signature (none for a library kernel)."""
    key = (spec.id, tuple(types), attr_key(attrs))
    return next((dict(a.params) for a in kernels.accepted if a.signature() == key), {})
